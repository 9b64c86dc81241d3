"""Scoring the entry's evaluations and computing time-to-accuracy from host-stamped events."""

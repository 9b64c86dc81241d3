"""Tests that need a real NVIDIA GPU (a package, so its conftest does not shadow tests/conftest.py)."""

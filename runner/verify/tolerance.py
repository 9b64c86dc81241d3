"""How close a recomputed number must be to the claimed one."""

from __future__ import annotations

import math

TTA_SECONDS = 1e-6  # the bound for TTA
SCORE = 1e-12  # scores are exact fractions; only float printing may differ
RELATIVE = 1e-9  # dollars and derived ratios


def close(claimed: object, recomputed: float | None, *, abs_tol: float, rel_tol: float = 0.0) -> bool:
    if recomputed is None or claimed is None:
        return claimed is None and recomputed is None
    if isinstance(claimed, bool) or not isinstance(claimed, (int, float)):
        return False
    return math.isclose(float(claimed), recomputed, abs_tol=abs_tol, rel_tol=rel_tol)


def shown(value: object) -> str:
    """A number as a verdict prints it: enough digits to see a difference, no float noise."""
    if isinstance(value, float):
        return f"{value:.9g}"
    return repr(value)

"""Support projection: recovered components made valid model parameters.

Moment estimates of probability vectors and weights may have negative or
zero entries; NumPyro needs values strictly inside each site's support.
Sign fixing by total mass, flooring and renormalization live here.
"""

from __future__ import annotations

import numpy as np

from specinit._validation import warn

__all__ = ["fix_signs_by_mass", "project", "project_to_simplex", "positive_weights"]


def fix_signs_by_mass(components: np.ndarray, eigenvalues: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Flip each ``(component, eigenvalue)`` pair whose component sums to < 0.

    For probability vectors the sign indeterminacy of an odd-order
    decomposition is resolved by positive total mass.

    Parameters
    ----------
    components : ndarray, shape (k, d)
        Recovered components (rows).
    eigenvalues : ndarray, shape (k,)
        Their tensor eigenvalues.

    Returns
    -------
    components, eigenvalues : ndarray
        With the flipped pairs negated.
    n_flips : int
        How many were flipped (non-zero only with noisy moments).
    """
    flip = components.sum(axis=1) < 0
    sign = np.where(flip, -1.0, 1.0)
    return components * sign[:, None], eigenvalues * sign, int(flip.sum())


def project_to_simplex(rows: np.ndarray, floor: float = 1e-3) -> tuple[np.ndarray, dict]:
    """Project rows onto the interior of the probability simplex.

    Negative entries (noise) are clipped, every entry is floored at
    ``floor / d`` (never an exact zero, which would break Dirichlet and
    categorical densities downstream) and rows are renormalized.

    Parameters
    ----------
    rows : array-like, shape (k, d) or (d,)
        Rows to project.
    floor : float
        Every entry ends up at least ``floor / d`` (before renormalization).

    Returns
    -------
    rows : ndarray
        Strictly positive rows summing to one.
    report : dict
        ``negative_mass``: per row, the fraction of absolute mass that was
        negative before clipping (0 for exact moments).
    """
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    d = rows.shape[1]
    if rows.min() < 0:
        total = np.abs(rows).sum(axis=1)
        negative = np.where(rows < 0, -rows, 0.0).sum(axis=1) / np.where(total > 0, total, 1.0)
        clipped = np.maximum(rows, 0.0)
    else:  # what EM's iterates are: nothing to clip
        negative, clipped = np.zeros(rows.shape[0]), rows
    sums = clipped.sum(axis=1, keepdims=True)
    if sums.min() > 0:
        clipped = clipped / sums
    else:
        clipped = np.where(sums > 0, clipped / np.where(sums > 0, sums, 1.0), 1.0 / d)
    out = np.maximum(clipped, floor / d)
    return out / out.sum(axis=1, keepdims=True), {"negative_mass": negative}


def positive_weights(weights: np.ndarray, floor: float = 1e-6, name: str = "weights") -> np.ndarray:
    """Floor mixing weights at ``floor`` and renormalize, warning if any was not finite.

    Parameters
    ----------
    weights : array-like, shape (k,)
        Estimated weights (possibly negative or non-finite from noise).
    floor : float
        Smallest weight kept.
    name : str
        What the weights are, for the warning.

    Returns
    -------
    ndarray, shape (k,)
        Positive weights summing to one.

    Warns
    -----
    RuntimeWarning
        If an estimate was not finite (replaced by the floor).
    """
    weights = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(weights)):
        warn(f"{name}: non-finite estimates replaced by the floor {floor}; the decomposition is unreliable "
                      "(check diagnostics, try more data or a smaller k).")
        weights = np.where(np.isfinite(weights), weights, floor)
    weights = np.maximum(weights, floor)
    return weights / weights.sum()


def project(params: dict, sites: dict, floor: float) -> tuple[dict, dict]:
    """Every parameter strictly inside its site's support, with a report of the repairs.

    ``"simplex"`` sites (the last axis sums to one) go through
    :func:`project_to_simplex` (entries floored at ``floor / d``; the
    negative mass clipped is reported as ``negative_mass_<site>``);
    ``"positive"`` sites are floored at ``floor`` times their largest entry
    (the number floored is reported as ``floored_<site>``); every value must
    be finite.

    Parameters
    ----------
    params : dict of str -> ndarray
        Recovered values.
    sites : dict of str -> Site
        Their supports (sites not listed pass unchanged).
    floor : float
        Relative floor.

    Returns
    -------
    params : dict
    report : dict

    Raises
    ------
    FloatingPointError
        A non-finite recovered value (the decomposition broke down).
    """
    out, report = {}, {}
    for name, value in params.items():
        value = np.asarray(value, dtype=np.float64)
        if not np.isfinite(value).all():
            raise FloatingPointError(f"the recovered {name!r} has non-finite entries: the moments are degenerate "
                                     "(try a smaller k, more data, or check the data for constant or duplicated "
                                     "columns)")
        site = sites.get(name)
        support = getattr(site, "support", None)
        if support == "simplex":
            rows, proj = project_to_simplex(value.reshape(-1, value.shape[-1]), floor)
            value = rows.reshape(value.shape)
            report[f"negative_mass_{name}"] = proj["negative_mass"] if value.ndim > 1 else float(proj["negative_mass"][0])
        elif support == "positive":
            low = floor * max(float(value.max()), np.finfo(float).tiny)
            report[f"floored_{name}"] = int(np.count_nonzero(value < low))
            value = np.maximum(value, low)
        out[name] = value
    return out, report

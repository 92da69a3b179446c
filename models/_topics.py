"""The spectral path shared by the count-data topic models (single-topic, LDA).

counts -> :class:`~specinit.engine.moments.CountMoments` -> :func:`~specinit.engine.exchangeable.fit_exchangeable`
-> sign fixing -> topics on the simplex. The models differ only in
``alpha0`` (``None`` for the single-topic model) and in how the tensor
eigenvalues map to weights, which they do themselves.
"""

from __future__ import annotations

import numpy as np

from specinit._validation import bad_argument, check_int, warn
from specinit.engine.exchangeable import fit_exchangeable
from specinit.engine.support import fix_signs_by_mass, project_to_simplex
from specinit.engine.whitening import IndefiniteMomentError

__all__ = ["fit_topics"]


def fit_topics(moments, k: int, *, func: str, method: str, seed, advice: str = "", floor: float = 1e-3,
               decompose_options: dict | None = None):
    """Run the shared spectral path on count moments (or factored population moments).

    ``func`` names the public entry in errors and warnings; ``advice`` is
    added to an :class:`~specinit.engine.whitening.IndefiniteMomentError`.
    Entries of ``beta`` are floored at ``floor / V`` (see
    :func:`~specinit.engine.support.project_to_simplex`).

    Returns ``(beta, eigenvalues, fit, report)``: topics strictly inside the
    simplex (k, V), the sign-fixed tensor eigenvalues, the
    :class:`~specinit.engine.exchangeable.ExchangeableFit` and a dict of diagnostics.
    """
    d = moments.n_features
    k = check_int(k, "k", func, minimum=1)
    if k >= d:
        raise bad_argument("k", func, f"smaller than the vocabulary size V={d}", k)
    n_docs = getattr(moments, "n_documents", None)
    if n_docs is not None and n_docs < k:
        raise bad_argument("k", func, f"at most the number of usable documents ({n_docs} with >= 3 tokens)", k)
    try:
        fit = fit_exchangeable(moments, k, method=method, seed=seed, decompose_options=decompose_options)
    except IndefiniteMomentError as exc:
        raise exc.advise(func, advice) from None
    if not np.all(np.abs(fit.eigenvalues) > 1e-12 * max(1.0, np.max(np.abs(fit.eigenvalues)))):
        raise ValueError(
            f"{func}: the whitened third moment is degenerate (tensor eigenvalues "
            f"{np.array2string(fit.eigenvalues, precision=3)}): some components carry no third-order signal. "
            "Try a smaller k or more data."
        )
    raw, eig, flips = fix_signs_by_mass(fit.components, fit.eigenvalues)
    beta, proj = project_to_simplex(raw, floor)
    report = {**fit.diagnostics, "sign_flips": flips, "negative_mass": proj["negative_mass"]}
    if n_docs is not None:
        report.update(n_documents=n_docs, n_dropped=moments.n_dropped)
    if flips:
        warn(
            f"{func}: {flips} recovered topic(s) had negative total mass before sign fixing; the moments are "
            f"too noisy for k={k} (try more documents, a smaller k, or method='tpm' with more restarts).")
    return beta, eig, fit, report

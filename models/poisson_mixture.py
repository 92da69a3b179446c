"""Poisson mixtures: rows of counts, a mixture of independent Poissons, and its NumPyro program.

Each row has one component ``h ~ Categorical(weights)``; given it, its ``d``
counts are independent, ``x_j | h = i ~ Poisson(rates_ij)``. The component
is summed out (``MixtureSameFamily``), so the observed site ``counts`` lives
in the plate ``rows`` with one log-likelihood per row.

Moments from factorial moments: a Poisson count has ``E[x (x - 1) ... (x - r
+ 1)] = lambda^r`` ([2]_), and independent counts multiply, so the factorial
moments of a row are those of its rates:

.. math::

    E[x] = \\sum_i w_i \\lambda_i, \\qquad
    M_2 = E[x x^T] - \\mathrm{diag}(E[x]) = \\sum_i w_i \\lambda_i \\lambda_i^T,

    M_3 = E[x^{\\otimes 3}] - \\sum_j \\mathrm{sym}_3(e_j \\otimes e_j \\otimes E[x_j x])
          + 2 \\sum_j E[x_j]\\, e_j^{\\otimes 3} = \\sum_i w_i \\lambda_i^{\\otimes 3},

where ``sym_3`` sums the three placements of the pair ``e_j (x) e_j``. The
empirical moments (means over rows) are unbiased. The whitened third moment
is read from whitened rows ``y = W^T x`` in passes over the rows: ``M3(W, W,
W) = E[y^(x)3] - sym_3(sum_j W_j (x) W_j (x) C_j) + 2 sum_j E[x_j] W_j^(x)3``
with ``C = E[x y^T]`` (d, k); no (d, d) or (d, d, d) array is formed. After
whitening the tensor eigenvalues are ``lambda_i = w_i^(-1/2)`` ([1]_ Sec.
4.3), so ``w_i = 1 / lambda_i^2`` and ``rates_i = lambda_i (W^T)^+ v_i``;
the rates must be linearly independent (``k <= d``).

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, "Tensor decompositions for
   learning latent variable models", JMLR 2014, Sec. 3 and Thm 4.3.
.. [2] Johnson, Kemp, Kotz, "Univariate Discrete Distributions", 3rd ed.,
   Wiley 2005, Sec. 4.3 (factorial moments of the Poisson distribution).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.special import gammaln

from specinit._validation import Interval, bad_argument, check_count_matrix, current_entry, public, warn
from specinit.engine.backends import OnBackend
from specinit.engine.backends.numpy import pair_products
from specinit.engine.population import FactoredMoments
from specinit.engine.rows import ROW_PASSES, RowSums
from specinit.engine.sources import ViewSource
from specinit.engine.support import fix_signs_by_mass
from specinit.estimate import Site, SpectralEstimate
from specinit.faces import (RANDOM_STATE, Face, Param, face, max_iter_param, mean_log_likelihood,
                            n_components_param, predicted, refined, responsibilities)
from specinit.family import UPDATED_ESTIMATE, Family, site_values
from specinit.refine import RefineResult

if TYPE_CHECKING:
    from specinit.engine.backends import Passes
    from specinit.engine.exchangeable import ExchangeableFit

__all__ = ["FAMILY", "PoissonMixture", "PoissonMoments", "log_likelihood", "model", "population_moments", "predict",
           "refine", "spectral", "spectral_from_moments", "update"]


class PoissonMoments(OnBackend):
    """Factorial moments of rows of counts, matrix-free: ``M2 @ Q`` and ``M3(W, W, W)`` in passes over the rows.

    Parameters
    ----------
    counts : array-like, scipy.sparse matrix, or RowSums
        (N, d) non-negative integer counts (validated; held as CSR), or the summary of such rows
        (:class:`~specinit.engine.rows.RowSums`, kept by :func:`update`: the same moments from its sums, no pass
        over rows; its (d, d, d) sums are contracted with ``W`` before they are read).
    backend : {"numpy", "jax"}, Passes or None
        Where the passes run (:func:`specinit.engine.backends.resolve_backend`; the row passes ``gram`` and
        ``triples``).

    Attributes
    ----------
    n : int
        Rows.
    m1 : ndarray, shape (d,)
        ``E[x]``, the column means.

    Raises
    ------
    ValueError
        Counts that are negative, not integers, NaN or infinite, or empty; a backend without the row passes.
    TypeError
        Counts of a non-numeric type.
    """

    @public
    def __init__(self, counts: ArrayLike | sp.spmatrix | RowSums, backend: str | Passes | None = None) -> None:
        if isinstance(counts, RowSums):  # x = mean + unit * z with the central moments of z
            self._run_on("numpy", "memory", ROW_PASSES)
            self.n, self._sums, self._placed = counts.n, counts, None
            self.m1, self._unit, (central,) = counts.standardized(order=2)
            self._raw2 = np.outer(self.m1, self.m1) + self._unit**2 * central
            return
        matrix = check_count_matrix(counts, "counts")
        self._run_on(backend, "memory", ROW_PASSES)
        self.n = matrix.shape[0]
        self.m1 = np.asarray(matrix.sum(axis=0)).ravel() / self.n
        self._placed = self.passes.place_views(ViewSource([matrix], "counts", minimum=1))

    @property
    def n_features(self) -> int:
        """d, the number of columns."""
        return self.m1.size

    def _raw_matmat(self, Q: np.ndarray) -> np.ndarray:
        """``E[x (x^T Q)]`` (one pass, or the summary's (d, d) moment)."""
        if self._placed is None:
            return self._raw2 @ Q
        return np.asarray(self.passes.gram(self._placed, 0, 0, Q)) / self.n

    def _raw_cubes(self, W: np.ndarray) -> np.ndarray:
        """``E[y^(x)3]`` of ``y = W^T x`` (one pass, or from the summary: ``y = a + unit * u`` with ``a = W^T E[x]``
        and ``u = W^T z`` centred, whose second and third moments the summary contracts with ``W``)."""
        if self._placed is None:
            u2, u3 = self._sums.projected_central(W)
            a = W.T @ self.m1
            spread = np.einsum("a,bc->abc", a, u2)
            return (np.einsum("a,b,c->abc", a, a, a) + self._unit**2 * (spread + spread.transpose(1, 0, 2)
                                                                         + spread.transpose(1, 2, 0))
                    + self._unit**3 * u3)
        return np.asarray(self.passes.triples(self._placed, 0, 0, 0, W, W, W)) / self.n

    def m2_matmat(self, Q: np.ndarray) -> np.ndarray:
        """``M2 @ Q = E[x (x^T Q)] - E[x] * Q`` for a (d, r) matrix (one pass over the rows, none from a summary)."""
        Q = np.asarray(Q, dtype=np.float64)
        return self._raw_matmat(Q) - self.m1[:, None] * Q

    def whitened_m3(self, W: np.ndarray) -> np.ndarray:
        """``M3(W, W, W)`` for a (d, k) matrix (two passes over the rows, for the whitened cubes and ``C = E[x
        y^T]``; none from a summary)."""
        W = np.asarray(W, dtype=np.float64)
        k = W.shape[1]
        # G[a, b, c] = sum_j W_ja W_jb C_jc and H[a, b, c] = sum_j E[x_j] W_ja W_jb W_jc in one product
        both = pair_products(W, np.hstack([self._raw_matmat(W), self.m1[:, None] * W]))
        G, H = both[:, :, :k], both[:, :, k:]
        return self._raw_cubes(W) - (G + G.transpose(0, 2, 1) + G.transpose(2, 0, 1)) + 2.0 * H


@dataclass(frozen=True)
class CountRows:
    """Counts as EM reads them: CSR (float64) and every row's ``sum_j log x_j!``."""

    csr: sp.csr_matrix
    log_factorials: np.ndarray


class PoissonMixture(Family):
    """Mixtures of independent Poissons over the columns of count rows (moments from factorial moments)."""

    name = "poisson_mixture"
    data_kind = "counts"
    sites = {
        "weights": Site("simplex", (0,), ("components",), ("components",)),
        "rates": Site("positive", (0,), ("components", "feature"), ("components", "feature")),
        "counts": Site("observed", (), ("rows", "feature"), ("feature",)),
    }
    match_site = "rates"
    summary = RowSums
    # the factorial moments are unbiased: their sampling noise has both signs, and on sparse counts its negative
    # eigenvalues can exceed the smaller components' (skipped with a warning, as for the topic models)
    whitening_eigenspace = "positive"
    advice = "The components' rates must be linearly independent (k <= d): try a smaller k."
    arguments = {
        "counts": Param("array-like or scipy.sparse matrix, shape (N, d)", "Non-negative integer counts, one row per "
                        "observation (a dense array or CSR, as scikit-learn takes them)."),
        "moments": Param("PoissonMoments or FactoredMoments", "The data moments (:class:`PoissonMoments`) or "
                         ":func:`population_moments`.", annotation=PoissonMoments | FactoredMoments),
        "backend": Param("{'numpy', 'jax'} or None", "Where the passes over the rows run "
                         "(:mod:`specinit.engine.backends`); ``None``: JAX when an accelerator is present, NumPy "
                         "otherwise.", None),
    }

    def moments(self, counts: ArrayLike | sp.spmatrix, *, k: int, backend: str | Passes | None) -> PoissonMoments:
        return PoissonMoments(counts, backend)

    def population_moments(self, params: Mapping[str, Any], **options: Any) -> FactoredMoments:
        rates = np.asarray(params["rates"], dtype=np.float64)
        weights = np.asarray(params["weights"], dtype=np.float64)
        if rates.ndim != 2 or not np.all(np.isfinite(rates)) or np.any(rates < 0):
            raise bad_argument("rates", None, "a (k, d) array of finite non-negative rates", rates)
        return FactoredMoments(rates, weights, weights)

    def max_components(self, moments: PoissonMoments | FactoredMoments) -> tuple[int, str]:
        d = moments.n_features
        return d, f"at most the number of features d = {d} (the rates of k components must be linearly independent)"

    def unwhiten(self, fit: ExchangeableFit, moments: PoissonMoments | FactoredMoments, k: int, floor: float,
                 **options: Any) -> tuple[dict, dict, dict]:
        components, eig, flips = fix_signs_by_mass(fit.components, fit.eigenvalues)
        if flips:
            warn(f"{current_entry()}: {flips} recovered component(s) had negative total rate before sign fixing; the "
                 f"moments are too noisy for k={k} (try more rows or a smaller k).")
        weights = 1.0 / eig**2
        return ({"weights": weights, "rates": eig[:, None] * components},
                {"sign_flips": flips, "weights_sum_before_normalization": float(weights.sum())}, {})

    # EM ------------------------------------------------------------------------------------------------------
    def refine_data(self, counts: ArrayLike | sp.spmatrix, estimate: SpectralEstimate, **options: Any) -> CountRows:
        matrix = check_count_matrix(counts, "counts")
        d = estimate.params["rates"].shape[1]
        if matrix.shape[1] != d:
            raise bad_argument("counts", None, f"rows of d = {d} counts (the estimate's)",
                               f"{matrix.shape[1]} columns", describe=False)
        logs = matrix.copy()
        logs.data = gammaln(logs.data + 1.0)
        return CountRows(matrix, np.asarray(logs.sum(axis=1)).ravel())

    def n_observations(self, data: CountRows) -> int:
        return int(data.csr.shape[0])

    def component_log_prob(self, params: Mapping[str, Any], data: CountRows) -> np.ndarray:
        rates = np.asarray(params["rates"], dtype=np.float64)
        log_rates = np.log(np.maximum(rates, np.finfo(np.float64).tiny))
        return np.asarray(data.csr @ log_rates.T) - rates.sum(axis=1) - data.log_factorials[:, None]

    def m_step(self, data: CountRows, resp: np.ndarray, params: Mapping[str, Any], **options: Any) -> dict:
        totals = resp.sum(axis=0) + 10 * np.finfo(np.float64).eps
        return {"weights": totals, "rates": np.asarray(data.csr.T @ resp).T / totals[:, None]}

    def estimator_face(self) -> Face:
        """:class:`specinit.estimators.SpectralPoissonMixture`."""
        return Face(
            class_name="SpectralPoissonMixture", mixins=("cluster", "density"),
            summary="A mixture of independent Poissons started from the method-of-moments estimate, then EM "
                    "(:mod:`specinit.models.poisson_mixture`).",
            parameters={
                "n_components": n_components_param("components", 2, 'poisson_mixture.spectral(X, "auto")'),
                "max_iter": max_iter_param(refine, "EM iterations"),
                "random_state": RANDOM_STATE,
            },
            spectral={"n_components": "k"}, data="counts", refine=refined, refine_arguments={"max_iter": "max_iter"},
            attributes={
                "weights_": ("ndarray, shape (n_components,)",
                             lambda estimator, estimate, X: estimate.params["weights"]),
                "rates_": ("ndarray, shape (n_components, n_features)\n    Poisson rate of every feature in every "
                           "component.", lambda estimator, estimate, X: estimate.params["rates"]),
                "labels_": ("ndarray, shape (n_samples,)\n    Most probable component of every training row.",
                            predicted),
            },
            predict_proba=responsibilities, score=mean_log_likelihood,
            answers=frozenset({"score_samples", "bic", "partial_fit"}))


FAMILY = PoissonMixture()


#: The arguments of :func:`model`.
MODEL_ARGUMENTS = {
    "counts": Param("array-like or scipy.sparse matrix, shape (N, d), optional", "Observed counts (a sparse matrix is "
                    "densified); ``None`` generates ``n`` rows of ``dim`` counts.", None, annotation=ArrayLike | None),
    "k": Param("int", "Number of components."),
    "n": Param("int, optional", "Needed only when ``counts`` is None.", None),
    "dim": Param("int, optional", "Needed only when ``counts`` is None.", None),
    "rate_mean": Param("float", "Mean of the exponential prior of every rate.", 10.0),
}


@face(MODEL_ARGUMENTS)
def model(counts, *, k, n, dim, rate_mean) -> None:
    """NumPyro Poisson mixture with the component of each row summed out.

    Notes
    -----
    NumPyro sites: ``weights`` (k,) ~ Dirichlet(1); ``rates`` (k, d) ~
    Exponential(1 / ``rate_mean``) in the plate ``components``; observed
    ``counts`` in the plate ``rows``, ``MixtureSameFamily(Categorical(weights),
    Poisson(rates).to_event(1))``: the assignment of each row marginalized, as
    NumPyro's mixture examples write it.
    """
    if counts is None:
        if n is None or dim is None:
            raise bad_argument("n", "poisson_mixture.model", "given (with dim) when counts is None, to generate data",
                               n)
        n_rows, d = int(n), int(dim)
    else:
        counts = jnp.asarray(counts.toarray() if sp.issparse(counts) else counts)
        n_rows, d = counts.shape
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(k)))
    with numpyro.plate("components", k):
        rates = numpyro.sample("rates", dist.Exponential(1.0 / rate_mean).expand([d]).to_event(1))
    with numpyro.plate("rows", n_rows):
        numpyro.sample("counts", dist.MixtureSameFamily(dist.Categorical(weights), dist.Poisson(rates).to_event(1)),
                       obs=counts)


@FAMILY.face(
    validate=True,
    rates=Param("array-like, shape (k, d), or dict / SpectralEstimate", "Component rates (non-negative, linearly "
                "independent rows for identifiability), or both sites by name."),
    weights=Param("array-like, shape (k,)", "Mixing weights (positive).", None))
def population_moments(rates, weights) -> FactoredMoments:
    """Exact factorial moments ``M2 = sum_i w_i lambda_i lambda_i^T`` and ``M3 = sum_i w_i lambda_i^(x)3``.

    Returns
    -------
    FactoredMoments
        For :func:`spectral_from_moments` (exact recovery of both sites).

    Raises
    ------
    ValueError
        Rates that are negative or not finite, weights that are not positive, or shapes that do not match.
    """
    return FAMILY.population_moments(site_values(rates, "rates", weights=weights))


@FAMILY.face()
def spectral_from_moments(moments, k, *, method, seed, floor, decompose_options) -> SpectralEstimate:
    """Weights and rates from factorial moments (of data or of the population).

    Returns
    -------
    SpectralEstimate
        As for :func:`spectral`.

    Raises
    ------
    ValueError
        ``k`` above the number of features.
    specinit.engine.whitening.IndefiniteMomentError
        If the second moment has fewer than k positive eigenvalues (linearly dependent rates).
    """
    return FAMILY.spectral_from_moments(moments, k, method=method, seed=seed, floor=floor,
                                        decompose_options=decompose_options)


@FAMILY.face()
def spectral(counts, k, *, method, seed, floor, decompose_options, backend) -> SpectralEstimate:
    """Method-of-moments estimate of a Poisson mixture from rows of counts.

    Returns
    -------
    SpectralEstimate
        ``"poisson_mixture"`` with ``weights`` (k,) and ``rates`` (k, d), every rate at least ``floor`` times the
        largest (diagnostics ``floored_rates``: how many were not); :func:`refine` runs EM from it,
        :func:`predict` assigns rows.

    Raises
    ------
    ValueError
        Counts that are negative, not integers, NaN or infinite; ``k`` above the number of features d.
    TypeError
        Counts of a non-numeric type.
    specinit.engine.whitening.IndefiniteMomentError
        If the second moment has fewer than k positive eigenvalues (k beyond what the data support).

    Warns
    -----
    RuntimeWarning
        Negative eigenvalues of the second moment larger than the smallest kept one (skipped by the whitening), a
        whitening whose eigensolver did not converge (a tiny eigengap), or rates floored at the support.
    """
    return FAMILY.spectral(counts, k, method=method, seed=seed, floor=floor, decompose_options=decompose_options,
                           backend=backend)


@FAMILY.refine_face(
    estimate=Param("SpectralEstimate or dict", "Starting ``weights`` (k,) and ``rates`` (k, d), inside their "
                   "supports (checked)."),
    max_iter=500, tol=None, rtol=1e-6)
def refine(counts, estimate, *, method, max_iter, tol, rtol, window, floor, restarts, restart_iter, seed,
           accelerate) -> RefineResult:
    """Spectral then refine: EM for the Poisson mixture started from an estimate.

    E-step: ``log w_i + x_n . log(rates_i) - sum_j rates_ij - sum_j log x_nj!``, normalized per row (one sparse
    product); M-step: ``w_i`` proportional to ``R.sum(axis=0)``, ``rates_i = (R^T X)_i / R.sum(axis=0)_i`` (the
    responsibility-weighted mean row) ([3]_).

    Returns
    -------
    specinit.refine.RefineResult
        ``.estimate`` (model ``"poisson_mixture"``), ``.log_likelihood`` (total, trace), ``.n_iter``,
        ``.converged``, ``.mean_log_likelihood``.

    Raises
    ------
    ValueError
        Bad counts, counts whose d differs from the estimate's, an estimate of another model or outside the
        supports.

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations.

    References
    ----------
    .. [3] Dempster, Laird, Rubin, "Maximum likelihood from incomplete data via the EM algorithm", JRSS B 39
       (1977).
    """
    return FAMILY.refine(counts, estimate, method=method, max_iter=max_iter, tol=tol, rtol=rtol, window=window,
                         floor=floor, restarts=restarts, restart_iter=restart_iter, seed=seed, accelerate=accelerate)


@FAMILY.face(
    counts=Param("array-like or scipy.sparse matrix, shape (n, d)", "The new rows of counts."),
    estimate=UPDATED_ESTIMATE,
    k=Param("int, optional", "Number of components, at most d: required for the first batch; with ``estimate`` None "
            "means ``estimate.k`` (the stored sums fit any k).", None, Interval(int, 1, none=True)))
def update(counts, estimate, *, k, method, seed, floor, decompose_options) -> SpectralEstimate:
    """Add a batch of rows to a Poisson-mixture fit: exact merged sums, then the moment estimate.

    The factorial moments are functions of the number of rows and the sums of their first three powers
    (:class:`~specinit.engine.rows.RowSums`), which add up over batches exactly: after any number of batches the
    estimate is that of :func:`spectral` on all the rows at once (the same moments to rounding, the same
    decomposition and seed), whatever the batch sizes. Components keep their labels from batch to batch (the new
    rates are matched to the previous ones). Memory: a few (d, d, d) float arrays (the third-power sums; the fit
    reads them contracted with the whitening). There is no EM step (EM needs all the rows): :func:`refine` on
    rows at hand takes the estimate further. The estimate keeps the sums in its ``state`` (``moments/...``),
    which :meth:`~specinit.estimate.SpectralEstimate.save` writes, so updates go on in a later process.

    Returns
    -------
    SpectralEstimate
        ``"poisson_mixture"`` as from :func:`spectral`, plus ``n_batches`` and ``n_observations`` in the
        diagnostics.

    Raises
    ------
    ValueError
        ``k`` missing on the first batch or above d, an estimate without stored sums (from :func:`spectral`: fit
        the first batch with :func:`update`), a batch with another number of columns, bad counts.
    MemoryError
        The (d, d, d) sums over the memory budget (:func:`specinit.memory_limit`).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> rates = np.array([[1.0, 6.0, 2.0, 0.5], [5.0, 1.0, 0.5, 3.0]])
    >>> x = rng.poisson(rates[rng.choice(2, 2_000)])
    >>> est = update(x[:1_000], k=2)
    >>> est = update(x[1_000:], est)
    >>> once = spectral(x, 2)
    >>> from specinit.align import match_components
    >>> same = once.params["rates"][match_components(est.params["rates"], once.params["rates"])]
    >>> bool(abs(est.params["rates"] - same).max() < 1e-8), est.diagnostics["n_batches"]
    (True, 2)
    """
    stored, k, n_batches = FAMILY.stream(estimate, k, RowSums, "poisson_mixture.update")
    batch = RowSums.from_rows(check_count_matrix(counts, "counts").toarray(), "counts", frame=stored)
    merged = batch if stored is None else stored + batch
    fit = FAMILY.spectral_from_moments(PoissonMoments(merged), k, method=method, seed=seed, floor=floor,
                                       decompose_options=decompose_options)
    return FAMILY.streamed(fit, estimate, merged, n_batches, n_observations=merged.n)


predict = FAMILY.predict_face("counts", "Posterior component probabilities of every row and the most probable "
                              "component.")


log_likelihood = FAMILY.log_likelihood_face("counts", "Log-likelihood of every row, its component summed out (the "
                                            "``log x_j!`` terms included).")

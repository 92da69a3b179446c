"""Independent-factor models (skewed or kurtotic factors): NumPyro program and moment maps.

Observations ``x = loc + O h + eps`` with ``k`` independent, non-Gaussian,
zero-mean, UNIT-VARIANCE factors ``h`` and isotropic Gaussian noise
``eps ~ Normal(0, noise^2 I_d)``. The columns of ``O`` (d, k) are the rows of
the site ``loadings`` (k, d). Fixing the factors' variance to one is the
scale convention: ``Cov(x) = O O^T + noise^2 I``.

Two factor families, chosen by ``cumulant``:

* ``"skew"``: ``h_i = g_i - sqrt(a_i)`` with ``g_i ~ Gamma(a_i, sqrt(a_i))``
  (site ``shape`` = ``a``); skewness ``gamma_i = 2 / sqrt(a_i)``.
* ``"kurtosis"``: ``h_i`` exponential-power (generalized normal) with shape
  ``beta_i`` (site ``power``) and unit variance: density proportional to
  ``exp(-(|h| / s)^beta)``, ``s = sqrt(Gamma(1/beta) / Gamma(3/beta))``;
  ``beta = 1`` Laplace, ``beta = 2`` Gaussian, ``beta -> inf`` uniform. Its
  excess kurtosis ``Gamma(5/beta) Gamma(1/beta) / Gamma(3/beta)^2 - 3`` covers
  super-Gaussian (``beta < 2``) and sub-Gaussian (``beta > 2``, down to -1.2)
  factors.

Moments ([1]_ Sec. 3.1, Lemmas 1-2; [2]_ Algs. 1-2). Gaussian noise leaves
the third and fourth cumulants unchanged:

.. math::

    \\kappa_3(x) = \\sum_i \\gamma_i\\, o_i^{\\otimes 3}, \\qquad
    \\kappa_4(x) = \\sum_i \\kappa_i\\, o_i^{\\otimes 4},

with ``gamma_i``, ``kappa_i`` the skewness and excess kurtosis of factor
``i``. The covariance is corrected for the noise: with ``d > k`` the noise
variance is the mean of the ``d - k`` smallest eigenvalues of ``Cov(x)``
(assumption: ISOTROPIC noise; with ``d == k`` or ``noise="none"`` the data
are taken as noise-free). ``M2 = Cov(x) - noise^2 I = O O^T`` is whitened,
``W^T M2 W = I_k``, so ``v_i = W^T o_i`` are orthonormal and the whitened
cumulants ``sum_i gamma_i v_i^(x)3`` or ``sum_i kappa_i v_i^(x)4`` are
computed from the whitened data ``y = W^T (x - mean)`` (k x k x k or
k x k x k x k; no d^3 or d^4 array is ever formed) and decomposed by the
tensor power method (order 3: :mod:`specinit.engine.decompose`; order 4:
:mod:`specinit.engine.decompose4`). Then ``o_i = (W^T)^+ v_i`` and the
eigenvalue is ``gamma_i`` or ``kappa_i``.

Sign convention: for skewed factors the sign of ``o_i`` is the one that
makes the factor's skewness positive (identifiable); for kurtotic factors
(symmetric, sign not identifiable) the entry of largest magnitude of each
row of ``loadings`` is made positive. The order of the factors is by
decreasing ``|eigenvalue|``.

NumPyro: the factors are continuous latents per observation, kept as the
site ``factors`` (N, k) in the plate ``data`` (their marginal is not
available in closed form for Gamma or exponential-power factors). For the
skewed model the site holds ``g = h + sqrt(shape) > 0``. :func:`spectral`
also returns initial ``factors`` (``scores=True``: the linear posterior
mean ``E[h | x]`` under the estimate, moved inside the support), so that
every latent site of the model has a warm value for NUTS/SVI.

References
----------
.. [1] Anandkumar, Foster, Hsu, Kakade, Liu, "A Spectral Algorithm for Latent
   Dirichlet Allocation", Sec. 3.1 (independent factors), Lemmas 1-2, Alg. 1.
.. [2] Anandkumar, Foster, Hsu, Kakade, Liu, "Two SVDs Suffice: Spectral
   decompositions for probabilistic topic modeling and latent Dirichlet
   allocation" (Excess Correlation Analysis), Algs. 1-2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpy.typing import ArrayLike

from specinit._validation import (Interval, Options, bad_argument, check_arguments, check_choice, check_positive,
                                 current_entry, public, warn)
from specinit.align import amari_index
from specinit.distributions.continuous import UnitExponentialPower, excess_kurtosis_of_power, power_of_excess_kurtosis
from specinit.engine.cumulants import (CorrectedCovariance, pair_product_tensor, whitened_fourth_cumulant,
                                       whitened_third_cumulant)
from specinit.engine.rows import RowSums, unit_of
from specinit.engine.sources import check_rows
from specinit.estimate import ModelFacts, Site, SpectralEstimate
from specinit.faces import RANDOM_STATE, Face, Param, face, mean_log_likelihood
from specinit.family import COMMON_OPTIONS, UPDATED_ESTIMATE, Family, k_param, site_values
from specinit.refine import MAP_OPTIONS, RefineResult, map_estimate

if TYPE_CHECKING:
    from specinit.engine.backends import Passes
    from specinit.engine.exchangeable import ExchangeableFit

__all__ = [
    "FACTS",
    "FACTS_KURTOSIS",
    "FAMILY",
    "FactorMoments",
    "Factors",
    "amari_index",
    "excess_kurtosis_of_power",
    "factor_scores",
    "log_likelihood",
    "model",
    "population_moments",
    "power_of_excess_kurtosis",
    "refine",
    "spectral",
    "spectral_from_moments",
    "update",
]

CUMULANTS = ("skew", "kurtosis")

_SHAPE_RANGE = (1e-2, 1e6)       # Gamma shape: skewness between 2e-3 and 20


#: The arguments of :func:`model`.
MODEL_ARGUMENTS = {
    "x": Param("array, shape (N, d), optional", "Observations; ``None`` generates ``n`` observations of dimension "
               "``dim``.", None),
    "k": Param("int", "Number of factors."),
    "dim": Param("int, optional", "Needed only when ``x`` is None.", None),
    "n": Param("int, optional", "Needed only when ``x`` is None.", None),
    "cumulant": Param('{"skew", "kurtosis"}', "Skewed (centred Gamma) or kurtotic (exponential-power) factors.", "skew",
                      annotation=str),
    "prior_scale": Param("float", "Scale of the Normal priors of ``loc`` and ``loadings`` and of the HalfNormal prior "
                         "of ``noise`` (standardize the data, or set it).", 10.0),
}


@face(MODEL_ARGUMENTS)
def model(x, *, k, dim, n, cumulant, prior_scale) -> None:
    """NumPyro independent-factor model ``x = loc + h @ loadings + noise``.

    Returns
    -------
    None
        A NumPyro program; its sites are ``loc`` (d,) ~ Normal(0, prior_scale),
        ``loadings`` (k, d) ~ Normal(0, prior_scale), ``shape`` (k,) ~
        LogNormal(log 4, 1.5) (skew) or ``power`` (k,) ~ LogNormal(log 2, 1)
        (kurtosis), ``noise`` () ~ HalfNormal(prior_scale), and in the plate
        ``data`` the latent ``factors`` (N, k) and the observed ``x``.

    Raises
    ------
    ValueError
        Unknown ``cumulant``, or ``x`` None without ``n`` and ``dim``.
    """
    cumulant = check_choice(cumulant, "cumulant", None, CUMULANTS)
    if x is None:
        if n is None or dim is None:
            raise bad_argument("n", None, "given (with dim) when x is None, to generate data", n)
        n_obs, d = int(n), int(dim)
    else:
        n_obs, d = jnp.shape(x)
    loc = numpyro.sample("loc", dist.Normal(0.0, prior_scale).expand([d]).to_event(1))
    loadings = numpyro.sample("loadings", dist.Normal(0.0, prior_scale).expand([k, d]).to_event(2))
    if cumulant == "skew":
        shape = numpyro.sample("shape", dist.LogNormal(jnp.log(4.0), 1.5).expand([k]).to_event(1))
        rate = jnp.sqrt(shape)
        prior = dist.Gamma(shape, rate).to_event(1)
    else:
        power = numpyro.sample("power", dist.LogNormal(jnp.log(2.0), 1.0).expand([k]).to_event(1))
        prior = UnitExponentialPower(power).to_event(1)
    noise = numpyro.sample("noise", dist.HalfNormal(prior_scale))
    with numpyro.plate("data", n_obs):
        factors = numpyro.sample("factors", prior)
        h = factors - rate if cumulant == "skew" else factors
        numpyro.sample("x", dist.Normal(loc + h @ loadings, noise).to_event(1), obs=x)


# --- moments ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FactorMoments:
    """Exact moments of an independent-factor model, from its parameters.

    Parameters
    ----------
    loadings : ndarray, shape (k, d)
        Rows are the columns of the mixing matrix ``O``.
    cumulants : ndarray, shape (k,)
        Skewness (``cumulant="skew"``) or excess kurtosis of each unit-variance factor.
    noise_variance : float
        Variance of the isotropic Gaussian noise.
    mean : ndarray, shape (d,)
        ``E[x]``.
    cumulant : {"skew", "kurtosis"}
        Which cumulant tensor :meth:`whitened_cumulant` returns.

    Attributes
    ----------
    n_samples : None
        Population moments carry no sampling error.
    """

    loadings: np.ndarray
    cumulants: np.ndarray
    noise_variance: float
    mean: np.ndarray
    cumulant: str

    n_samples = None

    @property
    def n_features(self) -> int:
        """Observation dimension ``d``."""
        return self.loadings.shape[1]

    def covariance(self) -> np.ndarray:
        """``Cov(x) = O O^T + noise^2 I`` (d, d)."""
        return self.loadings.T @ self.loadings + self.noise_variance * np.eye(self.n_features)

    unit = 1.0

    def whitened_cumulant(self, W: np.ndarray) -> np.ndarray:
        """``sum_i c_i (W^T o_i)^(x)3`` (skew) or ``^(x)4`` (kurtosis)."""
        V = self.loadings @ W
        if self.cumulant == "skew":
            return np.einsum("i,ia,ib,ic->abc", self.cumulants, V, V, V)
        return np.einsum("i,ia,ib,ic,id->abcd", self.cumulants, V, V, V, V)


class _DataMoments:
    """Mean, covariance and whitened cumulants of (N, d) data, standardized by ``unit`` (scale-free arithmetic)."""

    def __init__(self, x: np.ndarray, cumulant: str):
        self.cumulant = cumulant
        self.n_samples = x.shape[0]
        self.mean = x.mean(axis=0)
        centred = x - self.mean
        self.unit = float(np.max(np.std(centred, axis=0)))
        self.z = centred / self.unit

    @property
    def n_features(self) -> int:
        return self.z.shape[1]

    def covariance(self) -> np.ndarray:
        return self.z.T @ self.z / self.n_samples

    def whitened_cumulant(self, W: np.ndarray) -> np.ndarray:
        y = self.z @ W
        return whitened_third_cumulant(y) if self.cumulant == "skew" else whitened_fourth_cumulant(y)


class _SummedMoments:
    """The moments of :class:`_DataMoments` from the rows' power sums (:class:`~specinit.engine.rows.RowSums`)."""

    def __init__(self, sums: RowSums, cumulant: str):
        self.cumulant = cumulant
        self.n_samples = sums.n
        self.mean, self.unit, (self._covariance,) = sums.standardized(order=2)
        self._sums = sums

    @property
    def n_features(self) -> int:
        return self.mean.size

    def covariance(self) -> np.ndarray:
        return self._covariance

    def whitened_cumulant(self, W: np.ndarray) -> np.ndarray:
        if self.cumulant == "skew":
            return self._sums.projected_central(W, order=3)[1]
        second, _, fourth = self._sums.projected_central(W, order=4)
        return fourth - pair_product_tensor(second)


def _check_no_constant_columns(spread, magnitude) -> None:
    constant = np.flatnonzero(spread <= 1e-12 * max(float(magnitude), 1e-300))
    if constant.size:
        raise bad_argument("x", None, "free of constant columns (they carry no factor and bias the noise "
                           "estimate; drop them)", f"constant columns {constant[:10].tolist()}", describe=False)



def _standard_error(cumulant: str, n_samples) -> float:
    """Sampling sd of a Gaussian's skewness (sqrt(6/N)) or excess kurtosis (sqrt(24/N)); 0 for population moments."""
    if n_samples is None:
        return 0.0
    return float(np.sqrt((6.0 if cumulant == "skew" else 24.0) / n_samples))


class Factors(Family):
    """Independent-factor models: noise-corrected covariance, whitened third or fourth cumulants."""

    name = "factors"
    data_kind = "rows"
    k_dependent_moments = True
    match_site = "loadings"
    summary = RowSums
    options = {
        "cumulant": Param(
            "{'skew', 'kurtosis'}",
            "Third cumulant (skewed factors; order-3 tensor) or fourth cumulant (kurtotic factors, sub- or "
            "super-Gaussian; order-4 tensor).", 'skew', Options(CUMULANTS)),
        "noise": Param(
            "{'isotropic', 'none'}",
            "``\"isotropic\"``: the noise variance is the mean of the ``d - k`` smallest covariance "
            "eigenvalues (0 when ``d == k``); ``\"none\"``: noise-free data.", 'isotropic',
            Options(("isotropic", "none"))),
        "scores": Param(
            "bool",
            "Also return the site ``factors`` (N, k) (:func:`factor_scores`), so that the estimate covers "
            "every latent site of :func:`model`.", True, lambda name, value: bool(value)),
    }
    arguments = {
        "x": Param(
            "array, shape (N, d)",
            "Observations, finite, with no constant column."),
        "moments": Param(
            "FactorMoments or the moments of data",
            "Anything with ``cumulant``, ``n_features``, ``mean``, ``n_samples``, ``covariance()`` and "
            "``whitened_cumulant(W)`` (:func:`population_moments`, or the data moments built by "
            ":func:`spectral`).", annotation=FactorMoments | _DataMoments | _SummedMoments),
        "k": k_param("Number of factors, ``1 <= k <= d`` (``k < d`` to estimate the noise)."),
        "method": Param(
            "{'tpm', 'svtd', 'eca', 'als'}",
            "``\"tpm\"`` (default), ``\"svtd\"``, ``\"eca\"``, ``\"als\"`` for skew; ``\"tpm\"`` or "
            "``\"eca\"`` for kurtosis.", 'tpm'),
        "seed": Param(
            "int or numpy.random.Generator",
            "Randomness of the decomposition.", 0),
        "decompose_options": Param(
            "dict, optional",
            "Keyword arguments of the decomposition (e.g. ``{\"n_restarts\": 20}``).", None),
        "backend": Param(
            "None or 'numpy'",
            "The cumulant passes run in NumPy (in memory).", None),
        "floor": COMMON_OPTIONS["floor"].documented(
            "The NumPyro site ``noise`` is at least ``floor`` times the root mean covariance eigenvalue (so that "
            "the likelihood is proper when the data are noise-free)."),
    }
    optional_sites = frozenset({"factors"})
    refine_methods = ("map",)
    advice = "Fewer than k factors stand out of the isotropic noise: try a smaller k."

    def site_table(self, params: Mapping[str, Any] | None = None, **options: Any) -> tuple[dict, str | None]:
        skew = "power" not in (params or {}) and options.get("cumulant", "skew") == "skew"
        extra = "shape" if skew else "power"
        sites = {
            "loc": Site("real", (), ("dim",), ("dim",)),
            "loadings": Site("real", (0,), ("factor", "dim"), ("factor", "dim")),
            extra: Site("positive", (0,), ("factor",), ("factor",)),
            "noise": Site("positive"),
            "factors": Site("positive" if skew else "real", (1,), ("data", "factor"), ("factor",)),
            "x": Site("observed", (), ("data", "dim"), ("dim",)),
        }
        return sites, "loadings"

    def choose_k(self, x: ArrayLike, *, rng: np.random.Generator, backend: str | Passes | None = None, k_max: int = 10,
                 **spectral_kw: Any) -> tuple[int, dict]:
        """``k`` from the data: the eigengap of the noise-corrected covariance (factors standing out of the noise).

        The factors' likelihood has no closed form, so no score after a refinement is compared; see
        :meth:`specinit.family.Family.spectrum_k`.
        """
        options = {name: spectral_kw[name] for name in self.options if name in spectral_kw}
        moments = self.moments(x, k=1, backend=backend, **options)
        k, report = self.spectrum_k(moments, min(k_max, moments.n_features), rng, **options)
        return k, {**report, "k_auto/chosen": k}

    def moments(self, x: ArrayLike, *, k: int, backend: str | Passes | None, cumulant: str = "skew",
                noise: str = "isotropic", scores: bool = True) -> _DataMoments:
        x = check_rows(x)
        _check_no_constant_columns(x.max(axis=0) - x.min(axis=0), np.max(np.abs(x)))
        if backend not in (None, "numpy"):
            raise bad_argument("backend", None, "None or 'numpy' (the cumulant passes run in memory)", backend)
        return _DataMoments(x, cumulant)

    def population_moments(self, params: Mapping[str, Any], cumulant: str | None = None,
                           **options: Any) -> FactorMoments:
        if cumulant is None:
            cumulant = "kurtosis" if params.get("shape") is None and params.get("power") is not None else "skew"
        loadings, shape, power = params["loadings"], params.get("shape"), params.get("power")
        noise, loc = params.get("noise", 0.0), params.get("loc")
        cumulant = check_choice(cumulant, "cumulant", None, CUMULANTS)
        loadings = np.asarray(loadings, dtype=np.float64)
        if loadings.ndim != 2 or not np.all(np.isfinite(loadings)) or loadings.shape[0] > loadings.shape[1]:
            raise bad_argument("loadings", None, "a finite (k, d) array with k <= d", loadings)
        k, d = loadings.shape
        name, value = ("shape", shape) if cumulant == "skew" else ("power", power)
        value = np.asarray(value if value is not None else np.nan, dtype=np.float64)
        if value.shape != (k,) or not np.all(np.isfinite(value)) or np.any(value <= 0):
            raise bad_argument(name, None, f"a finite positive array of shape ({k},) for cumulant={cumulant!r}",
                               value)
        cumulants = 2.0 / np.sqrt(value) if cumulant == "skew" else excess_kurtosis_of_power(value)
        if isinstance(noise, bool) or not np.isfinite(noise) or noise < 0:
            raise bad_argument("noise", None, "a finite number >= 0", noise)
        loc = np.zeros(d) if loc is None else np.asarray(loc, dtype=np.float64)
        if loc.shape != (d,) or not np.all(np.isfinite(loc)):
            raise bad_argument("loc", None, f"a finite array of shape ({d},)", loc)
        return FactorMoments(loadings, cumulants, float(noise) ** 2, loc, cumulant)

    def max_components(self, moments: FactorMoments | _DataMoments | _SummedMoments) -> tuple[int, str]:
        return moments.n_features, f"at most the dimension d = {moments.n_features} (a factor model has at most d " \
                                   "independent factors identifiable by its covariance)"

    def tensor_order(self, cumulant: str = "skew", **options: Any) -> int:
        return 3 if cumulant == "skew" else 4

    def fit_input(self, moments: FactorMoments | _DataMoments | _SummedMoments, k: int, noise: str = "isotropic",
                  **options: Any) -> CorrectedCovariance:
        return CorrectedCovariance(moments.covariance(), moments.whitened_cumulant, k, noise)

    def recover(self, moments: FactorMoments | _DataMoments | _SummedMoments, k: int, *, cumulant: str = "skew",
                **options: Any) -> tuple[dict, dict, dict]:
        if moments.cumulant != cumulant:
            raise bad_argument("cumulant", None, f"the moments' cumulant ({moments.cumulant!r})", cumulant)
        return super().recover(moments, k, cumulant=cumulant, **options)

    def unwhiten(self, fit: ExchangeableFit, moments: FactorMoments | _DataMoments | _SummedMoments, k: int,
                 floor: float, cumulant: str = "skew", noise: str = "isotropic",
                 **options: Any) -> tuple[dict, dict, dict]:
        corrected = self.fit_input(moments, k, noise)
        values, loadings = fit.eigenvalues, fit.components * moments.unit
        se = _standard_error(cumulant, moments.n_samples)
        top = float(np.max(np.abs(values)))
        what = "skewness" if cumulant == "skew" else "excess kurtosis"
        if moments.n_samples is None:
            gaussian_like = np.abs(values) <= 1e-8 * max(top, 1.0)
            if gaussian_like.any():
                raise ValueError(
                    f"{current_entry()}: {int(gaussian_like.sum())} of the {k} factors have zero {what}: Gaussian "
                    "factors are not identifiable (any rotation of them fits the moments). Use the other cumulant, "
                    "or a smaller k.")
        else:
            # se is the sampling sd of a Gaussian's skewness (kurtosis) along one direction; the largest of a
            # whitened noise tensor's k eigenvalues is ~sqrt(k) times larger, hence the threshold 2 sqrt(k) se
            threshold = 2.0 * np.sqrt(k) * se
            gaussian_like = np.abs(values) < threshold
            if gaussian_like.any():
                warn(f"{current_entry()}: {int(gaussian_like.sum())} of the {k} factors have {what} "
                     f"({np.array2string(values[gaussian_like], precision=3)}) within the sampling noise "
                     f"2 sqrt(k) se = {threshold:.2g} (N={moments.n_samples}) of a Gaussian's 0: such factors are not "
                     f"identifiable and their loadings are arbitrary. Try "
                     f"cumulant={'kurtosis' if cumulant == 'skew' else 'skew'!r}, a smaller k, or more data.")
        if cumulant == "skew":
            # the decomposition returns positive eigenvalues: o_i carries the sign that makes the skewness positive
            params = {"shape": np.clip(4.0 / np.maximum(values, 1e-300) ** 2, *_SHAPE_RANGE)}
            stats = {"skewness": values}
        else:
            biggest = np.argmax(np.abs(loadings), axis=1)
            loadings = loadings * np.where(loadings[np.arange(k), biggest] < 0, -1.0, 1.0)[:, None]
            params = {"power": power_of_excess_kurtosis(values)}
            stats = {"excess_kurtosis": values}
        eigvals = corrected.eigenvalues * moments.unit**2
        noise_variance = corrected.noise_variance * moments.unit**2
        noise_sd = max(np.sqrt(noise_variance), floor * np.sqrt(max(float(eigvals.mean()), np.finfo(float).tiny)))
        diagnostics = {"cumulant": cumulant, **stats, "noise_variance": noise_variance,
                       "covariance_eigenvalues": eigvals, "cumulant_standard_error": se,
                       "gaussian_like": gaussian_like}
        params = {"loc": np.asarray(moments.mean, dtype=np.float64), "loadings": loadings, **params,
                  "noise": np.asarray(noise_sd)}
        return params, diagnostics, {}

    def complete(self, params: dict, x: ArrayLike, moments: FactorMoments | _DataMoments | _SummedMoments, *,
                 rng: np.random.Generator, scores: bool = True, **options: Any) -> tuple[dict, dict]:
        if not scores:
            return params, {}
        return {**params, "factors": _scores(params, check_rows(x), 0.05)}, {}

    def model_inputs(self, x: ArrayLike, estimate: SpectralEstimate, **options: Any) -> tuple[Callable, tuple, dict]:
        """``(model, args, kwargs)`` of the NumPyro program for ``x`` (the ``map`` refinement)."""
        x = check_rows(x)
        if x.shape[1] != estimate.params["loadings"].shape[1]:
            raise bad_argument("x", None, f"d = {estimate.params['loadings'].shape[1]} columns (the estimate's)", x)
        # the log joint squares the data in JAX's default float: its largest magnitude must square within range
        limits = np.finfo(jnp.result_type(float))
        low, high = float(np.sqrt(limits.tiny)), float(np.sqrt(limits.max))
        if not low <= unit_of(x) <= high:
            raise bad_argument("x", None, f"of a magnitude whose square {limits.dtype} holds (largest entry between "
                               f"{low:.0e} and {high:.0e}, the log joint of the MAP refinement runs in JAX's default "
                               "float): rescale x and the estimate's 'loc', 'loadings' and 'noise' by one factor, or "
                               "enable JAX's float64 (jax.config.update('jax_enable_x64', True))",
                               f"a largest entry of {unit_of(x):.3g}", describe=False)
        return model, (x,), {"k": estimate.k, "cumulant": "skew" if "shape" in estimate.params else "kurtosis"}

    def refine_map(self, x: ArrayLike, estimate: SpectralEstimate, **options: Any) -> RefineResult:
        """The posterior mode from ``estimate``, its factor scores filled in when absent."""
        if "factors" not in estimate.params:
            estimate = self.estimate(estimate.k, {**estimate.params,
                                                  "factors": _scores(estimate.params, check_rows(x), 0.05)},
                                     estimate.diagnostics)
        return map_estimate(self, x, estimate, **options)

    def n_observations(self, x: ArrayLike) -> int:
        return int(np.shape(x)[0])

    def log_likelihood(self, x: ArrayLike, estimate: SpectralEstimate | Mapping[str, Any]) -> np.ndarray:
        from specinit.refine import check_estimate

        estimate = check_estimate(self, estimate)
        p = estimate.params
        x = check_rows(x, min_rows=1)
        g = p["factors"] if "factors" in p and len(p["factors"]) == len(x) else _scores(p, x, 0.05)
        h = g - np.sqrt(p["shape"]) if "shape" in p else g
        resid = (x - p["loc"] - h @ p["loadings"]) / float(p["noise"])
        return -0.5 * np.sum(resid**2, axis=1) - x.shape[1] * (np.log(float(p["noise"])) + 0.5 * np.log(2 * np.pi))

    def estimator_face(self) -> Face:
        """:class:`specinit.estimators.SpectralFactors`."""
        return Face(
            class_name="SpectralFactors", mixins=("feature_names", "transformer"),
            summary="""Independent non-Gaussian factors by the method of moments (:mod:`specinit.models.factors`).

            ``x = loc + h @ loadings + noise``, with independent skewed (Gamma) or
            kurtotic factors ``h``: the noise-corrected covariance whitens the third
            or fourth cumulant, whose decomposition gives the loadings in one pass,
            with no local optima (the model FastICA and ``FactorAnalysis`` users
            fit). ``transform`` gives the factor scores ``E[h | x]`` (linear).""",
            parameters={
                "n_components": Param("int or 'auto'", "Number of factors, at most the number of features (fewer "
                                      "to estimate the noise); ``\"auto\"``: the eigengap of the noise-corrected "
                                      "covariance (:meth:`specinit.models.factors.Factors.choose_k`).", 2),
                "cumulant": self.declared()["cumulant"],
                "noise": self.declared()["noise"],
                "random_state": RANDOM_STATE,
            },
            spectral={"n_components": "k", "cumulant": "cumulant", "noise": "noise"},
            fixed={"scores": False},
            data="rows",
            attributes={
                "components_": ("ndarray, shape (n_components, n_features)\n    Loadings (each factor's direction "
                                "and scale).", lambda estimator, estimate, X: estimate.params["loadings"]),
                "mean_": ("ndarray, shape (n_features,)", lambda estimator, estimate, X: estimate.params["loc"]),
                "noise_variance_": ("float\n    Variance of the isotropic noise.",
                                    lambda estimator, estimate, X: float(estimate.params["noise"]) ** 2),
            },
            transform=lambda estimator, faces, X: factor_scores(estimator.estimate_, X),
            score=mean_log_likelihood,
            answers=frozenset({"score_samples", "partial_fit"}),
        )


FAMILY = Factors()


#: Facts of the skewed-factor model (sites ``loc``, ``loadings``, ``shape``, ``noise``, ``factors``).
FACTS = ModelFacts.from_sites(*FAMILY.site_table({"shape": None}))
#: Facts of the kurtotic-factor model (``power`` in place of ``shape``).
FACTS_KURTOSIS = ModelFacts.from_sites(*FAMILY.site_table({"power": None}))


@FAMILY.face(
    validate=True,
    loadings=Param("array, shape (k, d), or dict / SpectralEstimate", "Rows are the columns of ``O`` (linearly "
                   "independent, so ``k <= d``); or all sites by name."),
    shape=Param("array, shape (k,), optional", "Gamma shapes of skewed factors (required for ``\"skew\"``); "
                "skewness ``2/sqrt(shape)``.", None),
    power=Param("array, shape (k,), optional", "Exponential-power shapes of kurtotic factors (required for "
                "``\"kurtosis\"``).", None),
    noise=Param("float", "Standard deviation of the isotropic Gaussian noise (>= 0).", 0.0),
    loc=Param("array, shape (d,), optional", "``E[x]`` (default zeros).", None),
    cumulant=Param("{'skew', 'kurtosis'} or None", "The model family; None (default): ``\"kurtosis\"`` when "
                   "``power`` is given without ``shape``, else ``\"skew\"``.", None))
def population_moments(loadings, shape, power, noise, loc, *, cumulant) -> FactorMoments:
    """Exact moments of the independent-factor model from its parameters.

    Returns
    -------
    FactorMoments
        For :func:`spectral_from_moments` (exact recovery of every site).

    Raises
    ------
    ValueError
        Shapes that do not match, non-finite values, ``k > d``, non-positive
        ``shape``/``power``, negative ``noise``.
    """
    return FAMILY.population_moments(site_values(loadings, "loadings", shape=shape, power=power, noise=noise,
                                                 loc=loc), cumulant=cumulant)


@FAMILY.face()
def spectral_from_moments(moments, k, *, noise, method, seed, decompose_options, floor) -> SpectralEstimate:
    """Loadings, factor shapes, noise and mean from the moments of an independent-factor model.

    Returns
    -------
    SpectralEstimate
        ``"factors"`` with ``loc`` (d,), ``loadings`` (k, d), ``shape`` (k,)
        (skew) or ``power`` (k,) (kurtosis), ``noise`` (); ``diagnostics``
        hold ``skewness`` or ``excess_kurtosis`` (k,), ``noise_variance``,
        ``covariance_eigenvalues``, ``gaussian_like`` (factors whose cumulant
        is below ``2 sqrt(k) se``, ``se = sqrt(6/N)`` for skewness or
        ``sqrt(24/N)`` for excess kurtosis: indistinguishable from a Gaussian's), the whitening and
        decomposition diagnostics.

    Raises
    ------
    ValueError
        ``k > d``; a factor with zero cumulant in population moments
        (Gaussian factors are not identifiable).
    specinit.engine.whitening.IndefiniteMomentError
        If the noise-corrected covariance has fewer than ``k`` eigenvalues
        above the noise level.

    Warns
    -----
    RuntimeWarning
        If factors of data moments have a cumulant indistinguishable from a
        Gaussian's (their loadings are then not identifiable).

    References
    ----------
    .. [1] Anandkumar et al., "A Spectral Algorithm for LDA", Sec. 3.1, Lemmas 1-2, Alg. 1.
    .. [2] Anandkumar et al., "Two SVDs Suffice", Algs. 1-2.
    """
    return FAMILY.spectral_from_moments(moments, k, method=method, seed=seed, floor=floor,
                                        decompose_options=decompose_options, noise=noise,
                                        cumulant=moments.cumulant)


def _scores(params, x, margin) -> np.ndarray:
    loadings, loc, noise = params["loadings"], params["loc"], params["noise"]
    gram = loadings @ loadings.T + float(noise) ** 2 * np.eye(loadings.shape[0])
    h = np.linalg.solve(gram, loadings @ (x - loc).T).T
    if "shape" in params:
        root = np.sqrt(params["shape"])
        return np.maximum(h + root, margin * root)
    return h


@public
def factor_scores(estimate: SpectralEstimate, x: ArrayLike, *, margin: float = 0.05) -> np.ndarray:
    """Initial values of the site ``factors``: the linear posterior mean ``E[h | x]``.

    ``h_hat = (L L^T + noise^2 I)^{-1} L (x - loc)`` (the posterior mean if
    the factors were Gaussian; a k x k solve). For skewed factors the site
    holds ``g = h + sqrt(shape)``, moved into ``g >= margin * sqrt(shape)``.

    Parameters
    ----------
    estimate : SpectralEstimate
        From :func:`spectral` or :func:`spectral_from_moments`.
    x : array, shape (N, d)
        Observations.
    margin : float
        Relative floor of the Gamma variables (skewed factors).

    Returns
    -------
    ndarray, shape (N, k)
        Values of the site ``factors``, strictly inside its support.

    Raises
    ------
    ValueError
        If ``x`` does not match the estimate's dimension or is not finite.
    """
    x = check_rows(x, min_rows=1)
    loadings = estimate.params["loadings"]
    if x.shape[1] != loadings.shape[1]:
        raise bad_argument("x", None, f"an array with d = {loadings.shape[1]} columns (the estimate's)", x)
    return _scores(estimate.params, x, check_positive(margin, "margin", None))


@FAMILY.face()
def spectral(x, k, cumulant, *, noise, method, seed, decompose_options, scores, floor, backend) -> SpectralEstimate:
    """Method-of-moments estimate of an independent-factor model from data.

    Returns
    -------
    SpectralEstimate
        As :func:`spectral_from_moments`, plus ``factors`` when ``scores``.

    Raises
    ------
    ValueError
        ``k > d``, rows with NaN or infinite entries, constant columns,
        fewer than two observations, unknown ``cumulant``/``noise``/``method``.
    TypeError
        Non-numeric ``x``, unknown ``decompose_options``.

    Warns
    -----
    RuntimeWarning
        Factors whose skewness/excess kurtosis is within the sampling noise
        of zero (Gaussian-like, not identifiable; see ``gaussian_like``).

    References
    ----------
    .. [1] Anandkumar et al., "A Spectral Algorithm for LDA", Sec. 3.1, Lemmas 1-2, Alg. 1.
    .. [2] Anandkumar et al., "Two SVDs Suffice", Algs. 1-2.
    """
    return FAMILY.spectral(x, k, method=method, seed=seed, floor=floor, decompose_options=decompose_options,
                           backend=backend, cumulant=cumulant, noise=noise, scores=scores)


@FAMILY.face(
    x=Param("array, shape (n, d)", "The new rows (finite)."),
    estimate=UPDATED_ESTIMATE,
    k=Param("int, optional", "Number of factors, ``1 <= k <= d``: required for the first batch; with ``estimate`` "
            "None means ``estimate.k`` (the stored sums fit any k).", None, Interval(int, 1, none=True)))
def update(x, estimate, *, k, cumulant, noise, method, seed, decompose_options, floor) -> SpectralEstimate:
    """Add a batch of rows to an independent-factor fit: exact merged moments, then the moment estimate.

    The moments of :func:`spectral` are functions of the count of rows and
    the sums of their first three powers (``cumulant="skew"``) or four
    (``"kurtosis"``) (:class:`~specinit.engine.rows.RowSums`), which add up
    over batches exactly: after any number of batches the estimate is that
    of :func:`spectral` on all the rows at once (the same moments to
    rounding, the same decomposition and seed), whatever the batch sizes.
    The sums do not depend on ``k`` or ``noise``, so a later batch may ask
    for others; sums of four powers also serve ``"skew"``, not the reverse.
    Factors keep their labels from batch to batch (the new loadings are
    matched to the previous ones). Memory: a few (d, d, d) or (d, d, d, d)
    float arrays, so the kurtotic update suits moderate ``d``. No factor
    scores are returned (:func:`factor_scores` gives them for any rows). The
    returned estimate keeps the sums in its ``state`` (``moments/...``),
    which :meth:`~specinit.estimate.SpectralEstimate.save` writes, so updates
    go on in a later process. The online face of
    ``SpectralFactors.partial_fit``.

    Returns
    -------
    SpectralEstimate
        ``"factors"`` as from :func:`spectral` with ``scores=False``, plus
        ``n_batches`` and ``n_observations`` in the diagnostics.

    Raises
    ------
    ValueError
        ``k`` missing on the first batch or above ``d``, an estimate without
        stored sums (from :func:`spectral`: fit the first batch with
        :func:`update`), ``cumulant="kurtosis"`` on sums of three powers, a
        batch with another number of columns, rows that are not finite,
        columns constant over every row seen.
    MemoryError
        The sums over the memory budget (:func:`specinit.memory_limit`).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.gamma(2.0, 1.0, (2000, 2)) @ np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 2.0]])
    >>> est = update(x[:1000], k=2, noise="none")
    >>> est = update(x[1000:], est, noise="none")
    >>> once = spectral(x, 2, noise="none", scores=False)
    >>> from specinit.align import match_components
    >>> same = once.params["loadings"][match_components(est.params["loadings"], once.params["loadings"])]
    >>> bool(abs(est.params["loadings"] - same).max() < 1e-8), est.diagnostics["n_batches"]
    (True, 2)
    """
    stored, k, n_batches = FAMILY.stream(estimate, k, FAMILY.summary, "factors.update")
    options = check_arguments(FAMILY.options, {"cumulant": cumulant, "noise": noise})
    order = FAMILY.tensor_order(options["cumulant"])
    if stored is not None and stored.order < order:
        raise bad_argument("cumulant", None, f"'skew' (the stored sums have powers up to {stored.order}; the fourth "
                           "cumulant needs the sums of fourth powers from the first batch on)", cumulant)
    batch = RowSums.from_rows(x, "x", order=order if stored is None else stored.order, frame=stored)
    merged = batch if stored is None else stored + batch
    _check_no_constant_columns(merged.high - merged.low, np.max(np.abs([merged.low, merged.high])))
    fit = FAMILY.spectral_from_moments(_SummedMoments(merged, options["cumulant"]), k, method=method, seed=seed,
                                       floor=floor, decompose_options=decompose_options, noise=options["noise"],
                                       cumulant=options["cumulant"])
    return FAMILY.streamed(fit, estimate, merged, n_batches, n_observations=merged.n)


# The options are checked once, by the driver (:func:`specinit.refine.map_estimate`).
@face({
    **MAP_OPTIONS,
    "x": Param("array, shape (N, d)", "The observations."),
    "estimate": Param("SpectralEstimate or dict", "Starting ``loc``, ``loadings``, ``shape`` or ``power``, ``noise`` "
                      "(and optionally ``factors``)."),
}, validate=False)
def refine(x, estimate, *, method, num_steps, lr, seed) -> RefineResult:
    """Spectral then refine: the posterior mode of :func:`model` (``AutoDelta``, Adam) from an estimate.

    The factors are continuous latents with no closed-form posterior (Gamma
    or exponential-power factors), so there is no closed-form EM; the
    refinement maximizes the log joint of every site, factor scores included
    (:func:`factor_scores` fills them in when the estimate has none).

    Returns
    -------
    specinit.refine.RefineResult
        ``.log_likelihood`` is the log joint after every step.

    Raises
    ------
    ValueError
        Bad ``x`` (its largest magnitude must square within JAX's default
        float: about 1e-19 to 1e19 in float32), or an estimate of another
        model, with missing sites or values outside their supports.
    """
    return FAMILY.refine(x, estimate, method=method, num_steps=num_steps, lr=lr, seed=seed)


log_likelihood = FAMILY.log_likelihood_face("x", """
    Log-likelihood of every row given the estimate's factor scores (``log p(x_n | h_n)``).

    The factors' marginal has no closed form; the density is the NumPyro
    program's ``x`` site given ``factors`` (from the estimate, or
    :func:`factor_scores` when it has none for these rows).

    Returns
    -------
    ndarray, shape (N,)
    """)

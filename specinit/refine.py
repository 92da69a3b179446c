"""Spectral then refine: the drivers that improve an estimate on the data, the same for every family.

* :func:`em` -- expectation-maximization; the E-step comes from the family's
  one likelihood (:meth:`~specinit.family.Family.component_log_prob` for
  mixtures, :meth:`~specinit.family.Family.e_step` for chains), the M-step
  from :meth:`~specinit.family.Family.m_step`, and every iterate is projected
  into the sites' supports by the one projection of
  :func:`specinit.engine.support.project`;
* :func:`map_estimate` -- the posterior mode of the family's NumPyro model
  (``AutoDelta`` guide, Adam), started from the estimate: families without a
  closed-form M-step (independent factors, kernel mixtures);
* the topic models' minibatch SVI lives with them (``lda.svi``), on the same
  :class:`RefineResult`.

Every driver checks the estimate it is given (:func:`check_estimate`): the
right family, every site present, finite, inside its support, shapes
consistent -- nothing is clipped or renormalized silently. A refined estimate
keeps the spectral diagnostics under their keys and adds ``refine/...`` keys,
so it saves and loads like any estimate.

References
----------
.. [1] Dempster, Laird, Rubin, "Maximum likelihood from incomplete data via
   the EM algorithm", JRSS B 39 (1977), Thm 1 (the likelihood never decreases).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from specinit._validation import Interval, bad_argument, current_entry, warn
from specinit.engine.support import project
from specinit.estimate import SpectralEstimate, check_site_values
from specinit.faces import Param, face

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from specinit.family import Family

__all__ = ["DRIVERS", "EM_OPTIONS", "MAP_OPTIONS", "PLATEAU_TOL", "RESTART_SPREADS", "RefineResult", "StoppingRule",
           "check_estimate", "component_share", "em", "map_estimate", "in_float64", "least_needed_component",
           "log_joint", "mixture_e_step", "normalized_rows", "perturbed", "plateau", "split_merge_pair",
           "without_negligible"]

#: The options of :func:`em`, declared once: the families' ``refine`` faces take them (with their own defaults).
EM_OPTIONS = {
    "method": Param("{'em'}", "Expectation-maximization (NumPy, float64, log-sum-exp E-step).", "em"),
    "max_iter": Param("int", "Largest number of M-steps of a run (the chosen candidate's race steps included).", 100,
                      Interval(int, 0)),
    "tol": Param("float, optional", "Stop when the log-likelihood gain per observation is below ``tol`` "
                 "(scikit-learn's ``GaussianMixture`` convention). None: the relative rule of ``rtol``.", 1e-3,
                 Interval(float, 0.0, open="low", none=True)),
    "rtol": Param("float, optional", "With ``tol=None``: stop when the last gain and the gain Aitken's extrapolation "
                  "still expects are both at most ``rtol`` times ``max(|log-likelihood|, n_observations)`` "
                  "(:class:`specinit.refine.StoppingRule`); a climb whose gains grow (EM leaving a saddle) never "
                  "stops. The restarts' race and the split-merge moves explore under ``100 * rtol``; the estimate "
                  "kept climbs on to ``rtol``. Default (None) with ``tol=None``: 1e-6.", None,
                  Interval(float, 0.0, 1.0, open="both", none=True)),
    "window": Param("int", "Steps the gains of the stopping rule are averaged over "
                    "(:class:`specinit.refine.StoppingRule`).", 1, Interval(int, 1)),
    "floor": Param("float", "Every iterate is projected strictly inside the supports with this floor "
                   "(probabilities at least ``floor / d``, as NumPyro needs).", 1e-10,
                   Interval(float, 0.0, 1.0, open="both")),
    "reg": Param("float", "Added to every variance, relative to the data's variance (so the result does not depend "
                 "on the data's unit).", 1e-6),
    "restarts": Param("int", "EM also runs from this many perturbed copies of the start "
                      "(:func:`specinit.refine.perturbed`) and the candidates race by successive halving, the best "
                      "one continuing: it escapes the saddles and duplicated components EM stalls in from a spectral "
                      "start on real data. 0: plain EM from the start.", 0, Interval(int, 0)),
    "restart_iter": Param("int", "EM steps of every candidate in each round of the race, and the most steps a "
                          "split-merge move gets to pass the estimate it would replace.", 20, Interval(int, 1)),
    "split_merge": Param("int", "After convergence, split-merge moves (the family's "
                         ":meth:`~specinit.family.Family.split_merge`: the component least needed taken away, a "
                         "heavy one split in two) run EM and replace the estimate when they reach a higher "
                         "log-likelihood; they stop after ``split_merge`` failures in a row (0: none). They escape "
                         "the optima where two components share one cluster while another cluster has none.", 0,
                         Interval(int, 0)),
    "seed": Param("int", "Randomness of the perturbed copies and of the moves.", 0, Interval(int, 0)),
    "accelerate": Param("bool", "SQUAREM (Varadhan and Roland 2008): after every two EM steps, a step along their "
                        "extrapolation (log coordinates for positive and simplex sites) followed by an EM step, kept "
                        "only when it does not lower the log-likelihood; the fixed points are EM's, reached in fewer "
                        "steps where EM converges slowly (Baum-Welch on long sequences). False (default): plain "
                        "EM.", False, lambda name, value: bool(value)),
}


@dataclass
class RefineResult:
    """What every ``refine`` returns: the refined estimate and the trace of its objective.

    Attributes
    ----------
    estimate : SpectralEstimate
        Refined values of the family's sites (strictly inside their
        supports), ready for ``init_strategy()`` / ``init_params(...)``; its
        diagnostics are the start's plus ``refine/method``,
        ``refine/n_iter``, ``refine/converged``, ``refine/log_likelihood``.
    log_likelihood : ndarray
        The objective at the start and after every iteration (EM: the
        total log-likelihood; MAP: the log joint; SVI: the ELBO).
    n_iter : int
        Iterations taken in all (for EM with restarts or split-merge moves, the other candidates' and the
        moves' steps included; ``log_likelihood`` traces the run that gave the estimate, from its start).
    converged : bool
        Whether the stopping rule was met.
    method : str
        The driver (``"em"``, ``"map"``, ``"svi"``).
    diagnostics : dict
        ``n_observations``, ``decreases`` (EM steps that lowered the
        log-likelihood by more than round-off; zero for exact EM).
    """

    estimate: SpectralEstimate
    log_likelihood: np.ndarray
    n_iter: int
    converged: bool
    method: str = "em"
    diagnostics: dict = field(default_factory=dict)

    @property
    def params(self) -> dict[str, np.ndarray]:
        """The refined parameters by site name (``estimate.params``)."""
        return self.estimate.params

    @property
    def mean_log_likelihood(self) -> float:
        """Final objective per observation (EM: comparable to scikit-learn's ``score``)."""
        return float(self.log_likelihood[-1] / self.diagnostics["n_observations"])


def check_estimate(family: Family, estimate: SpectralEstimate | Mapping[str, ArrayLike]) -> SpectralEstimate:
    """``estimate`` as a valid start for ``family``: family, sites, finiteness, support, shapes.

    Parameters
    ----------
    family : Family
    estimate : SpectralEstimate or dict
        An estimate of this family, or a dict of its site values.

    Returns
    -------
    SpectralEstimate

    Raises
    ------
    TypeError
        Neither a SpectralEstimate nor a dict.
    ValueError
        An estimate of another model, a missing site, a value that is not
        finite or outside its support, or inconsistent shapes.
    """
    if isinstance(estimate, SpectralEstimate):
        if estimate.model != family.name:
            raise bad_argument("estimate", None, f"an estimate of the {family.name!r} model",
                               f"an estimate of {estimate.model!r}", describe=False)
        params = estimate.params
    elif isinstance(estimate, Mapping):
        params = dict(estimate)
    else:
        raise bad_argument("estimate", None, f"a SpectralEstimate of {family.name!r} or a dict of its site values",
                           estimate, kind=TypeError)
    sites, _ = family.site_table(params)
    needed = [name for name, site in sites.items() if site.support != "observed" and name not in family.optional_sites]
    missing = [name for name in needed if name not in params]
    if missing:
        raise bad_argument("estimate", None, f"the sites {sorted(needed)}", f"missing {missing}", describe=False)
    values = {}
    for name, value in params.items():
        if value is None:
            raise bad_argument("estimate", None, f"an array for the site {name!r}", None)
        array = np.asarray(value)
        if array.dtype == object or array.dtype.kind not in "biuf":
            raise bad_argument("estimate", None, f"a numeric array for the site {name!r}", array, kind=TypeError)
        values[name] = array.astype(np.float64)
    if isinstance(estimate, SpectralEstimate):
        check_site_values(values, estimate.sites, estimate.k)
        return replace(estimate, params=values)
    match_site = family.site_table(values)[1]
    axes = sites[match_site].axes if match_site in sites else ()
    k = values[match_site].shape[axes[0]] if axes and values[match_site].ndim > axes[0] else None
    check_site_values(values, sites, k)
    return family.estimate(None, values, {})


def refined(family, start: SpectralEstimate, params: dict, method: str, trace, n_iter: int, converged: bool,
            extra: dict | None = None) -> SpectralEstimate:
    """The refined estimate: the start's diagnostics plus ``refine/*`` keys (flat, so it saves and loads)."""
    diagnostics = {key: value for key, value in start.diagnostics.items() if not key.startswith("refine/")}
    diagnostics.update({"refine/method": method, "refine/n_iter": int(n_iter), "refine/converged": bool(converged),
                        "refine/log_likelihood": np.asarray(trace, dtype=np.float64)})
    diagnostics.update({f"refine/{key}": value for key, value in (extra or {}).items()})
    return replace(start, params=params, diagnostics=diagnostics, sites=family.site_table(params)[0])


def mixture_e_step(family: Family, params: Mapping, data: Any,
                   per_observation: bool = False) -> tuple[np.ndarray, np.ndarray | float]:
    """Responsibilities and log-likelihood from the family's per-component likelihood (float64).

    Parameters
    ----------
    family : Family
        Provides ``component_log_prob(params, data)`` (JAX, evaluated under
        a scoped float64 context, or NumPy) and a ``weights`` site.
    params : dict
    data : object
        In the form ``component_log_prob`` reads.
    per_observation : bool
        Return the log-likelihood of every observation instead of the total.

    Returns
    -------
    resp : ndarray, shape (N, k)
    log_likelihood : float or ndarray (N,)
    """
    resp, row = normalized_rows(log_joint(family, params, data))
    return resp, (row if per_observation else float(row.sum()))


def log_joint(family: Family, params: Mapping, data: Any) -> np.ndarray:
    """``log w_i + log p(x_n | component i)`` for every observation and component, (N, k) float64.

    The family's ``component_log_prob`` (JAX, evaluated under a scoped float64 context, or NumPy) plus the
    log weights: what the E-step normalizes and the merge of a split-merge move compares.

    Parameters
    ----------
    family : Family
        Provides ``component_log_prob(params, data)`` and a ``weights`` site.
    params : dict
    data : object
        In the form ``component_log_prob`` reads.

    Returns
    -------
    ndarray, shape (N, k)
    """
    per_component = in_float64(family.component_log_prob, params, data)
    return per_component + np.log(np.asarray(params["weights"], dtype=np.float64))


def in_float64(compute: Callable, *args: Any) -> np.ndarray:
    """``compute(*args)`` evaluated under JAX's scoped float64 context, returned as a float64 NumPy array.

    Every likelihood the drivers and the families' ``log_likelihood`` read
    goes through here: JAX computes float32 by default, and a per-row
    log-likelihood summed over many rows needs float64.

    Parameters
    ----------
    compute : callable
        A JAX (or NumPy) computation.
    *args
        Its arguments.

    Returns
    -------
    ndarray
        Its value as float64.
    """
    from specinit.engine.backends.jax import x64

    with x64():
        return np.asarray(compute(*args), dtype=np.float64)


def least_needed_component(family: Family, params: Mapping, data: Any) -> int:
    """The mixture component whose removal costs the least log-likelihood (the merge of a split-merge move).

    Each candidate is scored by the data's log-likelihood with that component taken out and the other
    weights renormalized (``log(1 - w_j)`` per observation). Two exponentials of the (N, k) log joint serve
    every candidate: relative to each row's largest entry (rows whose largest entry stays) and relative to its
    second largest with the largest left out (rows whose largest entry leaves); each sum keeps a term equal to
    one, so nothing cancels.

    Parameters
    ----------
    family : Family
        Provides ``component_log_prob(params, data)`` and a ``weights`` site.
    params : dict
    data : object
        In the form ``component_log_prob`` reads.

    Returns
    -------
    int
    """
    weights = np.asarray(params["weights"], dtype=np.float64)
    by_column = np.ascontiguousarray(log_joint(family, params, data).T)  # (k, N): see normalized_rows
    k, n = by_column.shape
    rows = np.arange(n)
    first = by_column.argmax(axis=0)
    top = by_column[first, rows]
    scaled = _shifted_exp(by_column, top)
    total = scaled.sum(axis=0)
    others = by_column.copy()
    others[first, rows] = -np.inf
    second = others.max(axis=0)
    rest = _shifted_exp(others, second)
    rest[first, rows] = 0.0
    log_rest = second + np.log(rest.sum(axis=0))
    without = []
    for j in range(k):
        leaving = first == j  # these rows use log_rest; the others keep their largest term
        kept = top + np.log(np.where(leaving, 1.0, total - scaled[j]))
        without.append(np.where(leaving, log_rest, kept).sum() - n * np.log1p(-weights[j]))
    return int(np.argmax(without))


def split_merge_pair(family: Family, params: Mapping, data: Any, attempt: int) -> tuple[int, int] | None:
    """The two components of a mixture's split-merge move: the one that leaves and the one split in two.

    The least needed component leaves (:func:`least_needed_component`); the ``attempt``-th heaviest other one
    is split. A move is set by that pair (its split direction is the split component's principal axis), so
    there are k - 1 distinct moves from a fit: None once each has been tried.

    Parameters
    ----------
    family : Family
        A mixture with a ``weights`` site.
    params : dict
    data : object
        In the form the family's ``component_log_prob`` reads.
    attempt : int
        Moves from ``params`` that failed so far.

    Returns
    -------
    (int, int) or None
        ``(leaving, split)``.
    """
    weights = np.asarray(params["weights"], dtype=np.float64)
    k = weights.size
    if attempt >= k - 1:
        return None
    leaving = least_needed_component(family, params, data)
    others = np.delete(np.arange(k), leaving)
    return leaving, int(others[np.argsort(-weights[others], kind="stable")[attempt]])


#: The exponent below which ``exp`` gives subnormal float64 numbers (``exp(-708.4)`` is the smallest normal one).
SUBNORMAL_EXP = -700.0


def _shifted_exp(values: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``exp(values - shift)`` as a new array, differences below :data:`SUBNORMAL_EXP` raised to it."""
    out = np.maximum(values - shift, SUBNORMAL_EXP)
    return np.exp(out, out=out)


#: Weights below this (of a distribution summing to one) are invisible in its sums; as exact zeros, their products
#: with the data are not subnormal numbers, whose arithmetic is 10-100 times slower.
NEGLIGIBLE_WEIGHT = 1e-200


def without_negligible(weights: np.ndarray) -> np.ndarray:
    """``weights`` (non-negative, summing to one) with the entries below :data:`NEGLIGIBLE_WEIGHT` as exact zeros.

    For the products a split move iterates on (a component's responsibilities times the data): responsibilities
    of 1e-307 times data below one are subnormal, and a power step with them costs 10 times one without them
    (0.3 against 0.03 ms on digits, 1,797 x 64); their sums are those of the weights as they were.

    Parameters
    ----------
    weights : ndarray

    Returns
    -------
    ndarray
        A new array.
    """
    return np.where(weights >= NEGLIGIBLE_WEIGHT, weights, 0.0)


def component_share(resp: np.ndarray, component: int) -> np.ndarray:
    """What a split move weights the observations by: ``component``'s responsibilities normalized to sum to one,
    :func:`without_negligible`.

    Parameters
    ----------
    resp : ndarray, shape (N, k)
    component : int

    Returns
    -------
    ndarray, shape (N,)
    """
    column = resp[:, component]
    return without_negligible(column / max(float(column.sum()), np.finfo(float).tiny))


def normalized_rows(log_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``exp(log_values)`` with rows scaled to sum to one, and every row's log-sum-exp (one ``exp``, NumPy).

    Parameters
    ----------
    log_values : ndarray, shape (N, k)
        Finite in every row's largest entry.

    Returns
    -------
    normalized : ndarray, shape (N, k)
    log_sums : ndarray, shape (N,)
    """
    # Computed on the (k, N) transpose, contiguous: a reduction over the k entries of each row is then k - 1
    # vector operations over all rows (4-17x faster than over the short axis of a C-ordered (N, k) array; the
    # result is its Fortran-ordered transpose). Differences below SUBNORMAL_EXP are raised to it: their
    # exponentials stay normal numbers (subnormal arithmetic is many times slower) at a change of at most
    # 1e-304 relative to each row's sum.
    by_column = np.ascontiguousarray(np.asarray(log_values).T)
    top = by_column.max(axis=0)
    scaled = _shifted_exp(by_column, top)
    sums = scaled.sum(axis=0)
    scaled /= sums
    return scaled.T, top + np.log(sums)


#: Spreads (log-scale for probabilities and scales, in units of the components' spread for locations) of the
#: perturbed copies of the start, cycled over the restarts: small ones stay in the start's basin, large ones leave it.
RESTART_SPREADS = (0.5, 1.0, 2.0)


def _support(sites, name: str) -> str:
    """The support of the site ``name`` (``"real"`` for values that are not sites)."""
    return sites[name].support if name in sites else "real"


def perturbed(params: dict, sites: dict, rng: np.random.Generator, spread: float) -> dict:
    """A random copy of ``params`` near them: multiplicative noise for simplex and positive sites, additive for real.

    Simplex rows are first mixed with the uniform row (weight ``min(0.1 * spread, 0.5)``), so that entries at
    the floor -- a state the chain never enters, a symbol a state never emits -- can come back under EM.

    Parameters
    ----------
    params : dict
        Values inside their supports.
    sites : dict of str -> Site
    rng : numpy.random.Generator
    spread : float
        Standard deviation of the log-scale noise; real sites move by ``spread`` times the spread of their
        values across components (or their magnitude when they have no component axis).

    Returns
    -------
    dict
    """
    out = {}
    for name, value in params.items():
        support = _support(sites, name)
        noise = rng.standard_normal(value.shape)
        if support == "simplex":
            # mixed towards uniform first, so that entries at the floor (a state no chain enters) come back
            mix = min(0.1 * spread, 0.5)
            value = ((1.0 - mix) * value + mix / value.shape[-1]) * np.exp(spread * noise)
            out[name] = value / value.sum(axis=-1, keepdims=True)
        elif support == "positive":
            out[name] = value * np.exp(spread * noise)
        else:
            axes = sites[name].axes if name in sites else ()
            width = np.std(value, axis=axes[0], keepdims=True) if axes and value.shape[axes[0]] > 1 else np.abs(value)
            out[name] = value + spread * np.maximum(width, np.finfo(float).tiny) * noise
    return out


@dataclass(frozen=True)
class StoppingRule:
    """EM's stopping rule: an absolute tolerance per observation, or a relative one that lets a climb finish.

    Parameters
    ----------
    n_observations : int
        What divides the log-likelihood in the absolute rule (observations, symbols).
    tol : float or None
        Absolute rule: stop when the last gain per observation is below ``tol`` (scikit-learn's
        ``GaussianMixture`` convention). None: the relative rule.
    rtol : float
        Relative rule (``tol`` None): stop when the last gain and the gain still to come are both at most
        ``rtol * max(|log-likelihood|, n_observations)``. The gain still to come is Aitken's extrapolation of
        the last two gains (``g * r / (1 - r)`` with ``r`` their ratio, the rate of EM's linear convergence
        [2]_); a climb whose gains grow (``r >= 1``, EM leaving a saddle) is never stopped, and a slow one
        stops only near its end, where a rule on the last gain alone stops early.
    window : int
        The gains are the mean gains per step over the last ``window`` steps (and the ``window`` steps before,
        for the rate): objectives that climb in bursts (a slow step, then a climb when a cluster separates, as
        on short texts) are not stopped by one slow step. A run takes at least ``window`` steps.
    offset : float
        Added to the log-likelihood before its magnitude sets the relative threshold
        (:meth:`~specinit.family.Family.unit_offset`): data in another unit stop at the same step.

    References
    ----------
    .. [2] Böhning, Dietz, Schaub, Schlattmann, Lindsay, "The distribution of the likelihood ratio for mixtures
       of densities from the one-parameter exponential family", Ann. Inst. Statist. Math. 46 (1994)
       (Aitken's acceleration as a stopping rule for EM).
    """

    n_observations: int
    tol: float | None
    rtol: float = 1e-6
    window: int = 1
    offset: float = 0.0

    def loose(self) -> "StoppingRule":
        """The rule that ends the exploring runs (race, split-merge moves): ``rtol`` 100 times larger (the
        absolute rule unchanged); the run kept then climbs on to this rule."""
        return self if self.tol is not None else replace(self, rtol=min(100 * self.rtol, 0.5))

    def threshold(self, log_likelihood: float) -> float:
        """The gain (total, not per observation) below which a run has converged at ``log_likelihood``."""
        if self.tol is not None:
            return self.tol * self.n_observations
        return self.rtol * max(abs(log_likelihood + self.offset), self.n_observations)

    def converged(self, trace: Sequence[float]) -> bool:
        """Whether a run with this log-likelihood ``trace`` (two or more values) stops."""
        w = self.window
        if len(trace) <= w:
            return False
        gain = (trace[-1] - trace[-1 - w]) / w
        threshold = self.threshold(trace[-1])
        if self.tol is not None:
            return abs(gain) < threshold
        if gain > threshold:
            return False
        if gain <= 1e-12 * abs(trace[-1]):  # a fixed point up to round-off
            return True
        if len(trace) <= 2 * w:  # one small gain: its rate is not known yet
            return False
        previous = (trace[-1 - w] - trace[-1 - 2 * w]) / w
        if previous <= 0:
            return True
        rate = gain / previous
        return rate < 1.0 and gain * rate / (1.0 - rate) <= threshold


@dataclass
class _Run:
    """One EM run: its iterate, the expected statistics at it, its log-likelihood trace, and its extrapolations."""

    params: dict
    stats: object
    trace: list
    decreases: int = 0
    converged: bool = False
    accelerate: bool = False
    step_max: float = 4.0
    extrapolations: int = 0
    rejected: int = 0

    @property
    def n_iter(self) -> int:
        return len(self.trace) - 1


def _start_run(family, prepared, params, accelerate: bool) -> _Run:
    stats, ll = family.e_step(params, prepared)
    return _Run(params, stats, [float(ll)], accelerate=accelerate)


def _step(family, prepared, run: _Run, sites, floor, rule: StoppingRule, options, check: bool = True) -> None:
    """One M-step and E-step of ``run`` (in place); ``converged`` by ``rule`` when ``check``."""
    run.params, run.stats, ll = family.em_step(prepared, run.stats, run.params, sites, floor, **options)
    run.trace.append(float(ll))
    if run.trace[-1] - run.trace[-2] < -1e-9 * max(rule.n_observations, abs(run.trace[-2])):
        run.decreases += 1
    if check:
        run.converged = rule.converged(run.trace)


#: Supports whose values :func:`_extrapolate` moves in log coordinates (the others: as they are).
_LOG_SUPPORTS = ("simplex", "positive")


def _extrapolate(before: dict, middle: dict, after: dict, sites, step_max: float) -> tuple[dict, float]:
    """SQUAREM's extrapolation (scheme S3) from three successive EM iterates, in log coordinates for positive and
    simplex sites; the point and the step length ``-alpha`` (1: no extrapolation)."""
    supports = {name: _support(sites, name) for name in after}
    u0, u1, u2 = ({name: np.log(value) if supports[name] in _LOG_SUPPORTS else np.asarray(value, dtype=np.float64)
                   for name, value in params.items()} for params in (before, middle, after))
    r = {name: u1[name] - u0[name] for name in u0}
    v = {name: u2[name] - 2.0 * u1[name] + u0[name] for name in u0}
    r2, v2 = sum(float(np.sum(x**2)) for x in r.values()), sum(float(np.sum(x**2)) for x in v.values())
    step = min(np.sqrt(r2 / v2), step_max) if v2 > 0 else 1.0
    if not np.isfinite(step) or step <= 1.0:
        return after, 1.0
    out = {}
    for name in u0:
        u = u0[name] + 2.0 * step * r[name] + step**2 * v[name]
        if supports[name] == "simplex":
            u = np.exp(u - u.max(axis=-1, keepdims=True))
            u = u / u.sum(axis=-1, keepdims=True)
        elif supports[name] == "positive":
            u = np.exp(u)
        out[name] = u
    return out, step


def _accelerated(family, prepared, run: _Run, sites, floor, rule, options) -> None:
    """Two EM steps of ``run``, then (unless they converged) a SQUAREM step: the extrapolated point, one EM step
    from it, kept when its log-likelihood is at least the second EM step's (else the run stays there).

    The extrapolated point's own evaluation is not in the trace (which holds EM iterates: monotone); its E-step is
    counted in ``run.extrapolations``.
    """
    before = run.params
    _step(family, prepared, run, sites, floor, rule, options, check=False)
    middle = run.params
    _step(family, prepared, run, sites, floor, rule, options)
    if run.converged:
        return
    point, step = _extrapolate(before, middle, run.params, sites, run.step_max)
    if step == 1.0:
        return
    if step >= run.step_max:
        run.step_max *= 4.0
    run.extrapolations += 1
    point, _ = project(point, sites, floor)
    with np.errstate(all="ignore"):
        stats, ll = family.e_step(point, prepared)
    if np.isfinite(ll):
        params, stats, ll = family.em_step(prepared, stats, point, sites, floor, **options)
        if ll >= run.trace[-1]:
            run.params, run.stats = params, stats
            run.trace.append(float(ll))
            return
    run.rejected += 1
    run.step_max = max(run.step_max / 4.0, 1.0)


def _advance(family, prepared, run: _Run, sites, floor, rule, options, room: int) -> None:
    """One SQUAREM cycle of ``run`` when it accelerates and ``room`` allows its three steps, else one EM step."""
    if run.accelerate and room >= 3:
        _accelerated(family, prepared, run, sites, floor, rule, options)
    else:
        _step(family, prepared, run, sites, floor, rule, options)


def _climb(family, prepared, run: _Run, sites, floor, rule, max_iter, options, steps=None) -> None:
    """Step ``run`` until it converges, reaches ``max_iter`` steps, or has taken ``steps`` more (three-step SQUAREM
    cycles while at least three steps remain)."""
    stop = max_iter if steps is None else min(max_iter, run.n_iter + steps)
    while run.n_iter < stop and not run.converged:
        _advance(family, prepared, run, sites, floor, rule, options, stop - run.n_iter)


def _race(family, prepared, runs: list, sites, floor, rule, max_iter, steps, options) -> np.ndarray:
    """Successive halving of ``runs``; the steps each took.

    Every round, each run still in the race takes ``steps`` more EM steps (fewer when it converges or reaches
    ``max_iter``), then the better half by log-likelihood stays in; the race ends when one run is left.
    """
    active = list(range(len(runs)))
    while len(active) > 1:
        for i in active:
            _climb(family, prepared, runs[i], sites, floor, rule, max_iter, options, steps)
        active = sorted(active, key=lambda i: -runs[i].trace[-1])[: (len(active) + 1) // 2]
    return np.array([run.n_iter for run in runs])


def _split_merge(family, prepared, run: _Run, sites, floor, rule, max_iter, horizon, patience, rng,
                 options) -> tuple[_Run, dict]:
    """Split-merge moves from a converged ``run`` until ``patience`` moves in a row fail; the best run and counts.

    A move (the family's :meth:`~specinit.family.Family.split_merge`) takes the least needed component away and
    splits another; EM runs from it and replaces ``run`` once it passes ``run``'s log-likelihood by more than
    the stopping threshold (then continues to convergence), or is dropped when it has not passed it after
    ``horizon`` steps.
    """
    failures, tried, accepted, spent = 0, 0, 0, 0
    while failures < patience:
        start = family.split_merge(run.params, prepared, run.stats, rng, failures)
        if start is None:
            break
        tried += 1
        move = _start_run(family, prepared, project(start, sites, floor)[0], run.accelerate)
        while move.n_iter < max_iter and not move.converged and (move.trace[-1] > run.trace[-1]
                                                                 or move.n_iter < horizon):
            _advance(family, prepared, move, sites, floor, rule, options, max_iter - move.n_iter)
        if move.trace[-1] > run.trace[-1] + rule.threshold(run.trace[-1]):
            spent, run, failures, accepted = spent + run.n_iter, move, 0, accepted + 1
        else:
            spent, failures = spent + move.n_iter, failures + 1
    return run, {"split_merge_moves": tried, "split_merge_accepted": accepted, "split_merge_iterations": spent}


@face({
    **EM_OPTIONS,
    "family": Param("Family", "The family (its E-step, M-step and moves).", annotation="Family"),
    "data": Param("object", "The family's data."),
    "estimate": Param("SpectralEstimate", "A checked start (:func:`check_estimate`)."),
    "options": Param("dict", "The family's M-step options (covariance kind, regularization, prior)."),
})
def em(family: Family, data: Any, estimate: SpectralEstimate, *, max_iter: int, tol: float | None, rtol: float | None,
       window: int, floor: float, restarts: int, restart_iter: int, split_merge: int, seed: int, accelerate: bool,
       **options: Any) -> RefineResult:
    """EM from ``estimate`` until its stopping rule (:class:`StoppingRule`) holds.

    With ``restarts``, EM also starts from ``restarts`` perturbed copies of the start (:func:`perturbed`,
    spreads cycling through :data:`RESTART_SPREADS`) and the candidates race by successive halving: rounds of
    ``restart_iter`` steps, after each of which the better half stays in; the last one left continues.
    Copies of a spectral start explore its neighbourhood and beyond at the cost of a few short runs, escaping
    the saddles and duplicated components where EM stalls. With ``split_merge``, the converged estimate then
    meets split-merge moves (Ueda, Nakano, Ghahramani, Hinton 2000): a component moves from where it is least
    needed to where another component covers two clusters. Under the relative rule the race and the moves
    explore under :meth:`StoppingRule.loose` (``100 * rtol``), and only the run kept climbs on to ``rtol``.
    With ``accelerate``, every run climbs in SQUAREM cycles ([1]_, scheme S3): two EM steps, their
    extrapolation (step length at most 4, growing fourfold while it is reached, shrinking after a rejected
    step), and one EM step from the extrapolated point, kept only when its log-likelihood is at least the second
    step's; the stopping rule is tested after the second EM step of a cycle, where the last two gains are EM's.

    Returns
    -------
    RefineResult
        ``log_likelihood`` traces the run that gave the estimate, from its start (EM iterates and kept SQUAREM
        steps: never decreasing); ``n_iter`` counts every M-step (each extrapolated point costs one more
        E-step). ``diagnostics`` add ``extrapolations`` and ``extrapolations_rejected`` (the kept run's SQUAREM
        steps, and those it did not keep), ``restart_log_likelihoods`` (each candidate where it stopped; the first is
        the start's), ``restart_steps`` (the steps each candidate took), ``chosen_restart`` and
        ``restart_iterations`` (the other candidates' steps); ``split_merge_moves``,
        ``split_merge_accepted`` and ``split_merge_iterations`` (the steps of the moves and of the runs they
        replaced).

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations.

    References
    ----------
    .. [1] Varadhan, Roland. "Simple and globally convergent methods for accelerating the convergence of any EM
       algorithm", Scandinavian Journal of Statistics 35(2), 2008.
    """
    prepared = family.refine_data(data, estimate, **options)
    n_obs = family.n_observations(prepared)
    rule = StoppingRule(n_obs, tol, 1e-6 if rtol is None else rtol, window, family.unit_offset(prepared))
    sites = estimate.sites
    params, _ = project(dict(estimate.params), sites, floor)
    rng = np.random.default_rng(seed)
    run = _start_run(family, prepared, params, accelerate)
    extra, explore = {}, rule.loose()
    if restarts and max_iter > 0:
        runs = [run] + [_start_run(family, prepared, project(perturbed(params, sites, rng, spread), sites, floor)[0],
                                   accelerate) for spread in np.resize(RESTART_SPREADS, restarts)]
        steps = _race(family, prepared, runs, sites, floor, explore, max_iter, restart_iter, options)
        finals = np.array([candidate.trace[-1] for candidate in runs])
        chosen = int(np.argmax(finals))
        run = runs[chosen]
        extra = {"restart_log_likelihoods": finals, "chosen_restart": chosen, "restart_steps": steps,
                 "restart_iterations": int(steps.sum() - steps[chosen])}
    if split_merge and max_iter > 0:
        _climb(family, prepared, run, sites, floor, explore, max_iter, options)
        run, moves = _split_merge(family, prepared, run, sites, floor, explore, max_iter, restart_iter, split_merge,
                                  rng, options)
        extra.update(moves)
    run.converged = run.n_iter > 0 and rule.converged(run.trace)
    _climb(family, prepared, run, sites, floor, rule, max_iter, options)
    params, trace, converged, decreases = run.params, run.trace, run.converged, run.decreases
    extra.update(extrapolations=run.extrapolations, extrapolations_rejected=run.rejected)
    n_iter = run.n_iter + extra.get("restart_iterations", 0) + extra.get("split_merge_iterations", 0)
    if not converged and max_iter > 0:
        measure = (f"tol={rule.tol:g}" if rule.tol is not None else f"rtol={rule.rtol:g} (relative, with the gain "
                   "still expected)")
        warn(f"{current_entry()}: EM did not converge in max_iter={max_iter} iterations (last gain per observation "
             f"{(trace[-1] - trace[-2]) / n_obs:.3g}, stopping rule {measure}); raise max_iter, tol or rtol.")
    result = refined(family, estimate, params, "em", trace, n_iter, converged, {"decreases": decreases, **extra})
    return RefineResult(result, np.asarray(trace), n_iter, converged, "em",
                        {"n_observations": n_obs, "decreases": decreases, **extra})


#: The stopping test of the gradient drivers (:func:`map_estimate`, ``lda.refine``), declared once.
PLATEAU_TOL = Param("float", "``converged`` when the mean objective of the last tenth of the steps is within ``tol`` "
                    "(relative) of the tenth before it.", 1e-4, Interval(float, 0.0, open="low"))


def plateau(trace: np.ndarray, tol: float) -> tuple[bool, float]:
    """The test of :data:`PLATEAU_TOL` on an objective's trace: whether it holds, and the last tenth's mean.

    Parameters
    ----------
    trace : ndarray
        The objective after each step.
    tol : float

    Returns
    -------
    converged : bool
    last : float
        The mean of the last tenth of the steps.
    """
    tenth = max(trace.size // 10, 1)
    last, before = trace[-tenth:].mean(), trace[-2 * tenth: -tenth].mean() if trace.size >= 2 * tenth else -np.inf
    return bool(abs(last - before) <= tol * abs(last)), float(last)


#: The options of :func:`map_estimate`, declared once: the ``refine`` faces of the MAP families take them.
MAP_OPTIONS = {
    "method": Param("{'map'}", "The posterior mode (``AutoDelta``, Adam).", "map"),
    "num_steps": Param("int", "Adam steps (full batch).", 500, Interval(int, 1)),
    "lr": Param("float", "Adam step size.", 0.01, Interval(float, 0.0, open="low")),
    "seed": Param("int", "Seeds the optimization.", 0, Interval(int, 0)),
    "tol": PLATEAU_TOL,
}


@face({
    **MAP_OPTIONS,
    "family": Param("Family", "Provides ``model_inputs(data, estimate, **options) -> (model, args, kwargs)``.",
                    annotation="Family"),
    "data": Param("object", "The family's data."),
    "estimate": Param("SpectralEstimate", "The start (every latent site of the model must have a value)."),
    "options": Param("dict", "Passed to ``model_inputs``."),
})
def map_estimate(family: Family, data: Any, estimate: SpectralEstimate, *, num_steps: int, lr: float, seed: int,
                 tol: float, **options: Any) -> RefineResult:
    """The posterior mode of the family's NumPyro model, by Adam on an ``AutoDelta`` guide started at ``estimate``.

    Returns
    -------
    RefineResult
        ``log_likelihood`` is the log joint after every step.
    """
    import jax
    from numpyro.infer import SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoDelta
    from numpyro.optim import Adam

    model, args, kwargs = family.model_inputs(data, estimate, **options)
    guide = AutoDelta(model, init_loc_fn=estimate.init_strategy())
    svi = SVI(model, guide, Adam(lr), Trace_ELBO())
    result = svi.run(jax.random.PRNGKey(seed), num_steps, *args, progress_bar=False, **kwargs)
    trace = -np.asarray(result.losses, dtype=np.float64)
    median = guide.median(result.params)
    params = {name: np.asarray(median[name], dtype=np.float64) for name in estimate.params if name in median}
    params, _ = project(params, estimate.sites, 1e-12)
    close, last = plateau(trace, tol)
    converged = bool(np.isfinite(last) and close)
    if not np.all(np.isfinite(trace)):
        raise FloatingPointError(f"{current_entry()}: the log joint became non-finite during the MAP refinement; "
                                 "lower lr.")
    result_estimate = refined(family, estimate, {**estimate.params, **params}, "map", trace, num_steps, converged)
    return RefineResult(result_estimate, trace, num_steps, converged, "map",
                        {"n_observations": family.n_observations(args[0]) if args else 0})


#: Refinement drivers by method name (``svi`` families register their own in their module).
DRIVERS = {"em": em, "map": map_estimate}

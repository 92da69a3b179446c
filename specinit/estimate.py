"""The result of every spectral fit: parameters keyed by NumPyro site names."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specinit._validation import bad_argument

__all__ = ["ModelFacts", "SpectralEstimate"]


@dataclass(frozen=True)
class ModelFacts:
    """What a model tells the generic layers about its sites.

    Each model module defines one instance and attaches it to every
    estimate it returns, so that :mod:`specinit.align` and
    :mod:`specinit.posterior` hold no per-model table: a new model touches
    only ``models/``.

    Attributes
    ----------
    component_axes : dict of str -> int or tuple of int
        Component (label) axes of each site, counted without the chain and
        draw axes. A tuple permutes several axes with the same labels (HMM
        ``transition``: from-state rows and to-state columns). Sites whose
        value is shared by all components are left out.
    match_site : str
        The site whose components are compared to match labels (the
        richest component-indexed site, e.g. LDA ``beta``).
    dims : dict of str -> tuple of str
        Dimension names of each site's full shape (plate and event dims),
        for the estimate's own ArviZ object.
    event_dims : dict of str -> tuple of str
        Names of the event dims that ArviZ cannot infer from the plates
        (``extra_event_dims`` of ``az.from_numpyro``).
    """

    component_axes: dict = field(default_factory=dict)
    match_site: str | None = None
    dims: dict = field(default_factory=dict)
    event_dims: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """A JSON-serializable dict that :meth:`from_json` reads back."""
        return {
            "component_axes": {k: list(v) if isinstance(v, tuple) else v for k, v in self.component_axes.items()},
            "match_site": self.match_site,
            "dims": {k: list(v) for k, v in self.dims.items()},
            "event_dims": {k: list(v) for k, v in self.event_dims.items()},
        }

    @classmethod
    def from_json(cls, data: dict) -> "ModelFacts":
        """Inverse of :meth:`to_json`."""
        return cls(
            component_axes={k: tuple(v) if isinstance(v, list) else v for k, v in data["component_axes"].items()},
            match_site=data["match_site"],
            dims={k: tuple(v) for k, v in data["dims"].items()},
            event_dims={k: tuple(v) for k, v in data["event_dims"].items()},
        )


@dataclass
class SpectralEstimate:
    """Method-of-moments estimate of a specinit model.

    Attributes
    ----------
    model : str
        The model module name (``"lda"``, ``"single_topic"``, ``"hmm"``, ...).
    params : dict[str, ndarray]
        Constrained values keyed by the model's NumPyro site names, strictly
        inside each site's support, float64.
    diagnostics : dict
        Whitening, decomposition and model-specific diagnostics.
    vocabulary : tuple of str, optional
        Names of the observation dimension (words), kept with the estimate.
    facts : ModelFacts
        The model's component axes, matching site and ArviZ dims.

    Notes
    -----
    The components are ordered by decreasing tensor eigenvalue; their order
    (the labels) is otherwise arbitrary, as for any mixture. Posterior draws
    are aligned to these labels by :func:`specinit.align.align_draws`, which
    reads the component axes from :attr:`facts`.
    """

    model: str
    params: dict
    diagnostics: dict = field(default_factory=dict)
    vocabulary: tuple | None = None
    facts: ModelFacts = field(default_factory=ModelFacts)

    def __post_init__(self):
        self.params = {name: np.asarray(value, dtype=np.float64) for name, value in self.params.items()}
        for name, value in self.params.items():
            if not np.all(np.isfinite(value)):
                raise bad_argument("params", "SpectralEstimate", "finite values", f"non-finite entries in {name!r}", describe=False)
        if self.vocabulary is not None:
            self.vocabulary = tuple(str(w) for w in self.vocabulary)

    @property
    def k(self) -> int:
        """Number of components (topics, states, clusters)."""
        first = next(iter(self.params.values()))
        return first.shape[0]

    # NumPyro hand-off ---------------------------------------------------------------------------
    def init_strategy(self, sites=None):
        """``numpyro.infer.init_to_value`` with these (constrained) values; see :mod:`specinit.warmstart`."""
        from specinit.warmstart import init_strategy

        return init_strategy(self, sites=sites)

    def init_params(self, model, num_chains: int, key, *, jitter: float = 0.0, model_args=(), model_kwargs=None):
        """Per-chain UNCONSTRAINED initial values; see :func:`specinit.warmstart.init_params`."""
        from specinit.warmstart import init_params

        return init_params(self, model, num_chains, key, jitter=jitter, model_args=model_args, model_kwargs=model_kwargs)

    def condition(self, model, sites=None):
        """The model with these values fixed (a point estimate); see :func:`specinit.warmstart.condition`."""
        from specinit.warmstart import condition

        return condition(self, model, sites=sites)

    def to_inference_data(self):
        """The estimate as an ArviZ object with a single draw; see :mod:`specinit.posterior`."""
        from specinit.posterior import estimate_to_inference_data

        return estimate_to_inference_data(self)

    # persistence ----------------------------------------------------------------------------------
    def save(self, path) -> Path:
        """Write the estimate to an ``.npz`` file that :meth:`load` reads back exactly."""
        path = Path(path)
        arrays: dict[str, Any] = {f"param/{k}": v for k, v in self.params.items()}
        meta = {
            "model": self.model,
            "vocabulary": list(self.vocabulary) if self.vocabulary else None,
            "facts": self.facts.to_json(),
            "diagnostics": {},
        }
        for key, value in self.diagnostics.items():
            if isinstance(value, (str, bool, int, float)) or value is None:
                meta["diagnostics"][key] = value
            else:
                arrays[f"diag/{key}"] = np.asarray(value)
        with open(path, "wb") as handle:
            np.savez_compressed(handle, meta=np.array(json.dumps(meta)), **arrays)
        return path

    @classmethod
    def load(cls, path) -> "SpectralEstimate":
        """Read an estimate written by :meth:`save`."""
        with np.load(Path(path), allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            params = {k.split("/", 1)[1]: data[k] for k in data.files if k.startswith("param/")}
            diagnostics = dict(meta["diagnostics"])
            diagnostics.update({k.split("/", 1)[1]: data[k] for k in data.files if k.startswith("diag/")})
        return cls(
            model=meta["model"], params=params, diagnostics=diagnostics, vocabulary=meta["vocabulary"],
            facts=ModelFacts.from_json(meta["facts"]),
        )

"""The result of every spectral fit: parameters keyed by NumPyro site names."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specinit._validation import bad_argument

__all__ = ["SpectralEstimate"]


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

    Notes
    -----
    The components are ordered by decreasing tensor eigenvalue; their order
    (the labels) is otherwise arbitrary, as for any mixture. Posterior draws
    are aligned to these labels by :func:`specinit.align.match_components`.
    """

    model: str
    params: dict
    diagnostics: dict = field(default_factory=dict)
    vocabulary: tuple | None = None

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
        """The estimate as an ArviZ object with a single draw; see :mod:`specinit.diagnostics`."""
        from specinit.diagnostics import estimate_to_inference_data

        return estimate_to_inference_data(self)

    # persistence ----------------------------------------------------------------------------------
    def save(self, path) -> Path:
        """Write the estimate to an ``.npz`` file that :meth:`load` reads back exactly."""
        path = Path(path)
        arrays: dict[str, Any] = {f"param/{k}": v for k, v in self.params.items()}
        meta = {"model": self.model, "vocabulary": list(self.vocabulary) if self.vocabulary else None, "diagnostics": {}}
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
        return cls(model=meta["model"], params=params, diagnostics=diagnostics, vocabulary=meta["vocabulary"])

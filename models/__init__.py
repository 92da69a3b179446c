"""specinit.models: one module per model family, each a Family, its NumPyro program and its public faces.

Every module ``specinit.models.<name>`` defines ``FAMILY`` (a
:class:`specinit.family.Family`), ``model`` (the NumPyro program) and the
faces ``spectral``, ``spectral_from_moments``, ``population_moments``,
``refine`` and ``log_likelihood`` (``predict`` for mixtures, ``svi`` for the
topic models). This package registers them (each module imported on first
use); :data:`FAMILIES` names them.
"""

from types import ModuleType

from specinit import _registry

__all__ = ["FAMILIES", "family"]

for _name in ("lda", "single_topic", "hmm", "gaussian_hmm", "multiview", "gmm", "factors", "kernel_multiview",
              "poisson_mixture"):
    _registry.declare(_name, f"{__name__}.{_name}")

#: The built-in families' names (:func:`specinit.family.registered` adds the families defined elsewhere).
FAMILIES = _registry.declared()


def family(name: str) -> ModuleType:
    """The module of the built-in family ``name`` (``specinit.models.<name>``).

    Parameters
    ----------
    name : str
        One of :data:`FAMILIES`.

    Returns
    -------
    module

    Raises
    ------
    ValueError
        An unknown family.
    """
    if name not in FAMILIES:
        raise ValueError(f"The 'name' argument of family must be one of {', '.join(map(repr, FAMILIES))}; "
                         f"got {name!r} instead.")
    return _registry.lookup(name).faces

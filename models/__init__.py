"""specinit.models: one module per model family, each a Family, its NumPyro program and its public faces.

Every module ``specinit.models.<name>`` defines ``FAMILY`` (a
:class:`specinit.family.Family`), ``model`` (the NumPyro program) and the
faces ``spectral``, ``spectral_from_moments``, ``population_moments``,
``refine`` and ``log_likelihood`` (``predict`` for mixtures, ``svi`` for the
topic models). :data:`FAMILIES` names them all, in one place.
"""

import importlib

__all__ = ["FAMILIES", "family"]

#: Family name -> module name (imported on first use by :func:`family`).
FAMILIES = ("lda", "single_topic", "hmm", "gaussian_hmm", "multiview", "gmm", "factors", "kernel_multiview",
            "poisson_mixture")


def family(name: str):
    """The module of the family ``name`` (``specinit.models.<name>``).

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
    return importlib.import_module(f"specinit.models.{name}")

"""Old import paths of the 0.1 layout, kept working for one release with a ``DeprecationWarning``.

``import specinit.moments`` (and the other pre-0.2 module paths) resolves to
a module that re-exports the names of its new home, after a warning that
names the new path. Installed on ``sys.meta_path`` by ``specinit/__init__``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import warnings

__all__ = ["MOVED", "install"]

#: Old module path -> the modules that now hold its names.
MOVED = {
    "specinit.moments": ("specinit.engine.moments",),
    "specinit.population": ("specinit.engine.population",),
    "specinit.whitening": ("specinit.engine.whitening",),
    "specinit.recovery": ("specinit.engine.exchangeable", "specinit.engine.support"),
    "specinit.multiview": ("specinit.engine.views",),
    "specinit.topics": ("specinit.models._topics",),
    "specinit.data": ("specinit.corpus",),
    "specinit.text": ("specinit.corpus.quality",),
    "specinit.refine": ("specinit.compare",),
    "specinit.diagnostics": ("specinit.posterior",),
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finder and loader of the modules listed in :data:`MOVED`."""

    def find_spec(self, fullname, path, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        targets = MOVED[module.__name__]
        warnings.warn(
            f"{module.__name__} moved to {' and '.join(targets)} in specinit 0.2; import from there "
            "(the old path will be removed in 0.3).",
            DeprecationWarning,
            stacklevel=2,
        )
        for target in targets:
            names = vars(importlib.import_module(target))
            module.__dict__.update({name: value for name, value in names.items() if not name.startswith("__")})


def install() -> None:
    """Put the finder of moved modules on ``sys.meta_path`` (once)."""
    import sys

    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())

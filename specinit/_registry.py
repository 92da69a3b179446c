"""The registry of model families: every :class:`specinit.family.Family` subclass with a ``name``, by that name.

The bottom layer of the package (it imports no specinit module): :mod:`specinit.family` registers a family class
when it is defined; :mod:`specinit.estimate` reads a family off an estimate's model name to verify and load it;
:mod:`specinit.models` declares the built-in families by module, imported on first lookup. A user's family is
registered by defining it (its module imported), as the built-in ones are.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specinit.family import Family

__all__ = ["declare", "declared", "lookup", "names", "register"]

#: Family name -> family class (registered when the class is defined).
_CLASSES: dict[str, type] = {}
#: Family name -> its one instance, created on the first lookup.
_INSTANCES: dict[str, Any] = {}
#: Family name -> module that defines it, for families declared before their module is imported (the built-in ones).
_MODULES: dict[str, str] = {}


def register(cls: type) -> None:
    """Register ``cls`` under ``cls.name``.

    Defining a class again under the same name in the same module and qualified name (a reloaded module, a cell
    run twice) replaces it; another class claiming a registered name is refused.

    Raises
    ------
    ValueError
        ``cls.name`` is registered by a class of another module or qualified name.
    """
    name = cls.name
    known = _CLASSES.get(name)
    if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"The family name {name!r} of {cls.__module__}.{cls.__qualname__} is already registered by "
                         f"{known.__module__}.{known.__qualname__}; give the family another name.")
    _CLASSES[name] = cls
    _INSTANCES.pop(name, None)


def declare(name: str, module: str) -> None:
    """Declare that importing ``module`` registers the family ``name`` (imported on the first :func:`lookup`)."""
    _MODULES[name] = module


def declared() -> tuple:
    """The names of the declared families, in declaration order."""
    return tuple(_MODULES)


def lookup(name: str) -> Family | None:
    """The instance of the family ``name``, importing its declared module first; None for an unknown name.

    Raises
    ------
    ImportError
        A declared module that does not register the family it was declared for.
    """
    if name not in _CLASSES and name in _MODULES:
        importlib.import_module(_MODULES[name])  # a built-in family's module, imported on first use
        if name not in _CLASSES:
            raise ImportError(f"The module {_MODULES[name]} was declared to define the family {name!r} but defines "
                              f"no Family subclass with that name.")
    cls = _CLASSES.get(name)
    if cls is None:
        return None
    if name not in _INSTANCES:
        _INSTANCES[name] = cls()
    return _INSTANCES[name]


def names() -> tuple:
    """Every family name: the declared ones, then those registered by other modules (users' families)."""
    return (*_MODULES, *(name for name in _CLASSES if name not in _MODULES))

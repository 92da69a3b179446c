"""Every public function and class of specinit documents its signature in numpydoc form.

For each name in a public module's ``__all__`` (defined in that module): a
``Parameters`` section naming every argument of the signature (``self``,
``*args`` and ``**kwargs`` names included as ``*args``/``**kwargs``), and a
``Returns`` (or ``Yields``) section for functions that return a value (a
NumPyro model returns nothing). Classes document their constructor
arguments under ``Parameters`` or ``Attributes``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap

import pytest
import specinit.models
from numpydoc.docscrape import ClassDoc, FunctionDoc

import specinit.corpus
import specinit.distributions
import specinit.engine
import specinit.engine.backends


def _public_modules() -> list[str]:
    names = ["specinit.estimate", "specinit.family", "specinit.refine", "specinit.estimators", "specinit.warmstart",
             "specinit.compare", "specinit.conditional", "specinit.align", "specinit.posterior", "specinit.synthetic",
             "specinit.demo", "specinit.cli"]
    for package in (specinit.engine, specinit.engine.backends, specinit.corpus, specinit.distributions,
                    specinit.models):
        names += [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")]
    return names


def _documented_objects():
    for module_name in _public_modules():
        module = importlib.import_module(module_name)
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr)
            if getattr(obj, "__module__", None) == module.__name__ and (inspect.isfunction(obj) or inspect.isclass(obj)):
                yield f"{module_name}.{attr}", obj


OBJECTS = dict(_documented_objects())


def _names(section) -> set:
    return {part.strip().lstrip("*") for item in section for part in item.name.split(",")}


def _returns_a_value(func) -> bool:
    """Whether ``func``'s own body (not nested functions) has a ``return <value>``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def _signature_names(obj) -> list:
    try:
        parameters = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - builtins without signatures
        return []
    return [p.name for p in parameters if p.name != "self"]


@pytest.mark.parametrize("qualname", sorted(OBJECTS))
def test_numpydoc_matches_signature(qualname):
    obj = OBJECTS[qualname]
    assert obj.__doc__, f"{qualname} has no docstring"
    if inspect.isclass(obj):
        doc = ClassDoc(obj)
        documented = _names(doc["Parameters"]) | _names(doc["Attributes"])
        constructed = obj.__init__ is not object.__init__ and not getattr(obj, "_is_protocol", False)
        wanted = _signature_names(obj) if constructed else []  # a typing.Protocol describes, it is not built
    else:
        doc = FunctionDoc(obj)
        documented = _names(doc["Parameters"])
        wanted = _signature_names(obj)
        if _returns_a_value(obj):
            assert doc["Returns"] or doc["Yields"], f"{qualname}: no Returns section"
    missing = [name for name in wanted if name not in documented]
    assert not missing, f"{qualname}: parameters {missing} are not documented"
    extra = sorted(_names(doc["Parameters"]) - set(wanted)) if wanted else []
    assert not extra, f"{qualname}: documents {extra}, which are not in the signature"

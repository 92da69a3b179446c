"""The library's modules import one another without a circle, read from the code.

Every module under ``specinit/`` and ``models/`` (installed as ``specinit.models``) is parsed; its imports of
specinit modules are collected (``from package import name`` counts as an import of ``package.name`` when that is
a module); imports under ``if TYPE_CHECKING`` are left out. The module-level graph has no cycle. An import inside a
function is allowed to close a cycle only when it is a lazy import of a heavy module (one that imports JAX,
NumPyro, ArviZ or scikit-learn when loaded, as the NumPyro and ArviZ hand-offs of the estimate do): without those
edges, the graph of all imports has no cycle either.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Third-party packages whose import costs seconds: a module that imports one at module level is heavy.
HEAVY = ("jax", "numpyro", "arviz", "sklearn")


def _modules() -> dict:
    """Module name -> path, for every module of the library."""
    found = {}
    for base, package in ((ROOT / "specinit", "specinit"), (ROOT / "models", "specinit.models")):
        for path in base.rglob("*.py"):
            parts = [package, *path.relative_to(base).with_suffix("").parts]
            if package == "specinit" and parts[1:2] == ["models"]:
                continue
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, modules: dict) -> tuple[set, set, set]:
    """``(module-level specinit imports, function-level specinit imports, module-level third-party roots)``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top, local, external = set(), set(), set()

    def imported(node) -> list:
        """The dotted names ``node`` imports (``from a import b``: ``a.b``, resolved if relative)."""
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:
            parent = package
            for _ in range(node.level - 1):
                parent = parent.rpartition(".")[0]
            base = f"{parent}.{base}" if base else parent
        return [f"{base}.{alias.name}" for alias in node.names]

    def module_of(dotted: str) -> str:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted

    def visit(body, inside: bool):
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for dotted in imported(node):
                    if dotted.split(".")[0] == "specinit":
                        (local if inside else top).add(module_of(dotted))
                    elif not inside:
                        external.add(dotted.split(".")[0])
            elif isinstance(node, ast.If) and _type_checking(node.test):
                visit(node.orelse, inside)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, True)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(node, field, []), inside)

    visit(ast.parse(path.read_text()).body, False)
    return top - {name}, local - {name} - top, external


def _cycle(graph: dict) -> list | None:
    """A cycle of ``graph`` (as the list of its modules), or None."""
    state, path = {}, []

    def walk(node):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = walk(nxt)
                if found:
                    return found
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = walk(node)
            if found:
                return found
    return None


def _graphs():
    modules = _modules()
    parsed = {name: _imports(name, path, modules) for name, path in modules.items()}
    top = {name: imports[0] for name, imports in parsed.items()}
    heavy = {name for name, imports in parsed.items() if imports[2] & set(HEAVY)}
    lazy_light = {name: {target for target in imports[1] if target not in heavy} for name, imports in parsed.items()}
    return modules, top, lazy_light


def test_the_graph_is_read_from_every_module():
    modules, top, _ = _graphs()
    assert {"specinit.family", "specinit.estimate", "specinit.models.lda", "specinit.engine.backends.numpy",
            "specinit.corpus.quality"} <= set(modules)
    assert "specinit.estimate" in top["specinit.family"]  # the skeleton builds estimates
    assert "specinit.engine.backends" in top["specinit.engine.backends.numpy"]


def test_no_module_level_import_circle():
    _, top, _ = _graphs()
    assert _cycle(top) is None, " -> ".join(_cycle(top))


def test_a_function_level_import_closes_no_circle_unless_it_is_a_lazy_import_of_a_heavy_module():
    _, top, lazy_light = _graphs()
    graph = {name: top[name] | lazy_light[name] for name in top}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_a_circle_is_found():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None

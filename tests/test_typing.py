"""The public API as a type checker sees it: mypy (the test extra) checks tests/typing/check_public_api.py and the
README's code blocks (settings and strictness: pyproject.toml's [tool.mypy]); every public function and method of
the modules in ``ANNOTATED_MODULES`` annotates its parameters and its return."""

import importlib
import inspect
import os
import pkgutil
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pytest
from numpy.typing import ArrayLike

import specinit
import specinit.models
from specinit.estimate import SpectralEstimate
from specinit.faces import NO_ANNOTATION, REQUIRED, Param, annotation_of, face

HERE = Path(__file__).parent
CHECKED = HERE / "typing" / "check_public_api.py"


def _modules() -> list[str]:
    """Every module of ``specinit`` and ``specinit.models`` (the command line's ``__main__`` aside)."""
    names = []
    for package in (specinit, specinit.models):
        names.append(package.__name__)
        names += [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
                  if not info.name.endswith(".__main__")]
    return sorted(names)


#: Modules whose public functions and methods are all annotated (names in ``__all__`` defined there): all of them.
ANNOTATED_MODULES = _modules()


def _search_path(tmp_path) -> tuple[dict, Path]:
    """The environment under which mypy finds the installed package, ``specinit.models`` inside ``specinit``, and
    the folder it finds ``specinit`` in.

    A regular install has that layout and a ``py.typed``: mypy finds it in site-packages. A checkout installed with
    ``pip install -e`` maps ``models/`` to ``specinit.models`` by an import hook that mypy does not follow: a
    folder of links in that layout goes on ``MYPYPATH``.
    """
    package = Path(specinit.__file__).parent
    models = Path(specinit.models.__file__).parent
    if models.parent == package:
        return dict(os.environ), package.parent
    tree = tmp_path / "path" / "specinit"
    tree.mkdir(parents=True)
    for entry in package.iterdir():
        if entry.name != "__pycache__":
            (tree / entry.name).symlink_to(entry)
    (tree / "models").symlink_to(models)
    return dict(os.environ, MYPYPATH=str(tree.parent)), tree.parent


def test_public_calls_and_the_readme_blocks_type_check(tmp_path):
    root = HERE.parent
    blocks = re.findall(r"```python\n(.*?)```", (root / "README.md").read_text(), flags=re.S)
    assert blocks
    files = [str(CHECKED)]
    for number, block in enumerate(blocks):
        (tmp_path / f"readme_block_{number}.py").write_text(block)
        files.append(str(tmp_path / f"readme_block_{number}.py"))
    env, base = _search_path(tmp_path)
    # The annotated modules' files as mypy finds them (links in the folder on MYPYPATH, or the installed files).
    for name in ANNOTATED_MODULES:
        path = base.joinpath(*name.split("."))
        files.append(str(path / "__init__.py" if path.is_dir() else path.with_suffix(".py")))
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(root / "pyproject.toml"), "--cache-dir",
                           str(tmp_path / "cache"), *files], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert done.returncode == 0 or errors, done.stdout[-6000:] + done.stderr[-2000:]
    # The annotated modules are checked for their annotations only: every name an annotation uses resolves and is a
    # type (their bodies' errors are not this test's matter).
    library = [Path(specinit.__file__).parent.resolve(), Path(specinit.models.__file__).parent.resolve()]

    def in_library(line: str) -> bool:
        path = (tmp_path / line.split(":", 1)[0]).resolve()
        return any(path.is_relative_to(folder) for folder in library)

    failing = [line for line in errors if not in_library(line) or line.endswith(("[name-defined]", "[valid-type]"))]
    assert not failing, "\n".join(failing)[-6000:]


def _public_callables(module) -> dict:
    """The functions of ``module.__all__`` defined in ``module``, and the public methods (``__init__`` and
    ``__call__`` included, properties by their getter) its classes define there (not the ``__init__`` that
    ``typing.Protocol`` puts on a protocol class)."""
    found = {}
    for name in getattr(module, "__all__", ()):
        obj = getattr(module, name)
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(obj):
            for attr, value in list(vars(obj).items()):
                if attr.startswith("_") and attr not in ("__init__", "__call__"):
                    continue
                value = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                value = value.fget if isinstance(value, property) else value
                if inspect.isfunction(value) and value.__module__ == module.__name__:
                    found[f"{name}.{attr}"] = value
        elif inspect.isfunction(inspect.unwrap(obj)):
            found[name] = obj  # its signature as callers see it (a face's declared one)
    return found


def _missing_annotations(func) -> list[str]:
    signature = inspect.signature(func)
    parameters = list(signature.parameters.values())
    if parameters and parameters[0].name in ("self", "cls"):
        parameters = parameters[1:]
    missing = [p.name for p in parameters if p.annotation is inspect.Parameter.empty]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


@pytest.mark.parametrize("module_name", ANNOTATED_MODULES)
def test_public_callables_are_annotated(module_name):
    callables = _public_callables(importlib.import_module(module_name))
    unannotated = {name: missing for name, func in callables.items() if (missing := _missing_annotations(func))}
    assert not unannotated, f"{module_name}: parameters or returns without annotations: {unannotated}"


def test_the_annotation_walk_sees_an_unannotated_callable():
    def partly(x: int, y) -> int:
        return x

    def method(self, x: int):
        return x

    assert _missing_annotations(partly) == ["y"]
    assert _missing_annotations(method) == ["return"]
    assert "decompose" in _public_callables(importlib.import_module("specinit.engine.decompose"))
    assert "Passes.triples" in _public_callables(importlib.import_module("specinit.engine.backends"))
    protocol = _public_callables(importlib.import_module("specinit.engine.protocols"))
    assert "MultiViewMoments.pairs_matmat" in protocol and "MultiViewMoments.__init__" not in protocol


def test_a_face_signature_carries_the_declared_annotations_and_the_templates_return():
    from specinit.estimators import SpectralLDA
    from specinit.models import gmm, lda

    spectral = inspect.signature(lda.spectral)
    assert spectral.return_annotation is SpectralEstimate
    assert spectral.parameters["k"].annotation == int | Literal["auto"]
    assert spectral.parameters["alpha0"].annotation == float | None
    assert spectral.parameters["weighting"].annotation == Literal["pooled", "per-document"] | None
    assert inspect.signature(gmm.predict).return_annotation == tuple[np.ndarray, np.ndarray]
    init = inspect.signature(SpectralLDA.__init__)
    assert init.parameters["n_components"].annotation == int | Literal["auto"]
    assert init.parameters["random_state"].annotation == int | None
    assert init.return_annotation is None


@pytest.mark.parametrize("text, default, expected", [
    ("int", REQUIRED, int),
    ("float, optional", None, float | None),
    ("float, optional", 0.5, float),
    ("int or 'auto'", 2, int | Literal["auto"]),
    ("{'pooled', 'per-document'} or None", None, Literal["pooled", "per-document"] | None),
    ("None, bool or int", None, None | bool | int),
    ("array, shape (k,), or dict / SpectralEstimate", REQUIRED, ArrayLike | dict | SpectralEstimate),
    ("sequence of {'categorical', 'gaussian'}, optional", None, Sequence[Literal["categorical", "gaussian"]] | None),
    ("int or numpy.random.Generator", 0, int | np.random.Generator),
    ("ChainViews", REQUIRED, NO_ANNOTATION),
    ("sequence of feature maps, optional", None, NO_ANNOTATION),
])
def test_a_param_reads_its_annotation_off_a_simple_numpydoc_type(text, default, expected):
    assert annotation_of(text, default) == expected


def test_a_param_whose_type_is_not_simple_declares_its_annotation_or_has_none():
    assert Param("ChainViews", "The views.", annotation=tuple).annotation is tuple
    assert Param("int", "A count.", annotation=float).annotation is float
    undeclared = Param("ChainViews", "The views.")
    assert undeclared.annotation is NO_ANNOTATION

    @face({"views": undeclared, "k": Param("int", "Components.")})
    def template(views, k) -> int:
        """Fit."""
        return k

    assert _missing_annotations(template) == ["views"]
    assert template(None, 2) == 2

"""The documentation's sources cover the public API and the tutorials (without building it: docs/build.sh builds).

Every name in the ``__all__`` of every public module of specinit and specinit.models is listed in an
``autosummary`` of ``docs/api/`` (so it gets a page), every public module has its page in the API
index, and every tutorial is a sphinx-gallery example (a docstring with a title) that the gallery
collects. The sources are read statically (a module whose ``__all__`` is not one literal list is imported).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
API = DOCS / "api"
TUTORIALS = sorted((ROOT / "tutorials").glob("*.py"))


def _module_files() -> dict[str, Path]:
    """Public module name -> source file, for ``specinit`` (specinit/) and ``specinit.models`` (models/)."""
    modules = {}
    for package, folder in (("specinit", ROOT / "specinit"), ("specinit.models", ROOT / "models")):
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if any(part.startswith("_") for part in parts):
                continue
            modules[".".join([package, *parts])] = path
    return modules


def _all_of(module: str, path: Path) -> list[str]:
    """The module's ``__all__``: read from the source when it is one literal list, else imported."""
    def targets(node) -> set:
        return {getattr(t, "id", None) for t in getattr(node, "targets", [getattr(node, "target", None)])}

    assigned = [node for node in ast.parse(path.read_text()).body
                if isinstance(node, (ast.Assign, ast.AugAssign)) and "__all__" in targets(node)]
    if len(assigned) == 1 and isinstance(assigned[0], ast.Assign):
        try:
            return list(ast.literal_eval(assigned[0].value))
        except ValueError:
            pass
    return list(importlib.import_module(module).__all__) if assigned else []


MODULES = _module_files()
PUBLIC = {f"{module}.{name}" for module, path in MODULES.items() for name in _all_of(module, path)}


def _autosummary_names(text: str) -> set[str]:
    """Qualified names listed in the ``autosummary`` directives of an reST source, under their ``currentmodule``."""
    names: set[str] = set()
    module = ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if match := re.match(r"\.\. (?:current)?module:: (\S+)", line):
            module = match.group(1)
        if line.startswith(".. autosummary::"):
            for entry in lines[i + 1:]:
                if entry and not entry.startswith("   "):
                    break
                entry = entry.strip()
                if entry and not entry.startswith(":"):
                    names.add(f"{module}.{entry.lstrip('~')}")
    return names


DOCUMENTED = set().union(*(_autosummary_names(p.read_text()) for p in API.glob("*.rst")))


def test_public_modules_found():
    assert {"specinit", "specinit.models", "specinit.models.lda", "specinit.engine.backends.numpy",
            "specinit.corpus.shipped"} <= set(MODULES)
    assert not any(part.startswith("_") for name in MODULES for part in name.split("."))


def test_autosummary_reader():
    text = ".. currentmodule:: a.b\n\n.. autosummary::\n   :toctree: generated\n\n   f\n   C\n\nprose\n   g\n"
    assert _autosummary_names(text) == {"a.b.f", "a.b.C"}


def test_every_public_name_has_an_api_entry():
    missing = sorted(PUBLIC - DOCUMENTED)
    assert not missing, f"add to the autosummary of docs/api/<module>.rst: {missing}"


def test_api_lists_only_public_names():
    stale = sorted(DOCUMENTED - PUBLIC)
    assert not stale, f"listed in docs/api but in no module's __all__: {stale}"


def test_every_public_module_has_a_page_in_the_index():
    index = (API / "index.rst").read_text()
    listed = set(re.findall(r"^   (specinit\S*)$", index, flags=re.M))
    assert listed == set(MODULES), (f"pages to add (docs/api/<module>.rst, listed in docs/api/index.rst): "
                                    f"{sorted(set(MODULES) - listed)}; pages of no module: "
                                    f"{sorted(listed - set(MODULES))}")
    for module in MODULES:
        assert f".. automodule:: {module}" in (API / f"{module}.rst").read_text()


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_is_a_gallery_example(path):
    """Sphinx-gallery collects every tutorials/*.py whose docstring starts with a title (underlined by '=')."""
    docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    assert docstring, f"{path.name} has no module docstring (the gallery's title and introduction)"
    title, underline = docstring.splitlines()[:2]
    assert title.strip() and re.fullmatch(r"=+", underline) and len(underline) >= len(title), path.name


def test_gallery_collects_the_tutorials_folder():
    conf = (DOCS / "conf.py").read_text()
    assert re.search(r'"examples_dirs": str\(HERE.parent / "tutorials"\)', conf)
    assert (ROOT / "tutorials" / "GALLERY_HEADER.rst").is_file()
    assert re.search(r'"filename_pattern": "/" if _GALLERY in \("all", "none"\)', conf)  # every tutorial runs


def test_pages_link_existing_tutorials():
    for page in DOCS.rglob("*.rst"):
        if "_build" in page.parts or "gallery" in page.parts or "generated" in page.parts:
            continue
        text = page.read_text()
        for name in re.findall(r"gallery/(\w+)>?`", text):
            if name != "index":
                assert (ROOT / "tutorials" / f"{name}.py").is_file(), f"{page.name} links a missing tutorial {name}"
        for source in re.findall(r"literalinclude:: \.\./\.\./(\S+)", text):
            assert (ROOT / source).is_file(), f"{page.name} includes a missing file {source}"


def test_benchmark_figures_read_results_tables():
    """The benchmark page's figures find their tables in benchmarks/RESULTS.md and draw a point per row."""
    import importlib.util

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    spec = importlib.util.spec_from_file_location("benchmark_plots", DOCS / "benchmark_plots.py")
    plots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plots)
    assert plots.number("**1,453**") == 1453.0 and plots.number("*386.7*") == 386.7 and plots.number("-2.92") == -2.92
    assert plots.label("`lda.spectral(method=\"tpm\")` (alpha0 chosen: 0.01)") == 'lda.spectral(method="tpm")'
    real_text = plots.tables(plots.section("Real text: spectral LDA vs variational Bayes and Gibbs"))[:3]
    figure = plots.real_text_lda()
    try:
        drawn = [sum(len(c.get_offsets()) for c in ax.collections) for ax in figure.axes]
        assert drawn == [len(rows) for _, rows in real_text] and min(drawn) >= 5
    finally:
        pyplot.close(figure)
    for draw in (plots.synthetic_lda, plots.hmm_and_gmm):
        pyplot.close(draw())

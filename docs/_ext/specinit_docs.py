"""Sphinx helpers of specinit's documentation: README code blocks in pages, and figures the tutorials save.

* ``.. readme-code:: <README section title>`` shows a fenced code block of that
  README section (``:language:``, default ``python``; ``:nth:``, default 0), so
  the pages show the very code that ``tests/test_readme.py`` runs.
* References inside specinit that Sphinx's exact lookup misses are resolved
  as a reader means them: a name that exists where it is written (in the
  referring class or module) links to the page of that object, or shows as
  text when it has none (a private helper, a constant outside ``__all__``);
  a name unknown there (``Site`` in a family's docstring) links to the one
  documented object whose name ends with it. A name found nowhere, or whose
  ending names several different objects, stays an error.
* A class re-exported by several modules declares its canonical name once
  (Sphinx would report the second declaration as a duplicate).
* A function that cites its module's references (``[1]_``) gets those
  references appended, so that every page carries the papers it cites.
* :func:`saved_figures` is a sphinx-gallery image scraper: the tutorials save
  their figures to files (``fig.savefig``, :func:`specinit.posterior.plot_topic_heatmap`,
  ...) rather than showing them; every PNG a gallery block saved is copied into
  the gallery (and removed when it was written beside the tutorial, the
  directory sphinx-gallery runs it in).
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import shutil
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from matplotlib.figure import Figure
from sphinx.domains.python import PythonDomain
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

README = Path(__file__).resolve().parents[2] / "README.md"

# (path, figure) of every PNG saved since the last gallery block ended.
_SAVED: list[tuple[Path, Figure]] = []
_savefig = Figure.savefig


def _recording_savefig(self: Figure, fname, *args, **kwargs):
    result = _savefig(self, fname, *args, **kwargs)
    if isinstance(fname, (str, os.PathLike)):
        path = Path(fname).resolve()
        # sphx_glr_*: the images sphinx-gallery's own matplotlib scraper writes.
        if (path.suffix.lower() == ".png" or kwargs.get("format") == "png") and not path.name.startswith("sphx_glr_"):
            _SAVED.append((path, self))
    return result


def saved_figures(block, block_vars, gallery_conf) -> str:
    """Sphinx-gallery scraper: the PNG files saved by a block, in the order they were saved.

    Parameters
    ----------
    block : tuple
        The code block (unused).
    block_vars : dict
        Sphinx-gallery's variables of the block (``image_path_iterator``, ``src_file``).
    gallery_conf : dict
        Sphinx-gallery's configuration.

    Returns
    -------
    str
        The reST of the copied images.
    """
    from matplotlib import pyplot
    from sphinx_gallery.scrapers import figure_rst

    example_dir = Path(block_vars["src_file"]).resolve().parent
    images = []
    for path, figure in _SAVED:
        if not path.is_file():
            continue
        image = Path(next(block_vars["image_path_iterator"]))
        shutil.copyfile(path, image)
        if path.parent == example_dir:
            path.unlink()
        images.append(str(image))
        pyplot.close(figure)  # saved figures are shown once, not again by the matplotlib scraper
    _SAVED.clear()
    return figure_rst(images, gallery_conf["src_dir"])


def _section_blocks(section: str, language: str) -> list[str]:
    text = README.read_text()
    match = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    if match is None:
        raise ValueError(f"README.md has no section '## {section}'")
    return re.findall(rf"```{language}\n(.*?)```", match.group(1), flags=re.S)


class ReadmeCode(SphinxDirective):
    """``.. readme-code:: <section>``: a fenced code block of a README section, as a literal block."""

    required_arguments = 1
    final_argument_whitespace = True
    option_spec = {"language": directives.unchanged, "nth": directives.nonnegative_int}

    def run(self) -> list[nodes.Node]:
        language = self.options.get("language", "python")
        nth = self.options.get("nth", 0)
        self.env.note_dependency(str(README))
        blocks = _section_blocks(self.arguments[0], language)
        if nth >= len(blocks):
            raise self.error(f"README section '{self.arguments[0]}' has {len(blocks)} {language} block(s); "
                             f"asked for number {nth}")
        code = blocks[nth].rstrip("\n")
        block = nodes.literal_block(code, code, language=language)
        self.set_source_info(block)
        return [block]


_MISSING = object()
_FIELD = object()  # an attribute declared by annotation only (a dataclass field): it exists, without an object


def _lookup(dotted: str):
    """The object a dotted name designates (a module, then attributes), or ``_MISSING``."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for i, part in enumerate(parts[cut:], cut):
            if hasattr(obj, part):
                obj = getattr(obj, part)
            elif i == len(parts) - 1 and part in getattr(obj, "__annotations__", {}):
                return _FIELD
            else:
                return _MISSING
        return obj
    return _MISSING


def _canonical(obj) -> str | None:
    """Where ``obj`` is defined: a module's name, or a function's, class's or method's module and qualified name."""
    if inspect.ismodule(obj):
        return obj.__name__
    obj = getattr(obj, "__func__", None) or getattr(obj, "fget", None) or obj
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}.{qualname}" if isinstance(module, str) and isinstance(qualname, str) else None


def _contexts(node) -> list[str]:
    """The prefixes a name is looked up under: the referring class and module, and where they are defined."""
    module = node.get("py:module") or ""
    cls = node.get("py:class")
    prefixes = [f"{module}.{cls}", module] if cls else [module]
    for prefix in list(prefixes):
        where = _canonical(_lookup(prefix)) if prefix else None
        if where and where not in prefixes:
            prefixes += [where, where.rsplit(".", 1)[0]] if cls and prefix != module else [where]
    return [p for p in dict.fromkeys(prefixes) if p]


def _resolve(app, env, node, contnode):
    """``missing-reference``: a reference inside specinit that Sphinx's exact lookup missed."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    contexts = _contexts(node)
    if not (target.startswith("specinit") or any(c.startswith("specinit") for c in contexts)):
        return None
    domain = env.get_domain("py")

    def link(name: str):
        entry = domain.objects[name]
        return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, name)

    # The object the name designates from where it is written (or absolutely): the page where it is defined, or
    # the page of a name bound to the same object; without one, it is shown as text (a private helper, a constant
    # outside __all__).
    found = [obj for prefix in [*contexts, ""] if (obj := _lookup(f"{prefix}.{target}" if prefix else target))
             is not _MISSING]
    for obj in found:
        if (where := _canonical(obj)) in domain.objects:
            return link(where)
    tail = "." + target.rsplit(".", 1)[-1]
    if found:
        for name in domain.objects:
            if name.endswith(tail) and any(_same(_lookup(name), obj) for obj in found):
                return link(name)
        return contnode
    # A short name written elsewhere (``Site`` in a family's docstring): the documented object of that name.
    candidates = [name for name in domain.objects if name.endswith("." + target)]
    meant = {_canonical(_lookup(name)) or name for name in candidates}
    if len(meant) == 1:
        return link(min(candidates, key=lambda name: (domain.objects[name].aliased, len(name))))
    return None


def _same(a, b) -> bool:
    """Whether two looked-up values are one object (values such as None or numbers are not told apart)."""
    if a is _MISSING or a is _FIELD or isinstance(a, (type(None), bool, int, float, str, bytes, tuple)):
        return False
    return a is b or (_canonical(a) is not None and _canonical(a) == _canonical(b))


_REFERENCE = re.compile(r"\[(\d+)\]_")
_DEFINITION = re.compile(r"^\.\. \[(\d+)\]")


def _module_references(module) -> dict[str, list[str]]:
    """The ``.. [n]`` entries of a module docstring's References section, by label."""
    entries: dict[str, list[str]] = {}
    current = None
    for line in inspect.cleandoc(module.__doc__ or "").splitlines():
        match = _DEFINITION.match(line)
        if match:
            current = entries.setdefault(match.group(1), [])
            current.append(line)
        elif current is not None and (line.startswith("   ") or not line.strip()):
            current.append(line)
        else:
            current = None
    return {label: [*lines[:1], *(ln for ln in lines[1:] if ln.strip())] for label, lines in entries.items()}


def _cited_references(app, what, name, obj, options, lines) -> None:
    """``autodoc-process-docstring`` (before numpydoc): the module's references that a docstring cites."""
    if what == "module":
        return
    defined = {m.group(1) for line in lines if (m := _DEFINITION.match(line.strip()))}
    cited = [label for label in dict.fromkeys(_REFERENCE.findall("\n".join(lines))) if label not in defined]
    module = inspect.getmodule(obj)
    if not cited or module is None:
        return
    available = _module_references(module)
    added = [line for label in cited for line in available.get(label, [])]
    if not added:
        return
    if "References" in (line.strip() for line in lines):
        at = [line.strip() for line in lines].index("References") + 2
        lines[at:at] = [*added, ""]
    else:
        lines.extend(["", "References", "----------", *added])


def _note_object(self, name, objtype, node_id, aliased=False, location=None):
    """A class re-exported by several modules declares its canonical name once, not a duplicate per export."""
    if aliased and name in self.objects and self.objects[name].aliased:
        return None
    return _note_object_of_sphinx(self, name, objtype, node_id, aliased, location)


_note_object_of_sphinx = PythonDomain.note_object


def setup(app) -> dict:
    Figure.savefig = _recording_savefig
    PythonDomain.note_object = _note_object
    app.add_directive("readme-code", ReadmeCode)
    app.connect("missing-reference", _resolve)
    app.connect("autodoc-process-docstring", _cited_references, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

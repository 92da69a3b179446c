"""Sphinx configuration of specinit's documentation.

Build (offline, warnings as errors, every cross-reference checked), from the repository root::

    python -m sphinx -W --keep-going -n -b html docs docs/_build/html

or ``docs/build.sh``. The gallery executes ``tutorials/*.py`` with ``SPECINIT_TUTORIAL_SMALL=1``;
``SPECINIT_DOCS_GALLERY`` bounds it: ``none`` builds the gallery pages without running the tutorials,
any other value except ``all`` (the default) is a regular expression: only the tutorials whose file
name matches it run. Sphinx-gallery reruns a tutorial only when its source changed.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE))

os.environ["SPECINIT_TUTORIAL_SMALL"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")

import specinit  # noqa: E402

project = "specinit"
author = "The specinit developers"
copyright = "The specinit developers"  # noqa: A001
version = release = specinit.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "matplotlib.sphinxext.plot_directive",
    "specinit_docs",
]

exclude_patterns = ["_build", "gallery/*.ipynb", "gallery/*.py", "gallery/*.zip", "gallery/*.md5",
                    "gallery/*.json", "gallery/*.pickle"]
templates_path = ["_templates"]
root_doc = "index"

# -- HTML -------------------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"specinit {release}"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path: list[str] = []
html_show_sourcelink = False

# -- API reference ----------------------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
# Types are in the numpydoc Parameters and Returns sections (as in scikit-learn's reference), not in signatures.
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options = {"exclude-members": "__init__, __new__"}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# intersphinx needs the network: external names (NumPy, JAX, NumPyro, ArviZ, scikit-learn, the standard
# library) are left as text; every name inside specinit must resolve (nitpicky, -n).
nitpicky = True
_EXTERNAL = ("numpy", "np", "scipy", "sp", "jax", "jaxlib", "numpyro", "funsor", "arviz", "az", "arviz_base",
             "arviz_stats", "arviz_plots", "xarray", "xr", "pandas", "pd", "sklearn", "dask", "distributed", "numba",
             "matplotlib", "h5py", "threadpoolctl", "collections", "typing", "types", "pathlib", "os", "io",
             "concurrent", "dataclasses", "enum", "abc", "logging", "argparse", "builtins", "contextlib", "threading",
             "functools", "tempfile", "numbers", "optax", "gensim", "hmmlearn", "lda", "tensorly", "re", "ast",
             "inspect", "constraints", "warnings", "sys", "math", "json", "zipfile", "shutil", "weakref")
_BUILTINS = ("int", "float", "complex", "str", "bool", "bytes", "dict", "list", "tuple", "set", "frozenset",
             "object", "None", "type", "callable", "Callable", "Any", "Path", "Sequence", "Mapping", "Iterable",
             "Iterator", "Generator", "Exception", "ValueError", "TypeError", "RuntimeError", "KeyError",
             "UserWarning", "MemoryError", "OSError", "NotImplementedError", "Literal", "TypeVar", "Self",
             "NamedTuple", "ndarray", "Array", "ArrayLike", "DTypeLike", "DataTree", "InferenceData", "Dataset",
             "DataArray", "DataFrame", "spmatrix", "sparray", "csr_matrix", "csr_array", "ModuleType", "PathLike",
             "Enum", "Distribution", "Sample", "MCMC", "NUTS", "SVI", "HMC", "MCMCKernel", "Figure", "Axes", "Lock",
             "Executor", "ThreadPoolExecutor", "Random", "Generator", "RandomState", "BaseEstimator",
             # the engine's aliases for unions of external types (count corpora, views), shown as text
             "Counts", "View")
# Unreferenced and repeated citations of a module's references (its docstring is shown on its page and on the
# page of a name that re-exports it) are not broken links.
suppress_warnings = ["ref.citation"]
nitpick_ignore_regex = [
    (r"py:.*", rf"~?({'|'.join(_EXTERNAL)})(\..+)?"),
    (r"py:.*", rf"({'|'.join(_BUILTINS)})"),
]

# -- Gallery ----------------------------------------------------------------------------------------------
_GALLERY = os.environ.get("SPECINIT_DOCS_GALLERY", "all")
sphinx_gallery_conf = {
    "examples_dirs": str(HERE.parent / "tutorials"),
    "gallery_dirs": str(HERE / "gallery"),
    "plot_gallery": _GALLERY != "none",
    # Every tutorial runs (sphinx-gallery's default runs only plot_*.py), or those SPECINIT_DOCS_GALLERY names.
    "filename_pattern": "/" if _GALLERY in ("all", "none") else _GALLERY,
    "within_subsection_order": "FileNameSortKey",
    "image_scrapers": ("specinit_docs.saved_figures", "matplotlib"),
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "capture_repr": (),
    "reference_url": {},
    "backreferences_dir": None,
    "copyfile_regex": "",
}
if _GALLERY not in ("all", "none"):
    re.compile(_GALLERY)  # a bad pattern fails here, naming the variable in the traceback

# -- Benchmark plots --------------------------------------------------------------------------------------
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 90)]
plot_rcparams: dict = {}
plot_working_directory = str(HERE)

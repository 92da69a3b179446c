"""The installed distribution's metadata: one version, the license, the links and classifiers users look for."""

import importlib.metadata

import specinit


def test_one_version_read_by_the_package_and_the_metadata():
    assert importlib.metadata.version("specinit") == specinit.__version__


def test_license_expression_file_and_classifiers():
    meta = importlib.metadata.metadata("specinit")
    assert meta["License-Expression"] == "Apache-2.0"
    assert "LICENSE" in meta.get_all("License-File")
    classifiers = set(meta.get_all("Classifier"))
    assert {f"Programming Language :: Python :: 3.{minor}" for minor in (11, 12, 13)} <= classifiers
    assert {"Topic :: Scientific/Engineering", "Typing :: Typed"} <= classifiers
    urls = dict(entry.split(", ", 1) for entry in meta.get_all("Project-URL"))
    assert set(urls) == {"Documentation", "Source", "Issues"}
    assert meta["Author"] == "The specinit developers"


def test_scikit_learn_faces_need_no_extra():
    requires = importlib.metadata.requires("specinit")
    assert any(req.startswith("scikit-learn") and "extra ==" not in req for req in requires)

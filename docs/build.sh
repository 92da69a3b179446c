#!/usr/bin/env bash
# Builds the documentation into docs/_build/html: offline, warnings as errors, every cross-reference inside the
# site checked. SPECINIT_DOCS_GALLERY bounds the gallery (docs/conf.py): "none" skips running the tutorials, a
# regular expression runs those whose file name matches. Extra arguments go to sphinx-build (e.g. -E: from scratch).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" -m sphinx -W --keep-going -n -b html docs docs/_build/html "$@"

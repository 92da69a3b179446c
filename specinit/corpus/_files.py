"""File helpers shared by the corpus readers: paths, gzip-transparent text, error messages naming file and line."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from specinit._validation import bad_argument

__all__ = ["check_path", "file_error", "open_text"]


def check_path(path, name, func) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise bad_argument(name, func, "a path (str or os.PathLike)", path, kind=TypeError)
    return Path(path)


def open_text(path: Path, mode: str, encoding: str = "utf-8"):
    """Open ``path`` as text, through gzip when its name ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding=encoding)
    return open(path, mode, encoding=encoding)


def file_error(path, line_number, problem) -> ValueError:
    return ValueError(f"{path}, line {line_number}: {problem}")

"""File access shared by every reader and writer: regular files only, a memory budget, errors naming the file.

Readers open only regular files: a FIFO would block the reader forever, a
device never ends, a directory is not data; each is refused before it is
opened. Writers refuse an existing target that is not a regular file.

Every reader takes ``max_bytes``, its memory budget (default
:func:`specinit.memory_limit`, the budget the fits check too). A reader estimates what it is about to allocate
from what the file declares (a header, a member's shape, the largest term id)
and refuses a file that needs more, naming the file, the size and
``max_bytes``; text is read line by line with at most
``max_bytes // HELD_FRACTION`` characters a line (or a document) and at most
``max_bytes`` characters in all, so that a small compressed file cannot
inflate into memory.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import secrets
import signal
import stat
import threading
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO

import numpy as np

from specinit._validation import (MEMORY_LIMIT_VARIABLE, bad_argument, check_int, format_bytes, memory_limit,
                                  memory_limit_reason, process_headroom)

__all__ = [
    "ENTRY_BYTES",
    "FileError",
    "HELD_FRACTION",
    "ROW_BYTES",
    "WORD_BYTES",
    "LineReader",
    "check_budget",
    "check_max_bytes",
    "check_path",
    "check_target",
    "file_error",
    "file_kind",
    "new_file_beside",
    "npy_header",
    "npz_members",
    "open_regular",
    "read_held",
    "read_text",
    "remove_stale_beside",
    "signals_clean_up",
]

#: Bytes a reader holds per stored count while it builds a matrix (parsed ids, COO and CSR copies).
ENTRY_BYTES = 64
#: Bytes per vocabulary column: the word, and the per-word float64 vectors of the moment passes.
WORD_BYTES = 64
#: Bytes per document (row pointers and per-document totals).
ROW_BYTES = 16
#: A line or document held at once may take ``max_bytes // HELD_FRACTION`` characters (its tokens take more).
HELD_FRACTION = 16

_KINDS = (
    (stat.S_ISDIR, "directory"),
    (stat.S_ISFIFO, "FIFO (named pipe)"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)


def check_path(path: str | os.PathLike, name: str, func: str | None) -> Path:
    """``path`` as a :class:`~pathlib.Path`; TypeError naming ``name`` when it is not a path."""
    if not isinstance(path, (str, os.PathLike)):
        raise bad_argument(name, func, "a path (str or os.PathLike)", path, kind=TypeError)
    return Path(path)


def check_max_bytes(max_bytes: int | None, func: str | None) -> int:
    """The memory budget in bytes: :func:`specinit.memory_limit` for None, else a positive integer."""
    return memory_limit() if max_bytes is None else check_int(max_bytes, "max_bytes", func, minimum=1)


class FileError(ValueError):
    """A ValueError whose message already names the file (readers re-raise it unchanged)."""


def file_error(path: str | os.PathLike, line_number: int | None, problem: str) -> FileError:
    """A ValueError naming the file and, when ``line_number`` is not None, the line."""
    return FileError(f"{path}, line {line_number}: {problem}" if line_number is not None else f"{path}: {problem}")


def check_budget(path: str | os.PathLike, needed: float, max_bytes: int, what: str, func: str,
                 detail: str = "") -> None:
    """Refuse ``path`` when reading it needs more than ``max_bytes`` or than the process's address-space limits leave.

    ``what`` says where the size comes from; ``detail`` (e.g. the largest member of an archive) follows the sizes.
    """
    detail = f"; {detail}" if detail else ""
    headroom = process_headroom()
    if headroom is not None and headroom[0] < min(needed, max_bytes):
        raise FileError(f"{path}: reading it needs about {format_bytes(needed)} ({what}), more than the "
                         f"{format_bytes(headroom[0])} that {headroom[1]} leaves this process{detail}; raise that "
                         f"limit to read it with {func}.")
    if needed > max_bytes:
        reason = memory_limit_reason(max_bytes)
        remedy = ("raise that limit to read it" if reason else
                  f"pass a larger max_bytes to {func}, or raise the default with specinit.set_memory_limit or the "
                  f"{MEMORY_LIMIT_VARIABLE} environment variable, if the machine has the memory")
        raise FileError(f"{path}: reading it needs about {format_bytes(needed)} ({what}), more than the memory budget "
                         f"max_bytes={max_bytes} ({format_bytes(max_bytes)}){reason}{detail}; {remedy}.")


def file_kind(mode: int) -> str:
    """What a node of ``st_mode`` ``mode`` is, in words ("directory", "FIFO (named pipe)", ...)."""
    return next((label for test, label in _KINDS if test(mode)), "special file")


def _not_regular(path, mode, name, func) -> ValueError:
    return bad_argument(name, func, "a regular file (FIFOs, devices and directories are refused)",
                        f"the {file_kind(mode)} {str(path)!r}", describe=False)


def open_regular(path: str | os.PathLike, name: str, func: str | None) -> BinaryIO:
    """Open ``path`` for binary reading after checking that it is a regular file.

    The check runs before the file is opened (``os.stat``) and again on the
    open descriptor (``os.fstat``), opened without blocking, so that a FIFO
    swapped in between cannot block the reader.

    Raises
    ------
    FileNotFoundError
        No such file (the message names it).
    ValueError
        ``path`` is a directory, FIFO, device or socket.
    """
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode, name, func)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(path, mode, name, func)
    return os.fdopen(fd, "rb")


def check_target(path: str | os.PathLike, name: str, func: str | None) -> Path:
    """``path`` as a file a writer may create or replace: refuse an existing node that is not a regular file.

    A symbolic link is judged by what it points to (a link to ``/dev/null``
    is refused; a link to a regular file is written through).
    """
    path = check_path(path, name, func)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return path
    if not stat.S_ISREG(mode):
        raise bad_argument(name, func, "a regular file or a new name (a FIFO, device or directory is never "
                           "written or replaced)", f"the {file_kind(mode)} {str(path)!r}", describe=False)
    return path


def new_file_beside(target: Path) -> tuple[int, Path]:
    """A new, empty file in ``target``'s folder, to write and then move over ``target`` with ``os.replace``.

    Its mode is what ``open(target, "w")`` would give: an existing
    ``target``'s permission bits, else ``0o666`` less the process's umask
    (the kernel applies the umask and the folder's default ACL at creation;
    :func:`tempfile.mkstemp` would make it ``0o600``). Its name,
    ``.<target name>.<pid>.<random>.tmp``, records the writer's process id,
    so that :func:`remove_stale_beside` can tell a temporary left by a
    process that is gone (killed by SIGKILL, a power cut) from one being
    written.

    Parameters
    ----------
    target : pathlib.Path
        The file that will be replaced (its folder must exist).

    Returns
    -------
    (int, pathlib.Path)
        A descriptor open for writing, and the new file's path.

    Raises
    ------
    OSError
        The folder is missing or not writable.
    """
    directory = target.parent if str(target.parent) else Path(".")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        path = directory / f".{target.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(path, flags, 0o666)
        except FileExistsError:  # pragma: no cover - a 48-bit name taken already
            continue
        break
    try:
        os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))
    except FileNotFoundError:
        pass
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    return fd, path


def _running(pid: int) -> bool:
    """Whether a process ``pid`` exists (this one included); True when that cannot be told."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True
    return True


def remove_stale_beside(target: Path) -> list[Path]:
    """Remove the temporaries that :func:`new_file_beside` made for ``target`` in processes that are gone.

    A writer removes its temporary when it fails or is interrupted (:func:`signals_clean_up`); a process killed
    outright (SIGKILL, a power cut) cannot, and the next writer of the same target cleans up after it. Only
    regular files named as :func:`new_file_beside` names them, whose process id belongs to no running process,
    are removed; nothing else in the folder is touched, and a folder that cannot be listed is left alone.

    Parameters
    ----------
    target : pathlib.Path
        The file about to be written.

    Returns
    -------
    list of pathlib.Path
        The temporaries removed.
    """
    directory = target.parent if str(target.parent) else Path(".")
    pattern = re.compile(rf"\.{re.escape(target.name)}\.([0-9]{{1,10}})\.[0-9a-f]{{12}}\.tmp")
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        try:
            if match and entry.is_file(follow_symlinks=False) and not _running(int(match.group(1))):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


class _Terminated(BaseException):
    """SIGTERM arrived while a file was being written: raised so that the writer's clean-up runs."""


@contextlib.contextmanager
def signals_clean_up() -> Iterator[None]:
    """Run the body with SIGTERM turned into an exception, so that a writer's clean-up runs as it does on SIGINT.

    Only where SIGTERM would end the process (its handler is the default one) and only in the main thread (the
    only one that may set handlers): the handler raises an exception in the body (its ``except``/``finally``
    clauses remove the temporary file), then the previous handler is restored and the signal delivered again,
    so the process ends as it would have. Elsewhere the body runs as it is; a temporary left by a process that
    was killed is removed by the next writer (:func:`remove_stale_beside`).
    """
    sigterm = getattr(signal, "SIGTERM", None)
    if sigterm is None or threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(sigterm) is not signal.SIG_DFL:
        yield
        return
    received = []

    def terminate(signum, frame):
        received.append(signum)
        if len(received) == 1:
            raise _Terminated(signum)

    try:
        signal.signal(sigterm, terminate)
        yield
    except _Terminated:
        pass
    finally:
        signal.signal(sigterm, signal.SIG_DFL)
        if received:
            signal.raise_signal(sigterm)


def read_held(path: str | os.PathLike, name: str, func: str | None, max_bytes: int, *, gunzip: bool = False) -> bytes:
    """The bytes of a regular file read whole (inflated when ``gunzip``), at most ``max_bytes // HELD_FRACTION``.

    Raises
    ------
    ValueError
        Naming the file: not a regular file, longer than the limit once
        inflated, or a damaged gzip stream.
    """
    limit = max(max_bytes // HELD_FRACTION, 1)
    with open_regular(path, name, func) as raw:
        try:
            data = (gzip.GzipFile(fileobj=raw, mode="rb") if gunzip else raw).read(limit + 1)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise file_error(path, None, f"not a readable gzip file, truncated or corrupt ({type(exc).__name__}: "
                                         f"{exc}).") from None
    if len(data) > limit:
        raise file_error(path, None, f"longer than {limit} bytes, the most max_bytes={max_bytes} allows a file held "
                                     f"whole (max_bytes // {HELD_FRACTION}); pass a larger max_bytes to {func}.")
    return data


class LineReader:
    """Lines of an open binary stream, bounded in length and in total, decoded one by one when ``encoding``.

    Parameters
    ----------
    handle : binary file object
        The stream (``readline(limit)`` is used).
    path : pathlib.Path
        Named in errors.
    max_bytes : int
        The budget: lines of at most ``max_bytes // HELD_FRACTION``
        characters, at most ``max_bytes`` characters in all when ``total``.
    func : str
        The public function named in errors.
    total : bool
        Whether the whole text counts against the budget (False for readers
        that stream a file block by block and hold no more than a block).
    encoding : str or None
        Lines are decoded (an undecodable one is refused, naming it), or
        returned as bytes when None.

    Attributes
    ----------
    line_number : int
        The number of the last line read.
    """

    def __init__(self, handle: IO, path: str | os.PathLike, max_bytes: int, func: str, *, total: bool = True,
                 encoding: str | None = None) -> None:
        self.handle, self.path, self.func, self.encoding = handle, path, func, encoding
        self.max_bytes, self.max_line, self.total = max_bytes, max(max_bytes // HELD_FRACTION, 1), total
        self.line_number, self.characters = 0, 0

    def readline(self) -> str | bytes:
        """The next line (with its line break), or an empty line at the end of the file."""
        line = self.handle.readline(self.max_line + 1)
        if not line:
            return "" if self.encoding else line
        self.line_number += 1
        if len(line) > self.max_line:
            raise file_error(self.path, self.line_number, f"longer than {self.max_line} bytes, the longest "
                             f"line max_bytes={self.max_bytes} allows (max_bytes // {HELD_FRACTION}); pass a "
                             f"larger max_bytes to {self.func} if the file is right.")
        self.characters += len(line)
        if self.total and self.characters > self.max_bytes:
            raise file_error(self.path, self.line_number, f"more than max_bytes={self.max_bytes} bytes of text "
                             f"(decompressed); pass a larger max_bytes to {self.func} if the file is right.")
        if self.encoding is None:
            return line
        try:
            return line.decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise file_error(self.path, self.line_number, f"cannot be decoded as {self.encoding} ({exc.reason} at "
                                                          f"byte {exc.start} of the line).") from None

    def __iter__(self):
        while True:
            line = self.readline()
            if not line:
                return
            yield line


@contextlib.contextmanager
def read_text(path: str | os.PathLike, name: str, func: str | None, max_bytes: int) -> Iterator[LineReader]:
    """A :class:`LineReader` over the UTF-8 lines of ``path`` (through gzip when its name ends in ``.gz``).

    Decompression errors become a ValueError naming the file and the line
    being read.
    """
    raw = open_regular(path, name, func)
    reader = None
    try:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if Path(path).suffix == ".gz" else raw
        reader = LineReader(stream, path, max_bytes, func, encoding="utf-8")
        yield reader
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        line = None if reader is None else reader.line_number + 1
        raise file_error(path, line, f"not a readable gzip file, truncated or corrupt ({type(exc).__name__}: "
                                     f"{exc}).") from None
    finally:
        raw.close()


def npy_header(handle: IO[bytes]) -> tuple[tuple, np.dtype]:
    """``(shape, dtype)`` from the header of the ``.npy`` stream ``handle`` (left just past the header).

    Raises
    ------
    ValueError
        Not an ``.npy`` header of format 1.0 or 2.0.
    """
    version = np.lib.format.read_magic(handle)
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f"npy format version {version} (1.0 and 2.0 are read)")
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    try:
        shape, _, dtype = read(handle)
    except Exception as exc:  # NumPy parses the header with ast.literal_eval: SyntaxError, TokenError, ...
        raise ValueError(f"a damaged .npy header ({type(exc).__name__}: {exc})") from None
    return tuple(shape), dtype


def _member_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo):
    """``(shape, dtype, header length)`` of a ``.npy`` member, inflating only its header."""
    with archive.open(info) as member:
        shape, dtype = npy_header(member)
        return shape, dtype, member.tell()


def npz_members(handle: IO[bytes], path: str | os.PathLike, max_bytes: int, func: str) -> dict:
    """Shape and dtype of every array of an ``.npz`` archive, read from the member headers only.

    Each member's header (the ``.npy`` magic, shape and dtype) is inflated,
    never its data. A member whose size in the zip directory disagrees with
    its header's shape, an object dtype, or arrays that together exceed
    ``max_bytes`` or what the process's address-space limit leaves
    (:func:`specinit.memory_limit`) are refused before anything is inflated;
    the refusal names the largest member.

    Parameters
    ----------
    handle : binary file object
        The open archive (left open, rewound).
    path : pathlib.Path
        Named in errors.
    max_bytes : int
        Memory budget of all the arrays together.
    func : str
        The public function named in errors.

    Returns
    -------
    dict of str -> (tuple, numpy.dtype)
        By array name (the member name without ``.npy``).

    Raises
    ------
    ValueError
        Naming the file (and the member): not a zip archive, a member that
        is not an ``.npy`` array, a size that disagrees with the shape, an
        object dtype, or the budget exceeded.
    """
    headers = []
    try:
        with zipfile.ZipFile(handle) as archive:
            for info in archive.infolist():
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                try:
                    headers.append((name, info.file_size, *_member_header(archive, info)))
                except (ValueError, EOFError, zlib.error, zipfile.BadZipFile, OSError) as exc:
                    raise FileError(f"{path}, member {name!r}: not a readable .npy array ({type(exc).__name__}: "
                                     f"{exc}).") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error, OSError) as exc:
        raise FileError(f"{path}: not a readable .npz archive, truncated or corrupt ({type(exc).__name__}: "
                         f"{exc}).") from None
    finally:
        handle.seek(0)
    members, total, largest = {}, 0, None
    for name, file_size, shape, dtype, header in headers:
        if dtype.hasobject:
            raise FileError(f"{path}, member {name!r}: an object array (dtype {dtype}); only numeric and string "
                             "arrays are read.")
        n_bytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if header + n_bytes != file_size:
            raise FileError(f"{path}, member {name!r}: its header declares shape {shape} of {dtype} ({n_bytes} "
                             f"bytes) but the member holds {file_size - header} bytes.")
        members[name] = (shape, dtype)
        total += n_bytes
        if largest is None or n_bytes > largest[0]:
            largest = (n_bytes, f"the largest, member {name!r}, declares shape {shape} of {dtype}")
    check_budget(path, total, max_bytes, "the arrays its members declare", func, largest[1] if largest else "")
    return members

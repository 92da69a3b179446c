"""Command line: ``specinit demo`` and ``specinit fit <family> <data>`` for every family of the registry.

Exit status: 0 success; 2 a bad command line, argument or input file, or input over the memory budget (the message names it); 3 the data do
not support the fit (for example an indefinite second moment for the requested ``k``); 1 any other failure.
Every failure is one line on standard error, never a traceback (``--traceback`` shows it).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Sequence

__all__ = ["EXIT_FAILED", "EXIT_INPUT", "EXIT_OK", "EXIT_UNSUPPORTED", "main"]

#: Exit statuses of :func:`main`.
EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_UNSUPPORTED = 0, 1, 2, 3

_COUNT_FORMATS = ("auto", "ldac", "uci", "npz", "dir", "reuters")


class CommandError(Exception):
    """A failure of the command line itself (a flag, a file): exit status 2."""


# ---------------------------------------------------------------------------------------------------------------
# data in, by the family's data kind
# ---------------------------------------------------------------------------------------------------------------

def _load_corpus(path: str, fmt: str, vocab: str | None):
    from specinit import corpus as data

    if fmt == "reuters" or path == "reuters":
        return data.load_reuters()
    p = _existing(path)
    if fmt == "auto":
        if p.is_dir():
            fmt = "dir"
        elif p.suffix == ".npz":
            fmt = "npz"
        elif p.name.startswith("docword"):
            fmt = "uci"
        else:
            fmt = "ldac"
    if fmt == "dir":
        if not p.is_dir():
            raise CommandError(f"--format dir needs a directory of .txt files; {p} is a file")
        return data.from_text_files(p, stop_words="english")
    if p.is_dir():
        raise CommandError(f"{p} is a directory; --format {fmt} reads a file")
    if fmt == "uci":
        return data.load_uci_bow(p, vocab)
    if fmt == "npz":
        import scipy.sparse as sp

        try:
            matrix = sp.load_npz(p)
        except Exception as exc:  # zipfile, zlib and numpy errors of a damaged file
            raise CommandError(f"{p} is not a readable scipy.sparse .npz file ({type(exc).__name__}: {exc})") from exc
        return data.from_matrix(matrix, vocabulary=data.read_vocabulary(vocab, "specinit fit") if vocab else None)
    return data.load_ldac(p, vocab)


def _existing(path: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise CommandError(f"data file {p} does not exist")
    return p


def _load_arrays(path: str) -> list:
    """The arrays of a ``.npy``/``.npz`` file (an ``.npz`` in archive order), or the rows of a text file.

    Regular files only; the arrays' headers are checked against the memory budget before any is read.
    """
    import numpy as np

    from specinit._files import check_budget, check_max_bytes, npy_header, npz_members, open_regular

    p = _existing(path)
    if p.is_dir():
        raise CommandError(f"{p} is a directory; this family reads a .npy, .npz, .csv or text file")
    budget = check_max_bytes(None, "specinit fit")
    try:
        with open_regular(p, "data", "specinit fit") as handle:  # closed even when numpy fails on a damaged file
            if p.suffix == ".npz":
                npz_members(handle, p, budget, "specinit fit")
                with np.load(handle, allow_pickle=False) as archive:
                    return [archive[name] for name in archive.files]
            if p.suffix == ".npy":
                shape, dtype = npy_header(handle)
                check_budget(p, float(np.prod(shape, dtype=float)) * dtype.itemsize, budget, f"an array of shape "
                             f"{shape} and dtype {dtype}", "specinit fit")
                handle.seek(0)
                return [np.load(handle, allow_pickle=False)]
            # text: at least 2 characters a value, 8 bytes each as float64, twice while parsing
            check_budget(p, 8.0 * os.fstat(handle.fileno()).st_size, budget, "its values as float64", "specinit fit")
            return [np.loadtxt(handle, delimiter="," if p.suffix == ".csv" else None, ndmin=2)]
    except (OSError, ValueError, EOFError) as exc:
        raise CommandError(_naming_the_file(p, exc)) from exc
    except Exception as exc:  # zipfile/zlib errors of a truncated or corrupt archive
        raise CommandError(f"{p} is damaged or not an array file ({type(exc).__name__}: {exc})") from exc


def _load_sequences(path: str, dtype) -> list:
    """Sequences: one per line of a text file (whitespace-separated values), or the arrays of a .npy/.npz."""
    import numpy as np

    from specinit._files import check_max_bytes, read_text

    p = _existing(path)
    if p.suffix in (".npy", ".npz"):
        return [np.asarray(a) for a in _load_arrays(path)]
    if p.is_dir():
        raise CommandError(f"{p} is a directory; sequences are read from a .npy, .npz or text file")
    sequences = []
    with read_text(p, "data", "specinit fit", check_max_bytes(None, "specinit fit")) as lines:
        for line in lines:
            if line.strip():
                try:
                    sequences.append(np.array(line.split(), dtype=dtype))
                except (ValueError, OverflowError) as exc:
                    raise CommandError(f"{p}, line {lines.line_number}: {exc}") from exc
    if not sequences:
        raise CommandError(f"{p} holds no sequence")
    return sequences


def load_data(family, args):
    """The data argument of ``family``'s ``spectral`` (by its :attr:`~specinit.family.Family.data_kind`) read from
    ``args.data``, and a vocabulary (or None)."""
    kind = family.data_kind
    if kind == "counts":
        corpus = _load_corpus(args.data, args.format, args.vocab)
        return corpus.counts, corpus.vocabulary
    if kind in ("symbols", "sequences"):
        return _load_sequences(args.data, int if kind == "symbols" else float), None
    arrays = _load_arrays(args.data)
    if kind == "views":
        return arrays, None
    if len(arrays) != 1:
        raise CommandError(f"{args.data} holds {len(arrays)} arrays; this family reads one (N, d) array")
    return arrays[0], None


# ---------------------------------------------------------------------------------------------------------------
# fit
# ---------------------------------------------------------------------------------------------------------------

def _options(pairs) -> dict:
    options = {}
    for pair in pairs or ():
        name, sep, text = pair.partition("=")
        if not sep or not name.isidentifier():
            raise CommandError(f"--option expects NAME=VALUE; got {pair!r}")
        options[name] = _literal(text)
    return options


#: Arguments of every family's ``spectral`` that the command line sets itself (or reads from the data).
_NOT_FLAGS = ("k", "seed", "vocabulary")


def _spectral_options(family) -> list:
    """The keyword arguments of ``family``'s public ``spectral`` a flag may set (its signature, less the data and
    k; the family's declared options where it takes them as ``**options``)."""
    parameters = list(inspect.signature(family.faces.spectral).parameters.values())[1:]
    names = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        names += [name for name in family.options if name not in names]
    return [name for name in names if name not in _NOT_FLAGS]


def _family(text: str):
    """The family a command line names: a registered name (``-`` for ``_`` allowed), or ``module:Class`` for a
    family defined in an importable module (imported, which registers it)."""
    import importlib

    from specinit.family import Family, registered

    if ":" in text:
        module_name, _, class_name = text.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            raise CommandError(f"family {text!r}: cannot import {class_name} from {module_name} ({exc})") from exc
        if not (isinstance(cls, type) and issubclass(cls, Family) and cls.__dict__.get("name")):
            raise CommandError(f"family {text!r}: {class_name} is not a Family subclass with a name")
        return registered()[cls.name]
    families = registered()
    name = text.replace("-", "_")
    if name not in families:
        raise CommandError(f"unknown family {text!r}; choose one of {', '.join(families)}, or give module:Class")
    return families[name]


def _first_sentence(doc: str) -> str:
    """The first sentence of a declaration's documentation, without reST markup (for ``--help``)."""
    text = re.sub(r":\w+:`~?([^`<]*?)(?: <[^>]*>)?`", r"\1", " ".join(doc.split())).replace("``", "")
    return re.split(r"(?<!e\.g)(?<!i\.e)(?<!Sec)(?<!Thm)(?<!Alg)\. ", text)[0].rstrip(".").replace("%", "%%")


def _literal(text: str):
    """A flag's value: a Python literal (number, tuple, dict, True/None) or else the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _flag_type(constraints: list):
    """How a flag's text becomes a value: int or float when every family declaring it says so, else a literal."""
    kinds = {getattr(constraint, "kind", None) for constraint in constraints}
    nullable = any(getattr(constraint, "none", False) for constraint in constraints)
    return kinds.pop() if len(kinds) == 1 and kinds <= {int, float} and not nullable else _literal


def _add_option_flags(fit: argparse.ArgumentParser) -> list:
    """One ``--name`` flag per argument of the families' ``spectral``, documented from their declarations; the
    names."""
    from specinit.family import COMMON_OPTIONS, registered
    from specinit.models import FAMILIES

    declarations = {}
    for name in FAMILIES:
        family = registered()[name]
        table = family.declared()
        for option in _spectral_options(family):
            declarations.setdefault(option, []).append((name, table[option]))
    for option, declared in declarations.items():
        families = [family for family, _ in declared]
        param = COMMON_OPTIONS.get(option, declared[0][1])
        who = "every family" if len(families) == len(FAMILIES) else ", ".join(families)
        fit.add_argument(f"--{option.replace('_', '-')}", dest=option, default=None, metavar="VALUE",
                         type=_flag_type([p.constraint for _, p in declared]),
                         help=f"{who}: {_first_sentence(param.doc)} ({param.type})")
    return list(declarations)


def _check_out(path: str | None) -> Path | None:
    """Refuse an unusable ``--out`` before any work starts."""
    if path is None:
        return None
    out = Path(path)
    if out.is_dir():
        raise CommandError(f"--out {out} is a directory; give a file name such as {out / 'estimate.npz'}")
    parent = out.parent
    if not parent.exists():
        raise CommandError(f"--out {out}: the directory {parent} does not exist")
    if not parent.is_dir():
        raise CommandError(f"--out {out}: {parent} is not a directory")
    if not os.access(parent, os.W_OK):
        raise CommandError(f"--out {out}: the directory {parent} is not writable")
    return out


def _json_value(value):
    import numpy as np

    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value


def _fit(args) -> int:
    from specinit.family import registered

    family = _family(args.model)
    name = family.name
    out = _check_out(args.out)
    options = _options(args.option)
    takes = _spectral_options(family)
    for option in args.option_flags:
        value = getattr(args, option, None)
        if value is None:
            continue
        if option not in takes:
            users = [other for other, found in registered().items() if option in _spectral_options(found)]
            raise CommandError(f"--{option.replace('_', '-')} applies to {', '.join(users)} only, not {name}")
        options[option] = value
    k = args.k if args.k == "auto" else _int_k(args.k)
    try:
        data, vocabulary = load_data(family, args)
    except (ValueError, TypeError, OSError, MemoryError) as exc:
        raise CommandError(_naming_the_file(args.data, exc)) from exc
    if vocabulary is not None:
        options.setdefault("vocabulary", vocabulary)
    start = time.perf_counter()
    try:
        estimate = family.faces.spectral(data, k, seed=args.seed, **options)
    except (ValueError, TypeError) as exc:
        if not _DATA_ARGUMENT.search(str(exc)):
            raise
        raise type(exc)(_naming_the_file(args.data, exc)) from exc
    elapsed = time.perf_counter() - start
    diagnostics = {key: _json_value(value) for key, value in estimate.diagnostics.items()}
    if args.json:
        print(json.dumps({"family": name, "k": estimate.k, "seconds": elapsed,
                          "params": {key: _json_value(value) for key, value in estimate.params.items()},
                          "diagnostics": diagnostics}, indent=1))
    else:
        _print_summary(family, estimate, data, elapsed, args.top)
    if out is not None:
        path = estimate.save(out)
        print(f"estimate saved to {path}", file=sys.stderr if args.json else sys.stdout)
    return EXIT_OK


#: An error about the data argument of a family's ``spectral`` (the data read from the file).
_DATA_ARGUMENT = re.compile(r"The '(counts|sequences|x|views)(\[\d+\])?' argument")


def _naming_the_file(path: str, exc: Exception) -> str:
    """``exc``'s message, led by the data file's name unless it names it already."""
    message = str(exc) or type(exc).__name__
    return message if str(path) in message else f"{path}: {message}"


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return value


def _int_k(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CommandError(f"--k must be a positive integer or 'auto'; got {text!r}") from None


def _print_summary(family, estimate, data, elapsed: float, top: int) -> None:
    name = family.name
    shapes = ", ".join(f"{site} {tuple(value.shape)}" for site, value in estimate.params.items())
    print(f"{name}: k={estimate.k}, {_describe_data(data)}; fit in {elapsed:.2f} s; params {shapes}")
    scalars = {key: value for key, value in estimate.diagnostics.items()
               if isinstance(value, (bool, int, float, str)) and not key.startswith("k_auto/")}
    for key in sorted(scalars)[:40]:
        value = scalars[key]
        print(f"  {key} = {value:.4g}" if isinstance(value, float) else f"  {key} = {value}")
    if family.data_kind == "counts":
        from specinit.corpus import top_words, umass_coherence

        beta = estimate.params["beta"]
        weights = estimate.params.get("weights", estimate.params.get("alpha"))
        coherence = umass_coherence(beta, data, n=top)
        seeded = [f" ({name})" for name in estimate.diagnostics.get("seed/names", ())]
        for i, words in enumerate(top_words(beta, estimate.vocabulary, n=top)):
            label = seeded[i] if i < len(seeded) else ""
            print(f"topic {i:2d}{label}  weight {weights[i]:.3f}  coherence {coherence[i]:7.2f}  {' '.join(words)}")


def _describe_data(data) -> str:
    if hasattr(data, "nnz"):
        return f"{data.shape[0]} documents, V={data.shape[1]}, {data.nnz} non-zeros"
    if isinstance(data, list):
        return f"{len(data)} arrays"
    return f"data of shape {tuple(data.shape)}"


def _demo(args) -> int:
    from specinit.demo import run_demo

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {out} is a file; the demo writes a folder of plots")
    size = "quick" if args.quick else "full" if args.full else "default"
    run_demo(out_dir=out, size=size, seed=args.seed, log=lambda msg: print(msg, flush=True))
    return EXIT_OK


def build_parser(family_flags: bool = True) -> argparse.ArgumentParser:
    """The argument parser of the ``specinit`` command.

    Parameters
    ----------
    family_flags : bool
        Give ``fit`` one flag per argument of the families' ``spectral`` (imports every family; a command line
        without ``fit`` does without them and starts faster).

    Returns
    -------
    argparse.ArgumentParser
    """
    from specinit import __version__
    from specinit.models import FAMILIES

    parser = argparse.ArgumentParser(
        prog="specinit", description="Spectral (method-of-moments) estimates for NumPyro models.",
        epilog="Exit status: 0 success, 2 bad command line or input, 3 the data do not support the fit, 1 other failure.")
    parser.add_argument("--version", action="version", version=f"specinit {__version__}")
    parser.add_argument("--traceback", action="store_true", help="show the traceback of a failure")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="spectral fit, warm vs default NUTS and SVI on a corpus drawn from LDA, ArviZ plots")
    demo.add_argument("--out", default="specinit-demo", help="folder for plots and the saved estimate")
    length = demo.add_mutually_exclusive_group()
    length.add_argument("--quick", action="store_true",
                        help="tiny sizes, as run by the tests; still about 2-3 minutes on 2 cores, nearly all "
                             "of it JAX compiling the samplers")
    length.add_argument("--full", action="store_true", help="larger corpora and longer chains (several minutes)")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(handler=_demo)
    fit = sub.add_parser(
        "fit", help="fit any family to a data file and print the estimate's summary",
        description="Data by family: topic models (lda, single_topic) read LDA-C, UCI docword, scipy.sparse .npz, a "
                    "directory of .txt files or 'reuters'; gmm and factors an (N, d) .npy/.csv/text array; hmm and "
                    "gaussian_hmm one sequence per line of a text file (or the arrays of a .npy/.npz); multiview and "
                    "kernel_multiview an .npz with one array per view. Every argument of the family's spectral() "
                    "has a flag (e.g. --n-symbols 27 for hmm; values are Python literals or text); --option "
                    "NAME=VALUE sets any of them too.")
    fit.add_argument("model", metavar="family", help=f"one of {', '.join(FAMILIES)} (or with '-' for '_'), or "
                     "module:Class for a family defined in an importable module")
    fit.add_argument("data", help="data file, directory, or 'reuters'")
    fit.add_argument("--k", required=True, help="number of components, or 'auto' to choose it from the data")
    fit.add_argument("--option", action="append", metavar="NAME=VALUE",
                     help="a keyword argument of the family's spectral() (Python literal or string); repeatable")
    fit.add_argument("--format", default="auto", choices=_COUNT_FORMATS, help="topic models: the corpus format")
    fit.add_argument("--vocab", default=None, help="topic models: vocabulary file, one word per line")
    fit.add_argument("--top", type=_positive_int, default=10, help="topic models: top words per topic")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--json", action="store_true", help="print the estimate (params and diagnostics) as JSON")
    fit.add_argument("--out", default=None, help="save the estimate (.npz; SpectralEstimate.load reads it)")
    fit.set_defaults(handler=_fit, option_flags=_add_option_flags(fit) if family_flags else [])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``specinit`` command line.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 success, 2 a bad command line or input, 3 the data do not support the fit, 1 any
        other failure (see the module notes).
    """
    from specinit.engine.whitening import IndefiniteMomentError

    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(family_flags="fit" in argv).parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("specinit: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.traceback:
            raise
        if isinstance(exc, IndefiniteMomentError):
            status = EXIT_UNSUPPORTED
        elif isinstance(exc, (CommandError, ValueError, TypeError, OSError, ImportError, MemoryError)):
            status = EXIT_INPUT
        else:
            status = EXIT_FAILED
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"specinit: error: {message}", file=sys.stderr)
        return status

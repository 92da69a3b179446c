"""Public faces built from declarations: each argument of a family's public calls is declared once.

A :class:`Param` holds what a user needs to know about one argument: its
numpydoc type, its default, its constraint and its documentation. A family
declares its own in one table (:attr:`specinit.family.Family.options` and
:attr:`~specinit.family.Family.arguments`, beside the common ones of
:data:`specinit.family.COMMON_OPTIONS`); :func:`face` turns a template --
a function whose ``def`` line names the arguments and whose docstring holds
everything but the ``Parameters`` section -- into the public function:
signature (``__signature__``, with the declared defaults and types),
``Parameters`` section assembled from the table, and the entry scope of
:func:`specinit._validation.public`. The scikit-learn estimators
(:mod:`specinit.estimators`) and the command line (:mod:`specinit.cli`) read
the same tables, and the skeleton validates the values against them once.
"""

from __future__ import annotations

import functools
import inspect
import re
import textwrap
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, TypeVar

from specinit._validation import public

__all__ = ["REQUIRED", "Param", "face", "parameters_section"]

#: The default of an argument that has none.
REQUIRED = inspect.Parameter.empty

#: Sections a ``Parameters`` section goes before (numpydoc order).
_LATER_SECTIONS = re.compile(r"^\s*(Returns|Yields|Receives|Other Parameters|Raises|Warns|Warnings|See Also|Notes|"
                             r"References|Examples)\s*\n\s*-{3,}\s*$", re.MULTILINE)

#: Width of the assembled documentation lines (the code's line length).
_WIDTH = 116


@dataclass(frozen=True)
class Param:
    """One declared argument: numpydoc type, default, constraint and documentation.

    Parameters
    ----------
    type : str
        The numpydoc type line (``"{'pooled', 'per-document'} or None"``).
    doc : str
        The description (one paragraph, or paragraphs separated by blank lines; wrapped when assembled).
    default : object, optional
        The default value; :data:`REQUIRED` (default) for an argument without one.
    constraint : object, optional
        An :class:`~specinit._validation.Interval`, :class:`~specinit._validation.Options`, or a callable
        ``(name, value) -> value``; None: any value (checked where it is used).
    """

    type: str
    doc: str
    default: Any = REQUIRED
    constraint: Any = None

    def check(self, name: str, value: Any) -> Any:
        """``value`` checked against the constraint (and normalised), or as it is when there is none."""
        if self.constraint is None:
            return value
        if hasattr(self.constraint, "check"):
            return self.constraint.check(name, value)
        return self.constraint(name, value)

    def documented(self, doc: str) -> Param:
        """This declaration with another description: a family documenting a common argument its own way keeps
        its type, default and constraint."""
        return replace(self, doc=doc)

    def numpydoc(self, name: str) -> str:
        """The argument's entry in a ``Parameters`` section (unindented)."""
        paragraphs = [textwrap.fill(" ".join(part.split()), _WIDTH - 8) for part in self.doc.split("\n\n")]
        body = textwrap.indent("\n\n".join(paragraphs), "    ")
        return f"{name} : {self.type}\n{body}"


def parameters_section(table: Mapping[str, Param], names) -> str:
    """The numpydoc ``Parameters`` section of ``names`` (unindented), from ``table``."""
    return "Parameters\n----------\n" + "\n".join(table[name.lstrip("*")].numpydoc(name) for name in names)


def _with_parameters(doc: str, section: str) -> str:
    """``doc`` (a template's docstring) with ``section`` before its first later section, indented like it."""
    doc = inspect.cleandoc(doc)
    match = _LATER_SECTIONS.search(doc)
    at = match.start() if match else len(doc)
    head, tail = doc[:at].rstrip("\n"), doc[at:].lstrip("\n")
    return f"{head}\n\n{section}\n\n{tail}".rstrip() + "\n"


#: The return type of a template, kept by its public function (a type checker sees the template's annotation).
R = TypeVar("R")


def face(table: Mapping[str, Param], *, validate: bool = True) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Decorator: the public function of a template, with signature and ``Parameters`` section from ``table``.

    The template's ``def`` line names the arguments and their kinds (positional before the ``*``, keyword-only
    after it; ``**name`` for keyword arguments forwarded as they are); ``table`` gives each named argument its
    default and its documentation (type and description). Calls bind to the declared signature (missing
    defaults filled in, unknown names refused as Python refuses them), every argument with a constraint is
    checked against it (and normalised), and the template receives every argument named.

    Parameters
    ----------
    table : dict of str -> Param
        Declarations by argument name; every argument of the template must be declared.
    validate : bool, default True
        Check the arguments' constraints at the entry; False where the callee checks them once itself (the
        family skeleton checks the options of ``spectral``).

    Returns
    -------
    callable
        The decorator.

    Raises
    ------
    KeyError
        A template argument that ``table`` does not declare (at import).
    """

    def build(template: Callable[..., R]) -> Callable[..., R]:
        declared = inspect.signature(template)
        parameters = []
        for name, parameter in declared.parameters.items():
            param = table[name]
            keyword = parameter.kind is inspect.Parameter.VAR_KEYWORD
            parameters.append(parameter if keyword else parameter.replace(default=param.default))
        signature = declared.replace(parameters=parameters)
        names = [f"**{name}" if p.kind is inspect.Parameter.VAR_KEYWORD else name
                 for name, p in declared.parameters.items()]
        checked = [name for name in names if validate and not name.startswith("**")
                   and table[name].constraint is not None]

        @functools.wraps(template)
        def entry(*args: Any, **kwargs: Any) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            for name in checked:
                bound.arguments[name] = table[name].check(name, bound.arguments[name])
            return template(*bound.args, **bound.kwargs)

        entry.__signature__ = signature
        entry.__doc__ = _with_parameters(template.__doc__ or "", parameters_section(table, names))
        return public(entry)

    return build

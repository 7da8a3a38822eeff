"""The source a decorated function ships to its replicas, checked when the DAG file is parsed.

Replicas do not have the DAG file, so the function must stand on its own: a plain module-level function, not
a lambda, nested function, method or generator (``check``, when the DAG is parsed), that imports or defines in
its body every name it uses, builtins aside (``ship``, before the job is created). Its decorators are
stripped. The shipped text is padded so that it keeps its line numbers in the DAG file: a remote traceback
points at the author's lines.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import linecache
from collections.abc import Callable
from functools import lru_cache
from typing import Any

BUILTINS = frozenset(dir(builtins))


class ShippedFunction:
    """A function's standalone source. A plain class: this module is imported while a DAG file is parsed,
    where a ``NamedTuple`` class would cost about 0.7 ms to create (see ``manifests.JobOptions``)."""

    __slots__ = ("filename", "name", "source")

    def __init__(self, name: str, filename: str, source: str) -> None:
        self.name, self.filename, self.source = name, filename, source


def check(function: Callable[..., Any]) -> None:
    """What the DAG parse can afford to check (no source read): ``ValueError`` naming what to change."""
    if not inspect.isfunction(function):
        raise ValueError(f"{function!r} is not a Python function; decorate a function defined with `def`")
    name = function.__name__
    if name == "<lambda>":
        raise ValueError(
            "a lambda cannot be shipped to a T9k job: define the function with `def` at module level"
        )
    if inspect.unwrap(function) is not function:
        raise ValueError(f"{name}() is wrapped by another decorator; only its own source can be shipped")
    for test, what in (
        (inspect.isgeneratorfunction, "a generator"),
        (inspect.isasyncgenfunction, "an async generator"),
        (inspect.iscoroutinefunction, "a coroutine function"),
    ):
        if test(function):
            raise ValueError(f"{name}() is {what}; a T9k job runs a plain function and returns its value")
    qualname = function.__qualname__
    if "<locals>" in qualname:
        outer = qualname.split(".<locals>")[0]
        captured = function.__code__.co_freevars
        uses = f" and uses its variables {', '.join(captured)}" if captured else ""
        raise ValueError(
            f"{name}() is nested in {outer}(){uses}: replicas get only the function's own source; define it "
            "at module level of the DAG file and pass such values as arguments"
        )
    if "." in qualname:
        raise ValueError(f"{qualname}() is a method; decorate a module-level function")


@lru_cache(maxsize=256)
def ship(function: Callable[..., Any]) -> ShippedFunction:
    """The function's standalone source, read when the task runs (reading and analysing it would double the
    parse time of a DAG file); ``ValueError`` naming what to change when it cannot stand alone."""
    check(function)
    name = function.__name__
    filename = function.__code__.co_filename
    lines = linecache.getlines(filename)
    first = function.__code__.co_firstlineno - 1  # the first decorator's line
    if not lines[first : first + 1]:
        raise ValueError(f"the source of {name}() is not available; define it in a file")
    header, block, node = _definition(lines, first, name)
    # From the def line on (decorators stripped), each line at its line number in the file.
    body = (header + block)[node.lineno - 1 : node.end_lineno]
    def_line = first + node.lineno - len(header)
    source = "".join(["\n"] * (def_line - 1 - len(header)) + header + body)
    unknown = sorted((_module_names(source, filename, name) - BUILTINS - {name}) | _default_names(node))
    if unknown:
        raise ValueError(
            f"{name}() uses {', '.join(unknown)} from the DAG file's module, which its replicas do not have: "
            "import or define them inside the function, or pass them as arguments"
        )
    return ShippedFunction(name, filename, source)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _definition(lines: list[str], first: int, name: str) -> tuple[list[str], list[str], ast.FunctionDef]:
    """The decorated ``def`` that starts at ``lines[first]``, parsed.

    It ends before the first code line indented no deeper than its first line, unless the text up to there
    does not parse (a signature's closing line, a string spanning the dedent): then at the next such line.
    Cheaper than ``inspect.getblock``, whose tokenizer costs more than the rest of a DAG file's parse.
    An indented ``def`` (in a ``with DAG(...)`` block) parses unchanged under an ``if 1:`` header line.
    """
    indent = _indent(lines[first])
    header = ["if 1:\n"] if indent else []
    end = first + 1
    while True:
        while end < len(lines) and (
            not lines[end].strip() or lines[end].lstrip().startswith("#") or _indent(lines[end]) > indent
        ):
            end += 1
        block = lines[first:end]
        try:
            tree = ast.parse("".join(header + block)).body[0]
        except SyntaxError:
            if end >= len(lines):
                raise
            end += 1
            continue
        node = tree.body[0] if header else tree  # type: ignore[attr-defined]
        if not isinstance(node, ast.FunctionDef) or node.name != name:
            raise ValueError(f"cannot find `def {name}` in the source of {name}()")
        return header, block, node


def _module_names(source: str, filename: str, name: str) -> set[str]:
    """Names the function, and the functions and comprehensions inside it, read from their module."""
    import symtable  # only when the task runs: a DAG file's parse does not read the source

    tables = [t for t in symtable.symtable(source, filename, "exec").get_children() if t.get_name() == name]
    found = set()
    while tables:
        table = tables.pop()
        found |= {s.get_name() for s in table.get_symbols() if s.is_global() and not s.is_assigned()}
        tables += table.get_children()
    return found


def _default_names(node: ast.FunctionDef) -> set[str]:
    """Module names in default values: the shipped ``def`` evaluates them on the replica."""
    defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    return {
        n.id
        for default in defaults
        for n in ast.walk(default)
        if isinstance(n, ast.Name) and n.id not in BUILTINS
    }

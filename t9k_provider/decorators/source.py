"""The source a decorated function ships to its replicas, checked when the DAG file is parsed.

Replicas do not have the DAG file, so the function must stand on its own: a plain module-level function (not a
lambda, nested function, method or generator) that imports or defines inside its body every name it uses,
builtins aside. Its decorators are stripped. The shipped text is padded so that it keeps its line numbers in
the DAG file: a remote traceback points at the author's lines.
"""

from __future__ import annotations
import __future__

import ast
import builtins
import dis
import inspect
from collections.abc import Callable, Iterator
from functools import lru_cache
from types import CodeType
from typing import Any, NamedTuple

BUILTINS = frozenset(dir(builtins))


class ShippedFunction(NamedTuple):
    name: str
    filename: str
    source: str


def ship(function: Callable[..., Any]) -> ShippedFunction:
    """The function's standalone source; ``ValueError`` naming what to change when it cannot stand alone."""
    if not inspect.isfunction(function):
        raise ValueError(f"{function!r} is not a Python function; decorate a function defined with `def`")
    return _ship(function)


@lru_cache(maxsize=256)  # a DAG file calls a decorated function once per task (and per mapped expansion)
def _ship(function: Callable[..., Any]) -> ShippedFunction:
    name = function.__name__
    if name == "<lambda>":
        raise ValueError(
            "a lambda cannot be shipped to a T9k job: define the function with `def` at module level"
        )
    if inspect.unwrap(function) is not function:
        raise ValueError(f"{name}() is wrapped by another decorator; only its own source can be shipped")
    for check, what in (
        (inspect.isgeneratorfunction, "a generator"),
        (inspect.isasyncgenfunction, "an async generator"),
        (inspect.iscoroutinefunction, "a coroutine function"),
    ):
        if check(function):
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
    try:
        lines, first = inspect.getsourcelines(function)
    except (OSError, TypeError) as exc:
        raise ValueError(f"the source of {name}() is not available ({exc}); define it in a file") from exc
    # An indented def (in a `with DAG(...)` block) compiles unchanged under an `if 1:` header line.
    header = ["if 1:\n"] if lines[0][:1] in (" ", "\t") else []
    tree = ast.parse("".join(header + lines)).body[0]
    node = tree.body[0] if header else tree  # type: ignore[attr-defined]
    if not isinstance(node, ast.FunctionDef) or node.name != name:
        raise ValueError(f"cannot find `def {name}` in the source of {name}()")
    unknown = sorted((_global_names(function.__code__) - BUILTINS - {name}) | _default_names(node))
    if unknown:
        raise ValueError(
            f"{name}() uses {', '.join(unknown)} from the DAG file's module, which its replicas do not have: "
            "import or define them inside the function, or pass them as arguments"
        )
    # From the def line on (decorators stripped), each line at its line number in the file.
    block = (header + lines)[node.lineno - 1 : node.end_lineno]
    def_line = first + node.lineno - 1 - len(header)
    source = "".join(["\n"] * (def_line - 1 - len(header)) + header + block)
    filename = inspect.getsourcefile(function) or f"<{name}>"
    compile(source, filename, "exec", __future__.annotations.compiler_flag, True)
    return ShippedFunction(name, filename, source)


def _code_objects(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _code_objects(const)


def _global_names(code: CodeType) -> set[str]:
    """Names the function (and the functions and comprehensions inside it) read from its module."""
    loaded, stored = set(), set()
    for inner in _code_objects(code):
        for instruction in dis.get_instructions(inner):
            if instruction.opname == "LOAD_GLOBAL":
                loaded.add(str(instruction.argval))
            elif instruction.opname == "STORE_GLOBAL":
                stored.add(str(instruction.argval))
    return loaded - stored


def _default_names(node: ast.FunctionDef) -> set[str]:
    """Module names in default values: the shipped ``def`` evaluates them on the replica."""
    defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    return {
        n.id
        for default in defaults
        for n in ast.walk(default)
        if isinstance(n, ast.Name) and n.id not in BUILTINS
    }

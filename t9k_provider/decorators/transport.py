"""How a decorated function's call reaches its replicas, and how its result and errors come back.

In: the runner program and the call (the function's source, name, file, serializer and arguments), each
zlib-compressed and base64-encoded, are environment values of an init container in the job manifest itself
(``manifests``), so Airflow needs no permission beyond creating the job. A single environment value must stay
below the kernel's 128 KiB per-string limit, hence ``MAX_CALL_CHARS``.

Out: rank 0's result and every rank's error report are marked lines of the training container's log (see
``runner``), which Airflow reads with ``pods/log``.
"""

from __future__ import annotations

import base64
import importlib
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from t9k_provider.decorators import runner
from t9k_provider.decorators.source import ShippedFunction

if TYPE_CHECKING:
    from t9k_provider.kube.podlogs import LogLine

#: Largest encoded call (source and arguments after compression and base64).
MAX_CALL_CHARS = 100_000


class CallError(ValueError):
    """The call cannot be shipped: retrying will not change that."""


class RemoteError(NamedTuple):
    """One replica's failure report: when it was written, whether a retry can help, its text."""

    timestamp_ns: int
    retryable: bool
    text: str


def pack(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data, 9)).decode()


def unpack(text: str) -> bytes:
    return zlib.decompress(base64.b64decode(text))


@lru_cache(maxsize=1)
def packed_runner() -> str:
    return pack(Path(runner.__file__).read_bytes())


@lru_cache(maxsize=1)
def shipped_modules() -> dict[str, str]:
    """What the function may import from this package in an image without it: the progress reports."""
    from t9k_provider import progress

    return {progress.__name__: Path(progress.__file__).read_text()}


def encode_call(
    function: ShippedFunction, serializer: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> str:
    """The call as the init container's value; ``CallError`` for arguments that cannot be shipped."""
    # Airflow hands mapped upstream results over as lazy sequences: ship their items.
    args = [_materialized(value) for value in args]
    kwargs = {key: _materialized(value) for key, value in kwargs.items()}
    if serializer == "json":
        named = [(f"positional argument {i}", v) for i, v in enumerate(args)]
        named += [(f"argument {k!r}", v) for k, v in kwargs.items()]
        for what, value in named:
            issue = runner.json_issue(value, what)
            if issue:
                raise CallError(
                    f"{function.name}(): {issue}; pass JSON-safe values (None, bool, int, float, str, lists, "
                    "dicts with string keys) or choose serializer='cloudpickle' or 'dill'"
                )
        arguments: Any = {"args": args, "kwargs": kwargs}
    else:
        codec = importlib.import_module(serializer)
        try:
            arguments = base64.b64encode(codec.dumps({"args": args, "kwargs": kwargs})).decode()
        except Exception as exc:
            raise CallError(
                f"{function.name}(): the arguments cannot be serialized with {serializer}: {exc!r}"
            ) from exc
    call = {
        "function": function.name,
        "filename": function.filename,
        "source": function.source,
        "serializer": serializer,
        "arguments": arguments,
        "modules": shipped_modules(),
    }
    text = pack(json.dumps(call).encode())
    if len(text) > MAX_CALL_CHARS:
        raise CallError(
            f"{function.name}(): its source and arguments take {len(text)} characters in the job manifest "
            f"(compressed), over the {MAX_CALL_CHARS} a container's environment value may hold: pass large "
            "inputs through shared storage (a volume or an object store) and give the function their path"
        )
    return text


def _materialized(value: Any) -> Any:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, list, tuple)):
        return list(value)
    return value


def decode_result(texts: Iterable[str], serializer: str) -> Any:
    """Rank 0's return value from its log lines; ``ValueError`` when the lines hold none (or part of one)."""
    chunks: dict[int, str] = {}
    count = 0
    for text in texts:
        at = text.find(runner.RESULT_MARKER + " ")
        if at < 0:
            continue
        position, _, chunk = text[at + len(runner.RESULT_MARKER) + 1 :].partition(" ")
        index, _, total = position.partition("/")
        if index.isdigit() and total.isdigit():
            chunks[int(index)] = chunk.strip()
            count = int(total)
    if not count:
        raise ValueError("no result in the log")
    missing = [i for i in range(1, count + 1) if i not in chunks]
    if missing:
        raise ValueError(f"the result in the log is incomplete ({len(missing)} of {count} lines missing)")
    data = unpack("".join(chunks[i] for i in range(1, count + 1)))
    if serializer == "json":
        return json.loads(data)
    return importlib.import_module(serializer).loads(data)


def remote_errors(lines: Iterable[LogLine]) -> list[RemoteError]:
    """The failure reports in one container's log.

    Launchers that gather the output of several hosts (DeepSpeed's pdsh) put ``<host>: `` before every line:
    whatever precedes the opening marker is removed from the report's other lines too.
    """
    found: list[RemoteError] = []
    prefix, opened, body = "", None, []
    for line in lines:
        if opened is None:
            at = line.text.find(runner.ERROR_MARKER + " ")
            if at >= 0:
                prefix, opened, body = line.text[:at], line, [line.text[at + len(runner.ERROR_MARKER) + 1 :]]
            continue
        text = line.text.removeprefix(prefix) if prefix else line.text
        if text.strip() == runner.ERROR_END_MARKER:
            retryable, _, headline = body[0].partition(" ")
            found.append(
                RemoteError(
                    opened.timestamp_ns, retryable == runner.RETRYABLE, "\n".join([headline, *body[1:]])
                )
            )
            opened = None
        else:
            body.append(text)
    return found

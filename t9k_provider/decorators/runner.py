"""Runs one ``@task.t9k*`` function inside a T9k Job replica: the program the decorated task ships.

The ``t9k-taskflow`` init container writes this file and the call (the function's source and arguments, a
JSON file whose path is the first argument); every replica's training process runs this file. It uses the
standard library only, so it works in any image with Python 3.8+ (and in the local cluster's own interpreter).
The Airflow side imports it for the markers and the JSON check, so both ends agree on them. The call also
carries the modules a function may import from this package without having it (``provide``): the progress
reports of ``t9k_provider.progress``.

Protocol, read by the Airflow task from the container log:

* global rank 0 prints the return value as ``T9K_TASKFLOW_RESULT <i>/<n> <chunk>`` lines (the serialized
  value, zlib-compressed, base64, in chunks well below the 16 KiB at which container runtimes split lines);
* a failure prints ``T9K_TASKFLOW_ERROR <retryable|final> <what happened>``, the traceback, and
  ``T9K_TASKFLOW_ERROR_END`` on stderr. ``retryable`` (exit 1): the function raised. ``final`` (exit 65): the
  call cannot work however often it is retried (a result that cannot be serialized or is too large, a
  serializer missing from the image, source this Python cannot compile).
"""

from __future__ import annotations
import __future__

import atexit
import base64
import builtins
import faulthandler
import importlib
import json
import linecache
import os
import socket
import sys
import traceback
import types
import zlib
from typing import Any

RESULT_MARKER = "T9K_TASKFLOW_RESULT"
ERROR_MARKER = "T9K_TASKFLOW_ERROR"
ERROR_END_MARKER = "T9K_TASKFLOW_ERROR_END"
RETRYABLE = "retryable"
FINAL = "final"
#: Exit code of a ``final`` failure (sysexits' EX_DATAERR); a raising function exits 1.
FINAL_EXIT_CODE = 65
#: Base64 characters per result line.
CHUNK_CHARS = 4000
#: Largest serialized return value (before compression): XCom is for small values.
RESULT_LIMIT_BYTES = 256 * 1024
#: How deeply a JSON value may nest (a guard against cycles as much as a limit).
MAX_JSON_DEPTH = 100


class CallFailed(Exception):
    """A failure that retrying cannot cure."""


def json_issue(value: Any, what: str, depth: int = 0) -> str | None:
    """Why ``value`` would not come back from JSON as it went in (None if it would)."""
    if depth > MAX_JSON_DEPTH:
        return f"{what} nests deeper than {MAX_JSON_DEPTH} levels"
    if value is None or isinstance(value, (bool, int, float, str)):
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            issue = json_issue(item, f"{what}[{i}]", depth + 1)
            if issue:
                return issue
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{what} has the key {key!r} ({type(key).__name__}): JSON keys are strings"
            issue = json_issue(item, f"{what}[{key!r}]", depth + 1)
            if issue:
                return issue
        return None
    kind = type(value)
    return f"{what} is a {kind.__module__}.{kind.__qualname__}, which JSON cannot carry"


def global_rank() -> int:
    """This process's rank: ``RANK`` (PyTorch, XGBoost, DeepSpeed, GenericJob), else from ``TF_CONFIG``."""
    if os.environ.get("RANK", "").isdigit():
        return int(os.environ["RANK"])
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = config.get("task") or {}
    index = int(task.get("index", 0))
    if task.get("type") == "chief":
        return 0
    if task.get("type") == "worker":
        return index + len((config.get("cluster") or {}).get("chief") or [])
    return 0 if not task else -1


def provide(modules: dict[str, str]) -> None:
    """Make the shipped modules (``t9k_provider.progress``) importable where the image lacks them; an
    installed package keeps its own."""
    for name, source in modules.items():
        try:
            importlib.import_module(name)
            continue
        except ImportError:
            pass
        parent = name.rpartition(".")[0]
        if parent and parent not in sys.modules:
            sys.modules[parent] = types.ModuleType(parent)  # no __path__: nothing else of it is importable
        module = types.ModuleType(name)
        module.__file__ = f"<shipped {name}>"
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        sys.modules[name] = module
        if parent:
            setattr(sys.modules[parent], name.rpartition(".")[2], module)


def load_codec(name: str) -> Any:
    if name == "json":
        return None
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise CallFailed(f"serializer {name!r} is not installed in this image ({exc})") from exc


def define(call: dict[str, Any]) -> Any:
    """Execute the shipped source; tracebacks show its lines under the DAG file's name and line numbers."""
    source, filename = call["source"], call["filename"]
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        code = compile(source, filename, "exec", __future__.annotations.compiler_flag, True)
    except SyntaxError as exc:
        raise CallFailed(
            f"the function does not compile with Python {sys.version.split()[0]} here: {exc}"
        ) from exc
    namespace = {"__name__": "__t9k_taskflow__", "__builtins__": builtins}
    try:
        exec(code, namespace)
    except Exception as exc:  # e.g. a default value naming something this image lacks
        raise CallFailed(f"defining the function failed: {exc!r}") from exc
    return namespace[call["function"]]


def decode_arguments(call: dict[str, Any], codec: Any) -> tuple[list[Any], dict[str, Any]]:
    if codec is None:
        arguments = call["arguments"]
    else:
        try:
            arguments = codec.loads(base64.b64decode(call["arguments"]))
        except Exception as exc:
            raise CallFailed(f"the arguments cannot be deserialized with {codec.__name__}: {exc!r}") from exc
    return arguments["args"], arguments["kwargs"]


def encode_result(value: Any, codec: Any) -> str:
    if codec is None:
        issue = json_issue(value, "the return value")
        if issue:
            raise CallFailed(
                issue + "; return plain Python values or choose serializer='cloudpickle' or 'dill'"
            )
        data = json.dumps(value, separators=(",", ":")).encode()
    else:
        try:
            data = codec.dumps(value)
        except Exception as exc:
            raise CallFailed(f"the return value cannot be serialized with {codec.__name__}: {exc!r}") from exc
    if len(data) > RESULT_LIMIT_BYTES:
        raise CallFailed(
            f"the return value serializes to {len(data)} bytes, over the {RESULT_LIMIT_BYTES}-byte limit "
            "of a task's result: write large results to shared storage and return their path"
        )
    text = base64.b64encode(zlib.compress(data, 9)).decode()
    chunks = [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]
    return "".join(f"{RESULT_MARKER} {i + 1}/{len(chunks)} {chunk}\n" for i, chunk in enumerate(chunks))


def report(kind: str, headline: str, trace: str) -> None:
    sys.stdout.flush()
    sys.stderr.write(f"{ERROR_MARKER} {kind} {headline}\n{trace}{ERROR_END_MARKER}\n")
    sys.stderr.flush()


def main() -> int:
    # A rank that crashes in native code (a segfault in a collective's teardown, say) leaves every thread's
    # Python stack on stderr, which the task's failure message shows.
    faulthandler.enable(all_threads=True)
    with open(sys.argv[1]) as f:
        call = json.load(f)
    if "RANK" in os.environ:  # one process per replica unless torchrun started several
        os.environ.setdefault("LOCAL_RANK", "0")
        os.environ.setdefault("LOCAL_WORLD_SIZE", "1")
    rank = global_rank()
    where = f"{call['function']}() on rank {rank} (replica {socket.gethostname()})"
    provide(call.get("modules") or {})
    try:
        codec = load_codec(call["serializer"])
        args, kwargs = decode_arguments(call, codec)
        function = define(call)
    except CallFailed as exc:
        report(FINAL, f"{where}: {exc}", "")
        return FINAL_EXIT_CODE
    try:
        value = function(*args, **kwargs)
    except Exception as exc:
        frames = exc.__traceback__.tb_next if exc.__traceback__ else None  # drop this file's frame
        trace = "".join(traceback.format_exception(type(exc), exc, frames))
        report(RETRYABLE, f"{where} raised {type(exc).__name__}", trace)
        return 1
    if rank != 0:
        return 0
    try:
        lines = encode_result(value, codec)
    except CallFailed as exc:
        report(FINAL, f"{where}: {exc}", "")
        return FINAL_EXIT_CODE
    sys.stdout.flush()
    os.write(1, lines.encode())  # the real stdout, even if the function replaced sys.stdout
    return 0


def leave(code: int) -> None:
    """Exit with ``code`` after Python's own exit work (``atexit`` handlers, e.g. a tracker's last upload) but
    without the C++ teardown after it: a gloo or NCCL thread the function left joinable aborts the process
    there ("terminate called without an active exception"), failing a rank whose work and result are done."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main())

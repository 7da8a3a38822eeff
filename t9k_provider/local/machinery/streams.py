"""What the API server and a node's streaming endpoints exchange for ``pods/exec`` and ``pods/attach``: the
options of a stream and the client's side of it, whatever protocol carries them to the client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

#: The output streams a container writes to the client.
STDOUT, STDERR = "stdout", "stderr"


@dataclass(frozen=True)
class StreamOptions:
    """The query of an exec or attach request."""

    container: str
    command: list[str]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


@dataclass(frozen=True)
class ClientInput:
    """One message from the client: standard input, a new terminal size (columns, rows), or the end of its
    standard input."""

    stdin: bytes | None = None
    resize: tuple[int, int] | None = None
    stdin_closed: bool = False


class StreamClient(Protocol):
    """The client of one exec or attach, as the node sees it."""

    async def send(self, stream: str, data: bytes) -> None:
        """Write ``data`` to the client's ``STDOUT`` or ``STDERR``."""
        ...

    async def receive(self) -> ClientInput | None:
        """The client's next message; None once it has gone."""
        ...

    async def ready(self) -> None:
        """Tell the client its streams are set up: nothing the container writes from now on is lost (an
        attach says so only once it has fixed where its output starts)."""
        ...


@dataclass(frozen=True)
class ExecResult:
    """How an exec ended: the command's exit code, the reason it could not start, or (neither) the client
    left first."""

    exit_code: int | None = None
    start_error: str = ""

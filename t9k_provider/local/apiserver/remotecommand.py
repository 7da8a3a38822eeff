"""The Kubernetes remote-command WebSocket protocols (`pods/exec`, `pods/attach`): framing and statuses.

Every WebSocket message carries one channel: 0 stdin, 1 stdout, 2 stderr, 3 error (the final status), 4 resize
(v3 and later: `{"Width": w, "Height": h}`); v5 adds 255, whose payload names a channel the sender closes. In
the binary protocols a message is the channel byte followed by raw data; in the base64 ones it is text, the
channel as an ASCII digit followed by base64 data. The error channel carries the plain error text in
v1-v3 (nothing on success) and a `Status` JSON object from v4 on.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.wire import parse_bool
from t9k_provider.local.machinery import streams
from t9k_provider.local.machinery.streams import ClientInput, StreamOptions

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255


@dataclass(frozen=True)
class Protocol:
    name: str
    version: int  # 1 (channel.k8s.io) to 5
    binary: bool  # raw bytes after the channel byte; else text: channel digit + base64


PROTOCOLS = {
    p.name: p
    for p in (
        Protocol("v5.channel.k8s.io", 5, True),
        Protocol("v4.channel.k8s.io", 4, True),
        Protocol("v4.base64.channel.k8s.io", 4, False),
        Protocol("v3.channel.k8s.io", 3, True),
        Protocol("v3.base64.channel.k8s.io", 3, False),
        Protocol("v2.channel.k8s.io", 2, True),
        Protocol("v2.base64.channel.k8s.io", 2, False),
        Protocol("channel.k8s.io", 1, True),
        Protocol("base64.channel.k8s.io", 1, False),
    )
}
DEFAULT_PROTOCOL = PROTOCOLS["channel.k8s.io"]  # what a client that names no subprotocol gets


def parse_options(request: web.Request, needs_command: bool) -> StreamOptions:
    """The query of an exec or attach request."""
    tty = parse_bool(request, "tty")
    opts = StreamOptions(
        container=request.query.get("container", ""),
        command=request.query.getall("command", []),
        stdin=parse_bool(request, "stdin"),
        stdout=parse_bool(request, "stdout"),
        stderr=parse_bool(request, "stderr") and not tty,  # a terminal has one output stream
        tty=tty,
    )
    if needs_command and not opts.command:
        raise errors.bad_request("you must specify at least one command for the container")
    if not (opts.stdin or opts.stdout or opts.stderr):
        raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
    return opts


def negotiate(request: web.Request) -> Protocol:
    """The subprotocol to speak: the first one the client offers that we know (the client's preference)."""
    upgrade = request.headers.get("Upgrade", "").lower()
    if upgrade != "websocket":
        raise errors.bad_request(
            "Upgrade request required: t9k-local serves exec and attach over WebSocket only "
            "(the channel.k8s.io protocols, v1 to v5), not SPDY"
        )
    offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
    if not offered:
        return DEFAULT_PROTOCOL
    for name in offered:
        if name in PROTOCOLS:
            return PROTOCOLS[name]
    raise errors.bad_request(
        f"requested protocol(s) are not supported: {offered}; supports {list(PROTOCOLS)}"
    )


def success_status() -> dict[str, Any]:
    return {"metadata": {}, "status": "Success"}


def exit_code_status(command: list[str], code: int) -> dict[str, Any]:
    """A non-zero exit, in the form kubectl and the Python client turn back into the exit code."""
    return {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: "
        f"error executing command [{' '.join(command)}], exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def internal_error_status(message: str) -> dict[str, Any]:
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"Internal error occurred: {message}",
        "reason": "InternalError",
        "details": {"causes": [{"message": message}]},
        "code": 500,
    }


class Channels:
    """One accepted WebSocket, spoken in the negotiated protocol: the node's `StreamClient`."""

    def __init__(self, ws: web.WebSocketResponse, protocol: Protocol, opts: StreamOptions) -> None:
        self.ws = ws
        self.protocol = protocol
        self.opts = opts

    async def send(self, stream: str, data: bytes) -> None:
        await self.send_channel(STDOUT if stream == streams.STDOUT else STDERR, data)

    async def send_channel(self, channel: int, data: bytes) -> None:
        if self.protocol.binary:
            await self.ws.send_bytes(bytes([channel]) + data)
        else:
            await self.ws.send_str(str(channel) + base64.b64encode(data).decode())

    async def ready(self) -> None:
        """An empty message on the lowest output channel tells the client the stream is set up."""
        opts = self.opts
        await self.send_channel(STDOUT if opts.stdout else STDERR if opts.stderr else ERROR, b"")

    async def send_status(self, status: dict[str, Any]) -> None:
        if self.protocol.version >= 4:
            await self.send_channel(ERROR, json.dumps(status, separators=(",", ":")).encode())
        elif status["status"] != "Success":
            await self.send_channel(ERROR, status["message"].encode())

    async def receive(self) -> ClientInput | None:
        """The client's next message (others, as upstream, are dropped); None once it has gone."""
        while (message := await self.receive_channel()) is not None:
            channel, data = message
            if channel == STDIN:
                return ClientInput(stdin=data)
            if channel == RESIZE and (size := parse_resize(data)) is not None:
                return ClientInput(resize=size)
            if channel == CLOSE and self.protocol.version >= 5 and data[:1] == bytes([STDIN]):
                return ClientInput(stdin_closed=True)
        return None

    async def receive_channel(self) -> tuple[int, bytes] | None:
        """The next (channel, data) from the client; None once the connection is closed."""
        async for msg in self.ws:
            if msg.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
                continue
            # Like upstream, accept either frame type: the Python client sends text frames.
            data = msg.data.encode() if msg.type == WSMsgType.TEXT else msg.data
            if self.protocol.binary and data:
                return data[0], data[1:]
            if not self.protocol.binary and data[:1].isdigit():
                try:
                    return data[0] - ord("0"), base64.b64decode(data[1:])
                except binascii.Error:
                    continue  # a malformed message is dropped, as the upstream reader does
        return None


def parse_resize(data: bytes) -> tuple[int, int] | None:
    """(columns, rows) of a resize message, or None if it is not one."""
    try:
        size = json.loads(data)
        width, height = int(size["Width"]), int(size["Height"])
    except (ValueError, TypeError, KeyError):
        return None
    return (width, height) if width > 0 and height > 0 else None

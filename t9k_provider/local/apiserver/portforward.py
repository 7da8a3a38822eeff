"""`pods/portforward` as kubectl 1.31+ speaks it: SPDY/3.1 streams tunnelled through a WebSocket.

kubectl upgrades to a WebSocket with the subprotocol ``SPDY/3.1+portforward.k8s.io`` and runs a SPDY client
over its binary messages. For each local connection it opens an ``error`` and a ``data`` stream (headers
``streamtype``, ``port``, ``requestid``); the server connects the data stream to that port at the pod's IP,
which the host reaches in both network modes (the netns bridge, or the pod's own loopback address), and ends
both streams when the pod side closes. Only servers listening on the pod IP (or 0.0.0.0) are reachable: one
bound to the pod's own 127.0.0.1 in netns mode is not. There is no plain-SPDY upgrade, and no flow control
(kubectl's SPDY library sends no window updates either). The Python clients speak the kubelet's WebSocket
protocol instead, ``v4.channel.k8s.io``.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import zlib
from dataclasses import dataclass

from aiohttp import WSMsgType, web

from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.objects import Objects
from t9k_provider.local.apiserver.wire import Route

PROTOCOL = "SPDY/3.1+portforward.k8s.io"
CHANNELS = "v4.channel.k8s.io"
READ_SIZE = 32 * 1024
SYN_STREAM, SYN_REPLY, RST_STREAM, PING, GOAWAY, HEADERS = 1, 2, 3, 6, 7, 8
FLAG_FIN = 0x01
_DICTIONARY_WORDS = (  # comma-separated
    "options,head,post,put,delete,trace,accept,accept-charset,accept-encoding,accept-language,accept-ranges,"
    "age,allow,authorization,cache-control,connection,content-base,content-encoding,content-language,"
    "content-length,content-location,content-md5,content-range,content-type,date,etag,expect,expires,from,host,"
    "if-match,if-modified-since,if-none-match,if-range,if-unmodified-since,last-modified,location,max-forwards,"
    "pragma,proxy-authenticate,proxy-authorization,range,referer,retry-after,server,te,trailer,"
    "transfer-encoding,upgrade,user-agent,vary,via,warning,www-authenticate,method,get,status,200 OK,version,"
    "HTTP/1.1,url,public,set-cookie,keep-alive,origin"
)
_DICTIONARY_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)


def _dictionary() -> bytes:
    """SPDY/3's zlib dictionary for header blocks (SPDY draft 3, section 2.6.10.1): length-prefixed words,
    then text."""
    words = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _DICTIONARY_WORDS.split(","))
    return words + _DICTIONARY_TAIL.encode()


DICTIONARY = _dictionary()


@dataclass
class _Forward:
    """One forwarded connection: kubectl's error and data streams and the socket to the pod."""

    error_stream: int = 0
    data_stream: int = 0
    writer: asyncio.StreamWriter | None = None
    pump: asyncio.Task[None] | None = None


class _Session:
    def __init__(self, ws: web.WebSocketResponse, pod_ip: str) -> None:
        self.ws = ws
        self.pod_ip = pod_ip
        self.inflate = zlib.decompressobj(zdict=DICTIONARY)
        self.deflate = zlib.compressobj()
        self.forwards: dict[str, _Forward] = {}  # by requestid
        self.by_stream: dict[int, _Forward] = {}

    async def run(self) -> None:
        buffer = b""
        try:
            async for msg in self.ws:
                if msg.type != WSMsgType.BINARY:
                    continue
                buffer += msg.data
                while len(buffer) >= 8:
                    length = int.from_bytes(buffer[5:8], "big")
                    if len(buffer) < 8 + length:
                        break
                    frame, buffer = buffer[: 8 + length], buffer[8 + length :]
                    try:
                        if not await self._frame(frame):
                            return
                    except (zlib.error, ValueError, IndexError):
                        return  # not SPDY as kubectl speaks it: end the session
        finally:
            for fwd in self.forwards.values():
                if fwd.pump is not None:
                    fwd.pump.cancel()
                if fwd.writer is not None:
                    fwd.writer.close()

    async def _frame(self, frame: bytes) -> bool:
        head, flags, data = frame[:4], frame[4], frame[8:]
        if not head[0] & 0x80:  # a data frame
            fwd = self.by_stream.get(int.from_bytes(head, "big") & 0x7FFFFFFF)
            if fwd is not None and fwd.writer is not None and fwd.data_stream == int.from_bytes(head, "big"):
                if data:
                    fwd.writer.write(data)
                    await fwd.writer.drain()
                if flags & FLAG_FIN and fwd.writer.can_write_eof():
                    fwd.writer.write_eof()
            return True
        kind = int.from_bytes(head[2:4], "big")
        if kind == SYN_STREAM:
            stream = int.from_bytes(data[:4], "big") & 0x7FFFFFFF
            await self._open(stream, self._headers(data[10:]))
        elif kind == HEADERS:
            self._headers(data[4:])  # keeps the shared zlib context in step
        elif kind == RST_STREAM:
            fwd = self.by_stream.get(int.from_bytes(data[:4], "big") & 0x7FFFFFFF)
            if fwd is not None and fwd.writer is not None:
                fwd.writer.close()
        elif kind == PING:
            await self.ws.send_bytes(frame)
        elif kind == GOAWAY:
            return False
        return True

    def _headers(self, block: bytes) -> dict[str, str]:
        raw = self.inflate.decompress(block)
        count, pos, headers = int.from_bytes(raw[:4], "big"), 4, {}
        for _ in range(count):
            n = int.from_bytes(raw[pos : pos + 4], "big")
            name = raw[pos + 4 : pos + 4 + n].decode()
            pos += 4 + n
            n = int.from_bytes(raw[pos : pos + 4], "big")
            headers[name] = raw[pos + 4 : pos + 4 + n].decode()
            pos += 4 + n
        return headers

    async def _control(self, kind: int, flags: int, data: bytes) -> None:
        await self.ws.send_bytes(
            struct.pack(">HHB", 0x8003, kind, flags) + len(data).to_bytes(3, "big") + data
        )

    async def _data(self, stream: int, data: bytes, flags: int = 0) -> None:
        await self.ws.send_bytes(struct.pack(">IB", stream, flags) + len(data).to_bytes(3, "big") + data)

    async def _open(self, stream: int, headers: dict[str, str]) -> None:
        block = self.deflate.compress(b"\0\0\0\0") + self.deflate.flush(zlib.Z_SYNC_FLUSH)
        await self._control(SYN_REPLY, 0, stream.to_bytes(4, "big") + block)
        fwd = self.forwards.setdefault(headers.get("requestid", ""), _Forward())
        self.by_stream[stream] = fwd
        if headers.get("streamtype") == "error":
            fwd.error_stream = stream
            return
        fwd.data_stream = stream
        port = headers.get("port", "")
        try:
            reader, fwd.writer = await asyncio.open_connection(self.pod_ip, int(port))
        except (OSError, ValueError) as exc:
            message = f"error forwarding port {port} to pod {self.pod_ip}: {exc}"
            await self._end(fwd, message.encode())
            return
        fwd.pump = asyncio.create_task(self._pump(fwd, reader))

    async def _pump(self, fwd: _Forward, reader: asyncio.StreamReader) -> None:
        """The pod's side to kubectl, then the end of both streams (kubectl waits for the error stream)."""
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(READ_SIZE):
                await self._data(fwd.data_stream, chunk)
        await self._end(fwd, b"")

    async def _end(self, fwd: _Forward, error: bytes) -> None:
        with contextlib.suppress(ConnectionError):
            await self._data(fwd.data_stream, b"", FLAG_FIN)
            if fwd.error_stream:
                await self._data(fwd.error_stream, error, FLAG_FIN)


async def pod_portforward(objects: Objects, request: web.Request, route: Route) -> web.StreamResponse:
    pod = objects.get(route.res, route.namespace or "", route.name)
    if (pod.get("status") or {}).get("phase") != "Running":
        raise errors.bad_request(f"unable to upgrade connection: pod {route.name} is not running")
    offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    protocol = next((p for p in (PROTOCOL, CHANNELS) if p in offered), None)
    if request.headers.get("Upgrade", "").lower() != "websocket" or protocol is None:
        raise errors.bad_request(
            f"Upgrade request required: t9k-local serves port-forward over WebSocket ({PROTOCOL} or "
            f"{CHANNELS}) only"
        )
    ports = _query_ports(request) if protocol == CHANNELS else []
    ws = web.WebSocketResponse(protocols=(protocol,), autoping=True)
    await ws.prepare(request)
    try:
        if protocol == PROTOCOL:
            await _Session(ws, pod["status"]["podIP"]).run()
        else:
            await _channels(ws, pod["status"]["podIP"], ports)
    finally:
        await ws.close()
    return ws


def _query_ports(request: web.Request) -> list[int]:
    try:
        ports = [int(p) for value in request.query.getall("ports", []) for p in value.split(",")]
    except ValueError:
        raise errors.bad_request("invalid port in the ports query parameter") from None
    if not ports or not all(0 < p < 65536 for p in ports):
        raise errors.bad_request('query parameter "ports" is required: one to 65535')
    return ports


async def _channels(ws: web.WebSocketResponse, pod_ip: str, ports: list[int]) -> None:
    """The kubelet's WebSocket port-forward (``v4.channel.k8s.io``, the Python clients'): for the i-th port,
    channel 2i carries data and 2i+1 errors, each opened by a frame holding the port (little-endian)."""
    writers: dict[int, asyncio.StreamWriter] = {}
    pumps = []

    async def pump(channel: int, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(READ_SIZE):
                await ws.send_bytes(bytes((channel,)) + chunk)

    for i, port in enumerate(ports):
        for channel in (2 * i, 2 * i + 1):
            await ws.send_bytes(bytes((channel,)) + port.to_bytes(2, "little"))
        try:
            reader, writers[2 * i] = await asyncio.open_connection(pod_ip, port)
        except OSError as exc:
            message = f"error forwarding port {port} to pod {pod_ip}: {exc}"
            await ws.send_bytes(bytes((2 * i + 1,)) + message.encode())
            continue
        pumps.append(asyncio.create_task(pump(2 * i, reader)))
    pumped = asyncio.gather(*pumps)
    pumped.add_done_callback(lambda _: asyncio.ensure_future(ws.close()))  # the pod side has ended
    try:
        async for msg in ws:
            if msg.type == WSMsgType.BINARY and msg.data and msg.data[0] in writers:
                writers[msg.data[0]].write(msg.data[1:])
                await writers[msg.data[0]].drain()
    finally:
        pumped.cancel()
        for writer in writers.values():
            writer.close()

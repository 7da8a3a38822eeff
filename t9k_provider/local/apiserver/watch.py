"""WATCH: a stream of a collection's (or one object's) events from a revision, with bookmarks, until the
timeout or the client's leaving."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from typing import Any

from aiohttp import web

from t9k_provider.kube.timeouts import within
from t9k_provider.local.apiserver import tables
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.hub import Frame, Hub, Watcher
from t9k_provider.local.apiserver.objects import Objects
from t9k_provider.local.apiserver.wire import JSON, Route, parse_bool, parse_int
from t9k_provider.local.storage.store import Compacted

log = logging.getLogger(__name__)
#: An idle watch gets a bookmark a minute, as Kubernetes' watch cache sends them, and one at its timeout: each
#: wakes the server and its client, and a watch's resourceVersion needs no fresher (the store keeps 50,000
#: revisions; an older one is answered 410 and the client relists). A client that left is noticed then too.
BOOKMARK_SECONDS = 60.0
MAX_CHUNK_FRAMES = 256  # frames written to a watch stream at once


class _Frames:
    """How one watch writes its events and bookmarks."""

    def __init__(self, objects: Objects, res: Resource, want_table: bool, include_object: str) -> None:
        self.objects, self.res, self.want_table, self.include_object = (
            objects,
            res,
            want_table,
            include_object,
        )

    def encode(self, frame: Frame) -> bytes:
        view = self.objects.view(self.res, frame.obj)
        if frame.text is not None and view is frame.obj and not self.want_table:
            return f'{{"type":"{frame.type}","object":{frame.text}}}\n'.encode()
        if self.want_table:
            view = tables.table(self.res, [view], view["metadata"]["resourceVersion"], self.include_object)
        return json.dumps({"type": frame.type, "object": view}, separators=(",", ":")).encode() + b"\n"

    def bookmark(self, revision: int | None = None, initial_end: bool = False) -> bytes:
        """Only sent with an empty queue (or at ``revision``), so it never skips undelivered events."""
        meta: dict[str, Any] = {"resourceVersion": str(revision or self.objects.store.revision)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": self.res.kind, "apiVersion": self.res.group_version, "metadata": meta}
        return json.dumps({"type": "BOOKMARK", "object": obj}).encode() + b"\n"


async def watch(
    objects: Objects, hub: Hub, request: web.Request, route: Route, want_table: bool
) -> web.StreamResponse:
    res = route.res
    send_initial = parse_bool(request, "sendInitialEvents")  # watch-list (W9): state, then a marker
    since = await _since(objects, request, send_initial)
    watcher = Watcher(
        res.storage_group,
        res.storage_resource,
        route.namespace if res.namespaced else None,
        _matcher(objects, request, route),
    )
    response = web.StreamResponse(status=200, headers={"Content-Type": JSON, "Cache-Control": "no-cache"})
    response.enable_chunked_encoding()
    try:
        initial = hub.open(watcher, since)
        opened_at = objects.store.revision
    except Compacted as exc:
        await response.prepare(request)
        expired = errors.expired(str(exc)).status()
        await response.write(json.dumps({"type": "ERROR", "object": expired}).encode() + b"\n")
        await response.write_eof()
        return response
    frames = _Frames(objects, res, want_table, request.query.get("includeObject", "Metadata"))
    try:
        await response.prepare(request)
        if initial:
            await response.write(b"".join(frames.encode(f) for f in initial))
        if send_initial:
            await response.write(frames.bookmark(opened_at, initial_end=True))
        await _stream(request, response, watcher, frames)
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away
    except Exception:
        # headers are sent: the stream can only end; the client sees EOF and re-watches
        log.exception("watch of %s failed", request.path_qs)
    finally:
        hub.close(watcher)
    return response


def _matcher(objects: Objects, request: web.Request, route: Route) -> Any:
    """The watch's label and field selectors (a watch of one object selects its name)."""
    field_selector = request.query.get("fieldSelector", "")
    if route.name:
        name_sel = f"metadata.name={route.name}"
        field_selector = f"{field_selector},{name_sel}" if field_selector else name_sel
    return objects.matcher(route.res, request.query.get("labelSelector", ""), field_selector)


async def _since(objects: Objects, request: web.Request, send_initial: bool) -> int | None:
    """The revision to watch from (None: the current state first); a future one is waited for."""
    rv_param = request.query.get("resourceVersion", "")
    if not rv_param or rv_param == "0" or send_initial:
        return None
    try:
        since = int(rv_param)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {rv_param}") from None
    if since > objects.store.revision:
        await _wait_for_revision(objects, since)
    return since


async def _stream(
    request: web.Request, response: web.StreamResponse, watcher: Watcher, frames: _Frames
) -> None:
    """Write the watcher's frames as they come, bookmarks while idle, until the timeout, the hub's closing
    the watcher (too slow), or the client's leaving."""
    timeout = parse_int(request, "timeoutSeconds")
    if not timeout:  # a negative one has expired already: the stream ends at once, as upstream's timer
        timeout = random.randint(300, 600)
    bookmarks = parse_bool(request, "allowWatchBookmarks")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            # With frames still queued (a slow client), a bookmark at the store's revision would skip them;
            # without it the client re-watches from its last event and gets them from the history.
            if bookmarks and watcher.queue.empty():
                await response.write(frames.bookmark())
            return
        try:
            frame = await within(watcher.queue.get(), min(remaining, BOOKMARK_SECONDS))
        except asyncio.TimeoutError:
            if request.transport is None or request.transport.is_closing():
                return
            if bookmarks:
                await response.write(frames.bookmark())
            continue
        if frame is None:
            return
        # One pass of the loop later, the writes already under way have queued their frames too: a burst of
        # writes reaches each watcher in fewer, larger sends (each send wakes the client).
        await asyncio.sleep(0)
        chunk, ended = [frames.encode(frame)], False
        while not watcher.queue.empty() and len(chunk) < MAX_CHUNK_FRAMES:
            nxt = watcher.queue.get_nowait()
            if nxt is None:  # closed by the hub (too slow): end after what was queued
                ended = True
                break
            chunk.append(frames.encode(nxt))
        await response.write(b"".join(chunk))
        if ended:
            return


async def _wait_for_revision(objects: Objects, wanted: int, patience: float = 3.0) -> None:
    """A watch from a future revision waits briefly, then gets 504 (a client of a wiped store relists)."""
    deadline = asyncio.get_running_loop().time() + patience
    while objects.store.revision < wanted:
        if asyncio.get_running_loop().time() >= deadline:
            raise errors.ApiError(
                504,
                "Timeout",
                f"Too large resource version: {wanted}, current: {objects.store.revision}",
                {
                    "causes": [
                        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                    ],
                    "retryAfterSeconds": 1,
                },
            )
        await asyncio.sleep(0.05)

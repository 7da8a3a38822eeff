"""LIST: a collection at a revision, page by page (``limit``, ``continue``), as JSON or a Table."""

from __future__ import annotations

import base64
import json
from typing import Any

from aiohttp import web

from t9k_provider.local.apiserver import tables
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.objects import Objects, store_key
from t9k_provider.local.apiserver.wire import Route, parse_int, respond, respond_text
from t9k_provider.local.storage.store import Key


class ItemCache:
    """Serialised list items, reused until the object changes: a LIST of many objects is mostly json.dumps."""

    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self._texts: dict[Key, dict[str, tuple[str, str]]] = {}  # key -> group/version -> (rv, json)
        objects.store.subscribe(lambda event: self._texts.pop(event.key, None))

    def text(self, res: Resource, obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        key = store_key(res, meta.get("namespace", ""), meta["name"])
        per_version = self._texts.setdefault(key, {})
        cached = per_version.get(res.group_version)
        if cached is not None and cached[0] == meta["resourceVersion"]:
            return cached[1]
        view = self.objects.view(res, obj)
        if not res.strategy.custom:  # built-in list items omit kind and apiVersion, as a real server's do
            view = {k: v for k, v in view.items() if k not in ("kind", "apiVersion")}
        text = json.dumps(view, separators=(",", ":"))
        per_version[res.group_version] = (meta["resourceVersion"], text)
        return text


def list_objects(
    objects: Objects, cache: ItemCache, request: web.Request, route: Route, want_table: bool
) -> web.Response:
    """LIST: at the current revision, an exact older one, or a continue token's; one page of ``limit``."""
    res = route.res
    revision = objects.store.revision
    snapshot: int | None = None  # an older revision to list at: Exact, or the first page's of a continue
    rv_param = request.query.get("resourceVersion", "")
    if rv_param and rv_param != "0":
        try:
            wanted = int(rv_param)
        except ValueError:
            raise errors.bad_request(f"invalid resource version: {rv_param}") from None
        if request.query.get("resourceVersionMatch") == "Exact":
            if wanted > revision:
                raise errors.ApiError(504, "Timeout", "Too large resource version", {"retryAfterSeconds": 1})
            snapshot = revision = wanted
    token = request.query.get("continue", "")
    start = ""
    if token:
        snapshot, start = _decode_token(objects, token)
        revision = snapshot
    items = objects.list(
        res,
        route.namespace,
        request.query.get("labelSelector", ""),
        request.query.get("fieldSelector", ""),
        revision=snapshot,
    )
    if start:
        items = [o for o in items if f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" > start]
    limit = parse_int(request, "limit") or 0
    next_token = ""
    if limit > 0 and len(items) > limit:
        last = items[limit - 1]["metadata"]
        items = items[:limit]
        start = f"{last.get('namespace', '')}/{last['name']}"
        next_token = base64.urlsafe_b64encode(json.dumps({"rv": revision, "start": start}).encode()).decode()
    if want_table:
        views = [objects.view(res, o) for o in items]
        return respond(
            tables.table(
                res, views, str(revision), request.query.get("includeObject", "Metadata"), next_token
            )
        )
    metadata: dict[str, Any] = {"resourceVersion": str(revision)}
    if next_token:
        metadata["continue"] = next_token
    head = json.dumps(
        {"kind": res.list_kind, "apiVersion": res.group_version, "metadata": metadata},
        separators=(",", ":"),
    )
    body = ",".join(cache.text(res, o) for o in items)
    return respond_text(f'{head[:-1]},"items":[{body}]}}')


def _decode_token(objects: Objects, token: str) -> tuple[int, str]:
    """(revision of the first page, last key served) from a continue token; 410 once compacted."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        revision, start = int(decoded["rv"]), str(decoded["start"])
    except (ValueError, KeyError, TypeError):
        raise errors.bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        ) from None
    if revision < objects.store.compacted:
        raise errors.expired(
            "The provided continue parameter is too old to display a consistent list result. You can "
            "start a new list without the continue parameter, or use the continue token in this response "
            "to retrieve the remainder of the results. Continuing with the provided token results in an "
            "inconsistent list - objects that were created, modified, or deleted between the time the "
            "first chunk was returned and now may show up in the list."
        )
    return revision, start

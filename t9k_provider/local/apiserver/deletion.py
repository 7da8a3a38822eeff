"""DELETE: its options, and the deletion of a collection (``deletecollection``)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.objects import DeleteOptions, Objects
from t9k_provider.local.apiserver.wire import Route, parse_bool, parse_int, read_body, respond


async def delete_options(request: web.Request) -> DeleteOptions:
    """A DELETE's options, from its body (DeleteOptions) and its query."""
    body = await read_body(request)
    if body is not None and not isinstance(body, dict):
        raise errors.bad_request("the body of a DELETE must be a DeleteOptions object")
    body = body or {}
    opts = body_delete_options(body)
    if opts.grace_period is None:
        opts.grace_period = parse_int(request, "gracePeriodSeconds")
    if opts.orphan_dependents is None and "orphanDependents" in request.query:
        opts.orphan_dependents = parse_bool(request, "orphanDependents")
    opts.propagation = opts.propagation or request.query.get("propagationPolicy") or None
    if not body.get("dryRun"):
        opts.dry_run = "All" in request.query.getall("dryRun", [])
    return opts


def body_delete_options(body: dict[str, Any]) -> DeleteOptions:
    """The options a DeleteOptions object holds (a DELETE's body, an Eviction's ``deleteOptions``); a field
    of the wrong type is a 400, as Go's decoding of the body would answer."""
    pre = body.get("preconditions") or {}
    grace = body.get("gracePeriodSeconds")
    expected = [
        ("preconditions", pre, dict),
        ("gracePeriodSeconds", grace, int),
        ("orphanDependents", body.get("orphanDependents"), bool),
        ("propagationPolicy", body.get("propagationPolicy"), str),
    ]
    for field, value, kind in expected:
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            raise errors.bad_request(
                f"json: cannot unmarshal {type(value).__name__} into Go struct field DeleteOptions.{field}"
            )
    dry = body.get("dryRun") or []
    return DeleteOptions(
        grace_period=grace,
        propagation=body.get("propagationPolicy") or None,
        orphan_dependents=body.get("orphanDependents"),
        uid=pre.get("uid"),
        resource_version=pre.get("resourceVersion"),
        dry_run="All" in (dry if isinstance(dry, list) else [dry]),
    )


async def delete_collection(objects: Objects, request: web.Request, route: Route) -> web.Response:
    res = route.res
    if res.namespaced and route.namespace is None:
        raise errors.method_not_allowed()
    opts = await delete_options(request)
    items = objects.list(
        res,
        route.namespace,
        request.query.get("labelSelector", ""),
        request.query.get("fieldSelector", ""),
    )
    results = []
    for obj in items:
        meta = obj["metadata"]
        try:
            result = objects.delete(res, meta.get("namespace", ""), meta["name"], opts)
        except errors.ApiError as exc:
            if exc.code == 404:
                continue
            raise
        if result.body.get("kind") != "Status":
            results.append(result.body)
    items_out = [
        {k: v for k, v in o.items() if k not in ("kind", "apiVersion")} if not res.strategy.custom else o
        for o in results
    ]
    return respond(
        {
            "kind": res.list_kind,
            "apiVersion": res.group_version,
            "metadata": {"resourceVersion": str(objects.store.revision)},
            "items": items_out,
        }
    )

"""DELETE: its options, and the deletion of a collection (``deletecollection``)."""

from __future__ import annotations

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
    if grace is None:
        grace = parse_int(request, "gracePeriodSeconds")
    orphan = body.get("orphanDependents")
    if orphan is None and "orphanDependents" in request.query:
        orphan = parse_bool(request, "orphanDependents")
    dry = body.get("dryRun") or request.query.getall("dryRun", [])
    return DeleteOptions(
        grace_period=int(grace) if grace is not None else None,
        propagation=body.get("propagationPolicy") or request.query.get("propagationPolicy") or None,
        orphan_dependents=orphan,
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

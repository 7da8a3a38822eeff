"""Subresources with their own semantics: pods/binding, pods/log, namespaces/finalize, scale."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any

from aiohttp import web

from t9k_provider.kube.timestamps import now_rfc3339, parse_timestamp
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.node import NodeStreams
from t9k_provider.local.apiserver.objects import Objects, store_key
from t9k_provider.local.apiserver.wire import Route, parse_bool, parse_int, read_body, respond
from t9k_provider.local.machinery.jsonvalues import get_path, json_copy
from t9k_provider.local.machinery.patch import apply_patch
from t9k_provider.local.machinery.patcherrors import PatchError

log = logging.getLogger(__name__)


def bind(objects: Objects, route: Route, body: Any) -> web.Response:
    res, ns, name = route.res, route.namespace or "", route.name
    pod = objects.get(res, ns, name)
    target = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
    if not target:
        raise errors.invalid(
            "Binding",
            "",
            name,
            [{"reason": "FieldValueRequired", "message": "Required value", "field": "target.name"}],
            f'Binding "{name}" is invalid: target.name: Required value',
        )
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        raise errors.conflict(
            "pods/binding", "", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
        )
    if pod["metadata"].get("deletionTimestamp"):
        raise errors.conflict(
            "pods/binding", "", name, f"pod {name} is being deleted, cannot be assigned to a host"
        )
    new = json_copy(pod)
    new["spec"]["nodeName"] = target
    status = new.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
        }
    )
    status["conditions"] = conditions
    objects.store.update(res.storage_group, res.storage_resource, new)
    return respond(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201
    )


def finalize(objects: Objects, res: Resource, name: str, body: Any) -> dict[str, Any]:
    current = objects.get(res, "", name)
    if not isinstance(body, dict):
        raise errors.bad_request("the body of a finalize must be a Namespace")
    new = json_copy(current)
    new["spec"] = {
        **(current.get("spec") or {}),
        "finalizers": list(((body.get("spec") or {}).get("finalizers")) or []),
    }
    return objects.view(res, objects.write(res, current, new))


async def scale(objects: Objects, request: web.Request, route: Route) -> web.Response:
    res, ns, name = route.res, route.namespace or "", route.name
    paths = res.strategy.scale or {}
    spec_path = paths.get("specReplicasPath", ".spec.replicas")
    status_path = paths.get("statusReplicasPath", ".status.replicas")
    current = objects.get(res, ns, name)
    scale = _scale_of(res, current, spec_path, status_path)
    if request.method == "GET":
        return respond(scale)
    if request.method == "PUT":
        body = await read_body(request)
    elif request.method == "PATCH":
        ctype = (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        try:
            # a Scale has no merge keys; strategic merge is accepted for built-in kinds only
            fields = None if res.strategy.merge_fields is None else {}
            body = apply_patch(json_copy(scale), await request.read(), ctype, fields)
        except PatchError as exc:
            raise errors.ApiError(exc.code, exc.reason, exc.message) from exc
    else:
        raise errors.method_not_allowed()
    replicas = ((body or {}).get("spec") or {}).get("replicas") if isinstance(body, dict) else None
    if not isinstance(replicas, int) or replicas < 0:
        raise errors.invalid(
            "Scale",
            "autoscaling",
            name,
            [
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {replicas}: must be a non-negative integer",
                    "field": "spec.replicas",
                }
            ],
            f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: {replicas}',
        )
    new = json_copy(current)
    rv = (body.get("metadata") or {}).get("resourceVersion")
    if rv:  # a precondition of the write
        new["metadata"]["resourceVersion"] = rv
    _set_path(new, spec_path, replicas)
    updated = objects.write(res, current, new)
    return respond(_scale_of(res, updated, spec_path, status_path))


async def pod_log(
    objects: Objects, node: NodeStreams, request: web.Request, route: Route
) -> web.StreamResponse:
    res, ns, name = route.res, route.namespace or "", route.name
    pod = objects.get(res, ns, name)
    status = pod.get("status") or {}
    container = pod_container(pod, request.query.get("container", ""))
    statuses = [*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())]
    cstatus = next((s for s in statuses if s.get("name") == container), None)
    restart, follow = _log_instance(
        cstatus, container, name, parse_bool(request, "previous"), parse_bool(request, "follow")
    )
    since_time = _since(request)
    tail = parse_int(request, "tailLines")
    limit = parse_int(request, "limitBytes")
    if (tail is not None and tail < 0) or (limit is not None and limit <= 0):
        raise errors.bad_request("tailLines and limitBytes must be positive")
    uid = pod["metadata"]["uid"]
    key = store_key(res, ns, name)

    async def pod_gone() -> bool:
        current = objects.store.get(key)
        return current is None or current["metadata"].get("uid") != uid

    response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    chunks = node.container_log(
        pod,
        container,
        restart,
        follow=follow,
        timestamps=parse_bool(request, "timestamps"),
        tail_lines=tail,
        since_time=since_time,
        limit_bytes=limit,
        pod_gone=pod_gone,
    )
    try:
        async for chunk in chunks:
            await response.write(chunk)
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away
    except Exception:
        log.exception("log stream of %s failed", request.path_qs)
    return response


def pod_container(pod: dict[str, Any], requested: str) -> str:
    """The container a log, exec or attach request is for (the only one when none is named)."""
    spec, name = pod.get("spec") or {}, pod["metadata"]["name"]
    names = [c.get("name") for c in spec.get("containers") or ()]
    init_names = [c.get("name") for c in spec.get("initContainers") or ()]
    if not requested:
        if len(names) != 1:
            message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
            if init_names:
                message += f" or one of the init containers: [{' '.join(init_names)}]"
            raise errors.bad_request(message)
        return names[0]
    if requested not in names and requested not in init_names:
        raise errors.bad_request(f"container {requested} is not valid for pod {name}")
    return requested


def _log_instance(
    cstatus: dict[str, Any] | None, container: str, pod: str, previous: bool, follow: bool
) -> tuple[int, bool]:
    """The run whose log is served (its restart index) and whether to follow it, as the kubelet decides."""
    status = cstatus or {}
    restarts = int(status.get("restartCount") or 0)
    state, last = status.get("state") or {}, status.get("lastState") or {}
    if previous:
        if not last.get("terminated") or restarts == 0:
            raise errors.bad_request(f'previous terminated container "{container}" in pod "{pod}" not found')
        return restarts - 1, False
    if "running" in state or "terminated" in state:
        return restarts, follow
    if last.get("terminated") and restarts > 0:  # e.g. CrashLoopBackOff: the last run's output
        return restarts - 1, False
    reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
    if reason == "ErrImagePull":
        reason = "image can't be pulled"
    elif reason == "ImagePullBackOff":
        reason = "trying and failing to pull image"
    raise errors.bad_request(f'container "{container}" in pod "{pod}" is waiting to start: {reason}')


def _since(request: web.Request) -> datetime | None:
    seconds = parse_int(request, "sinceSeconds")
    if seconds is not None:
        if seconds <= 0:
            raise errors.bad_request("sinceSeconds must be a positive integer")
        return datetime.now(timezone.utc) - timedelta(seconds=seconds)
    text = request.query.get("sinceTime")
    if not text:
        return None
    try:
        return parse_timestamp(text)
    except ValueError:
        raise errors.bad_request(f'parsing time "{text}" as RFC3339: cannot parse') from None


def _set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.strip(".").split(".")
    for part in parents:
        obj = obj.setdefault(part, {})
    obj[leaf] = value


def _scale_of(res: Resource, obj: dict[str, Any], spec_path: str, status_path: str) -> dict[str, Any]:
    meta = obj["metadata"]
    status: dict[str, Any] = {"replicas": get_path(obj, status_path) or 0}
    selector = res.strategy.scale_selector(obj)
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": get_path(obj, spec_path) or 0},
        "status": status,
    }

"""Request parsing and response encoding shared by the API server's handlers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from t9k_provider.local.apiserver import protobuf, tables
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.machinery.jsonvalues import MAX_DEPTH, too_deep

JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
BODY_TYPES = ["application/json", "application/yaml", PROTOBUF]
TRUE = {"1", "t", "true"}
_FALSE = {"0", "f", "false"}


class _BodyLoader(yaml.SafeLoader):
    """Refuses flow nesting deeper than MAX_DEPTH as it scans: PyYAML's scanner is quadratic in that depth
    (libyaml's C loader is fast but overflows the stack, killing the server, on a deep enough body)."""

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        if self.flow_level >= MAX_DEPTH:
            raise yaml.scanner.ScannerError(None, None, f"nesting deeper than {MAX_DEPTH}", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)


@dataclass
class Route:
    res: Resource
    namespace: str | None  # None: all namespaces (collection) or a cluster-scoped resource
    name: str
    subresource: str


def parse_bool(request: web.Request, name: str) -> bool:
    """Go ``strconv.ParseBool``, as kube-apiserver parses query booleans: ``true/True/TRUE/1/t`` and the false
    equivalents."""
    value = request.query.get(name)
    if value is None or value == "":
        return False
    lowered = value.lower()
    if lowered in TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise errors.bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def parse_int(request: web.Request, name: str) -> int | None:
    value = request.query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax') from None


def respond(body: Any, status: int = 200) -> web.Response:
    return respond_text(json.dumps(body, separators=(",", ":")), status)


def respond_text(text: str, status: int = 200) -> web.Response:
    """A JSON body already encoded (an object's committed text). Ends with a newline, as Go's json.Encoder
    (kube-apiserver's serializer) writes it: clients quote error bodies verbatim."""
    return web.Response(text=text + "\n", status=status, content_type=JSON)


def error_response(exc: errors.ApiError) -> web.Response:
    """The error's Status; one that says when to retry says so in ``Retry-After`` (``ErrorNegotiated``)."""
    response = respond(exc.status(), exc.code)
    retry_after = (exc.details or {}).get("retryAfterSeconds")
    if retry_after:
        response.headers["Retry-After"] = str(retry_after)
    return response


def check_accept(request: web.Request) -> bool:
    """Whether JSON is acceptable (else 406 NotAcceptable); returns True when a Table was asked for."""
    accept = request.headers.get("Accept", "")
    if not accept.strip():
        return False
    acceptable = False
    for part in accept.split(","):
        media = part.split(";", 1)[0].strip().lower()
        if media in ("application/json", "*/*", "application/*", "application/json-seq", "text/plain"):
            acceptable = True
    if not acceptable:
        raise errors.not_acceptable(accept)
    return tables.wants_table(accept)


async def read_body(request: web.Request) -> Any:
    raw = await request.read()
    ctype = (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    if ctype and ctype not in BODY_TYPES:
        raise errors.unsupported_media_type(BODY_TYPES)
    if ctype == PROTOBUF:
        try:
            return protobuf.decode_object(raw)
        except protobuf.UnsupportedKind:
            raise errors.unsupported_media_type(BODY_TYPES[:2]) from None
        except protobuf.ProtobufError as exc:
            raise errors.bad_request(f"unable to decode the protobuf body: {exc}") from None
    if not raw.strip():
        return None
    try:
        if ctype == "application/yaml":
            return load_yaml(raw)
        body = json.loads(raw.decode())
        if too_deep(body):
            raise RecursionError
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from None
    except RecursionError:
        raise errors.bad_request(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    return body


def load_yaml(raw: bytes) -> Any:
    """A YAML request body; nesting deeper than MAX_DEPTH is a ``yaml.YAMLError``."""
    try:
        value = yaml.load(raw, Loader=_BodyLoader)
    except RecursionError:
        value = None
    else:
        if not too_deep(value):
            return value
    raise yaml.YAMLError(f"the body nests deeper than {MAX_DEPTH} levels")

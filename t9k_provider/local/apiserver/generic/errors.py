"""Kubernetes ``Status`` error objects with the reasons and messages of the real API server."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error answered to the client as a ``Status`` object."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        return status_object(self.code, self.reason, self.message, self.details)


def status_object(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        body["details"] = details
    body["code"] = code
    return body


def qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    return {"name": name, **({"group": group} if group else {}), "kind": kind}


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{qualified(plural, group)} "{name}" not found', _details(name, group, plural)
    )


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", None)


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(plural, group)} "{name}" already exists',
        _details(name, group, plural),
    )


def conflict(plural: str, group: str, name: str, why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
        _details(name, group, plural),
    )


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]], message: str) -> ApiError:
    return ApiError(422, "Invalid", message, {**_details(name, group, kind), "causes": causes})


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str, name: str = "", kind: str = "", group: str = "") -> ApiError:
    return ApiError(403, "Forbidden", message, _details(name, group, kind) if kind else None)


def method_not_allowed() -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def not_acceptable(accept: str) -> ApiError:
    return ApiError(
        406,
        "NotAcceptable",
        f"only the following media types are accepted: application/json, application/yaml "
        f"(requested: {accept})",
    )


def unsupported_media_type(accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def internal(message: str) -> ApiError:
    return ApiError(500, "", message)

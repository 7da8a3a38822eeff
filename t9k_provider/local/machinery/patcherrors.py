"""The refusals of a PATCH: 400 for a patch that cannot be decoded, 422 for one that cannot be applied."""

from __future__ import annotations

_INVALID_PATCH_MESSAGE = "the server rejected our request due to an error in our request"


class PatchError(Exception):
    """A patch the server refuses (400/413/415/422); ``code``/``reason``/``message`` go into the Status.

    ``detail`` says what exactly failed, for logs: the real server hides it behind a generic
    message for JSON patch failures.
    """

    def __init__(self, code: int, reason: str, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.detail = detail or message


def bad_request(message: str) -> PatchError:
    return PatchError(400, "BadRequest", message)


def invalid(detail: str) -> PatchError:
    return PatchError(422, "Invalid", _INVALID_PATCH_MESSAGE, detail)

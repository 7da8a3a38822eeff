"""Name syntax checks of apimachinery ``util/validation``, returning the server's messages (none if valid)."""

from __future__ import annotations

import re
from collections.abc import Callable

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"

#: A name rule of the object-meta validation: (name, is a generateName prefix) -> messages.
NameCheck = Callable[[str, bool], list[str]]

_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """``validation.RegexError``, double spaces included."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _check(value: str, limit: int, message: str, fmt: str, *examples: str) -> list[str]:
    errs = [max_len_error(limit)] if len(value) > limit else []
    if not re.fullmatch(fmt, value):
        errs.append(regex_error(message, fmt, *examples))
    return errs


def is_dns1123_label(value: str) -> list[str]:
    message = (
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character"
    )
    return _check(value, 63, message, _DNS1123_LABEL_FMT, "my-name", "123-abc")


def is_dns1123_subdomain(value: str) -> list[str]:
    message = (
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character"
    )
    return _check(value, 253, message, _DNS1123_SUBDOMAIN_FMT, "example.com")


def is_dns1035_label(value: str) -> list[str]:
    message = (
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
        "start with an alphabetic character, and end with an alphanumeric character"
    )
    return _check(value, 63, message, _DNS1035_LABEL_FMT, "my-name", "abc-123")


def is_qualified_name(value: str) -> list[str]:
    """Label keys, annotation keys, finalizers: ``[prefix/]name``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + msg for msg in is_dns1123_subdomain(prefix)]
    else:
        return [
            "a qualified name "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not re.fullmatch(_QUALIFIED_NAME_FMT, name):
        errs.append(
            "name part "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    message = (
        "a valid label must be an empty string or consist of alphanumeric characters, "
        "'-', '_' or '.', and must start and end with an alphanumeric character"
    )
    return _check(value, 63, message, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")


def _mask_trailing_dash(name: str) -> str:
    """generateName prefixes may end in '-'; upstream masks the last two characters with one 'a'."""
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool) -> list[str]:
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def name_is_path_segment(name: str, prefix: bool) -> list[str]:
    """``path.IsValidPathSegmentName``: RBAC and APIService names may hold any character a URL segment can."""
    if name in (".", ".."):
        return [f'may not be "{name}"']
    return [f"may not contain '{c}'" for c in "/%" if c in name]

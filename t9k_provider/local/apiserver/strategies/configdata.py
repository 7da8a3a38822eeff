"""ConfigMaps and Secrets: config keys, the 1 MiB data limit, ``immutable``; Secret data must be base64."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.generic.validation import (
    CONFIG_KEY,
    CONFIG_KEY_MSG,
    IMMUTABLE,
    as_map,
    as_text,
)
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.jsonvalues import json_equal
from t9k_provider.local.machinery.schema import is_base64
from t9k_provider.local.machinery.selectors import field_getter

_CONFIG_SIZE_LIMIT = 1024 * 1024


class ConfigMapStrategy(Strategy):
    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        _config_keys(obj, ("data", "binaryData"), out)

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        _immutable_data(old, new, ("data", "binaryData"), out)


class SecretStrategy(Strategy):
    field_selectors = {"type": field_getter("type")}

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        _config_keys(obj, ("data",), out)
        for key, value in as_map(obj.get("data")).items():
            if isinstance(value, str) and not is_base64(value):
                out.append(fe.invalid(f"data[{key}]", "<value omitted>", "must be base64 encoded"))
        decoding.text_field(obj, "type", "type", out)

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        _immutable_data(old, new, ("data",), out)
        if (as_text(old.get("type")) or "Opaque") != (as_text(new.get("type")) or "Opaque"):
            out.append(fe.invalid("type", as_text(new.get("type")), IMMUTABLE))


def _config_keys(obj: dict, sections: tuple[str, ...], out: list[Cause]) -> None:
    seen: dict[str, str] = {}
    size = 0
    for section in sections:
        for key, value in decoding.string_map(obj, section, section, out).items():
            path = f"{section}[{key}]"
            if len(key) > 253:
                out.append(fe.invalid(path, key, "must be no more than 253 characters"))
            if not CONFIG_KEY.match(key):
                out.append(fe.invalid(path, key, CONFIG_KEY_MSG))
            if key in (".", ".."):
                out.append(fe.invalid(path, key, f"must not be '{key}'"))
            if key in seen:
                out.append(fe.invalid(path, key, f"duplicate of key present in {seen[key]}"))
            seen.setdefault(key, section)
            size += len(value)
    if size > _CONFIG_SIZE_LIMIT:
        out.append(fe.too_long("", _CONFIG_SIZE_LIMIT))


def _immutable_data(old: dict, new: dict, sections: tuple[str, ...], out: list[Cause]) -> None:
    if old.get("immutable") is not True:
        return
    detail = "field is immutable when `immutable` is set"
    if new.get("immutable") is not True:
        out.append(fe.forbidden("immutable", detail))
    for key in sections:
        if not json_equal(as_map(old.get(key)), as_map(new.get(key))):
            out.append(fe.forbidden(key, detail))


CONFIGMAPS = Resource.builtin("", "ConfigMap", ConfigMapStrategy(), short_names=["cm"])
SECRETS = Resource.builtin("", "Secret", SecretStrategy())


ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"


def root_ca_config_map(namespace: str, ca: str) -> dict[str, Any]:
    """The CA bundle every namespace publishes (kube-controller-manager's ``root-ca-cert-publisher``)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": ROOT_CA_CONFIG_MAP,
            "namespace": namespace,
            "annotations": {
                "kubernetes.io/description": "Contains a CA bundle that can be used to verify the "
                "kube-apiserver when using internal endpoints such as the internal service IP or "
                "kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes "
                "clusters."
            },
        },
        "data": {"ca.crt": ca},
    }

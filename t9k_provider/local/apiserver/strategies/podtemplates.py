"""PodTemplates: a stored pod template; only its strategic merge keys are its own."""

from __future__ import annotations

from t9k_provider.local.apiserver.patch import MergeField
from t9k_provider.local.apiserver.resources import Resource
from t9k_provider.local.apiserver.strategies.base import Strategy
from t9k_provider.local.apiserver.strategies.podspec import POD_TEMPLATE_FIELDS


class PodTemplateStrategy(Strategy):
    merge_fields = {"template": MergeField(node=POD_TEMPLATE_FIELDS)}


RESOURCE = Resource.builtin("", "PodTemplate", PodTemplateStrategy())

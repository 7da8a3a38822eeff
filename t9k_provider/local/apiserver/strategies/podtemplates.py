"""PodTemplates: a stored pod template; only its strategic merge keys are its own."""

from __future__ import annotations

from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.strategies.podspec import POD_TEMPLATE_FIELDS
from t9k_provider.local.machinery.strategicpatch import MergeField


class PodTemplateStrategy(Strategy):
    merge_fields = {"template": MergeField(node=POD_TEMPLATE_FIELDS)}


RESOURCE = Resource.builtin("", "PodTemplate", PodTemplateStrategy())

"""One operator per T9k Job kind, ``<Kind>Operator``: the same behaviour as ``T9kJobOperator``, restricted to
that kind.

A manifest of another kind fails before any API call, so a DAG reads as what it runs. The classes are made
from the list of kinds (`jobs.constants.KIND_NAMES`, the keys of `jobs.KINDS`), so a new kind gets its
operator without the models being imported while a DAG file is parsed; each is built on first use
(``kind_operator``, or the module attribute ``<Kind>Operator``): a DAG file pays only for the kinds it uses.
"""

from __future__ import annotations

import types

from t9k_provider.jobs.constants import KIND_NAMES
from t9k_provider.operators.job import T9kJobOperator


def kind_operator(kind: str) -> type[T9kJobOperator]:
    """The operator class of ``kind`` (one of `KIND_NAMES`), built once."""
    name = f"{kind}Operator"
    built = globals().get(name)
    if built is None:

        def body(namespace: dict[str, object]) -> None:
            namespace.update(__module__=__name__, job_kind=kind)

        built = globals()[name] = types.new_class(name, (T9kJobOperator,), exec_body=body)
    return built


def __getattr__(name: str) -> type[T9kJobOperator]:
    kind = name.removesuffix("Operator")
    if kind == name or kind not in KIND_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return kind_operator(kind)

"""One operator per T9k Job kind, ``<Kind>Operator``: the same behaviour as ``T9kJobOperator``, restricted to
that kind.

A manifest of another kind fails before any API call, so a DAG reads as what it runs. The classes are made
from the list of kinds (`jobs.constants.KIND_NAMES`, the keys of `jobs.KINDS`), so a new kind gets its
operator without the models being imported while a DAG file is parsed.
"""

from __future__ import annotations

import types

from t9k_provider.jobs.constants import KIND_NAMES
from t9k_provider.operators.job import T9kJobOperator


def _kind_operator(kind: str) -> type[T9kJobOperator]:
    def body(namespace: dict[str, object]) -> None:
        namespace.update(__module__=__name__, job_kind=kind)

    return types.new_class(f"{kind}Operator", (T9kJobOperator,), exec_body=body)


#: Operator class by kind, in the order of `KIND_NAMES`.
KIND_OPERATORS: dict[str, type[T9kJobOperator]] = {kind: _kind_operator(kind) for kind in KIND_NAMES}
globals().update({cls.__name__: cls for cls in KIND_OPERATORS.values()})

"""Label and field selectors with the grammar, validation and error messages of apimachinery.

Label selectors follow ``pkg/labels/selector.go`` (lexer, parser, ``Requirement.Matches``); field
selectors follow ``pkg/fields/selector.go`` plus the selectable fields each resource's strategy declares.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from t9k_provider.local.machinery.fielderrors import aggregate, invalid
from t9k_provider.local.machinery.names import is_qualified_name, is_valid_label_value


class SelectorError(ValueError):
    """A selector the server rejects with 400 BadRequest; the message is the server's."""


# ------------------------------------------------------------------------------- label selectors

_IN, _NOT_IN, _EQ, _DEQ, _NEQ, _GT, _LT = "in", "notin", "=", "==", "!=", "gt", "lt"
_EXISTS, _NOT_EXISTS = "exists", "!"
_BINARY_OPERATORS = ", ".join([_IN, _NOT_IN, _EQ, _DEQ, _NEQ, _GT, _LT])
_INT64 = re.compile(r"[+-]?[0-9]+\Z")


def _parse_int64(text: str) -> int | None:
    if not _INT64.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.operator in (_IN, _EQ, _DEQ):
            return present and labels[self.key] in self.values
        if self.operator in (_NOT_IN, _NEQ):
            return not present or labels[self.key] not in self.values
        if self.operator == _EXISTS:
            return present
        if self.operator == _NOT_EXISTS:
            return not present
        if not present or len(self.values) != 1:
            return False
        actual, bound = _parse_int64(labels[self.key]), _parse_int64(self.values[0])
        if actual is None or bound is None:
            return False
        return actual > bound if self.operator == _GT else actual < bound


@dataclass(frozen=True)
class LabelSelector:
    """AND of requirements; no requirements matches everything, ``nothing`` matches no object."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: dict[str, str] | None) -> bool:
        return not self.nothing and all(r.matches(labels or {}) for r in self.requirements)


def new_requirement(key: str, operator: str, values: Iterable[str]) -> Requirement:
    """Build a validated requirement (``labels.NewRequirement``); raises SelectorError."""
    vals = tuple(values)
    errors = [invalid("key", key, msg) for msg in _key_errors(key)]
    if operator in (_IN, _NOT_IN) and not vals:
        errors.append(invalid("values", list(vals), "for 'in', 'notin' operators, values set can't be empty"))
    elif operator in (_EQ, _DEQ, _NEQ) and len(vals) != 1:
        errors.append(invalid("values", list(vals), "exact-match compatibility requires one single value"))
    elif operator in (_EXISTS, _NOT_EXISTS) and vals:
        errors.append(invalid("values", list(vals), "values set must be empty for exists and does not exist"))
    elif operator in (_GT, _LT):
        if len(vals) != 1:
            errors.append(
                invalid("values", list(vals), "for 'Gt', 'Lt' operators, exactly one value is required")
            )
        for i, value in enumerate(vals):
            if _parse_int64(value) is None:
                errors.append(
                    invalid(f"values[{i}]", value, "for 'Gt', 'Lt' operators, the value must be an integer")
                )
    for i, value in enumerate(vals):
        problems = is_valid_label_value(value)
        if problems:
            errors.append(invalid(f"values[{i}][{key}]", value, "; ".join(problems)))
    if errors:
        raise SelectorError(aggregate(errors))
    return Requirement(key, operator, vals)


def _key_errors(key: str) -> list[str]:
    problems = is_qualified_name(key)
    return ["; ".join(problems)] if problems else []


# Tokens of the label selector lexer.
_ID, _EOS, _COMMA, _OPEN, _CLOSE = "identifier", "end", ",", "(", ")"
_SPECIAL = set("=!(),<>")
_SYMBOLS = {"=": _EQ, "==": _DEQ, "!=": _NEQ, "!": _NOT_EXISTS, ">": _GT, "<": _LT, ",": _COMMA}
_SYMBOLS.update({"(": _OPEN, ")": _CLOSE})
_KEYWORDS = {"in": _IN, "notin": _NOT_IN}
_WHITESPACE = " \t\r\n"


def _lex(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append((_EOS, ""))
            return tokens
        if text[i] in _SPECIAL:
            # Longest run of special characters that still spells a symbol, like the Go lexer.
            j, last = i, None
            while j < n and text[j] in _SPECIAL:
                if text[i : j + 1] in _SYMBOLS:
                    last = j + 1
                elif last is not None:
                    break
                j += 1
            assert last is not None  # every single special character is a symbol
            literal = text[i:last]
            tokens.append((_SYMBOLS[literal], literal))
            i = last
        else:
            j = i
            while j < n and text[j] not in _SPECIAL and text[j] not in _WHITESPACE:
                j += 1
            literal = text[i:j]
            tokens.append((_KEYWORDS.get(literal, _ID), literal))
            i = j


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def lookahead(self, values: bool) -> tuple[str, str]:
        tok, lit = self.tokens[self.pos]
        if values and tok in (_IN, _NOT_IN):
            tok = _ID
        return tok, lit

    def consume(self, values: bool) -> tuple[str, str]:
        token = self.lookahead(values)
        self.pos += 1
        return token

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self.lookahead(True)
            if tok in (_ID, _NOT_EXISTS):
                try:
                    requirements.append(self.requirement())
                except SelectorError as exc:
                    raise SelectorError(f"unable to parse requirement: {exc}") from None
                tok, lit = self.consume(True)
                if tok == _EOS:
                    return requirements
                if tok != _COMMA:
                    raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
                tok2, lit2 = self.lookahead(True)
                if tok2 not in (_ID, _NOT_EXISTS):
                    raise SelectorError(f"found '{lit2}', expected: identifier after ','")
            elif tok == _EOS:
                return requirements
            else:
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Requirement:
        operator = ""
        tok, lit = self.consume(True)
        if tok == _NOT_EXISTS:
            operator = _NOT_EXISTS
            tok, lit = self.consume(True)
        if tok != _ID:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key = lit
        problems = _key_errors(key)
        if problems:
            raise SelectorError(invalid("<nil>", key, problems[0]).error())
        if operator == _NOT_EXISTS or self.lookahead(True)[0] in (_EOS, _COMMA):
            return new_requirement(key, operator or _EXISTS, ())
        tok, lit = self.consume(False)
        if tok not in (_IN, _NOT_IN, _EQ, _DEQ, _NEQ, _GT, _LT):
            raise SelectorError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        operator = tok
        values = self.value_set() if operator in (_IN, _NOT_IN) else self.exact_value()
        return new_requirement(key, operator, values)

    def value_set(self) -> list[str]:
        tok, lit = self.consume(True)
        if tok != _OPEN:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead(True)
        if tok in (_ID, _COMMA):
            values = self.identifiers()
            tok, _ = self.consume(True)
            if tok != _CLOSE:
                raise SelectorError(f"found '{lit}', expected: ')'")
            return values
        if tok == _CLOSE:
            self.consume(True)
            return [""]
        raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")

    def identifiers(self) -> list[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.consume(True)
            if tok == _ID:
                values.add(lit)
                tok2, lit2 = self.lookahead(True)
                if tok2 == _COMMA:
                    continue
                if tok2 == _CLOSE:
                    return sorted(values)
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _COMMA:
                if not values:
                    values.add("")
                tok2, _ = self.lookahead(True)
                if tok2 == _CLOSE:
                    values.add("")
                    return sorted(values)
                if tok2 == _COMMA:
                    self.consume(True)
                    values.add("")
            else:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        tok, _ = self.lookahead(True)
        if tok in (_EOS, _COMMA):
            return [""]
        tok, lit = self.consume(True)
        if tok == _ID:
            return [lit]
        raise SelectorError(f"found '{lit}', expected: identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse a ``labelSelector`` query value; raises SelectorError with the server's message."""
    return LabelSelector(tuple(_LabelParser(text).parse()))


_SPEC_OPERATORS = {"In": _IN, "NotIn": _NOT_IN, "Exists": _EXISTS, "DoesNotExist": _NOT_EXISTS}


def label_selector_from_spec(selector: dict | None) -> LabelSelector:
    """``metav1.LabelSelectorAsSelector``: None selects nothing, ``{}`` selects everything."""
    if selector is None:
        return LabelSelector(nothing=True)
    labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise SelectorError("matchLabels must be a map of string keys to string values")
    if not isinstance(expressions, list) or not all(isinstance(e, dict) for e in expressions):
        raise SelectorError("matchExpressions must be a list of label selector requirements")
    requirements = [new_requirement(k, _EQ, [v]) for k, v in labels.items()]
    for expr in expressions:
        key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
        if op not in _SPEC_OPERATORS:
            raise SelectorError(f'"{op}" is not a valid label selector operator')
        if (
            not isinstance(key, str)
            or not isinstance(values, list)
            or not all(isinstance(v, str) for v in values)
        ):
            raise SelectorError("a label selector requirement needs a string key and a list of string values")
        requirements.append(new_requirement(key, _SPEC_OPERATORS[op], values))
    return LabelSelector(tuple(requirements))


def format_label_selector(selector: dict | None) -> str:
    """A ``LabelSelector`` in the query syntax (``metav1.FormatLabelSelector``), as Scale status and kubectl's
    SELECTOR column show it: requirements sorted by key, "<none>" for one that selects everything."""
    spec = selector or {}
    terms = [(k, f"{k}={v}") for k, v in (spec.get("matchLabels") or {}).items()]
    for expr in spec.get("matchExpressions") or ():
        key, op, values = expr.get("key", ""), expr.get("operator"), sorted(expr.get("values") or ())
        text = {
            "In": f"{key} in ({','.join(values)})",
            "NotIn": f"{key} notin ({','.join(values)})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(op, "")
        terms.append((key, text))
    return ",".join(t for _, t in sorted(terms, key=lambda kt: kt[0])) or "<none>"


# ------------------------------------------------------------------------------- field selectors


FieldGetter = Callable[[dict], str]


def field_getter(*keys: str) -> FieldGetter:
    """The selectable value at this path of an object, as a field selector compares it."""

    def get(obj: dict) -> str:
        node: Any = obj
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            return ""
        if isinstance(node, bool):
            return "true" if node else "false"
        return str(node)

    return get


_COMMON: dict[str, FieldGetter] = {
    "metadata.name": field_getter("metadata", "name"),
    "metadata.namespace": field_getter("metadata", "namespace"),
}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    negate: bool
    value: str
    get: FieldGetter

    def matches(self, obj: dict) -> bool:
        return (self.get(obj) == self.value) != self.negate


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: dict) -> bool:
        return all(r.matches(obj) for r in self.requirements)


def _split_terms(text: str) -> list[str]:
    terms, start, escaped = [], 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescape(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: {value[i : i + 2]}")
            out.append(value[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ch}")
        out.append(ch)
        i += 1
    return "".join(out)


def parse_field_selector(text: str, selectable: Mapping[str, FieldGetter]) -> FieldSelector:
    """Parse a ``fieldSelector`` for objects whose kind has these ``selectable`` fields besides
    ``metadata.name`` and ``metadata.namespace``; unsupported fields raise SelectorError."""
    supported = {**_COMMON, **selectable}
    requirements = []
    for term in sorted(_split_terms(text)):
        if not term:
            continue
        parts = _split_term(term)
        if parts is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        name, op, raw = parts
        value = _unescape(raw)
        if name not in supported:
            raise SelectorError(f"field label not supported: {name}")
        requirements.append(FieldRequirement(name, op == "!=", value, supported[name]))
    return FieldSelector(tuple(requirements))

"""Constrained decoding: grammars and JSON Schemas that only admit a well-formed step
(docs/constrained-decoding.md).

:func:`schema_rules` turns a JSON Schema (the subset tool signatures produce) into GBNF
rules; :func:`react_grammar` is the grammar of a whole text ReAct reply on this agent's
tools; :func:`step_schema` the JSON Schema of one structured-output step. Whitespace inside
JSON is one optional space: a small model allowed more can spend its budget on blank lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import UserError

__all__ = [
    "MAX_ENUM_VALUES",
    "MAX_PROPERTIES",
    "MAX_SCHEMA_CHARS",
    "GrammarError",
    "ReactLabels",
    "react_grammar",
    "schema_grammar",
    "schema_rules",
    "step_schema",
]

_MAX_DEPTH: Final = 32

# Past these sizes (OpenAI's limits for Structured Outputs schemas) a schema gets no
# grammar: GrammarError, and the request goes without a constraint.
MAX_PROPERTIES: Final = 5000
MAX_ENUM_VALUES: Final = 1000
MAX_SCHEMA_CHARS: Final = 120_000
_FENCE: Final = "`" * 3


class GrammarError(UserError, ValueError):
    """A JSON Schema uses something the grammar writer does not support.

    Within a run it is not raised: the request goes without a grammar."""


_BASE_RULES: Final = {
    "ws": '" "?',
    "json-string": r'"\"" json-char* "\""',
    "json-text": r'"\"" json-char+ "\""',
    "json-char": r'[^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" hex hex hex hex)',
    "hex": "[0-9a-fA-F]",
    "json-int": '"-"? ("0" | [1-9] [0-9]{0,15})',
    "json-number": 'json-int ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?',
    "json-bool": '"true" | "false"',
    "json-null": '"null"',
    "json-value": "json-object | json-array | json-string | json-number | json-bool | json-null",
    "json-member": 'json-string ws ":" ws json-value',
    "json-object": '"{" ws ( json-member ( ws "," ws json-member )* )? ws "}"',
    "json-array": '"[" ws ( json-value ( ws "," ws json-value )* )? ws "]"',
}
"""Rules every grammar may use: JSON's own values, written once."""

_BASE_DEPENDS: Final = {
    name: [other for other in _BASE_RULES if re.search(rf"(?<![\w-]){other}(?![\w-])", body)]
    for name, body in _BASE_RULES.items()
}


def literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    return '"' + text.translate(_ESCAPES) + '"'


_ESCAPES: Final = {i: f"\\x{i:02x}" for i in range(0x20)} | str.maketrans(
    {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
)


def _json_literal(value: Any) -> str:
    return literal(json.dumps(value, ensure_ascii=False))


@dataclass
class _Writer:
    """Accumulates named rules; each schema node becomes one rule (or a base rule)."""

    prefix: str
    defs: Mapping[str, Any]
    rules: dict[str, str] = field(default_factory=dict)
    base: set[str] = field(default_factory=set)
    _refs: dict[str, str] = field(default_factory=dict)
    _properties: int = 0
    _enum_values: int = 0
    _chars: int = 0

    def count(self, *, properties: int = 0, enum_values: int = 0, chars: int = 0) -> None:
        """Add to the schema's size; past OpenAI's limits the schema gets no grammar."""
        self._properties += properties
        self._enum_values += enum_values
        self._chars += chars
        if self._properties > MAX_PROPERTIES:
            raise GrammarError(f"schema has more than {MAX_PROPERTIES} properties")
        if self._enum_values > MAX_ENUM_VALUES:
            raise GrammarError(f"schema has more than {MAX_ENUM_VALUES} enum values")
        if self._chars > MAX_SCHEMA_CHARS:
            raise GrammarError(f"schema names and values exceed {MAX_SCHEMA_CHARS} characters")

    def use(self, name: str) -> str:
        stack = [name]
        while stack:
            current = stack.pop()
            if current not in self.base:
                self.base.add(current)
                stack.extend(_BASE_DEPENDS.get(current, ()))
        return name

    def node(self, schema: Any, name: str, depth: int = 0) -> str:
        """The rule name (or inline expression) that matches ``schema``."""
        if depth > _MAX_DEPTH:
            raise GrammarError(f"schema nested deeper than {_MAX_DEPTH} levels at {name}")
        if schema is True or schema == {}:
            return self.use("json-value")
        if not isinstance(schema, Mapping):
            raise GrammarError(f"{name}: a schema must be an object, not {schema!r}")
        if "$ref" in schema:
            return self._ref(schema["$ref"], depth)
        if "const" in schema:
            self.count(chars=len(str(schema["const"])))
            return _json_literal(schema["const"])
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise GrammarError(f"{name}: 'enum' must be a non-empty list")
            self.count(enum_values=len(values), chars=sum(len(str(v)) for v in values))
            return _add(self.rules, name, " | ".join(_json_literal(v) for v in values))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = schema[key]
                if not isinstance(options, list) or not options:
                    raise GrammarError(f"{name}: {key!r} must be a non-empty list")
                parts = [
                    self.node(option, f"{name}-{i}", depth + 1) for i, option in enumerate(options)
                ]
                return _add(self.rules, name, " | ".join(parts))
        if "allOf" in schema:
            options = schema["allOf"]
            if isinstance(options, list) and len(options) == 1:
                return self.node(options[0], name, depth + 1)
            raise GrammarError(f"{name}: 'allOf' with several schemas is not supported")
        kind = schema.get("type")
        if isinstance(kind, list):
            parts = [self.node({**schema, "type": k}, f"{name}-{k}", depth + 1) for k in kind]
            return _add(self.rules, name, " | ".join(parts))
        if kind == "object" or (kind is None and "properties" in schema):
            return self._object(schema, name, depth)
        if kind == "array":
            return self._array(schema, name, depth)
        if kind == "string":
            return self._string(schema, name)
        if kind is None or (isinstance(kind, str) and kind in _SCALARS):
            return self.use(_SCALARS.get(str(kind), "json-value"))
        raise GrammarError(f"{name}: unsupported type {kind!r}")

    def _ref(self, ref: Any, depth: int) -> str:
        if not isinstance(ref, str) or not ref.startswith(("#/$defs/", "#/definitions/")):
            raise GrammarError(f"only local references into $defs are supported, not {ref!r}")
        key = ref.rsplit("/", 1)[1]
        if key in self._refs:
            return self._refs[key]
        if key not in self.defs:
            raise GrammarError(f"reference {ref!r} names no definition")
        self.count(chars=len(key))
        # Named before it is written, so a recursive definition refers to itself.
        rule = _add(self.rules, f"{self.prefix}-def-{key}", "")
        self._refs[key] = rule
        self.rules[rule] = self.node(self.defs[key], f"{rule}-body", depth + 1)
        return rule

    def _string(self, schema: Mapping[str, Any], name: str) -> str:
        # A string is at least one character unless the schema says otherwise: a small
        # model under a grammar otherwise takes the shortest way out, "" for every
        # argument (seen: calculator(expression="")).
        low = schema.get("minLength")
        high = schema.get("maxLength")
        if low is None and high is None:
            return self.use("json-text")
        self.use("json-char")
        lo = int(low) if isinstance(low, int) else 1
        hi = "" if not isinstance(high, int) else str(int(high))
        return _add(self.rules, name, rf'"\"" json-char{{{lo},{hi}}} "\""')

    def _array(self, schema: Mapping[str, Any], name: str, depth: int) -> str:
        self.use("ws")
        item = self.node(schema.get("items", {}), f"{name}-item", depth + 1)
        low = schema.get("minItems", 0)
        high = schema.get("maxItems")
        if not isinstance(low, int) or low < 0:
            low = 0
        more = f'( ws "," ws {item} )'
        if low == 0:
            bound = "*" if not isinstance(high, int) else f"{{0,{max(high - 1, 0)}}}"
            body = f'"[" ws ( {item} {more}{bound} )? ws "]"'
            if isinstance(high, int) and high == 0:
                body = '"[" ws "]"'
        else:
            upper = "" if not isinstance(high, int) else str(max(high - 1, low - 1))
            body = f'"[" ws {item} {more}{{{low - 1},{upper}}} ws "]"'
        return _add(self.rules, name, body)

    def _object(self, schema: Mapping[str, Any], name: str, depth: int) -> str:
        self.use("ws")
        props = schema.get("properties") or {}
        if not isinstance(props, Mapping):
            raise GrammarError(f"{name}: 'properties' must be an object")
        required = set(schema.get("required") or ())
        self.count(properties=len(props), chars=sum(len(str(k)) for k in props))
        if not props:
            extra = schema.get("additionalProperties", True)
            if extra is False:
                return _add(self.rules, name, '"{" ws "}"')
            return self.use("json-object")
        order = [k for k in props if k in required] + [k for k in props if k not in required]
        members: list[tuple[str, bool]] = []
        for key in order:
            value = self.node(props[key], f"{name}-{key}", depth + 1)
            members.append((f'{_json_literal(key)} ws ":" ws {value}', key in required))
        # tail(i, after): the members from i on, after a member was written or not (named
        # rules keep it linear), from the last member back. No member is written before the
        # first, and none can be missing after a required one.
        n = len(members)
        first_required = next((i for i, (_, needed) in enumerate(members) if needed), n)
        tails: dict[tuple[int, bool], str] = {(n, True): "", (n, False): ""}
        for i in reversed(range(n)):
            member, needed = members[i]
            for after in [True] * (i > 0) + [False] * (i <= first_required):
                sep = '"," ws ' if after else ""
                here = f"{sep}{member} {tails[(i + 1, True)]}".strip()
                skip = "" if needed else tails[(i + 1, after)]
                body = here if needed else f"( {here} ) | {skip}" if skip else f"( {here} )?"
                tails[(i, after)] = _add(self.rules, f"{name}-m{i}{'a' if after else ''}", body)
        return _add(self.rules, name, f'"{{" ws {tails[(0, False)]} ws "}}"')


_SCALARS: Final = {
    "integer": "json-int",
    "number": "json-number",
    "boolean": "json-bool",
    "null": "json-null",
}


def _rule_name(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9-]+", "-", text).strip("-").lower()
    return name or "rule"


def schema_rules(schema: Mapping[str, Any], name: str) -> tuple[str, dict[str, str]]:
    """GBNF rules for values valid under ``schema``: (the root rule's name, every rule);
    :class:`GrammarError` for a feature outside the supported subset."""
    writer = _Writer(prefix=_rule_name(name), defs=schema.get("$defs") or {})
    root = writer.node(schema, _rule_name(name))
    rules = {k: _BASE_RULES[k] for k in sorted(writer.base)}
    rules.update(writer.rules)
    return root, rules


def schema_grammar(schema: Mapping[str, Any], name: str = "value") -> str:
    """A whole GBNF grammar (``root`` first) admitting exactly the JSON values valid under
    ``schema``, for servers that take a grammar but no JSON Schema (:class:`GrammarError`
    as :func:`schema_rules`)."""
    root, rules = schema_rules(schema, name)
    return _render({"root": root, **rules})  # a rule named root is the root itself


@dataclass(frozen=True, slots=True)
class ReactLabels:
    """The labels a text template asks the model to write, and how the action is given."""

    thought: str = "Thought"
    action: str = "Action"
    action_input: str = "Action Input"
    final_answer: str = "Final Answer"
    final_thought: str = "I now know the final answer"
    plan_prefix: str = "I need to"
    """How a thought begins when an action must follow: a plan, not a guess at the answer
    (which a small model later copies instead of the tool's result). Empty for none."""
    colon: str = ": "
    json_blob: bool = False
    """The action is a fenced ``{"action": ..., "action_input": ...}`` blob (the ``json``
    template) instead of ``Action:`` and ``Action Input:`` lines."""


def _render(rules: Mapping[str, str]) -> str:
    return "\n".join(f"{name} ::= {body}" for name, body in rules.items()) + "\n"


def react_grammar(
    tools: Sequence[Mapping[str, Any]],
    labels: ReactLabels = ReactLabels(),
    *,
    allow_final: bool = True,
    answer_schema: Mapping[str, Any] | None = None,
) -> str:
    """The GBNF grammar of one text ReAct reply: a one-line thought, then an action on one
    of ``tools`` (OpenAI tool entries or bare functions) with valid arguments, or a final
    answer. No ``tools`` admits only the answer, ``allow_final=False`` only actions;
    ``answer_schema`` makes the answer one JSON value of that schema.
    """
    rules: dict[str, str] = {}
    shared: dict[str, str] = {}
    sep = literal(labels.colon)
    rules["root"] = ""
    rules["thought"] = f"{literal(labels.thought)} {sep} thought-text {literal(chr(10))}"
    rules["thought-text"] = "[^\\n]{1,300}"  # one line
    if not allow_final and labels.plan_prefix:
        rules["thought-text"] = f"{literal(labels.plan_prefix + ' ')} {rules['thought-text']}"
    rules["answer"] = f"{literal(labels.final_answer)} {sep} answer-text"
    rules["answer-text"] = "[^\\n] [^\\x00]*"
    if answer_schema is not None:
        root, answer_rules = schema_rules(answer_schema, "output")
        for key, body in answer_rules.items():
            (shared if key in _BASE_RULES else rules)[key] = body
        rules["answer-text"] = root
    choices: list[str] = []
    for tool_name, fn in _functions(tools):
        root, tool_rules = schema_rules(
            fn.get("parameters") or {}, f"args{len(choices)}-{tool_name}"
        )
        for key, body in tool_rules.items():
            (shared if key in _BASE_RULES else rules)[key] = body
        if labels.json_blob:
            head = literal(_FENCE + "json\n" + '{"action": ')
            middle = literal(', "action_input": ')
            tail = literal("}\n" + _FENCE)
            call = f"{head} {_json_literal(tool_name)} {middle} {root} {tail}"
            body = f"{literal(labels.action + ':' + chr(10))} {call}"
        else:
            body = (
                f"{literal(labels.action)} {sep} {literal(tool_name)} {literal(chr(10))} "
                f"{literal(labels.action_input)} {sep} {root}"
            )
        choices.append(_add(rules, f"call-{tool_name}", body))
    if allow_final or not choices:
        choices.append("answer")
    else:
        del rules["answer"], rules["answer-text"]
    if choices == ["answer"]:
        # Only an answer is allowed: the template's own closing thought, then the answer.
        fixed = f"{labels.thought}{labels.colon}{labels.final_thought}\n"
        rules["root"] = f"{literal(fixed)} answer"
        del rules["thought"], rules["thought-text"]
    else:
        # The thought is required before an action: the template asks for it, and a
        # model allowed to skip it tends to answer at once.
        rules["root"] = "thought ( " + " | ".join(choices) + " )"
    rules.update(shared)
    return _render(rules)


def _functions(tools: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    return [(str(fn.get("name")), fn) for fn in (t.get("function", t) for t in tools)]


def _add(rules: dict[str, str], name: str, body: str) -> str:
    key = _rule_name(name)
    base, n = key, 2
    while key in rules:
        key = f"{base}-{n}"
        n += 1
    rules[key] = body
    return key


def step_schema(
    tools: Sequence[Mapping[str, Any]],
    *,
    allow_final: bool = True,
    answer_schema: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON Schema of one structured-output step: ``{"thought", "action"}`` where the
    action is ``{"tool", "arguments"}`` (one ``anyOf`` branch per tool, tying the arguments
    to the tool) or ``{"final_answer"}`` (a string, or of ``answer_schema``); no ``tools``
    admits only the answer, ``allow_final=False`` only a call."""
    branches: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    for name, fn in _functions(tools):
        params = dict(fn.get("parameters") or {"type": "object", "properties": {}})
        defs.update(params.pop("$defs", None) or {})
        branches.append(_closed({"tool": {"enum": [name]}, "arguments": params}))
    if allow_final or not branches:
        answer: dict[str, Any] = {"type": "string"}
        if answer_schema is not None:
            answer = dict(answer_schema)
            defs.update(answer.pop("$defs", None) or {})
        branches.append(_closed({"final_answer": answer}))
    action: dict[str, Any] = branches[0] if len(branches) == 1 else {"anyOf": branches}
    schema = _closed({"thought": {"type": "string"}, "action": action})
    if defs:
        schema["$defs"] = defs
    return schema


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema of exactly ``properties``, each required."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }

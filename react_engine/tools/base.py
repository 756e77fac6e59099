"""Tools: a callable plus the pydantic model that describes and validates its arguments.

A definition that does not add up is a :class:`ToolDefinitionError` where the tool is
defined, not in the middle of a run."""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypedDict, Unpack, cast, get_type_hints

import pydantic
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ModelBehaviorError, ToolDefinitionError
from ..nesting import TOO_DEEP, exceeds_depth
from ..types import is_seconds
from ..wording import Notice, NoticeCode
from .docstrings import parse_docstring
from .schema import meets_strict_mode, schema_nodes, strict_schema
from .timeouts import within

if TYPE_CHECKING:
    from ._schema_check import SchemaCheck

__all__ = ["Tool", "ToolAnnotations", "ToolArgumentsError", "ToolOptions", "arguments_dict"]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")


class ToolArgumentsError(ModelBehaviorError, ValueError):
    """Arguments a tool cannot accept; ``notice`` is what the model is told."""

    def __init__(self, notice: Notice) -> None:
        super().__init__(notice.text())
        self.notice = notice


@dataclass(frozen=True, slots=True)
class ToolAnnotations:
    """What calling a tool does to the world: MCP's tool annotations (``readOnlyHint``...),
    under Python names. The defaults are MCP's worst case; they are hints, not promises."""

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    @classmethod
    def from_mcp(cls, hints: Any) -> ToolAnnotations:
        """From an MCP listing's ``annotations`` (the ``mcp`` package's object, or ``None``;
        ``read_only_hint`` for ``readOnlyHint``...); a hint left out, or not a bool, keeps
        MCP's default."""
        names = (f.name for f in dataclasses.fields(cls))
        given = {n: v for n in names if isinstance(v := getattr(hints, f"{n}_hint", None), bool)}
        return cls(**given)


class ToolOptions(TypedDict, total=False):
    """The options every constructor of a :class:`Tool` takes: its fields of the same name."""

    summarize: Callable[[Any], str] | None
    requires_approval: bool
    timeout: float | None
    max_observation_chars: int | None
    annotations: ToolAnnotations | None
    inline: bool


_OPTIONS: frozenset[str] = frozenset(ToolOptions.__optional_keys__)


@dataclass(slots=True)
class Tool:
    """A tool the agent may call: its name, description, argument model and function."""

    name: str
    description: str
    args_model: type[BaseModel]
    function: Callable[..., Any]
    parameters: dict[str, Any]
    """The JSON Schema of the arguments: self-contained, ``additionalProperties: false``."""
    pass_model: bool = False
    """Call ``function(model_instance)`` instead of ``function(**fields)``."""
    pass_arguments: bool = False
    """Call ``function(arguments)`` with the arguments as one JSON-ready dict."""
    is_async: bool = False
    summarize: Callable[[Any], str] | None = None
    """Turns a raw result into what the model sees (observation injection)."""
    requires_approval: bool = False
    """Ask the run's approval callback before every call."""
    timeout: float | None = None
    """Seconds a call may take before it becomes a timeout observation."""
    max_observation_chars: int | None = None
    """Per-tool override of the agent's observation length limit."""
    strict: bool = False
    """The schema meets OpenAI's strict mode rules, and is sent with ``"strict": true``."""
    annotations: ToolAnnotations = field(default_factory=ToolAnnotations)
    schema_check: SchemaCheck | None = field(default=None, repr=False, compare=False)
    """The whole JSON Schema the arguments must meet (tools built by :meth:`from_schema`)."""
    forbid_extra: bool = field(default=False, repr=False, compare=False)
    """Refuse unknown keys in nested objects too (pydantic would drop them silently)."""
    inline: bool = False
    """A quick sync function, called on the event loop's thread: no timeout, deadline or
    Ctrl-C stops it. For microseconds of work, never for I/O."""

    @property
    def argument_names(self) -> list[str]:
        """The arguments' names as the model writes them: the properties of :attr:`parameters`."""
        return list(self.parameters.get("properties") or ())

    def openai_schema(self) -> dict[str, Any]:
        """The entry for the ``tools`` array of a chat completion request."""
        function: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        if self.strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def check(self, arguments: Mapping[str, Any] | str) -> BaseModel | dict[str, Any]:
        """Validate raw arguments into what :meth:`ainvoke` takes: a model of
        :attr:`args_model`, or the checked dict for a :attr:`pass_arguments` tool; else
        :class:`ToolArgumentsError` with a model-readable text."""
        if isinstance(arguments, str):
            names = self.argument_names
            if len(names) == 1 and arguments.strip():
                # A plain-string input for a one-argument tool ("Action: search[cats]").
                arguments = {names[0]: arguments}
            elif not arguments.strip() and not self.parameters.get("required"):
                arguments = {}
            else:
                raise ToolArgumentsError(
                    Notice(
                        NoticeCode.PLAIN_TEXT_ARGUMENTS,
                        tool=repr(self.name),
                        fields=", ".join(self.argument_names) or "(none)",
                        text=repr(arguments[:200]),
                    )
                )
        if exceeds_depth(arguments):
            raise ToolArgumentsError(TOO_DEEP)
        if self.schema_check is not None:
            coerced = self.schema_check.coerce(arguments)
            problems = self.schema_check.errors(coerced)
            if problems:
                detail = "; ".join(problems)
                notice = Notice(NoticeCode.INVALID_ARGUMENTS, tool=repr(self.name), detail=detail)
                raise ToolArgumentsError(notice)
            # A tool changing its arguments in place must not change what the step records.
            return copy.deepcopy(coerced)
        return self._model(arguments)

    def _model(self, arguments: Mapping[str, Any]) -> BaseModel:
        try:
            if self.forbid_extra:
                return self.args_model.model_validate(dict(arguments), extra="forbid")
            return self.args_model.model_validate(dict(arguments))
        except ValidationError as exc:
            parts = []
            for err in exc.errors(include_url=False):
                loc = ".".join(str(x) for x in err.get("loc", ())) or "(arguments)"
                msg = "unexpected field" if err["type"] == "extra_forbidden" else err["msg"]
                parts.append(f"{loc}: {msg}")
            detail = "; ".join(parts)
            notice = Notice(NoticeCode.INVALID_ARGUMENTS, tool=repr(self.name), detail=detail)
            raise ToolArgumentsError(notice) from None

    async def ainvoke(
        self, validated: BaseModel | dict[str, Any], timeout: float | None = None
    ) -> Any:
        """Run the function with validated arguments, within ``timeout`` seconds
        (:class:`~react_engine.runtime.DeadlinePassed` past it). A sync function runs on a
        worker thread, an :attr:`inline` one right here, with no timeout."""
        if self.pass_model:
            call = functools.partial(self.function, validated)
        elif self.pass_arguments:
            call = functools.partial(self.function, arguments_dict(validated))
        else:  # a partial: a tool may have a parameter named ``timeout``
            names = self.args_model.model_fields
            call = functools.partial(self.function, **{n: getattr(validated, n) for n in names})
        if self.is_async:
            running = cast(Awaitable[Any], call())
            return await (running if timeout is None else within(running, timeout))
        if self.inline:
            return call()
        from ..runtime import run_sync_call  # with asyncio: loaded by the running loop

        return await run_sync_call(call, timeout=timeout)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calling the tool calls the wrapped function, so decorated functions stay usable."""
        return self.function(*args, **kwargs)

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        **options: Unpack[ToolOptions],
    ) -> Tool:
        """Build a tool from a typed function; its docstring gives the descriptions."""
        tool_name = _checked_name(name or str(getattr(function, "__name__", "")))
        summary, arg_docs = parse_docstring(inspect.getdoc(function) or "")
        sig = inspect.signature(function)
        try:
            hints = get_type_hints(function, include_extras=True)
        except Exception as exc:  # a NameError from a forward reference, typically
            raise _bad(tool_name, f"cannot resolve type hints: {exc}") from exc
        fields: dict[str, Any] = {}
        for pname, param in sig.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise _bad(
                    tool_name,
                    f"*{pname} / **{pname} cannot be described as JSON "
                    "Schema; give every argument a name and a type",
                )
            if param.kind is param.POSITIONAL_ONLY:
                raise _bad(
                    tool_name, f"positional-only parameter {pname!r} cannot be passed by name"
                )
            if pname not in hints:
                raise _bad(tool_name, f"parameter {pname!r} has no type annotation")
            default = ... if param.default is param.empty else param.default
            info = (
                pydantic.Field(default=default, description=arg_docs[pname])
                if pname in arg_docs
                else pydantic.Field(default=default)
            )
            fields[pname] = (hints[pname], info)
        unknown = sorted(set(arg_docs) - set(sig.parameters))
        if unknown:
            raise _bad(
                tool_name,
                f"the docstring documents {', '.join(unknown)}, which the function does not take",
            )
        try:
            model = pydantic.create_model(
                _model_name(tool_name),
                __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
                **fields,
            )
        except (pydantic.PydanticSchemaGenerationError, TypeError) as exc:
            raise _bad(tool_name, f"cannot build an argument model: {exc}") from exc
        if description is None:
            description = summary
        return cls._build(tool_name, description, model, function, pass_model=False, **options)

    @classmethod
    def from_model(
        cls,
        args_model: type[BaseModel],
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        **options: Unpack[ToolOptions],
    ) -> Tool:
        """Build a tool from a pydantic model plus a function.

        The function takes either one parameter annotated with the model (it receives the
        validated instance) or keyword parameters named exactly like the model's fields.
        """
        tool_name = _checked_name(name or str(getattr(function, "__name__", "")))
        if not (isinstance(args_model, type) and issubclass(args_model, BaseModel)):
            raise _bad(tool_name, f"{args_model!r} is not a pydantic model")
        sig = inspect.signature(function)
        params = [
            p for p in sig.parameters.values() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]
        try:
            hints = get_type_hints(function)
        except Exception:
            hints = {}
        pass_model = len(params) == 1 and (
            hints.get(params[0].name) is args_model
            or params[0].annotation is args_model
            or params[0].annotation == args_model.__name__  # a string annotation, unresolved
        )
        if not pass_model:
            takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
            fields = set(args_model.model_fields)
            names = {p.name for p in params}
            missing = sorted(fields - names) if not takes_kwargs else []
            extra = sorted(p.name for p in params if p.name not in fields and p.default is p.empty)
            parts = [f"fields the function does not take: {', '.join(missing)}"] if missing else []
            if extra:
                parts.append(f"required parameters the model lacks: {', '.join(extra)}")
            if parts:
                raise _bad(
                    tool_name,
                    f"{args_model.__name__} and the function disagree (" + "; ".join(parts) + ")",
                )
        doc = description
        if doc is None:
            doc = parse_docstring(inspect.getdoc(function) or "")[0] or (
                inspect.getdoc(args_model) or ""
            )
        return cls._build(tool_name, doc, args_model, function, pass_model=pass_model, **options)

    @classmethod
    def from_schema(
        cls,
        name: str,
        parameters: Mapping[str, Any],
        function: Callable[[dict[str, Any]], Any],
        *,
        description: str = "",
        **options: Unpack[ToolOptions],
    ) -> Tool:
        """Build a tool from a JSON Schema of its arguments plus a function that takes them as
        one dict (an MCP server's tool, say); every call is checked against the whole schema."""
        from ._schema_check import schema_check

        _checked_name(name)
        if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
            raise _bad(
                name,
                "the arguments' schema must be a JSON Schema of an object, "
                f"not {str(parameters)[:100]}",
            )
        check = schema_check(name, parameters)
        extra = parameters.get("additionalProperties", False)
        built = cls._build(name, description, _Given, function, pass_model=False, **options)
        built.pass_arguments = True
        built.schema_check = check
        built.parameters = strict_schema(dict(parameters))
        if extra is not False:
            built.parameters["additionalProperties"] = copy.deepcopy(extra)
        built.strict = meets_strict_mode(built.parameters)
        return built

    @classmethod
    def _build(
        cls,
        name: str,
        description: str,
        args_model: type[BaseModel],
        function: Callable[..., Any],
        *,
        pass_model: bool,
        **options: Unpack[ToolOptions],
    ) -> Tool:
        given: dict[str, Any] = dict(options)
        unknown = sorted(set(given) - _OPTIONS)
        if unknown:
            raise TypeError(f"tool {name!r}: unexpected option {', '.join(unknown)}")
        for key, (ok, what) in _OPTION_CHECKS.items():
            if key in given and not ok(given[key]):
                raise _bad(name, f"{key} must be {what}, not {given[key]!r}")
        try:
            raw_schema = args_model.model_json_schema()
        except Exception as exc:
            raise _bad(name, f"its arguments have no JSON Schema: {exc}") from exc
        parameters = strict_schema(raw_schema)
        # The schema sent forbids unknown nested keys: so does the call, unless a model allows them.
        forbid_extra = all(
            n.get("additionalProperties") is not True for n in schema_nodes(raw_schema)
        )
        is_async = is_async_callable(function)
        given["annotations"] = given.get("annotations") or ToolAnnotations()
        given["inline"] = given.get("inline", False) and not is_async
        return cls(
            name=name,
            description=description.strip(),
            args_model=args_model,
            function=function,
            parameters=parameters,
            pass_model=pass_model,
            is_async=is_async,
            strict=meets_strict_mode(parameters),
            forbid_extra=forbid_extra,
            **given,
        )


_OPTION_CHECKS: Final[dict[str, tuple[Callable[[Any], bool], str]]] = {
    "inline": (lambda v: isinstance(v, bool), "True or False"),
    "annotations": (lambda v: v is None or isinstance(v, ToolAnnotations), "a ToolAnnotations"),
    "timeout": (
        lambda v: v is None or is_seconds(v),
        "a positive, finite number of seconds or None",
    ),
    "max_observation_chars": (
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
        "a positive int or None",
    ),
}
"""The options :meth:`Tool._build` checks, and what each must be."""


def is_async_callable(function: Callable[..., Any]) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - objects with an async __call__
    )


class _Given(BaseModel):
    """A :meth:`Tool.from_schema` tool's arguments: its schema check reads them, not a model."""

    # Built with the first such tool: building it loads modules a run alone may need.
    model_config = ConfigDict(extra="allow", defer_build=True)


def arguments_dict(validated: BaseModel | dict[str, Any]) -> dict[str, Any]:
    """Validated arguments as JSON-ready data under their JSON names, only those given."""
    if isinstance(validated, dict):
        return validated
    data: dict[str, Any] = validated.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return data


def _bad(tool_name: str, why: str) -> ToolDefinitionError:
    return ToolDefinitionError(f"tool {tool_name!r}: {why}", tool_name=tool_name)


def _checked_name(name: str) -> str:
    # fullmatch: with match(), "$" also matches before a trailing newline ("get_weather\n").
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ToolDefinitionError(
            f"invalid tool name {name!r}: use letters, digits, '_' or '-', at most 64 characters, "
            "not starting with a digit",
            tool_name=name if isinstance(name, str) and name else None,
        )
    return name


def _model_name(tool_name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[_\-]", tool_name)) + "Args"

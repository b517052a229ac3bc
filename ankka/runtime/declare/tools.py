"""Function tools: one pydantic type gives both the JSON Schema the model is shown and the
decoder of the model's arguments, so a parameter cannot be described as one type and read as
another.

Declare a tool with :func:`tool` on a typed function::

    @tool
    def get_weather(city: str) -> str:
        \"\"\"Current weather for a city.\"\"\"
        return f"Sunny in {city}"

The loop calls :meth:`Tool.run` with the model's raw argument text. A tool that raises, or
whose arguments do not decode, gives an error result the model sees; it never fails the turn.

A tool can require a person's decision before it runs (docs/approvals.md)::

    @tool(requires_approval=lambda args: args.amount > 100, approval_timeout=3600)
    def refund(order: str, amount: float) -> str: ...

``requires_approval`` is ``True`` (every call) or a pure predicate of the decoded arguments;
``approval_timeout`` (seconds) makes an undecided request expire.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from ankka._kernel.errors import ConfigurationError

__all__ = ["ApprovalRule", "RunnableTool", "Tool", "ToolOutcome", "ToolSpec", "approval_of", "tool"]

Predicate = Callable[[Any], bool]  # given the decoded arguments (a pydantic model)


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """When a tool's call waits for a person: ``always``, or when ``predicate`` of the decoded
    arguments is true; undecided requests expire after ``timeout`` seconds (None: never)."""

    always: bool
    predicate: Predicate | None
    timeout: float | None

    def needed(self, arguments: BaseModel | None) -> bool:
        """Whether this call waits. Arguments that did not decode run nothing (the tool
        answers the decoding error), so they wait for no one; a predicate that raises is
        taken as "yes": a call is never let through because its check failed."""
        if self.always:
            return True
        if arguments is None or self.predicate is None:
            return False
        try:
            return bool(self.predicate(arguments))
        except Exception:
            return True


def approval_of(tool: RunnableTool | None) -> ApprovalRule | None:
    """The approval rule of any runnable tool (function or MCP), or None."""
    return tool.approval if tool is not None else None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is shown: a name, a description and a JSON Schema of the arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: str
    is_error: bool


class RunnableTool(Protocol):
    """What the loop needs of a tool: a function :class:`Tool`, an MCP server's tool
    (:class:`ankka.runtime.features.mcp.servers.McpTool`), or a task's built-in tools.
    Approval is part of the seam: ``approval`` is the tool's rule (None: it never waits) and
    ``needs_approval`` says whether one call waits for a person."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> ToolSpec: ...

    @property
    def approval(self) -> ApprovalRule | None: ...

    def needs_approval(self, raw_arguments: str) -> bool: ...

    async def run(self, raw_arguments: str) -> ToolOutcome: ...


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    arguments: type[BaseModel]
    function: Callable[..., Any]
    takes_model: bool
    is_async: bool
    fields: tuple[str, ...]
    spec: ToolSpec
    approval: ApprovalRule | None = None

    def decode(self, raw_arguments: str) -> BaseModel | None:
        """The decoded arguments, or None when they do not decode."""
        try:
            return self.arguments.model_validate_json(raw_arguments or "{}")
        except ValidationError:
            return None

    def needs_approval(self, raw_arguments: str) -> bool:
        return self.approval is not None and self.approval.needed(self.decode(raw_arguments))

    async def run(self, raw_arguments: str) -> ToolOutcome:
        try:
            decoded = self.arguments.model_validate_json(raw_arguments or "{}")
        except ValidationError as exc:
            return ToolOutcome(_argument_error(self.name, exc), is_error=True)
        try:
            args: tuple[Any, ...] = (decoded,) if self.takes_model else ()
            kwargs = {} if self.takes_model else {k: getattr(decoded, k) for k in self.fields}
            if self.is_async:
                result = await self.function(*args, **kwargs)
            else:
                # A plain function may block (files, HTTP); keep it off the event loop.
                result = await asyncio.to_thread(self.function, *args, **kwargs)
        except Exception as exc:
            return ToolOutcome(f"tool {self.name!r} failed: {type(exc).__name__}: {exc}", True)
        return ToolOutcome(_render(result), is_error=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The tool stays callable as the plain function it wraps."""
        return self.function(*args, **kwargs)


def _argument_error(name: str, exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
        for err in exc.errors(include_url=False)
    )
    return f"the arguments for tool {name!r} did not decode: {problems}"


def _render(result: object) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    return json.dumps(result, ensure_ascii=False, default=str)


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def _arguments_type(function: Callable[..., Any], name: str) -> tuple[type[BaseModel], bool]:
    hints = get_type_hints(function)
    params = list(inspect.signature(function).parameters.values())
    if len(params) == 1:
        only = hints.get(params[0].name)
        if isinstance(only, type) and issubclass(only, BaseModel):
            return only, True
    fields: dict[str, Any] = {}
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigurationError(
                f"tool {name!r}: *args and **kwargs cannot be described to a model; "
                "give each parameter a name and a type"
            )
        if param.name not in hints:
            raise ConfigurationError(
                f"tool {name!r}: parameter {param.name!r} has no type annotation; the model "
                "is shown a schema built from the annotations"
            )
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], default)
    model: type[BaseModel] = create_model(
        f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model, False


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool | Predicate = False,
    approval_timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool | Predicate = False,
    approval_timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function (sync or async) into a :class:`Tool`.

    The description defaults to the docstring. Use as ``@tool`` or ``@tool(name=...)``.
    ``requires_approval`` (``True`` or a pure predicate of the decoded arguments) makes a call
    wait for a person's decision; ``approval_timeout`` seconds later it expires.
    """
    rule = _approval_rule(
        str(name or getattr(function, "__name__", "tool")), requires_approval, approval_timeout
    )

    def build(fn: Callable[..., Any]) -> Tool:
        tool_name = name or fn.__name__
        arguments, takes_model = _arguments_type(fn, tool_name)
        text = description if description is not None else inspect.getdoc(fn) or ""
        spec = ToolSpec(tool_name, text, _schema(arguments))
        return Tool(
            name=tool_name,
            description=text,
            arguments=arguments,
            function=fn,
            takes_model=takes_model,
            is_async=inspect.iscoroutinefunction(fn),
            fields=tuple(arguments.model_fields),
            spec=spec,
            approval=rule,
        )

    if function is not None:
        return build(function)
    return build


def _approval_rule(
    name: str, requires: bool | Predicate, timeout: float | None
) -> ApprovalRule | None:
    if timeout is not None and not timeout > 0:
        raise ConfigurationError(f"tool {name!r}: approval_timeout must be positive seconds")
    if requires is False:
        if timeout is not None:
            raise ConfigurationError(
                f"tool {name!r}: approval_timeout is set but the tool requires no approval"
            )
        return None
    if requires is True:
        return ApprovalRule(True, None, timeout)
    if not callable(requires):
        raise ConfigurationError(
            f"tool {name!r}: requires_approval is True, False or a predicate of the "
            f"arguments, not {type(requires).__name__}"
        )
    if inspect.iscoroutinefunction(requires):
        raise ConfigurationError(
            f"tool {name!r}: requires_approval's predicate must be a plain function (pure, no I/O)"
        )
    return ApprovalRule(False, requires, timeout)

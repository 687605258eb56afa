"""The tool registry: typed tools with a safety class, called through one function that records.

Every tool is a plain function ``fn(ctx, args) -> result`` with a pydantic argument model and a
pydantic result. It is registered with a safety class: ``read`` (looks, measures in scratch
space; never changes the user's checkout, index, stash or refs) or ``mutate`` (changes something
a person owns). ``call`` validates the arguments, refuses a ``mutate`` tool that was not approved,
times the call and returns a ``ToolRecord`` (name, args, result, duration, error): the unit the
transcript store persists and replay serves back. Tools never print and never raise through
``call``: an error is data in the record.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ValidationError

from tools.validation import first_error

Safety = Literal["read", "mutate"]


class ToolRecord(BaseModel):
    name: str
    safety: Safety | None
    args: dict[str, Any]
    result: Any = None
    error: str | None = None
    started_at: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ToolSpec:
    name: str
    safety: Safety
    description: str
    args_model: type[BaseModel]
    result_type: Any
    fn: Callable[[Any, BaseModel], Any]

    def schema(self) -> dict:
        """The OpenAI function-calling schema of this tool."""
        params = self.args_model.model_json_schema()
        params.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }


REGISTRY: dict[str, ToolSpec] = {}


def tool(name: str, safety: Safety) -> Callable:
    """Register ``fn(ctx, args: ArgsModel) -> Result``; the docstring's first paragraph describes it."""

    def wrap(fn: Callable) -> Callable:
        hints = get_type_hints(fn)
        params = list(inspect.signature(fn).parameters)
        args_model = hints[params[1]]
        if not (isinstance(args_model, type) and issubclass(args_model, BaseModel)):
            raise TypeError(f"tool {name}: the second parameter must be a pydantic model")
        if name in REGISTRY:
            raise ValueError(f"tool {name} registered twice")
        doc = inspect.getdoc(fn) or name
        REGISTRY[name] = ToolSpec(
            name=name,
            safety=safety,
            description=doc.split("\n\n")[0].replace("\n", " "),
            args_model=args_model,
            result_type=hints.get("return"),
            fn=fn,
        )
        return fn

    return wrap


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return f"invalid arguments: {first_error(exc, '(arguments)')}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value


def call(name: str, args: dict[str, Any] | BaseModel, ctx: Any, approved: bool = False) -> ToolRecord:
    """Run a tool by name and record what happened. Never raises for tool errors."""
    started = datetime.now(UTC).isoformat()
    t0 = time.perf_counter()
    raw = args.model_dump(mode="json") if isinstance(args, BaseModel) else dict(args)
    spec = REGISTRY.get(name)
    if spec is None:
        return ToolRecord(
            name=name,
            safety=None,
            args=raw,
            error=f"unknown tool '{name}'",
            started_at=started,
            duration_s=time.perf_counter() - t0,
        )
    if spec.safety == "mutate" and not approved:
        return ToolRecord(
            name=name,
            safety=spec.safety,
            args=raw,
            started_at=started,
            duration_s=time.perf_counter() - t0,
            error=f"'{name}' changes what a person owns and needs their approval first",
        )
    try:
        parsed = spec.args_model.model_validate(raw)
        result = _dump(spec.fn(ctx, parsed))
        error = None
    except Exception as exc:
        result, error = None, _one_line(exc)
    return ToolRecord(
        name=name,
        safety=spec.safety,
        args=raw,
        result=result,
        error=error,
        started_at=started,
        duration_s=time.perf_counter() - t0,
    )


def schemas(safety: Safety | None = None) -> list[dict]:
    return [s.schema() for s in REGISTRY.values() if safety is None or s.safety == safety]

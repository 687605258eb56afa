"""Pydantic's first complaint as one line, ``field.path: message``, and TOML files read into a
model with such a line naming the file: what every bad-input message of ours is made of."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def first_error(exc: ValidationError, empty: str = "") -> str:
    """``field.path: message`` of the first error (``empty`` stands for a field path of nothing)."""
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or empty}: {err['msg']}"


def load_toml_model(path: str | Path, model: type[M], error: type[Exception]) -> M:
    """Read a TOML file into ``model``; any problem raises ``error("FILE: field: reason")``."""
    p = Path(path)
    try:
        return model.model_validate(tomllib.loads(p.read_text()))
    except OSError as exc:
        raise error(f"{p}: cannot read ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{p}: not TOML ({exc})") from exc
    except ValidationError as exc:
        raise error(f"{p}: {first_error(exc)}") from exc

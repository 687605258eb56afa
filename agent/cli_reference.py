"""The ``sleuth`` command tree as Markdown, for the documentation's CLI reference
(``docs/reference/cli.md``): every command and plugin registered, each with the help text
``sleuth COMMAND --help`` prints, so the reference is the help and never a copy of it. (Typer
carries its own copy of Click, which mkdocs-click and mkdocs-typer2 do not read: hence this.)"""

from __future__ import annotations

from collections.abc import Iterator

import typer
import typer.core
from typer.testing import CliRunner

from agent.cli import app, register

WIDTH = "100"


def reference_markdown() -> str:
    """One section per command, in the order ``sleuth --help`` lists them, groups recursed."""
    register()
    plain, typer.core.HAS_RICH = typer.core.HAS_RICH, False  # plain text, not Rich panels
    try:
        return "\n\n".join(_sections(typer.main.get_command(app), []))
    finally:
        typer.core.HAS_RICH = plain


def _sections(command, path: list[str]) -> Iterator[str]:
    res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": WIDTH, "NO_COLOR": "1"}, prog_name="sleuth")
    if res.exit_code != 0:
        raise RuntimeError(f"sleuth {' '.join(path)} --help exited {res.exit_code}: {res.output[-300:]}")
    title = " ".join(["sleuth", *path])
    yield f"## `{title}`\n\n```text\n{res.output.rstrip()}\n```"
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if not getattr(sub, "hidden", False):
            yield from _sections(sub, [*path, name])

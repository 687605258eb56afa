"""The metric options every measuring command shares (`sleuth hunt`, `bisect`, `bench`): which
number is the sample and which way is better, checked once, with one-line errors naming the flag."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated

import typer
from pydantic import BaseModel, ValidationError

from agent.cli import bad_input
from tools.bench import SERVER_METRICS
from tools.metric import LAST_NUMBER_WARNING, SERVING_BENCHMARK, MetricSpec, higher_is_better

MetricOpt = Annotated[
    str | None,
    typer.Option(
        help="the metric: with --bench a key of the JSON it writes (p99_ttft_ms, output_throughput, a JMESPath); "
        "for a server one that sleuth bench measures (tok_per_s, p99_ttft_ms, median_itl_ms, ...)"
    ),
]
MetricRegexOpt = Annotated[
    str | None, typer.Option(help="with --bench: a regex for the number in its plain-text output (first group)")
]
BenchOutputOpt = Annotated[
    str | None,
    typer.Option(
        help="with --bench: the file it writes its result to, relative to the worktree "
        "(or put {out} in the command: a fresh file per sample)"
    ),
]
DirectionOpt = Annotated[
    bool | None,
    typer.Option(
        "--lower-is-better/--higher-is-better",
        help="the metric's direction (default: from its name; required for a --bench number with no name)",
    ),
]


class MetricChoice(BaseModel):
    """What a command measures: ``metric`` ("value" for a --bench read by regex or last number)."""

    metric: str
    higher_is_better: bool
    regex: str | None = None
    output: str | None = None
    warning: str | None = None  # said once to the user (the last-number rule)


def resolve_metric(
    metric: str | None,
    regex: str | None,
    output: str | None,
    lower: bool | None,
    command: str | None,
) -> MetricChoice:
    """Check the metric flags for a command workload (``command``) or a server's benchmark."""
    if command is None:
        for flag, value in (("--metric-regex", regex), ("--bench-output", output)):
            if value is not None:
                bad_input(f"{flag}: only with --bench (a server's metrics are named with --metric)")
        name = metric or "tok_per_s"
        if name not in SERVER_METRICS:
            known = ", ".join(sorted(SERVER_METRICS))
            bad_input(f"--metric: '{name}' is not measured by sleuth bench (known: {known})")
        return MetricChoice(metric=name, higher_is_better=_direction(name, lower), warning=_against_name(name, lower))
    if output is not None:
        path = PurePosixPath(output)
        if path.is_absolute() or ".." in path.parts:
            bad_input(f"--bench-output: '{output}' must be a path inside the worktree (or use {{out}} in --bench)")
    try:
        spec = MetricSpec(name=metric, regex=regex, output=output)
    except ValidationError as exc:
        flag = "--metric-regex" if regex and "regex" in str(exc) and not metric else "--metric"
        bad_input(f"{flag}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")
    if spec.name:
        return MetricChoice(
            metric=spec.name,
            higher_is_better=_direction(spec.name, lower),
            output=output,
            warning=_against_name(spec.name, lower),
        )
    if output is not None or "{out}" in command:
        bad_input("--metric: name the key to read from the benchmark's output file")
    if lower is None:
        # A number with no name has no direction to look up, and guessing one turns a regression
        # into "no regression" (a 36x slowdown read as a 36x gain): the user says which way.
        bad_input(
            "--lower-is-better/--higher-is-better: required: the benchmark's number has no name "
            "that tells which way is better"
        )
    warning = LAST_NUMBER_WARNING if not regex and SERVING_BENCHMARK.search(command) else None
    return MetricChoice(metric=_named_by(regex) or "value", higher_is_better=not lower, regex=regex, warning=warning)


def _named_by(regex: str | None) -> str | None:
    """The name a regex reads its number after (``roundtrips_per_s ([\\d.]+)``: roundtrips_per_s), to
    call the number by in every line: a trial's hunt said "now: 84.2 value" throughout."""
    m = re.match(r"\^?\s*([A-Za-z_][\w.]*[A-Za-z0-9_])(?=[\s:=(\\]|$)", regex or "")
    return m.group(1) if m else None


def _against_name(name: str, lower: bool | None) -> str | None:
    """A warning where the direction given contradicts the one the metric's name says (a
    ``p99_latency_ms`` given ``--higher-is-better`` read a 30 % rise as no regression): the flag
    holds, as the user may know better, but it is said."""
    known = higher_is_better(name)
    if lower is None or known is None or known != lower:
        return None
    given, named = ("lower", "higher") if lower else ("higher", "lower")
    return (
        f"--{given}-is-better: '{name}' reads as {named}-is-better by its name; taken as given, "
        f"so a {'rise' if given == 'lower' else 'fall'} of it is the regression hunted"
    )


def _direction(name: str, lower: bool | None) -> bool:
    if lower is not None:
        return not lower
    known = higher_is_better(name)
    if known is None:
        bad_input(f"--metric: cannot tell which way '{name}' is better; add --lower-is-better or --higher-is-better")
    return known

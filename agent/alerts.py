"""Reading alerts: an Alertmanager webhook v4 payload (or one plain alert) and its annotations.

perf-sleuth reads these annotations: ``launch_command`` (a template with ``{worktree}`` and
``{port}``), ``benchmark_command`` (a ``sleuth bench`` line: ``--model``, ``--requests``,
``--max-tokens``, ``--time-scale``, and the workload's shape ``--concurrency``, ``--input-len``,
``--request-rate``), ``good_value`` / ``bad_value``, and optionally ``good_ref``,
``good_launch_command``, ``repo``, ``summary``, and for the host ``slots`` (servers it holds at
once), ``launch_timeout`` and ``sample_timeout`` (seconds), ``busy_wait`` (seconds a launch waits
for GPUs another process holds; 0: none), ``setup`` (a per-probe build
command), ``trace_paths`` (true: launches print the modules they import, so commits that touch
none are not bisected), ``pip_log`` and ``wheelhouse`` (the host's pip log and a directory of the
previous versions' wheels, for the dependency hypothesis); the label ``metric`` names the metric
(a name of ``BenchResult.metrics()``: ``tok_per_s``,
``output_throughput``, ``p99_ttft_ms``, ...) and the annotation ``direction`` (``higher_is_better``
or ``lower_is_better``) its direction when the name does not say it.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from tools.bench import BenchConfig
from tools.metric import higher_is_better


class AlertError(ValueError):
    """The file is not an alert perf-sleuth can use; the message names the file and the field."""


def read_alert(path: str | Path) -> tuple[dict[str, str], dict[str, str]]:
    """(annotations, labels) of the first alert in the file."""
    p = Path(path)
    try:
        payload = json.loads(p.read_text())
        alert = payload["alerts"][0] if "alerts" in payload else payload
        ann = alert.get("annotations") or payload.get("commonAnnotations") or {}
        labels = alert.get("labels") or payload.get("commonLabels") or {}
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise AlertError(f"{p}: not an alert payload ({exc})") from exc
    return dict(ann), dict(labels)


def bench_options(command: str) -> dict[str, str]:
    """``--flag value`` pairs of a benchmark command line."""
    words = shlex.split(command)
    return {words[i]: words[i + 1] for i in range(len(words) - 1) if words[i].startswith("--")}


def workload_shape(opts: dict[str, str]) -> dict:
    """The workload's shape a benchmark command line gives (``--concurrency``, ``--input-len``,
    ``--request-rate``), as ``BenchConfig`` fields; ValueError on a value that is not a number."""
    return {
        "concurrency": int(opts.get("--concurrency", 1)),
        "input_len": int(opts["--input-len"]) if "--input-len" in opts else None,
        "request_rate": float(opts["--request-rate"]) if "--request-rate" in opts else None,
    }


def bench_config(annotations: dict[str, str], where: str = "alert") -> BenchConfig:
    """The benchmark the alert's ``benchmark_command`` describes (endpoint filled per server)."""
    if "benchmark_command" not in annotations:
        raise AlertError(f"{where}: annotations.benchmark_command missing")
    opts = bench_options(annotations["benchmark_command"])
    try:
        return BenchConfig(
            endpoint="http://unset/v1",
            model=opts["--model"],
            requests=int(opts.get("--requests", 4)),
            max_tokens=int(opts.get("--max-tokens", 64)),
            time_scale=float(opts.get("--time-scale", 1.0)),
            **workload_shape(opts),
        )
    except (KeyError, ValueError) as exc:
        raise AlertError(f"{where}: annotations.benchmark_command unusable ({exc})") from exc


def metric_direction(labels: dict[str, str], annotations: dict[str, str], where: str = "alert") -> tuple[str, bool]:
    """(metric, higher is better) of an alert: the label ``metric`` (default ``tok_per_s``), its
    direction from the annotation ``direction`` or else from its name; AlertError when neither
    says it."""
    metric = labels.get("metric", "tok_per_s")
    direction = annotations.get("direction")
    if direction is not None:
        if direction not in ("higher_is_better", "lower_is_better"):
            raise AlertError(
                f"{where}: annotations.direction: {direction!r} is not higher_is_better or lower_is_better"
            )
        return metric, direction == "higher_is_better"
    known = higher_is_better(metric)
    if known is None:
        raise AlertError(
            f"{where}: labels.metric: cannot tell which way '{metric}' is better; add annotations.direction"
        )
    return metric, known


def host_settings(annotations: dict[str, str], where: str = "alert") -> dict:
    """The host's settings an alert may carry, as ``Target`` fields: ``slots``, ``launch_timeout_s``,
    ``sample_timeout_s`` (positive numbers), ``busy_wait_s`` (>= 0), ``setup`` and ``trace_paths`` (true or false);
    AlertError names a bad one."""
    out: dict = {}
    for key, field, kind, zero_ok in (
        ("slots", "slots", int, False),
        ("launch_timeout", "launch_timeout_s", float, False),
        ("sample_timeout", "sample_timeout_s", float, False),
        ("busy_wait", "busy_wait_s", float, True),  # 0: fail at once when the GPUs are held
    ):
        if key in annotations:
            what, bound = ("a number of seconds >= 0", ">= 0") if zero_ok else ("a positive number", "> 0")
            try:
                value = kind(annotations[key])
                if not (value >= 0 if zero_ok else value > 0):  # NaN is neither
                    raise ValueError(f"must be {bound}")
            except ValueError as exc:
                raise AlertError(f"{where}: annotations.{key}: {annotations[key]!r} is not {what} ({exc})") from exc
            out[field] = value
    for key in ("setup", "pip_log", "wheelhouse"):
        if annotations.get(key):
            out[key] = annotations[key]
    if "trace_paths" in annotations:
        word = annotations["trace_paths"].strip().lower()
        if word not in ("true", "false", "1", "0", "yes", "no"):
            raise AlertError(f"{where}: annotations.trace_paths: {annotations['trace_paths']!r} is not true or false")
        out["trace_paths"] = word in ("true", "1", "yes")
    return out

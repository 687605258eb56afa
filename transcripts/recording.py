"""A run as plain data, out of one store and into another: its row, events, measurements and
hypotheses. An evaluation job ships its run back to the driver this way (``evals.runner``), and a
recorded world is checked in this way (``tests/recordings/``, one JSON object per line, so a
re-recording's diff reads like code): a strict replay of it (``agent.replay.replay_strict``)
serves every answer from the recording, with no repository, server or benchmark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transcripts.store import Store


def export_run(store: Store, run_id: str) -> dict[str, Any]:
    """``{"run", "events", "measurements", "hypotheses"}`` of one run, as the store holds them."""
    return {
        "run": store.run(run_id),
        "events": store.events(run_id),
        "measurements": store.measurements(run_id),
        "hypotheses": store.hypotheses(run_id),
    }


def import_run(store: Store, got: dict[str, Any], **fields: Any) -> str | None:
    """Store an exported run (``export_run``'s shape) under its own id, with ``fields`` set on
    its row; None when there is no run in it."""
    run = got.get("run")
    if not run:
        return None
    run_id = run["id"]
    store.start_run(run_id, **{k: v for k, v in run.items() if k != "id"})
    if fields:
        store.update_run(run_id, **fields)
    store.events_batch(
        run_id,
        [
            {
                "kind": e["kind"],
                "text": e["text"],
                "payload": json.loads(e["payload"]) if isinstance(e["payload"], str) else e["payload"],
                "duration_s": e["duration_s"],
                "t": e["t"],
            }
            for e in got["events"]
        ],
    )
    for m in got["measurements"]:
        store.put_measurement(run_id, {**m, "id": m["mid"], "samples": json.loads(m["samples"])}, m["metric"])
    store.put_hypotheses(
        run_id, [{**h, "id": h["hid"], "evidence": json.loads(h["evidence"])} for h in got["hypotheses"]]
    )
    return run_id


def write_lines(path: Path, got: dict[str, Any]) -> None:
    """One JSON object per line: the run row first, then each event, measurement, hypothesis."""
    lines = [json.dumps({"run": got["run"]}, sort_keys=True)]
    for part in ("events", "measurements", "hypotheses"):
        lines += [json.dumps({part[:-1]: item}, sort_keys=True) for item in got[part]]
    path.write_text("\n".join(lines) + "\n")


def read_lines(path: Path) -> dict[str, Any]:
    """``write_lines``'s file back as ``export_run``'s shape."""
    got: dict[str, Any] = {"run": None, "events": [], "measurements": [], "hypotheses": []}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        (kind, item), *_ = json.loads(line).items()
        if kind == "run":
            got["run"] = item
        else:
            got[kind + "s"].append(item)
    return got

"""The Markdown report of an evaluation set, with its PNG plots (accuracy per kind; probes against
the bisection bound), and the side-by-side comparison of two sets."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import matplotlib

from tools.text import counted

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _short(ref: str) -> str:
    """A SHA's first 10 hex digits; a path's file name; anything else as it is."""
    if len(ref) >= 7 and all(c in "0123456789abcdef" for c in ref):
        return ref[:10]
    return ref.rsplit("/", 1)[-1]


def _scores(rows: list[dict]) -> list[dict]:
    """The runs judged against their truth: scored, and not a case error (a case whose own input
    made the hunt impossible is neither exact nor wrong)."""
    return [s for r in rows if r.get("score") and not (s := json.loads(r["score"])).get("case_error")]


def aggregate(rows: list[dict]) -> dict:
    """The set's numbers. ``runs`` = ``scored`` + ``crashed`` + ``case_errors``; ``exact``,
    ``graded``, ``per_kind`` and the means are over the scored runs only."""
    scores = _scores(rows)
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for s in scores:
        by_kind[s["truth_kind"]].append(s)
    ratios = [s["probes_over_bound"] for s in scores if s.get("probes_over_bound") is not None]
    return {
        "runs": len(rows),
        "scored": len(scores),
        "crashed": sum(1 for r in rows if r.get("error")),
        "case_errors": sum(1 for r in rows if r.get("score") and json.loads(r["score"]).get("case_error")),
        "exact": sum(s["exact"] for s in scores) / len(scores) if scores else 0.0,
        "graded": sum(s["graded"] for s in scores) / len(scores) if scores else 0.0,
        "per_kind": {k: sum(s["exact"] for s in v) / len(v) for k, v in sorted(by_kind.items())},
        "mean_probes": sum(s["probes"] for s in scores) / len(scores) if scores else 0.0,
        "mean_probes_over_bound": sum(ratios) / len(ratios) if ratios else None,
        "mean_wall_s": sum(s["wall_s"] for s in scores) / len(scores) if scores else 0.0,
        "repo_intact": all(s["repo_intact"] for s in scores),
        "gate_held": all(s["approval_before_mutation"] for s in scores),
        "wrongly_supported": sum(len(s["wrongly_supported"]) for s in scores),
    }


def plots(rows: list[dict], out_dir: Path, stem: str) -> list[Path]:
    scores = _scores(rows)
    agg = aggregate(rows)
    paths = []
    fig, ax = plt.subplots(figsize=(7, 3.2))
    kinds = list(agg["per_kind"])
    ax.bar(kinds, [agg["per_kind"][k] * 100 for k in kinds], color="#4c78a8")
    ax.set_ylabel("exact (%)")
    ax.set_ylim(0, 105)
    ax.set_title("accuracy per root-cause kind")
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    p = out_dir / f"{stem}-accuracy.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for s in scores:
        ax.scatter(s["bound"], s["probes"], color="#54a24b" if s["exact"] else "#e45756")
    top = max([s["bound"] for s in scores] + [1]) + 1
    ax.plot([0, top], [0, top], "k--", lw=0.8, label="probes = bound")
    ax.plot([0, top], [0, 1.5 * top], "k:", lw=0.8, label="1.5 x bound")
    ax.set_xlabel("ceil(log2(N+1))")
    ax.set_ylabel("probes")
    ax.set_title("probes vs the bisection bound (green: exact)")
    ax.legend()
    fig.tight_layout()
    p = out_dir / f"{stem}-probes.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)
    return paths


def markdown(set_row: dict, rows: list[dict], out: Path) -> str:
    agg = aggregate(rows)
    imgs = plots(rows, out.parent, out.stem)
    lines = [
        f"# Evaluation {set_row['id']}",
        "",
        f"policy **{set_row.get('policy')}**"
        + (f", model {set_row['model']}" if set_row.get("model") else "")
        + f"; {agg['runs']} runs ({agg['crashed']} crashed, {agg['case_errors']} case errors), "
        + f"{counted(int(set_row.get('workers') or 0), 'worker')}, "
        + f"{(set_row.get('wall_s') or 0):.0f} s wall",
        "",
        f"- exact: **{agg['exact'] * 100:.0f} %**, graded {agg['graded'] * 100:.0f} %",
        f"- mean probes {agg['mean_probes']:.1f}"
        + (
            f", {agg['mean_probes_over_bound']:.2f} x the bound ceil(log2(N+1))"
            if agg["mean_probes_over_bound"] is not None
            else ""
        ),
        f"- repository left intact in every run: {agg['repo_intact']}; "
        f"approval before every mutation: {agg['gate_held']}",
        f"- red herrings wrongly supported: {agg['wrongly_supported']}",
        "",
        "| kind | exact |",
        "| --- | ---: |",
        *[f"| {k} | {v * 100:.0f} % |" for k, v in agg["per_kind"].items()],
        "",
        "| scenario | truth | named | exact | graded | probes | bound | samples | launches | device s | tool calls "
        "| wall s | status |",
        "| --- | --- | --- | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in sorted(rows, key=lambda r: (r.get("scenario") or "", r["repeat"])):
        if not r.get("score"):
            lines.append(
                f"| {r.get('scenario')} | - | - | - | - | - | - | - | - | - | - | - | crashed: {r.get('error')} |"
            )
            continue
        s = json.loads(r["score"])
        if s.get("case_error"):  # the case's input, not the agent's answer
            reason = s["case_error"].splitlines()[0].replace("|", "\\|")
            lines.append(f"| {s['scenario']} | - | - | - | - | - | - | - | - | - | - | - | case error: {reason} |")
            continue
        named = ", ".join(_short(n) for n in s["named"]) or s["got_kind"] or "-"
        truth = s["truth_kind"] + ": " + (", ".join(_short(t) for t in s["truth_refs"]) or "-")
        lines.append(
            f"| {s['scenario']} | {truth} | {named} | {'yes' if s['exact'] else 'no'} | {s['graded']:.2f} | "
            f"{s['probes']} | {s['bound']} | {s['samples']} | {s.get('launches', 0)} | {s.get('device_s', 0):.0f} | "
            f"{s['tool_calls']} | {s['wall_s']:.0f} | {s['status']} |"
        )
    lines += ["", *[f"![{p.stem}]({p.name})" for p in imgs], ""]
    text = "\n".join(lines)
    out.write_text(text)
    return text


def _by_scenario(rows: list[dict]) -> dict[str, dict]:
    return {json.loads(r["score"])["scenario"]: json.loads(r["score"]) for r in rows if r.get("score")}


def shared_scenarios(a: list[dict], b: list[dict]) -> set[str]:
    """The scenarios both sets ran (by name; a crashed run counts)."""
    return {r.get("scenario") for r in a} & {r.get("scenario") for r in b} - {None}


def compare_json(a_row: dict, a: list[dict], b_row: dict, b: list[dict]) -> dict:
    """``sleuth eval --compare A B --json``: each set (id, policy, model, wall, aggregate) and a row
    per scenario with each set's score (null where that set has none: not run, or it crashed)."""

    def side(row: dict, rows: list[dict]) -> dict:
        return {
            "set": row["id"],
            "policy": row.get("policy"),
            "model": row.get("model"),
            "wall_s": row.get("wall_s"),
            "aggregate": aggregate(rows),
        }

    sa, sb = _by_scenario(a), _by_scenario(b)
    return {
        "a": side(a_row, a),
        "b": side(b_row, b),
        "shared": len(shared_scenarios(a, b)),
        "scenarios": [
            {"scenario": name, "a": sa.get(name), "b": sb.get(name)}
            for name in sorted({r.get("scenario") for r in a + b} - {None})
        ],
    }


def compare(a_row: dict, a: list[dict], b_row: dict, b: list[dict]) -> str:
    ga, gb = aggregate(a), aggregate(b)
    sa = {json.loads(r["score"])["scenario"]: json.loads(r["score"]) for r in a if r.get("score")}
    sb = {json.loads(r["score"])["scenario"]: json.loads(r["score"]) for r in b if r.get("score")}
    name_a = f"{a_row['id']} ({a_row.get('policy')}{'/' + a_row['model'] if a_row.get('model') else ''})"
    name_b = f"{b_row['id']} ({b_row.get('policy')}{'/' + b_row['model'] if b_row.get('model') else ''})"
    lines = [
        f"| | A: {name_a} | B: {name_b} |",
        "| --- | ---: | ---: |",
        f"| exact | {ga['exact'] * 100:.0f} % | {gb['exact'] * 100:.0f} % |",
        f"| graded | {ga['graded'] * 100:.0f} % | {gb['graded'] * 100:.0f} % |",
        f"| mean probes | {ga['mean_probes']:.1f} | {gb['mean_probes']:.1f} |",
        f"| mean wall s | {ga['mean_wall_s']:.0f} | {gb['mean_wall_s']:.0f} |",
        "",
        "| scenario | A exact | B exact | A probes | B probes |",
        "| --- | :---: | :---: | ---: | ---: |",
    ]

    def exact(x: dict | None) -> str:
        if x is None:
            return "-"
        return "case error" if x.get("case_error") else "yes" if x["exact"] else "no"  # the case's, not the agent's

    for name in sorted(set(sa) | set(sb)):
        x, y = sa.get(name), sb.get(name)
        lines.append(
            f"| {name} | {exact(x)} | {exact(y)} | {x['probes'] if x else '-'} | {y['probes'] if y else '-'} |"
        )
    return "\n".join(lines)

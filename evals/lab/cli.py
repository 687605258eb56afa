"""``sleuth lab build SPEC DIR`` and ``sleuth lab demo``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from agent.cli import bad_input, out, print_json, progress
from evals.lab.builder import LabError, build
from evals.lab.demo import DemoResult, run_demo
from evals.lab.spec import SpecError, load_spec

app = typer.Typer(no_args_is_help=True, help="The regression lab: reproducible perf-regression scenarios.")


@app.command("build")
def build_cmd(
    spec: Annotated[Path, typer.Argument(help="scenario spec (TOML)")],
    out_dir: Annotated[Path, typer.Argument(help="where to write repo/, host/, truth.json, alert.json")],
    json_out: Annotated[bool, typer.Option("--json", help="print what was built as JSON")] = False,
    launch_scale: Annotated[
        float | None,
        typer.Option(
            min=0.0, max=10.0, help="of the spec's simulated launch time (default $SLEUTH_LAB_LAUNCH_SCALE or 1)"
        ),
    ] = None,
) -> None:
    """Build a scenario: DIR/repo (the agent's checkout), DIR/host, DIR/truth.json, DIR/alert.json."""
    try:
        scenario = load_spec(spec)
    except SpecError as exc:
        bad_input(str(exc))
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        bad_input(f"{out_dir}: exists and is not an empty directory")
    try:
        res = build(scenario, out_dir, launch_scale=launch_scale)
    except LabError as exc:
        out.print(f"[red]build failed:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from exc
    summary = {
        "scenario": scenario.name,
        "dir": str(res.root),
        "repo": str(res.repo),
        "host": str(res.host),
        "good_sha": res.good_sha,
        "head_sha": res.head_sha,
        "pre_pull_sha": res.pre_pull_sha,
        "alert": str(res.root / "alert.json"),
        "truth": str(res.root / "truth.json"),
    }
    if json_out:
        print_json(summary)
        return
    for key, value in summary.items():
        out.print(f"[bold]{key:>13}[/bold]  {value}", highlight=False)


def demo_table(res: DemoResult) -> Table:
    t = Table(title="seed scenario eagle3_pcg_moe: measured (simulated time) vs the seeds")
    for col in ("metric", "good", "seeds good", "bad", "seeds bad", "change", "p (rank test)", "within 10%"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for r in res.rows:
        c = r.comparison
        t.add_row(
            r.metric,
            f"{r.good:.1f}",
            f"{r.seed_good:g}",
            f"{r.bad:.1f}",
            f"{r.seed_bad:g}",
            f"{c.delta_pct:+.1f}%" if c else "",
            f"{c.p_value:.1e}" if c else "",
            "[green]yes[/green]" if r.within_10pct else "[red]no[/red]",
        )
    return t


@app.command("demo")
def demo_cmd(
    samples: Annotated[int, typer.Option(min=2, help="benchmark samples per state")] = 5,
    keep: Annotated[Path | None, typer.Option(help="keep the built scenario and logs in this (new) dir")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Build the seed scenario, measure good vs bad (baseline and EAGLE-3), compare with the seeds."""
    if keep is not None and keep.exists() and any(keep.iterdir()):
        bad_input(f"--keep: {keep} exists and is not empty")
    with progress() as bar:
        task = bar.add_task("measuring 4 states", total=4 * samples)
        res = run_demo(
            samples=samples,
            workdir=keep,
            keep=keep is not None,
            on_sample=lambda label, _r: bar.update(task, advance=1, description=label),
        )
    if json_out:
        print_json(res.model_dump(mode="json"))
    else:
        out.print(demo_table(res))
        where = f"  (scenario kept in {res.scenario_dir})" if keep is not None else ""
        out.print(f"good {res.good_sha[:10]}  head {res.head_sha[:10]}{where}", highlight=False)
    if not all(r.within_10pct for r in res.rows):
        raise typer.Exit(1)

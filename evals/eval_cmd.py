"""``sleuth eval PATH... [--policy P] [--model M] [--repeats K] [--workers N] [--json] [--report FILE.md]``,
``sleuth eval --compare SET_A SET_B``, ``sleuth eval --rescore SET`` (plugged in through
``perf_sleuth.cli``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from agent.cli import bad_input, db_path, output_file, progress
from agent.hunt_cmd import AllowShellOpt, BaseUrlOpt, MaxTokensOpt, MaxTurnsOpt, ModelOpt, PolicyOpt, llm_options
from agent.state import LLMSettings
from evals import report
from evals.backends import LocalBackend, RayBackend, RayError
from evals.runner import find_specs, rescore, run_set, set_rows
from tools.text import first_line
from transcripts.store import Store, run_command


def json_row(row: dict) -> dict:
    """One result of a set as ``--json`` gives it: its score (or the scenario and the error that
    left it unscored), with the run and repeat it came from, so a wrong row leads to
    ``sleuth show RUN`` and ``sleuth replay RUN``."""
    got = json.loads(row["score"]) if row["score"] else {"scenario": row["scenario"], "error": row["error"]}
    return got | {"run_id": row["run_id"], "repeat": row["repeat"]}


def _set(store: Store, set_id: str) -> dict:
    if "eval_sets" not in store.db.table_names():
        bad_input(f"SET: no evaluation sets in {store.path}")
    rows = list(store.db["eval_sets"].rows_where("id = ?", [set_id]))
    if not rows:
        bad_input(f"SET: no evaluation set '{set_id}' in {store.path}")
    return rows[0]


def eval_cmd(
    paths: Annotated[list[str] | None, typer.Argument(help="spec files or folders of them")] = None,
    policy: PolicyOpt = "methodical",
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    allow_shell: AllowShellOpt = None,
    max_turns: MaxTurnsOpt = None,
    max_llm_tokens: MaxTokensOpt = None,
    backend: Annotated[str, typer.Option(help="local (worker processes) or ray (tasks on a Ray cluster)")] = "local",
    ray_address: Annotated[
        str | None, typer.Option(help="an existing Ray cluster (ray://HOST:10001 or HOST:6379); default: a local head")
    ] = None,
    ray_resource: Annotated[
        str, typer.Option(help="the custom resource a node must offer to run a scenario")
    ] = "sleuth-lab",
    repeats: Annotated[int, typer.Option(min=1)] = 1,
    workers: Annotated[int, typer.Option(min=1)] = 1,
    json_out: Annotated[bool, typer.Option("--json")] = False,
    report_path: Annotated[Path | None, typer.Option("--report", help="Markdown report (PNG plots beside it)")] = None,
    compare: Annotated[
        tuple[str, str] | None, typer.Option(metavar="SET_A SET_B", help="two set ids, side by side")
    ] = None,
    rescore_set: Annotated[str | None, typer.Option("--rescore", help="score a stored set again")] = None,
    resume: Annotated[str | None, typer.Option(help="continue an interrupted set (runs only what is missing)")] = None,
    min_exact: Annotated[
        float | None,
        typer.Option(min=0.0, max=1.0, help="exit 1 when the share of exact runs is below this (a CI gate)"),
    ] = None,
    db: Annotated[Path | None, typer.Option("--db", help="run store")] = None,
) -> None:
    """Run scenario suites with a policy, score every run against its truth, report."""
    # A set to compare, rescore or resume must be in a store that exists; a new evaluation opens
    # (and so creates) its store only once its specs are read, so a refused input leaves no file.
    modes = [flag for flag, on in (("--compare", compare), ("--rescore", rescore_set), ("--resume", resume)) if on]
    if len(modes) > 1:
        bad_input(f"{'/'.join(modes)}: give one")
    if modes and paths:
        bad_input(f"PATH: not with {modes[0]} (it reads the stored set{'s' if compare else ''}, not specs)")
    if modes and (policy != "methodical" or model or repeats != 1):
        bad_input(f"--policy/--model/--repeats: not with {modes[0]} (the stored set keeps its own)")
    if compare and report_path:
        bad_input("--report: not with --compare (a comparison is printed; --json gives it as data)")
    if compare and min_exact is not None:
        bad_input("--min-exact: not with --compare (it gates one set's score)")
    if report_path:
        output_file("--report", report_path)
    stored = bool(modes)
    path = db_path(db, must_exist=stored)
    store = Store(path) if stored else None
    try:
        if compare:
            a, b = _set(store, compare[0]), _set(store, compare[1])
            rows_a, rows_b = set_rows(store, a["id"]), set_rows(store, b["id"])
            if not report.shared_scenarios(rows_a, rows_b):  # side by side, nothing lines up
                sys.stderr.write(f"warning: sets {a['id']} and {b['id']} share no scenario\n")
            if json_out:
                print(json.dumps(report.compare_json(a, rows_a, b, rows_b), indent=2))
            else:
                print(report.compare(a, rows_a, b, rows_b))
            return
        if rescore_set:
            s = _set(store, rescore_set)
            scores = rescore(store, s["id"])
            rows = set_rows(store, s["id"])
            agg = report.aggregate(rows)
            if json_out:  # the rows of a run's --json, scored again ("scores" as before: the bare scores)
                scored = [x.model_dump() if x else None for x in scores]
                print(
                    json.dumps(
                        {"set": s["id"], "aggregate": agg, "rows": [json_row(r) for r in rows], "scores": scored},
                        indent=2,
                    )
                )
            else:
                print(f"rescored {len(scores)} runs of {s['id']}: exact {agg['exact'] * 100:.0f} %")
            if report_path:
                report.markdown(_set(store, s["id"]), set_rows(store, s["id"]), report_path)
            _gate(agg, min_exact)
            return
        llm = llm_options(policy, model, base_url, allow_shell, max_turns, max_llm_tokens)
        if backend not in ("local", "ray"):
            bad_input(f"--backend: '{backend}' is not local or ray")
        if backend == "local" and ray_address:
            bad_input("--ray-address: only with --backend ray")
        runner = (
            LocalBackend(workers) if backend == "local" else RayBackend(ray_address, ray_resource, local_cpus=workers)
        )
        if not paths and not resume:
            bad_input("PATH: give spec files or folders (or --compare / --rescore / --resume)")
        if resume:
            s = _set(store, resume)
            specs = [Path(x) for x in json.loads(s["specs"])]
            policy, model, repeats = s["policy"], s.get("model"), s["repeats"]
            llm = LLMSettings.model_validate_json(s["llm"]) if s.get("llm") else None
        else:
            try:
                specs = find_specs(paths or [])
            except FileNotFoundError as exc:
                bad_input(f"PATH: {exc}")
            if not specs:
                bad_input(f"PATH: no .toml specs in {' '.join(paths or [])}")
        from evals.lab.spec import SpecError, load_spec
        from evals.realworld import CASE_PYTHON_ENV, CaseError, history_problem, is_real, load_case, needs_said

        unrunnable: list[str] = []
        for spec in specs:
            try:
                if is_real(spec.read_text()):  # a public project's regression (evals.realworld)
                    case = load_case(spec)
                    for name in (case.bundle, case.licence):
                        if not (spec.parent / name).is_file():
                            bad_input(
                                f"{spec.parent / name}: missing (named by {spec.name}; the case cannot be unpacked)"
                            )
                    if said := history_problem(spec.parent, case):  # its bundle holds the commits it names
                        bad_input(f"{spec}: {said}")
                    if said := needs_said(case, spec.parent.resolve()):  # its server's runtime is not here
                        unrunnable.append(said)
                else:
                    load_spec(spec)
            except (SpecError, CaseError) as exc:
                bad_input(str(exc))
        if unrunnable and len(unrunnable) == len(specs):  # nothing here could run: say why, run nothing
            bad_input(unrunnable[0])
        store = store or Store(path)
        total = len(specs) * repeats
        from agent.state import new_run_id

        set_id = resume or "set-" + new_run_id()  # named before it runs: Ctrl-C says how to resume it
        try:
            with progress(transient=False, disable=json_out) as bar:
                task = bar.add_task(f"eval ({policy})", total=total)

                def done(got: dict, sc) -> None:
                    error = first_line(got.get("error"), 200)
                    if sc is None and f"${CASE_PYTHON_ENV}" in error:  # needs_said: its server's runtime is not here
                        mark = "skipped: " + error.removeprefix("ValueError: ")
                    elif sc is None:
                        mark = "crashed: " + error[:160]
                    elif sc.case_error:  # the case's own input made the hunt impossible: not the agent's answer
                        mark = "case error: " + first_line(sc.case_error, 200)
                    else:
                        mark = "exact" if sc.exact else "wrong"
                    bar.console.print(f"  {got.get('scenario')}: {mark}", highlight=False, markup=False, soft_wrap=True)
                    bar.advance(task)

                try:
                    run_set(
                        specs, store, policy, model, repeats, workers, on_done=done, set_id=set_id, llm=llm,
                        backend=runner,
                    )  # fmt: skip
                except RayError as exc:
                    bad_input(f"--backend ray: {exc}")
                finally:
                    if isinstance(runner, RayBackend):
                        runner.shutdown()
        except KeyboardInterrupt:  # what finished is stored (and its wall time); --resume runs the rest
            again = run_command("eval --resume", set_id, path)
            sys.stderr.write(f"interrupted: set {set_id} stopped; `{again}` continues it\n")
            raise typer.Exit(130) from None
        rows = set_rows(store, set_id)
        agg = report.aggregate(rows)
        s = _set(store, set_id)
        if report_path:
            report.markdown(s, rows, report_path)
        if json_out:
            print(
                json.dumps(
                    {
                        "set": set_id,
                        "aggregate": agg,
                        "wall_s": s.get("wall_s"),
                        "rows": [json_row(r) for r in rows],
                    },
                    indent=2,
                )
            )
        else:
            print(
                f"set {set_id}: exact {agg['exact'] * 100:.0f} % of {agg['runs']} runs, "
                + (f"{agg['case_errors']} case errors (not counted), " if agg["case_errors"] else "")
                + f"mean probes {agg['mean_probes']:.1f}"
                + (f" ({agg['mean_probes_over_bound']:.2f} x bound)" if agg["mean_probes_over_bound"] else "")
                + f", {s.get('wall_s', 0):.0f} s"
            )
        if agg["runs"] and agg["crashed"] + agg["case_errors"] == agg["runs"]:
            raise typer.Exit(1)  # no run was scored: the evaluation itself failed
        _gate(agg, min_exact)
    finally:
        if store is not None:
            store.close()


def _gate(agg: dict, min_exact: float | None) -> None:
    """``--min-exact``: a set scored below it exits 1, saying so on stderr (a trial's CI script
    had to parse the JSON: every scenario wrong exits 0, as any set that ran)."""
    if min_exact is not None and agg["exact"] < min_exact:
        sys.stderr.write(f"exact {agg['exact'] * 100:.0f} % is below --min-exact {min_exact * 100:.0f} %\n")
        raise typer.Exit(1)

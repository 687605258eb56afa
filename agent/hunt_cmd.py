"""``sleuth demo``, ``sleuth hunt``, ``sleuth approve RUN``, ``sleuth reject RUN``."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from agent import process_start
from agent.alerts import AlertError, bench_config, host_settings, metric_direction, read_alert
from agent.cli import (
    BusyWaitOpt,
    LaunchTimeoutOpt,
    SetupOpt,
    SlotsOpt,
    TracePathsOpt,
    app,
    bad_input,
    check_launch,
    console,
    db_path,
    off_the_line,
    one_workload,
    out,
    print_json,
)
from agent.graph import Decision, HostLost, Hunter
from agent.llm_policy import settings_for
from agent.metric_opts import BenchOutputOpt, DirectionOpt, MetricOpt, MetricRegexOpt, resolve_metric
from agent.report import verdict, write_report
from agent.state import Budget, Hunt, LLMSettings, Target, new_run_id
from agent.terminal import report_view
from tools.bench import SERVER_METRICS, BenchConfig
from tools.git import GitError, open_repo
from tools.host import HostError, LocalHost
from tools.ssh import SSHHost
from tools.text import first_line
from transcripts.lease import RunBusy
from transcripts.store import Store, StoreUnavailable, layout, run_command

DbOpt = Annotated[Path | None, typer.Option("--db", help="run store (default $SLEUTH_DB or the XDG data dir)")]
PolicyOpt = Annotated[str, typer.Option(help="methodical, bisect-only, or llm (with --model)")]
ModelOpt = Annotated[str | None, typer.Option(help="the LLM, for --policy llm ($OPENAI_API_KEY is its key)")]
BaseUrlOpt = Annotated[
    str | None, typer.Option(help="an OpenAI-compatible endpoint (vLLM, SGLang, Ollama); default $OPENAI_BASE_URL")
]
AllowShellOpt = Annotated[
    list[str] | None, typer.Option(help="argv prefix the model may run, e.g. 'pip list' (repeatable); default none")
]
MaxTurnsOpt = Annotated[int | None, typer.Option(min=1, help="model turns budget (--policy llm; default 40)")]
MaxTokensOpt = Annotated[
    int | None, typer.Option(min=1, help="model tokens budget, input + output (--policy llm; default 400000)")
]


def llm_options(
    policy: str,
    model: str | None,
    base_url: str | None,
    allow_shell: list[str] | None,
    max_turns: int | None = None,
    max_tokens: int | None = None,
) -> LLMSettings | None:
    """The LLM settings of a command line, or a one-line error naming the option (exit 2)."""
    from agent.policy import POLICY_NAMES

    if policy not in POLICY_NAMES:
        bad_input(f"--policy: unknown policy '{policy}' (known: {', '.join(POLICY_NAMES)})")
    try:
        return settings_for(policy, model, base_url, allow_shell, max_turns, max_tokens)
    except ValueError as exc:
        bad_input(str(exc))


class _Ticking:
    """A line drawn anew at each refresh of the live panel (four a second), so its clock moves
    between a hunt's steps: a minute-long launch read as a hang with the time standing still."""

    def __init__(self, draw: Callable[[], Text]) -> None:
        self.draw = draw

    def __rich__(self) -> Text:
        return self.draw()


class LiveView:
    """A Rich live panel in a terminal: run, phase, current hypothesis, probes, measurements so
    far. In a pipe or a log (``trail``), each step the hunt says is one line on stderr instead, so a
    hunt of minutes is not silent until its report."""

    def __init__(self, enabled: bool, trail: bool = False) -> None:
        self.live = Live(console=console, refresh_per_second=4, transient=False) if enabled else None
        self.trail = trail and not enabled
        self.last = ""
        # Seconds the hunt has run (``Hunter.elapsed``: a resumed run's time lying dead left out; a
        # trial's resume said "[ 341.6s] measuring now" four seconds in). Set by the command.
        self.clock: Callable[[Hunt], float] = lambda hunt: time.time() - hunt.started_at

    def __enter__(self) -> LiveView:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.__exit__(None, None, None)

    def update(self, hunt: Hunt, text: str) -> None:
        self.last = text
        if self.trail:
            line = f"[{self.clock(hunt):6.1f}s] {text}"
            console.print(escape(line), highlight=False, soft_wrap=True)  # "h1 [hardware]" is text
        if self.live is None:
            return
        current = next((h for h in hunt.hypotheses if h.status == "open"), None)
        said = f"run {hunt.run_id}  {hunt.phase}  probes {hunt.probes}/{hunt.budget.max_probes}"
        head = _Ticking(lambda: Text(f"{said}  {self.clock(hunt):5.1f}s", style="bold"))
        hyp = Text(f"hypothesis: {current.id} [{current.category}] {current.statement}" if current else "")
        t = Table(show_header=True, header_style="dim", box=None)
        for col in ("state", "ref", hunt.target.metric, "n"):
            t.add_column(col)
        for m in hunt.latest_states()[-8:]:
            t.add_row(m.label, m.ref[:10], f"{m.median:.4g}", str(len(m.samples)))
        self.live.update(Group(head, hyp, t, Text(text, style="dim")))


@contextlib.contextmanager
def graceful_signals():
    """SIGTERM (and SIGINT, as usual) unwind the hunt: every server is stopped and every scratch
    worktree removed on the way out. (SIGKILL cannot be caught: the next start cleans up.) Once
    the work inside has finished, SIGTERM and SIGINT are ignored, not restored, until
    ``report_written``: the run's end is in the store, and its report, verdict file and printed
    verdict follow whatever arrives now. A trial's SIGTERM two seconds after "proposed: ..." ended
    the process with 143, nothing printed and no verdict.json (the default action had been put back)."""

    def stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, stop)
    finished = False
    try:
        yield
        finished = True
    finally:
        if finished:
            _HELD.update({signal.SIGTERM: old, signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN)})
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            signal.signal(signal.SIGTERM, old)


_HELD: dict[int, object] = {}  # the handlers ``graceful_signals`` holds back until the report is out


@contextlib.contextmanager
def report_written():
    """Around a finished command's report and verdict: afterwards, the handlers ``graceful_signals``
    held back are put back (in-process callers, a test's, get theirs again)."""
    try:
        yield
    finally:
        _release_held()


def _release_held() -> None:
    while _HELD:
        sig, handler = _HELD.popitem()
        signal.signal(sig, handler)  # type: ignore[arg-type]


@contextlib.contextmanager
def shielded_cleanup():
    """The way out (servers stopped, worktrees removed, the run's lease let go) is not cut short by
    a SIGTERM or Ctrl-C arriving during it: outside ``graceful_signals`` SIGTERM's default ends
    the process at once. A service stopped just after its approval job recorded the run's end
    killed that job in its cleanup, and left the re-measurement's worktree behind (CI, twice)."""
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    except BaseException:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        _release_held()  # no report follows: what ``graceful_signals`` held back goes back now
        raise
    for sig, handler in old.items():
        signal.signal(sig, handler)


def target_from_alert(path: Path, repo: str | None) -> Target:
    try:
        ann, labels = read_alert(path)
        if "launch_command" not in ann:
            raise AlertError(f"{path}: annotations.launch_command missing")
        bench = bench_config(ann, str(path))
        good = float(ann["good_value"]) if "good_value" in ann else None
        bad = float(ann["bad_value"]) if "bad_value" in ann else None
        host_fields = host_settings(ann, str(path))
        metric, higher = metric_direction(labels, ann, str(path))
        if metric not in SERVER_METRICS:
            raise AlertError(f"{path}: labels.metric: '{metric}' is not a metric sleuth bench measures")
    except AlertError as exc:
        bad_input(f"--alert: {exc}")
    except ValueError as exc:
        bad_input(f"--alert: {path}: annotations.good_value/bad_value: {exc}")
    check_launch(f"--alert: {path}: annotations.launch_command", ann["launch_command"])
    return Target(
        **host_fields,
        repo=repo or ann.get("repo", ""),
        launch=ann["launch_command"],
        good_launch=ann.get("good_launch_command"),
        workload=bench,
        metric=metric,
        higher_is_better=higher,
        good_ref=ann.get("good_ref"),
        good_value=good,
        bad_value=bad,
        summary=ann.get("summary", ""),
    )


def run_hunt(
    target: Target,
    db: Path,
    budget: Budget,
    yes: bool,
    json_out: bool,
    live: bool = True,
    scenario: Path | None = None,
    spec: str | None = None,
    policy: str = "methodical",
    model: str | None = None,
    llm: LLMSettings | None = None,
    run_id: str | None = None,
) -> None:
    hunt = Hunt(
        run_id=run_id or new_run_id(), target=target, budget=budget, policy=policy, model=model, llm=llm,
        started_at=process_start.take(),
    )  # fmt: skip
    approve_hint = run_command("approve", hunt.run_id, db)
    view = LiveView(live and not json_out and console.is_terminal, trail=live and not json_out)
    if view.trail:
        console.print(f"run {hunt.run_id}: hunting (each step below; the report at the end)", highlight=False)
    hunter = Hunter(db, layout(db).runs, on_event=view.update)
    try:
        _take_lease(hunter, hunt.run_id, "--run-id")  # a --run-id another live process already drives: exit 2
        with view, graceful_signals(), store_guard(hunter, hunt.run_id, run_command("resume", hunt.run_id, db)):
            result = hunter.start(hunt, scenario=str(scenario) if scenario else None, spec=spec)
            if result.status == "awaiting_approval" and yes:
                result = hunter.resume(hunt.run_id, Decision(approved=True, reason="--yes"))
    finally:
        with shielded_cleanup():
            hunter.close()
    with report_written():
        run_dir = layout(db).runs / hunt.run_id
        write_report(result, run_dir, approve_hint)
        finish(result, run_dir, json_out, approve_hint)


def finish(hunt: Hunt, run_dir: Path, json_out: bool, approve_hint: str | None = None) -> None:
    if hunt.bad_flag:  # the input made the hunt impossible: one line naming it, exit 2 (the run is kept)
        bad_input(f"{hunt.bad_flag}: {hunt.error}")
    if json_out:
        print_json(verdict(hunt))
    elif out.is_terminal:  # rendered: headings, tables, verdicts in colour, the approve command highlighted
        out.print(report_view(hunt, approve_hint if hunt.status == "awaiting_approval" else None))
        out.print(f"report: {run_dir / 'report.md'}  plot: {run_dir / 'hunt.png'}", highlight=False)
    else:  # a pipe or a file: the Markdown as it is, no line wrapped at a terminal's width
        text = (run_dir / "report.md").read_text().rstrip() + "\n\n"
        text += f"report: {run_dir / 'report.md'}  plot: {run_dir / 'hunt.png'}\n"
        if hunt.status == "awaiting_approval" and approve_hint:
            reject = approve_hint.replace(" approve ", " reject ")
            text += f"awaiting approval: {approve_hint}   (or: {reject} --reason '...')\n"
        out.file.write(text)
        out.file.flush()
    if hunt.status in ("inconclusive", "failed") or hunt.root_kind == "external":
        raise typer.Exit(1)  # nothing to approve: a person must look outside the repository


DEMO_LAUNCH_SCALE = 0.02  # of the seed's simulated launch time (50 s -> 1 s simulated, 0.2 s wall)


@app.command("demo")
def demo(
    json_out: Annotated[bool, typer.Option("--json", help="print the verdict as JSON")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="approve the proposed revert (for scripts)")] = False,
    policy: PolicyOpt = "methodical",
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    allow_shell: AllowShellOpt = None,
    max_turns: MaxTurnsOpt = None,
    db: DbOpt = None,
) -> None:
    """Build the seed scenario in a temp dir and hunt it end to end (methodical: no LLM, no network)."""
    llm = llm_options(policy, model, base_url, allow_shell, max_turns)
    from evals.lab.builder import build  # the lab plugs in from evals (see agent/cli.py)
    from evals.lab.demo import SEED_SPEC
    from evals.lab.spec import load_spec

    root = Path(tempfile.mkdtemp(prefix="sleuth-demo-"))
    # The demo tells the story; bench/real_cost.py is where launches take their realistic time.
    scale = None if "SLEUTH_LAB_LAUNCH_SCALE" in os.environ else DEMO_LAUNCH_SCALE
    res = build(load_spec(SEED_SPEC), root / "scenario", launch_scale=scale)
    console.print(f"seed scenario built in {res.root}", highlight=False)
    target = target_from_alert(res.root / "alert.json", str(res.repo))
    budget = Budget(max_probes=10, max_wall_s=600)
    run_hunt(
        target,
        db_path(db),
        budget,
        yes,
        json_out,
        scenario=res.root,
        spec=SEED_SPEC.read_text(),
        policy=policy,
        model=model,
        llm=llm,
    )


@app.command("hunt")
def hunt_cmd(
    repo: Annotated[str | None, typer.Option(help="repository path (on the host)")] = None,
    alert: Annotated[Path | None, typer.Option(help="alert JSON (Alertmanager v4 or plain)")] = None,
    launch: Annotated[str | None, typer.Option(help="launch template with {worktree} and {port}")] = None,
    bench: Annotated[
        str | None, typer.Option(help="instead of a server: a command run in {worktree} that prints one number")
    ] = None,
    metric: MetricOpt = None,
    metric_regex: MetricRegexOpt = None,
    bench_output: BenchOutputOpt = None,
    lower_is_better: DirectionOpt = None,
    good: Annotated[str | None, typer.Option(help="known-good ref")] = None,
    good_value: Annotated[float | None, typer.Option(help="the metric's good value")] = None,
    served_model: Annotated[str | None, typer.Option(help="the served model's name, for the benchmark")] = None,
    requests: Annotated[int, typer.Option(min=1)] = 4,
    max_tokens: Annotated[int, typer.Option(min=1)] = 64,
    time_scale: Annotated[float, typer.Option(min=0.0001)] = 1.0,
    host: Annotated[str | None, typer.Option(help="ssh alias of the host (default: this machine)")] = None,
    ssh_config: Annotated[Path | None, typer.Option(help="ssh config file for --host (default ~/.ssh/config)")] = None,
    known_hosts: Annotated[
        Path | None, typer.Option(help="known_hosts for --host (default ~/.ssh/known_hosts)")
    ] = None,
    slots: SlotsOpt = None,
    launch_timeout: LaunchTimeoutOpt = None,
    busy_wait: BusyWaitOpt = None,
    sample_timeout: Annotated[
        float | None,
        typer.Option(min=0.001, help="seconds per sample, each request whole (default: 10x the slowest sample seen)"),
    ] = None,
    setup: SetupOpt = None,
    trace_paths: TracePathsOpt = None,
    pip_log: Annotated[
        str | None, typer.Option(help="pip's log on the host: which packages changed (with no stored snapshot)")
    ] = None,
    wheelhouse: Annotated[
        str | None, typer.Option(help="directory of wheels on the host with the previous versions, tried in an overlay")
    ] = None,
    max_probes: Annotated[
        int,
        typer.Option(
            min=1, help="states measured: the reproduction and each A/B side count, then each bisection probe"
        ),
    ] = 20,
    max_wall: Annotated[float, typer.Option(min=0.001, help="wall-time budget, seconds")] = 1800.0,
    samples: Annotated[int, typer.Option(min=3)] = 5,
    yes: Annotated[bool, typer.Option("--yes", help="approve the proposed action")] = False,
    json_out: Annotated[bool, typer.Option("--json")] = False,
    policy: PolicyOpt = "methodical",
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    allow_shell: AllowShellOpt = None,
    max_turns: MaxTurnsOpt = None,
    max_llm_tokens: MaxTokensOpt = None,
    run_id: Annotated[
        str | None, typer.Option(help="the new run's id (default: time + random); `sleuth serve` names its runs")
    ] = None,
    db: DbOpt = None,
) -> None:
    """Hunt a regression in a real repository (local, or --host over SSH)."""
    one_workload(bench, launch)
    llm = llm_options(policy, model, base_url, allow_shell, max_turns, max_llm_tokens)
    if run_id is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}", run_id):
        bad_input(f"--run-id: '{run_id}' is not a run id (letters, digits, . _ -)")
    if run_id is not None:
        store = Store(db_path(db))
        taken = store.run(run_id) is not None
        store.close()
        if taken:
            bad_input(f"--run-id: run '{run_id}' already exists")
    warnings: list[str] = []
    if alert is not None:
        target = target_from_alert(alert, repo)
        if good:
            target.good_ref = good
        if launch:
            target.launch = launch
        if metric is not None or lower_is_better is not None:
            chosen = resolve_metric(metric or target.metric, metric_regex, bench_output, lower_is_better, None)
            target.metric, target.higher_is_better = chosen.metric, chosen.higher_is_better
            warnings.append(chosen.warning or "")
    elif bench is not None:
        if not repo:
            bad_input("--repo: required")
        if not good:
            bad_input(
                "--good: required with --bench (or give --alert): the commit it was fast at, or `--good HEAD "
                "--good-value N` when the code has not changed and a package, variable or the host may have"
            )
        chosen = resolve_metric(metric, metric_regex, bench_output, lower_is_better, bench)
        warnings.append(chosen.warning or "")  # said once the input is known to be good
        target = Target(
            repo=repo or "",
            command=bench,
            metric=chosen.metric,
            metric_regex=chosen.regex,
            bench_output=chosen.output,
            higher_is_better=chosen.higher_is_better,
            good_ref=good,
            good_value=good_value,
        )
    else:
        for flag, value in (("--repo", repo), ("--launch", launch), ("--served-model", served_model)):
            if not value:
                bad_input(f"{flag}: required (or give --bench, or --alert)")
        check_launch("--launch", launch or "")
        chosen = resolve_metric(metric, metric_regex, bench_output, lower_is_better, None)
        warnings.append(chosen.warning or "")
        target = Target(
            repo=repo or "",
            launch=launch or "",
            good_ref=good,
            good_value=good_value,
            metric=chosen.metric,
            higher_is_better=chosen.higher_is_better,
            workload=BenchConfig(
                endpoint="http://unset/v1",
                model=served_model or "",
                requests=requests,
                max_tokens=max_tokens,
                time_scale=time_scale,
            ),
        )
    target.host = host
    for field, value in (
        ("slots", slots),
        ("launch_timeout_s", launch_timeout),
        ("busy_wait_s", busy_wait),
        ("sample_timeout_s", sample_timeout),
        ("setup", setup),
        ("trace_paths", trace_paths),
        ("pip_log", pip_log),
        ("wheelhouse", wheelhouse),
    ):
        if value is not None:
            setattr(target, field, value)
    for flag, given in (("--ssh-config", ssh_config), ("--known-hosts", known_hosts)):
        if given is not None and not Path(given).is_file():  # ignored, it read as "host not found"
            bad_input(f"{flag}: {given}: no such file")
    target.ssh_config = str(ssh_config) if ssh_config else None
    target.known_hosts = str(known_hosts) if known_hosts else None
    h = LocalHost() if host is None else SSHHost(host, ssh_config=ssh_config, known_hosts=known_hosts)
    git = None
    try:
        git = open_repo(target.repo, h)
        if target.good_ref:
            good_sha = git.rev_parse(target.good_ref)
            if good_sha == git.rev_parse("HEAD") and not target.good_value and git.status().clean:
                # Nothing differs between the two ends: no commit, no patch, no number to reach.
                bad_input(
                    f"--good: {target.good_ref} is HEAD itself and the working tree is clean: nothing to compare "
                    "(give a commit from before the slowdown, or --good-value, the number it used to give)"
                )
            warnings.append(off_the_line(git, target.good_ref, "HEAD") or "")
    except HostError as exc:
        bad_input(f"--host {host}: {exc}")
    except GitError as exc:
        bad_input(f"{'--good' if target.good_ref and target.good_ref in str(exc) else '--repo'}: {exc}")
    finally:
        if git is not None:
            git.close()
        h.close()
    for said in filter(None, warnings):  # on stderr: stdout stays the report or the JSON
        console.print(f"[yellow]warning:[/yellow] {escape(said)}", soft_wrap=True, highlight=False)
    run_hunt(
        target,
        db_path(db),
        Budget(max_probes=max_probes, max_wall_s=max_wall, samples=samples),
        yes,
        json_out,
        policy=policy,
        model=model,
        llm=llm,
        run_id=run_id,
    )


@contextlib.contextmanager
def store_guard(hunter: Hunter, run_id: str, resume_hint: str | None = None) -> Iterator[None]:
    """A run store that cannot be written (a full disk, a database locked by another process), or
    a host that stopped answering mid-hunt, ends the command with one line saying why and how the
    run goes on, exit code 1 (the work failed; nothing was wrong with the input). With
    ``resume_hint`` (a hunt or a resume driving the graph), Ctrl-C or SIGTERM too: one line names
    the run and the command that continues it, exit 130 (its servers and worktrees are removed on
    the way out, as always)."""
    resume = resume_hint or f"sleuth resume {run_id}"
    try:
        yield
    except KeyboardInterrupt:
        if resume_hint is None:
            raise
        resumable = hunter.has_checkpoint(run_id)
        then = (
            f"`{resume_hint}` continues it from its last checkpoint"
            if resumable
            else "it had not reached a checkpoint: start it again"
        )
        if resumable:
            _mark_interrupted(hunter, run_id)
        console.print(f"interrupted: run {run_id} stopped; {then}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(130) from None
    except HostLost as exc:  # the host went away mid-hunt: the run waits at its checkpoint
        _mark_interrupted(hunter, run_id)
        said = f"host: {exc.reason}; run {run_id} stopped at its last checkpoint: `{resume}` once it answers"
        console.print(f"[red]error:[/red] {escape(said)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    except StoreUnavailable as exc:
        then = (
            f"run {run_id} stopped at its last checkpoint: `{resume}` once the store is writable"
            if hunter.has_checkpoint(run_id)
            else f"run {run_id} did not start"
        )
        console.print(f"[red]error:[/red] STORE: {escape(str(exc))}; {then}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def _mark_interrupted(hunter: Hunter, run_id: str) -> None:
    """A run that stopped where it can be continued: its row said "running", as of a live hunt,
    and now says "interrupted" (`sleuth runs`, the page). An approval stopped before its decision
    was recorded keeps "awaiting_approval" (the service asks it again after a restart); one
    stopped after it says "interrupted" too, with the verdict as it stands (the action approved,
    its branch landed): it had still read "awaiting_approval" and "pending" while the branch
    existed and a rejection was refused."""
    with contextlib.suppress(Exception):  # the store may be what failed
        status = (hunter.store.run(run_id) or {}).get("status")
        if status == "running":
            hunter.store.update_run(run_id, status="interrupted")
        elif status == "awaiting_approval":
            hunt = hunter.current(run_id)
            if hunt.action is not None and hunt.action.status in ("approved", "applied", "rejected"):
                hunter.record_end(hunt)  # the verdict: the decision and what of it is done
                hunter.store.update_run(run_id, status="interrupted", ended=None)


def _take_lease(hunter: Hunter, run_id: str, field: str = "RUN") -> None:
    """One driver per run: a second process is told who drives it, exit 2, and changes nothing."""
    try:
        hunter.lease(run_id)
    except RunBusy as exc:
        bad_input(f"{field}: {exc}")


def _recorded_decision(hunt: Hunt, decision: Decision) -> bool:
    """Is ``decision`` the one already recorded on a run that has not ended (its driver died after
    the approval)? False when never decided, decided otherwise, or ended."""
    a = hunt.action
    if hunt.status != "running" or a is None or a.status not in ("approved", "applied", "rejected"):
        return False
    return (a.status != "rejected") == decision.approved


def _checkpoints_of(db: Path, run_id: str) -> None:
    """A store with no checkpoints at all (only evaluations or imports wrote to it) holds no run
    that can be continued: said of the run asked for, where the store has it."""
    if layout(db).checkpoints.exists():
        return
    if db.exists():
        store = Store(db)
        try:
            if store.run(run_id) is not None:
                bad_input(_no_checkpoint(store, run_id, db))
        finally:
            store.close()
    bad_input(f"--db: {db}: no run store here")


def _no_checkpoint(store: Store, run_id: str, db: Path) -> str:
    """Why a run has nothing to continue: no such run, or one the store holds without a checkpoint
    (an evaluation's run, its world removed; an imported session). A trial's approval of an
    evaluation's run was told "no run" of a run that `sleuth runs` listed."""
    row = store.run(run_id)
    if row is None:
        return f"RUN: no run '{run_id}' in {db}"
    if row.get("eval_set"):
        return (
            f"RUN: run '{run_id}' is a run of evaluation {row['eval_set']}: its world was removed when the "
            "evaluation scored it, and nothing of it can be approved, rejected or resumed"
        )
    return f"RUN: run '{run_id}' ({row.get('kind') or 'a run'}) has no checkpoint in {db}: nothing to continue"


def _why_not_awaiting(hunt: Hunt) -> str:
    """Why there is nothing to decide on a run, in words: a proposed action for a person to do,
    one already decided, or a run that ended (or runs) without one."""
    a = hunt.action
    if a is not None and a.kind == "investigate":
        return f"its action is for a person to do, nothing to approve: {a.detail}"
    if a is not None and a.status in ("approved", "applied", "rejected") and hunt.status == "running":
        decided = "approve" if a.status != "rejected" else "reject"
        return f"its action was {a.status} by a run of `sleuth {decided}` that stopped: run that again to finish it"
    if a is not None and a.status in ("approved", "applied", "rejected"):
        return f"its action was {a.status}"
    return f"it is {hunt.status}" + ("" if a is not None and a.kind != "none" else ", with no action proposed")


def _resume(run_id: str, decision: Decision, db: Path | None, json_out: bool) -> None:
    db = db_path(db)
    _checkpoints_of(db, run_id)
    # Each step on stderr, as a hunt's: an approval lands the branch and re-measures the fix, a
    # minute or more a trial's reviewer watched in silence.
    view = LiveView(False, trail=not json_out)
    hunter = Hunter(db, layout(db).runs, on_event=view.update)
    began = time.time()
    view.clock = lambda _hunt: time.time() - began  # from the decision, not the hunt hours before
    try:
        try:
            hunter.current(run_id)
        except KeyError:
            bad_input(_no_checkpoint(hunter.store, run_id, db))
        _take_lease(hunter, run_id)  # before looking at its state: nobody else may change it now
        pending = hunter.pending(run_id)
        recorded = not pending and _recorded_decision(hunter.current(run_id), decision)
        if not pending and not recorded:
            bad_input(f"RUN: run '{run_id}' is not awaiting approval ({_why_not_awaiting(hunter.current(run_id))})")
        if pending and decision.approved:
            hunt = hunter.current(run_id)
            try:
                _branch_free(hunter, hunt, decision)
            except (GitError, HostError) as exc:  # the repository moved or was removed since the hunt
                bad_input(f"RUN: the run's repository {hunt.target.repo}: {first_line(exc)}; nothing was recorded")
        again = run_command("approve" if decision.approved else "reject", run_id, db)
        # SIGTERM (a stopping service's, or the kernel's as the service dies) unwinds an approval
        # as it does a hunt: the re-measurement's server stopped and its worktree removed; it killed
        # the process where it stood before, both left behind (found by CI: a scratch worktree too many).
        with graceful_signals(), store_guard(hunter, run_id, again):
            # The same decision already recorded by a process that died before the end (an approval
            # killed while it landed the revert): the decision is asked again, the run finished.
            result = hunter.continue_run(run_id) if recorded else hunter.resume(run_id, decision)
    finally:
        with shielded_cleanup():
            hunter.close()
    with report_written():
        run_dir = layout(db).runs / run_id
        write_report(result, run_dir)
        finish(result, run_dir, json_out)


def _branch_free(hunter: Hunter, hunt: Hunt, decision: Decision) -> None:
    """An approved revert lands as a new branch: one of that name already in the repository at
    another commit (an earlier approval of the same culprit, a person's own branch) is refused
    before anything is recorded, exit 2, so the run still awaits a decision with another name."""
    a = hunt.action
    if a is None or a.kind != "revert":
        return
    name = decision.branch or a.branch or ""
    git = hunter.runtime(hunt).ctx.git
    field = "--branch" if decision.branch else "RUN"
    # Not a name git takes ("bad..name", a space): refused here, where it failed the proven run
    # after the approval was recorded ("cannot create branch").
    form = git.git("check-ref-format", "--branch", name, check=False)
    if not name or not form.ok:
        bad_input(f"{field}: '{name}' is not a valid branch name ({first_line(form.stderr) or 'empty'})")
    if name.startswith("refs/"):  # git would make refs/heads/refs/heads/main, and warn of ambiguity
        bad_input(f"{field}: '{name}' is a ref path; give the branch's name alone (e.g. {name.rsplit('/', 1)[-1]})")
    if git.git("rev-parse", "--verify", "--quiet", f"refs/tags/{name}", check=False).ok:
        bad_input(f"{field}: a tag '{name}' exists in {hunt.target.repo}: a branch of that name would be ambiguous")
    try:
        at = git.rev_parse(f"refs/heads/{name}")
    except GitError:
        return  # no such branch: free
    if at != a.revert_sha:
        bad_input(
            f"{field}: branch '{name}' already exists in {hunt.target.repo} (at {at[:10]}); "
            "approve with --branch NAME to land the revert under another name"
        )


@app.command("approve")
def approve(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    branch: Annotated[str | None, typer.Option(help="branch for the revert (default sleuth/revert-SHA)")] = None,
    reason: Annotated[str, typer.Option(help="why (recorded with the approval)")] = "approved",
    json_out: Annotated[bool, typer.Option("--json")] = False,
    db: DbOpt = None,
) -> None:
    """Approve a run's proposed action: it is applied, re-measured and reported."""
    _resume(run_id, Decision(approved=True, reason=reason, branch=branch), db, json_out)


@app.command("reject")
def reject(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    reason: Annotated[str, typer.Option(help="why (recorded)")],
    json_out: Annotated[bool, typer.Option("--json")] = False,
    db: DbOpt = None,
) -> None:
    """Reject a run's proposed action; nothing is changed."""
    if not reason.strip():  # as the service's form: a rejection is read later by whoever proposes again
        bad_input("--reason: a rejection says why")
    _resume(run_id, Decision(approved=False, reason=reason), db, json_out)


def _go_on_said(hunt: Hunt) -> str:
    """What continues a hunt a budget stopped (a resume does not: its end is recorded): a new
    hunt with more budget, from the range its bisection had narrowed to where it had one (a
    trial's resume of a 150 s hunt that had narrowed 39 commits to 2 said only "has ended")."""
    error = hunt.error or ""
    if "budget" not in error:
        return ""
    said = f": {error.split(';')[0]}; a new hunt with a larger budget goes on"
    # Not where a commit of that range was reverted later: the cause at HEAD may lie outside it.
    m = re.search(r"narrowed \d+ commits to (\d+) \((\w+)(?:\^\.\.\w+)?\)", error)
    if m and "outside this range" not in error:
        said += f" (--good {m.group(2)}^ searches only the {m.group(1)} commit(s) it narrowed to)"
    return said


@app.command("resume")
def resume(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    json_out: Annotated[bool, typer.Option("--json")] = False,
    db: DbOpt = None,
) -> None:
    """Continue a hunt that was killed mid-way, from its last checkpoint, reusing its measurements."""
    db = db_path(db)
    _checkpoints_of(db, run_id)
    view = LiveView(not json_out and console.is_terminal, trail=not json_out)
    hunter = Hunter(db, layout(db).runs, on_event=view.update)
    view.clock = hunter.elapsed
    try:
        try:
            hunter.current(run_id)
        except KeyError:
            bad_input(_no_checkpoint(hunter.store, run_id, db))
        _take_lease(hunter, run_id)
        hunt = hunter.current(run_id)  # as its last driver left it
        if hunter.pending(run_id):
            bad_input(f"RUN: run '{run_id}' is awaiting approval: use sleuth approve/reject")
        stuck = str((hunter.store.run(run_id) or {}).get("error") or "").startswith("store:")
        if hunt.status != "running" and not stuck:
            bad_input(f"RUN: run '{run_id}' has ended ({hunt.status}){_go_on_said(hunt)}")
        with view, graceful_signals(), store_guard(hunter, run_id, run_command("resume", run_id, db)):
            # An end the store could not record (the graph had finished): record it now.
            result = hunter.continue_run(run_id) if hunt.status == "running" else hunter.record_ended(run_id)
    finally:
        with shielded_cleanup():
            hunter.close()
    with report_written():
        run_dir = layout(db).runs / run_id
        hint = run_command("approve", run_id, db)
        write_report(result, run_dir, hint)
        finish(result, run_dir, json_out, hint)

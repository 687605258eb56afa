"""``sleuth bisect``: noisy bisection of a real repository, locally or on a host over SSH.

Everything it needs can come from flags or from an alert (``--alert alert.json``: the lab's and
any Alertmanager payload with ``launch_command`` / ``benchmark_command`` / ``good_ref``
annotations). Bad input (no repo, unknown ref, unreachable host, a launch command that exits at
once) is one line naming it, exit code 2, and no process left running.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from agent import process_start
from agent.alerts import AlertError, bench_options, host_settings, metric_direction, read_alert, workload_shape
from agent.cli import (
    BusyWaitOpt,
    LaunchTimeoutOpt,
    SetupOpt,
    SlotsOpt,
    app,
    bad_input,
    check_launch,
    console,
    off_the_line,
    one_workload,
    out,
    print_json,
)
from agent.metric_opts import BenchOutputOpt, DirectionOpt, MetricOpt, MetricRegexOpt, resolve_metric
from tools.bench import BenchConfig
from tools.bisect import BisectConfig, BisectError, BisectResult, ProbeRecord, bisect, log2_bound, where_stopped
from tools.git import GitError, open_repo
from tools.host import Host, HostError, LocalHost
from tools.measure import Deadline, Measurer, Workload
from tools.pool import LostProbe, PoolError, RayProbePool, SSHProbePool, load_pool
from tools.ssh import SSHHost


def _host(alias: str | None, known_hosts: Path | None, accept_new: bool) -> Host:
    if alias is None:
        return LocalHost()
    host = SSHHost(alias, known_hosts=known_hosts, host_key_policy="accept-new" if accept_new else "reject")
    try:
        host.connect()
    except HostError as exc:
        bad_input(f"--host {alias}: {exc}")
    return host


def _pool(pool: Path | None, ray_nodes: list[str] | None, address: str | None, workdir: Path):
    """The probe pool the options name (None: probes on --host alone)."""
    if pool is not None:
        try:
            return SSHProbePool(load_pool(pool), workdir / "pool")
        except PoolError as exc:
            bad_input(f"--pool: {exc}")
    if ray_nodes:
        nodes = {}
        for item in ray_nodes:
            name, sep, path = item.partition("=")
            if not sep or not name or not path:
                bad_input(f"--ray-node: '{item}' is not RESOURCE=REPO")
            nodes[name] = path
        try:
            return RayProbePool(nodes, address=address, workdir=str(workdir / "ray"))
        except PoolError as exc:
            bad_input(f"--ray-node: {exc}")
    return None


def stopped_said(parents: dict[str, list[str]], bad: str, res: BisectResult) -> str:
    """The line of a bisection a budget stopped: the budget, what it had found, and the range its
    last search had narrowed to (a trial's read "no step found" after a probe had decided)."""
    stop = where_stopped(parents, bad, [], res)
    if not res.culprits:
        said = "no step found"
    elif not res.culprits[0].verified:
        said = "the table's step was not yet verified against its parent"
    else:
        said = "the table names the steps found before it"
    above = " above the last step" if res.culprits else ""
    if stop.left:
        ends = f"{stop.left[-1][:10]}^..{stop.left[0][:10]}" if len(stop.left) > 1 else stop.left[0][:10]
        said += f"; the search{above} had narrowed {stop.commits} commits to {len(stop.left)} ({ends})"
    elif res.culprits and stop.live:
        said += f"; the search for a further step in the {stop.live} commits above it had decided nothing"
    return f"{res.stopped}: {said}"


@app.command("bisect")
def bisect_cmd(
    repo: Annotated[str | None, typer.Option(help="repository path (on the host)")] = None,
    good: Annotated[str | None, typer.Option(help="known-good ref")] = None,
    bad: Annotated[str, typer.Option(help="bad ref")] = "HEAD",
    launch: Annotated[str | None, typer.Option(help="launch template with {worktree} and {port}")] = None,
    model: Annotated[str | None, typer.Option(help="model name for the benchmark")] = None,
    requests: Annotated[int, typer.Option(min=1, help="requests per sample")] = 2,
    max_tokens: Annotated[int, typer.Option(min=1, help="max_tokens per request")] = 32,
    time_scale: Annotated[float, typer.Option(min=0.0001, help="lab servers' clock scale")] = 1.0,
    metric: MetricOpt = None,
    metric_regex: MetricRegexOpt = None,
    bench_output: BenchOutputOpt = None,
    alert: Annotated[Path | None, typer.Option(help="take launch, benchmark and good ref from an alert")] = None,
    host: Annotated[str | None, typer.Option(help="ssh host or ~/.ssh/config alias (default: this machine)")] = None,
    known_hosts: Annotated[Path | None, typer.Option(help="known_hosts file for --host")] = None,
    accept_new_host_key: Annotated[bool, typer.Option(help="trust an unknown host key (never a changed one)")] = False,
    first_parent: Annotated[bool, typer.Option(help="bisect the first-parent line only")] = False,
    k: Annotated[
        int,
        typer.Option(min=1, max=16, help="probes in flight per round (with --pool or --ray-node: the pool's size)"),
    ] = 1,
    bench: Annotated[
        str | None, typer.Option(help="instead of a server: a command run in {worktree} that prints one number")
    ] = None,
    lower_is_better: DirectionOpt = None,
    pool: Annotated[Path | None, typer.Option(help="pool.toml: hosts that each measure probes in their clone")] = None,
    ray_node: Annotated[
        list[str] | None,
        typer.Option(help="RESOURCE=REPO: a Ray node (by its custom resource) and its clone; repeatable"),
    ] = None,
    ray_address: Annotated[str | None, typer.Option(help="the Ray cluster for --ray-node (default: local)")] = None,
    workdir: Annotated[Path, typer.Option(help="logs and scratch files")] = Path("/tmp/sleuth-bisect"),
    max_wall: Annotated[
        float | None, typer.Option(min=0.001, help="wall-time budget, seconds: the probe in flight is stopped")
    ] = None,
    max_samples: Annotated[
        int | None,
        typer.Option(
            min=2, help="samples the whole bisection may take: it ends before passing them, with what it found"
        ),
    ] = None,
    max_culprits: Annotated[
        int, typer.Option(min=1, max=8, help="steps to name at most (1: the first step above GOOD only)")
    ] = 4,
    launch_timeout: LaunchTimeoutOpt = None,
    busy_wait: BusyWaitOpt = None,
    setup: SetupOpt = None,
    slots: SlotsOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Find the commit(s) that changed a benchmark metric between GOOD and BAD, with statistics."""
    one_workload(bench, launch)
    shape: dict = {}
    if alert is not None:
        try:
            ann, labels = read_alert(alert)
            if metric is None and lower_is_better is None and not bench:
                metric, higher_from_alert = metric_direction(labels, ann, str(alert))
                lower_is_better = not higher_from_alert
        except AlertError as exc:
            bad_input(f"--alert: {exc}")
        launch = launch or ann.get("launch_command")
        good = good or ann.get("good_ref")
        repo = repo or ann.get("repo")
        opts = bench_options(ann.get("benchmark_command", ""))
        model = model or opts.get("--model")
        requests = int(opts.get("--requests", requests))
        max_tokens = int(opts.get("--max-tokens", max_tokens))
        time_scale = float(opts.get("--time-scale", time_scale))
        try:
            shape = workload_shape(opts)
        except ValueError as exc:
            bad_input(f"--alert: {alert}: annotations.benchmark_command unusable ({exc})")
        try:
            on_host = host_settings(ann, str(alert))
        except AlertError as exc:
            bad_input(f"--alert: {exc}")
        launch_timeout = launch_timeout or on_host.get("launch_timeout_s")
        busy_wait = on_host.get("busy_wait_s") if busy_wait is None else busy_wait
        slots = slots or on_host.get("slots")
        setup = setup or on_host.get("setup")
    needed = (("--repo", repo), ("--good", good)) + ((("--launch", launch), ("--model", model)) if not bench else ())
    for flag, value in needed:
        if not value:
            bad_input(f"{flag}: required (give it, or an --alert that carries it)")
    if not bench:
        check_launch("--launch", launch or "")
    if pool and ray_node:
        bad_input("--pool/--ray-node: one pool at a time")
    assert repo and good
    h = _host(host, known_hosts, accept_new_host_key)
    try:
        git = open_repo(repo, h)
        good_sha, bad_sha = git.rev_parse(good), git.rev_parse(bad)
    except GitError as exc:
        flag = "--good" if good in str(exc) else "--bad" if bad in str(exc) else "--repo"
        bad_input(f"{flag}: {exc}")
    parents = git.rev_list(good_sha, bad_sha, first_parent=first_parent)
    if not parents and good_sha == bad_sha:
        bad_input(f"--good: {good} and --bad {bad} are the same commit {good_sha[:10]} (nothing to bisect)")
    if not parents:
        bad_input(f"--good: {good} is not an ancestor of {bad} (nothing to bisect)")
    if said := off_the_line(git, good, bad):  # on stderr, with --json too
        console.print(f"[yellow]warning:[/yellow] {escape(said)}", soft_wrap=True)
    chosen = resolve_metric(metric, metric_regex, bench_output, lower_is_better, bench)
    if chosen.warning:  # on stderr, with --json too (as a hunt's)
        console.print(f"[yellow]warning:[/yellow] {escape(chosen.warning)}", soft_wrap=True)
    higher = chosen.higher_is_better
    if bench:
        workload = Workload(command=bench, metric=chosen.metric, metric_regex=chosen.regex, output=chosen.output)
        launch = ""
    else:
        workload = Workload(
            bench=BenchConfig(
                endpoint="http://unset/v1",
                model=model or "",
                requests=requests,
                max_tokens=max_tokens,
                time_scale=time_scale,
                **shape,
            ),
            metric=chosen.metric,
        )
    assert launch is not None
    probes = _pool(pool, ray_node, ray_address, workdir)
    if probes is not None and k == 1:
        k = probes.k
    measurer = Measurer(
        h,
        git,
        workdir / "logs",
        health_timeout_s=launch_timeout or 1800.0,
        slots=slots or 1,
        setup=setup,
        busy_wait_s=600.0 if busy_wait is None else busy_wait,
    )
    if max_wall is not None:
        # From the process's start, with the finish kept within it, as a hunt's (agent/process_start.py).
        measurer.deadline = process_start.take() + max_wall - process_start.finish_reserve_s(max_wall)
    probe = probes.probe_fn(launch, workload) if probes else measurer.probe_fn(launch, workload)
    cfg = BisectConfig.for_probes(
        bool(bench), k=k, higher_is_better=higher, max_total_samples=max_samples, max_culprits=max_culprits
    )
    seen: list[ProbeRecord] = []

    def show(rec: ProbeRecord) -> None:
        seen.append(rec)
        console.print(
            f"  probe {rec.sha[:10]}: {rec.verdict:<4} ({rec.samples} samples, median "
            f"{rec.median if rec.median is None else round(rec.median, 2)})",
            highlight=False,
        )

    console.print(
        f"bisecting {len(parents)} commits of {good}..{bad} on {h.name} "
        f"(one step: about {log2_bound(len(parents))} probes; each further step, a search of its own)",
        highlight=False,
    )
    try:
        res = bisect(parents, good_sha, bad_sha, probe, cfg, on_record=show, stop_on=(Deadline,))
        if res.stopped and not res.stopped.startswith("sample budget"):  # the wall: what it found stands
            res.stopped = f"wall-time budget of {max_wall:g} s exhausted after {res.probes} probes"
        # A step is where the metric first moved, not the cause at the bad end: one a later commit
        # reverted may have come back in a re-land (a trial's bisect named the undone first
        # landing, confidence 100 %, without a word; `sleuth hunt` follows the revert). Read here,
        # while the host is open.
        undone = {c.sha: git.reverts_of(c.sha, bad_sha) for c in res.culprits}
    except Deadline:  # past the bisection (the reverts looked up after it)
        why = f"wall-time budget of {max_wall:g} s exhausted after {len({r.sha for r in seen})} probes"
        if json_out:
            print_json({"status": "inconclusive", "error": why, "records": [r.model_dump() for r in seen]})
        else:
            out.print(f"inconclusive: {why}", highlight=False, markup=False)
        raise typer.Exit(1) from None
    except HostError as exc:  # the host stopped answering mid-bisection: not the input's fault
        out.print(f"failed: the host stopped answering: {exc}", highlight=False, markup=False)
        raise typer.Exit(1) from None
    except BisectError as exc:
        if isinstance(exc.__cause__, LostProbe):  # an end was measured on a pool host that went away
            out.print(f"failed: {exc}", highlight=False, markup=False)
            raise typer.Exit(1) from None
        bad_input(f"{'--bench' if bench else '--launch'}: {exc}".replace("\n", " | ")[:400])
    finally:
        measurer.close()
        h.close()
        if isinstance(probes, SSHProbePool):
            probes.close()
    used = {name: len(set(shas)) for name, shas in probes.used.items()} if probes else None
    lost = probes.lost if isinstance(probes, SSHProbePool) else {}
    if json_out:
        pool_out = {"pool": used, "pool_lost": lost} if used is not None else {}
        later = {"reverted_later": {s: [r.sha for r in rs] for s, rs in undone.items() if rs}}
        stopped = {"narrowed": where_stopped(parents, bad_sha, [], res).left} if res.stopped else {}
        print_json(res.model_dump(mode="json") | pool_out | later | stopped)
        if res.stopped:
            raise typer.Exit(1)
        return
    for name, why in lost.items():
        said = f"pool host {name} stopped answering mid-way ({why}); the others went on"
        out.print(said, highlight=False, markup=False)
    cols = ("commit", "subject", "change", "p", "verified", "suspects")
    rows = [
        (
            c.sha[:12],
            git.log(c.sha, max_count=1)[0].subject if h is not None else "",
            f"{c.delta_pct:+.1f}%" if c.delta_pct is not None else "",
            f"{c.p_value:.1e}" if c.p_value is not None else "",
            "yes" if c.verified else "no",
            ", ".join(s[:10] for s in c.suspects) if len(c.suspects) > 1 else "",
        )
        for c in res.culprits
    ]
    if out.is_terminal:
        t = Table(title=f"culprit(s) in {good}..{bad}")
        for col in cols:
            t.add_column(col)
        for row in rows:
            t.add_row(*row)
        out.print(t)
    else:  # a pipe or a file: one tab-separated line a culprit, as `sleuth runs` (a table wrapped at 80 columns)
        print(f"culprit(s) in {good}..{bad}")
        print("\t".join(cols))
        for row in rows:
            print("\t".join(" ".join(cell.split()) for cell in row))
    for sha, reverts in undone.items():
        if reverts:
            r = reverts[-1]  # the oldest
            how = "" if r.by == "message" else " (it deletes the lines it added; its message does not say so)"
            said = (
                f'note: {sha[:10]} was reverted later by {r.sha[:10]} "{r.subject}"{how}: the slowness at {bad} may '
                "be a later re-land; `sleuth hunt` measures the revert and follows it"
            )
            out.print(said, highlight=False, markup=False, soft_wrap=True)
    out.print(
        f"probes {res.probes} (one step: about {log2_bound(res.candidates)}), samples {res.samples}, "
        f"skipped {len(res.skipped)}"
        + (f", {res.confidence:.0%} of probes decided before their sample cap" if res.records else ""),
        highlight=False,
    )
    if res.stopped:
        out.print(f"inconclusive: {stopped_said(parents, bad_sha, res)}", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(1)

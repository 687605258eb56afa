"""The agent's hands: every tool, typed and registered with its safety class.

Import this module to populate ``tools.registry.REGISTRY``. A ``ToolContext`` says where the
tools act (a Host, the repository path on it, a scratch dir) and holds the measurement cache,
so a state is measured once per run whichever tool asks.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from contextlib import suppress
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, Field

from tools.bench import BenchConfig, BenchResult, run_bench
from tools.bisect import BisectConfig, BisectResult, bisect
from tools.codepath import inert_changes
from tools.git import (
    CliGit,
    CommitInfo,
    DiffStat,
    GitStatus,
    ReflogEntry,
    RevertCommit,
    RevertPlan,
    ShowStat,
    open_repo,
)
from tools.host import Host, HostError, LocalHost
from tools.measure import MeasureCache, Measurement, Measurer, State, Workload
from tools.pins import PinMove
from tools.registry import tool
from tools.stats import Comparison


class ToolContext:
    def __init__(
        self,
        repo: str | Path,
        host: Host | None = None,
        workdir: str | Path = "/tmp/sleuth-work",
        cache: MeasureCache | None = None,
        pid_dir: Path | None = None,
        slots: int = 1,
        launch_timeout_s: float = 1800.0,
        sample_timeout_s: float | None = None,
        setup: str | None = None,
        trace_imports: bool = False,
        busy_wait_s: float = 0.0,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        self.host = host or LocalHost()
        self.busy_wait_s = busy_wait_s
        self.on_wait = on_wait  # told how a long wait of the measurer's goes
        self.trace_imports = trace_imports
        self.repo = str(repo)
        self.workdir = Path(workdir)
        self.cache = cache or MeasureCache()
        self.pid_dir = pid_dir
        self.slots, self.launch_timeout_s, self.sample_timeout_s, self.setup = (
            slots,
            launch_timeout_s,
            sample_timeout_s,
            setup,
        )

    @cached_property
    def git(self) -> CliGit:
        return open_repo(self.repo, self.host)

    @cached_property
    def measurer(self) -> Measurer:
        return Measurer(
            self.host,
            self.git,
            self.workdir / "logs",
            self.cache,
            health_timeout_s=self.launch_timeout_s,
            pid_dir=self.pid_dir,
            slots=self.slots,
            setup=self.setup,
            sample_timeout_s=self.sample_timeout_s,
            trace_imports=self.trace_imports,
            busy_wait_s=self.busy_wait_s,
            on_wait=self.on_wait,
        )

    def close(self) -> None:
        """Stop the measurer's warm servers and end the repository's git readers (those opened)."""
        if "measurer" in self.__dict__:
            with suppress(HostError):  # a host that stopped answering: the next start there cleans up
                self.measurer.close()
        if "git" in self.__dict__:
            self.git.close()


class NoArgs(BaseModel):
    pass


class LogArgs(BaseModel):
    rev_range: str = Field(description="e.g. 'GOOD..HEAD' or a single ref")
    max_count: int | None = Field(default=50, ge=1, le=5000)
    first_parent: bool = False


class CommitList(BaseModel):
    commits: list[CommitInfo]


class ReflogArgs(BaseModel):
    ref: str = "HEAD"
    limit: int | None = Field(default=30, ge=1)


class Reflog(BaseModel):
    entries: list[ReflogEntry]


class DiffArgs(BaseModel):
    a: str | None = Field(default="HEAD", description="base ref; HEAD by default")
    b: str | None = Field(default=None, description="other ref; the working tree when omitted")


class RefArgs(BaseModel):
    ref: str


class TwoRefs(BaseModel):
    a: str
    b: str


class Sha(BaseModel):
    sha: str


class RevertArgs(BaseModel):
    culprit: str
    base: str = "HEAD"
    keep: list[str] = []  # files that may stay as at base where the revert conflicts (none executed)


class LandArgs(BaseModel):
    plan: RevertPlan
    branch: str | None = None


class Branch(BaseModel):
    branch: str


class GpuQuery(BaseModel):
    setup: str = Field(default="", description="shell setup to run first (e.g. '. /etc/profile && '), as for a launch")
    fields: list[str] = [
        "index",
        "name",
        "clocks.sm",
        "clocks.max.sm",
        "power.draw",
        "power.limit",
        "pcie.link.gen.current",
        "pcie.link.gen.max",
        "pcie.link.width.current",
        "pcie.link.width.max",
        "clocks_throttle_reasons.active",
    ]


class GpuState(BaseModel):
    gpus: list[dict[str, str]]
    # Processes on the GPUs that are not this hunt's servers (pid, process_name, used_memory MiB),
    # one per process; empty where nvidia-smi cannot list them.
    processes: list[dict[str, str]] = []


class CommandArgs(BaseModel):
    argv: list[str] = Field(min_length=1)
    cwd: str | None = None
    timeout_s: float = Field(default=120, gt=0, le=3600)


class CommandOut(BaseModel):
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool


class StateArgs(BaseModel):
    label: str
    ref: str = Field(description="commit, or 'WORKTREE' for the uncommitted work (snapshot)")
    launch: str = Field(description="launch command template with {worktree} and {port}")
    env: dict[str, str] = {}


class MeasureArgs(BaseModel):
    state: StateArgs
    workload: Workload
    samples: int = Field(default=7, ge=1, le=200)


class CompareArgs(BaseModel):
    a: StateArgs
    b: StateArgs
    workload: Workload
    samples: int = Field(default=7, ge=2, le=200)
    max_samples: int = Field(default=56, ge=2, le=400)
    min_effect_pct: float | None = Field(default=None, gt=0)
    fresh: bool = False


class CompareResult(BaseModel):
    comparison: Comparison
    a: Measurement
    b: Measurement


class BisectArgs(BaseModel):
    good: str
    bad: str = "HEAD"
    launch: str
    workload: Workload
    env: dict[str, str] = {}
    first_parent: bool = False
    config: BisectConfig = BisectConfig()


def _state(ctx: ToolContext, s: StateArgs) -> State:
    ref = ctx.git.snapshot() if s.ref == "WORKTREE" else ctx.git.rev_parse(s.ref)
    return State(label=s.label, ref=ref, launch=s.launch, env=s.env)


@tool("git_status", "read")
def git_status(ctx: ToolContext, args: NoArgs) -> GitStatus:
    """Staged, unstaged and untracked files of the checkout, its branch and HEAD, and which of
    those changes cannot alter what runs (``inert``: comments and formatting only, documentation,
    CI settings)."""
    status = ctx.git.status()
    changed = sorted(set(status.staged + status.unstaged + status.untracked))
    return status.model_copy(update={"inert": inert_changes(ctx.git, changed)})


@tool("git_log", "read")
def git_log(ctx: ToolContext, args: LogArgs) -> CommitList:
    """Commits of a range (all parents, or the first-parent line), newest first."""
    return CommitList(commits=ctx.git.log(args.rev_range, args.max_count, args.first_parent))


@tool("git_reflog", "read")
def git_reflog(ctx: ToolContext, args: ReflogArgs) -> Reflog:
    """Where HEAD (or a ref) has been: pulls, resets, checkouts, with old and new SHA and time."""
    return Reflog(entries=ctx.git.reflog(args.ref, args.limit))


@tool("git_diff_stat", "read")
def git_diff_stat(ctx: ToolContext, args: DiffArgs) -> DiffStat:
    """Files changed between two refs, or between a ref and the working tree, with line counts."""
    return ctx.git.diff_stat(args.a, args.b)


@tool("git_show_stat", "read")
def git_show_stat(ctx: ToolContext, args: RefArgs) -> ShowStat:
    """One commit: subject, body, author, date and the files it touched (git show --stat)."""
    return ctx.git.show_stat(args.ref)


class PinMoves(BaseModel):
    moves: list[PinMove]


@tool("git_pin_moves", "read")
def git_pin_moves(ctx: ToolContext, args: TwoRefs) -> PinMoves:
    """Versions pinned in requirement or lock files that moved between two refs (a to b)."""
    return PinMoves(moves=ctx.git.pin_moves(args.a, args.b))


class RevertsArgs(BaseModel):
    sha: str
    head: str = "HEAD"


class Reverts(BaseModel):
    commits: list[RevertCommit]


@tool("git_reverts_of", "read")
def git_reverts_of(ctx: ToolContext, args: RevertsArgs) -> Reverts:
    """The later commits (up to head) whose message says they revert a commit, newest first."""
    return Reverts(commits=ctx.git.reverts_of(args.sha, args.head))


@tool("git_merge_base", "read")
def git_merge_base(ctx: ToolContext, args: TwoRefs) -> Sha:
    """The best common ancestor of two refs."""
    return Sha(sha=ctx.git.merge_base(args.a, args.b))


@tool("git_snapshot", "read")
def git_snapshot(ctx: ToolContext, args: NoArgs) -> Sha:
    """A commit object holding the uncommitted work (user's files and index untouched)."""
    return Sha(sha=ctx.git.snapshot())


@tool("git_prepare_revert", "read")
def git_prepare_revert(ctx: ToolContext, args: RevertArgs) -> RevertPlan:
    """Revert a commit on top of a base in a scratch worktree; no ref moves (landing is separate)."""
    return ctx.git.prepare_revert(args.culprit, args.base, args.keep)


@tool("git_land_revert", "mutate")
def git_land_revert(ctx: ToolContext, args: LandArgs) -> Branch:
    """Create a branch at a prepared revert (after a person approved it)."""
    return Branch(branch=ctx.git.land_revert(args.plan, args.branch))


@tool("nvidia_smi", "read")
def nvidia_smi(ctx: ToolContext, args: GpuQuery) -> GpuState:
    """Clocks, power, PCIe link and throttle reasons of every GPU, as nvidia-smi reports them."""
    query = shlex.join(["nvidia-smi", f"--query-gpu={','.join(args.fields)}", "--format=csv,noheader,nounits"])
    res = ctx.host.run(args.setup + query, timeout=60).check()
    rows = [[v.strip() for v in line.split(",")] for line in res.stdout.strip().splitlines()]
    return GpuState(
        gpus=[dict(zip(args.fields, row, strict=False)) for row in rows], processes=_foreign_apps(ctx, args)
    )


APP_FIELDS = ("pid", "process_name", "used_memory")


def _foreign_apps(ctx: ToolContext, args: GpuQuery) -> list[dict[str, str]]:
    """The compute processes nvidia-smi lists that are not servers this hunt launched (those run
    in process groups the measurer knows), one entry per process (nvidia-smi lists it per GPU)."""
    query = shlex.join(["nvidia-smi", f"--query-compute-apps={','.join(APP_FIELDS)}", "--format=csv,noheader,nounits"])
    res = ctx.host.run(args.setup + query, timeout=60)
    if not res.ok:
        return []
    ours = ctx.measurer.server_groups() if "measurer" in ctx.__dict__ else set()  # none opened: none up
    seen: dict[str, dict[str, str]] = {}
    for line in res.stdout.strip().splitlines():
        row = dict(zip(APP_FIELDS, (v.strip() for v in line.split(",")), strict=False))
        pid = row.get("pid", "")
        if not pid.isdigit() or pid in seen:
            continue
        if ours:
            pgid = ctx.host.run(["ps", "-o", "pgid=", "-p", pid], timeout=30).stdout.strip()
            if pgid.isdigit() and int(pgid) in ours:
                continue
        seen[pid] = row
    return list(seen.values())


@tool("run_command", "mutate")
def run_command(ctx: ToolContext, args: CommandArgs) -> CommandOut:
    """Run an arbitrary command on the host (only with approval or an allowlist)."""
    res = ctx.host.run(args.argv, cwd=args.cwd, timeout=args.timeout_s)
    return CommandOut(exit_code=res.exit_code, stdout=res.stdout, stderr=res.stderr, timed_out=res.timed_out)


@tool("bench", "read")
def bench(ctx: ToolContext, args: BenchConfig) -> BenchResult:
    """Benchmark a running OpenAI-compatible endpoint."""
    return run_bench(args)


@tool("measure", "read")
def measure(ctx: ToolContext, args: MeasureArgs) -> Measurement:
    """Launch a state (commit or uncommitted work) in a scratch worktree and take samples (cached)."""
    try:
        return ctx.measurer.measure(_state(ctx, args.state), args.workload, args.samples)
    finally:
        ctx.measurer.close()  # a tool call leaves no server holding the host's GPUs


@tool("compare_states", "read")
def compare_states(ctx: ToolContext, args: CompareArgs) -> CompareResult:
    """Interleaved A/B of two states with a rank test: different, same or unknown, and the change."""
    try:
        cmp, ma, mb = ctx.measurer.compare_states(
            _state(ctx, args.a),
            _state(ctx, args.b),
            args.workload,
            args.samples,
            args.max_samples,
            min_effect_pct=args.min_effect_pct,
            fresh=args.fresh,
        )
    finally:
        ctx.measurer.close()
    return CompareResult(comparison=cmp, a=ma, b=mb)


@tool("bisect", "read")
def bisect_tool(ctx: ToolContext, args: BisectArgs) -> BisectResult:
    """Noisy bisection of good..bad with statistics, skips and a verification sandwich."""
    good, bad = ctx.git.rev_parse(args.good), ctx.git.rev_parse(args.bad)
    parents = ctx.git.rev_list(good, bad, first_parent=args.first_parent)
    probe = ctx.measurer.probe_fn(args.launch, args.workload, args.env)
    try:
        return bisect(parents, good, bad, probe, args.config)
    finally:
        ctx.measurer.close()

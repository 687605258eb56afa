"""The hunt's state: plain pydantic data, checkpointed by LangGraph after every node.

It holds what a careful engineer would write in a notebook: the target, the budget, every
measurement (with its raw samples), the hypothesis ledger (each with its test, verdict and
evidence), the culprit and the proposed action. Nothing in it is a live object, so a run resumes
in a new process (``sleuth approve RUN``) from the last checkpoint.
"""

from __future__ import annotations

import time
import uuid
from typing import Literal

from pydantic import BaseModel, Field

from tools.bench import BenchConfig

Status = Literal["running", "concluded", "awaiting_approval", "inconclusive", "failed"]
Category = Literal["hardware", "environment", "uncommitted", "history", "config", "dependencies", "code_path"]
# "untested": left out on purpose, its reason says why (the verdict shows it "open", with that reason).
HypStatus = Literal["open", "supported", "refuted", "demoted", "inconclusive", "untested"]
Kind = Literal["commit", "uncommitted", "env", "config", "dependency", "hardware", "external", "multiple", "none"]


# What a run's row keeps as its input: enough to start the same hunt again (a replay).
INPUT_FIELDS = {"target", "budget", "policy", "model", "llm", "started_at"}


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


class Target(BaseModel):
    """What is hunted, where, and how it is measured."""

    repo: str
    host: str | None = None  # ssh alias; None: this machine
    known_hosts: str | None = None
    ssh_config: str | None = None
    launch: str = ""  # server launch template with {worktree} and {port} ("" with ``command``)
    good_launch: str | None = None  # the launch that produced the good value, when it differs
    workload: BenchConfig | None = None  # the benchmark against the launched server...
    command: str | None = None  # ...or a command run in the worktree that prints one number
    metric: str = "tok_per_s"  # a name BenchResult.metrics() gives; with ``command``: a JSON key, or "value"
    metric_regex: str | None = None  # with ``command``: the number in its plain-text output
    bench_output: str | None = None  # with ``command``: the file it writes (relative to the worktree)
    higher_is_better: bool = True
    good_ref: str | None = None
    good_value: float | None = None
    bad_value: float | None = None
    summary: str = ""
    # The host's capacity and the costs of a real node (docs/guides/gpu-node.md).
    slots: int = Field(default=1, ge=1)  # servers the host holds at once (a TP-8 server on 8 GPUs: 1)
    launch_timeout_s: float = Field(default=1800.0, gt=0)  # launch to healthy, per launch
    sample_timeout_s: float | None = Field(default=None, gt=0)  # per sample; None: derived from samples seen
    setup: str | None = None  # run in each probe's worktree before the launch (a build); failure: unbuildable
    busy_wait_s: float = Field(default=600.0, ge=0)  # a launch waits this long for GPUs another process holds
    # Which commits can matter (tools.codepath): None: a benchmark command is traced by one extra
    # run at each end, launches are not; True: launches print their imports too; False: never.
    trace_paths: bool | None = None
    # The dependency hypothesis (tools.packages): pip's log on the host (a reference when no
    # earlier hunt stored a snapshot), and a directory of wheels holding the previous versions.
    pip_log: str | None = None
    wheelhouse: str | None = None


class Budget(BaseModel):
    """What a hunt may spend; running out ends it inconclusive, naming the budget that stopped it."""

    max_probes: int = Field(default=20, ge=1, description="measurements (A/B sides and bisection probes)")
    max_wall_s: float = Field(default=1800, gt=0, description="wall-clock seconds for the whole hunt")
    samples: int = Field(default=5, ge=3, le=100, description="benchmark samples a state gets to start with")


class LLMSettings(BaseModel):
    """How the LLM policy reaches its model and what it may spend. The API key is never stored:
    it comes from ``$OPENAI_API_KEY`` in whichever process runs the graph."""

    base_url: str | None = None  # default: $OPENAI_BASE_URL, else OpenAI
    allow_shell: list[str] = []  # programs the model may run (argv[0]); empty: no shell at all
    max_turns: int = Field(default=40, ge=1)  # model calls
    max_tokens: int = Field(default=400_000, ge=1)  # input + output, over the whole hunt
    max_invalid: int = Field(default=3, ge=1)  # replies in a row with no valid tool call
    context_chars: int = Field(default=60_000, ge=2_000)  # the request's messages, before old turns are folded
    output_chars: int = Field(default=4_000, ge=200)  # one tool result shown to the model, head and tail
    timeout_s: float = Field(default=120.0, gt=0)
    max_attempts: int = Field(default=4, ge=1)
    backoff_s: float = Field(default=1.0, ge=0)


class Conversation(BaseModel):
    """The LLM policy's side of the hunt, checkpointed with it: the messages so far and the
    counters the graph enforces budgets with."""

    messages: list[dict] = []
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    invalid_streak: int = 0
    concluded: bool = False
    failed_confirmations: int = 0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


class Measured(BaseModel):
    """One probed state: a commit (or a snapshot of uncommitted work) under a launch and env."""

    id: str
    label: str
    ref: str
    env: dict[str, str] = {}
    launch: str
    samples: list[float]
    groups: list[int] = []  # samples per launch, in order (empty: not known)
    median: float
    ci_low: float
    ci_high: float
    cv: float
    verify_ms: float | None = None


class Hypothesis(BaseModel):
    id: str
    category: Category
    statement: str
    test: str  # the planned discriminating test, stated before it runs
    status: HypStatus = "open"
    reason: str = ""  # why the verdict (the numbers)
    evidence: list[str] = []  # measurement ids
    subject: str | None = None  # what it names: a path, VAR, flag, sha


class Action(BaseModel):
    kind: Literal["revert", "unset", "restore", "pin", "investigate", "none"]
    ref: str | None = None
    detail: str = ""
    revert_sha: str | None = None
    branch: str | None = None
    status: Literal["pending", "approved", "rejected", "applied"] = "pending"
    reason: str = ""

    @property
    def status_said(self) -> str:
        """Its status in words, as the report, the terminal and the page show it: an
        ``investigate`` has nothing to approve (approve and reject refuse it), so its "pending" is
        for a person to do."""
        if self.kind == "investigate" and self.status == "pending":
            return "for a person to do (nothing to approve)"
        return self.status


class Event(BaseModel):
    t: float
    kind: str
    text: str


class Hunt(BaseModel):
    run_id: str
    policy: str = "methodical"
    model: str | None = None
    status: Status = "running"
    phase: str = "intake"
    target: Target
    budget: Budget = Budget()
    started_at: float = Field(default_factory=time.time)
    probes: int = 0
    measurements: list[Measured] = []
    hypotheses: list[Hypothesis] = []
    reproduced: str | None = None  # id of the "now" measurement
    good_candidate: str | None = None  # sha believed good (reflog or alert)
    head_sha: str | None = None  # HEAD when the hunt began (intake resolves it)
    culprits: list[str] = []
    rejected_culprits: list[str] = []  # bisected commits whose confirmation A/B failed
    root_kind: Kind | None = None
    root_ref: str | None = None
    root_summary: str = ""
    root_causes: list[dict] = []  # kind "multiple": each cause's kind, ref, summary, share_pct (agent.multiple)
    regression: dict = {}
    confirmation: dict = {}
    after: dict = {}
    cost: dict = {}  # launches, samples, device_s, build_s (tools.measure.Cost), summed over the run
    # The environment the history A/B and the bisection run under: the tuning variables blanked
    # once one A/B showed they change nothing (so that A/B's HEAD serves as the history's HEAD).
    probe_env: dict[str, str] = {}
    # The history A/B's first round (good-candidate, HEAD measurement ids), when it was measured
    # in one experiment with the clean A/B (``agent.categories.environment``; one-slot hosts).
    history_round: list[str] = []
    # Why the history A/B is not needed, when that experiment left the known-good commit out: clean
    # HEAD gave back the drop to the alert's good value (``agent.categories.environment``).
    history_unneeded: str = ""
    packages: dict = {}  # what the launch's Python has installed now: dists {name: version}, driver, python
    package_changes: list[dict] = []  # tools.packages.Change, against package_reference
    package_reference: str = ""  # what the changes are measured against (a stored snapshot, pip's log)
    bisected: list[str] = []  # the bisected range, oldest first (after good_candidate, up to HEAD): the plot's x axis
    pruned: list[dict] = []  # commits not bisected: they touch no executed file (sha, files, reason)
    # Of each commit the bisection kept, the files it touches that no run executes (code-path
    # tracing): where its revert conflicts only in those, they stay as at HEAD.
    inert_files: dict[str, list[str]] = {}
    # Steps a bisection found that a later commit undid (sha, subject, reverted_by, revert_subject,
    # numbers): history, not the cause at HEAD (``agent.categories.history.at_head``).
    undone: list[dict] = []
    broken: list[dict] = []  # states that did not build, serve or run their benchmark: label, ref, how, failure, log
    head_broken: str | None = None  # HEAD (the working tree) does not serve: the failure, from its log
    action: Action | None = None
    events: list[Event] = []
    # The store's last event seq when the last node ended (its checkpoint): what a resumed run's
    # re-run node has already recorded after it (``transcripts.cassette.Resumption``).
    seq: int | None = None
    error: str | None = None
    # The flag whose value made the hunt impossible (a --bench command that yields no number at HEAD
    # nor at the good ref): the CLI says so in one line, exit code 2, as for any bad input.
    bad_flag: str | None = None
    llm: LLMSettings | None = None  # the LLM policy's settings (None for the deterministic policies)
    conversation: Conversation = Conversation()

    def log(self, kind: str, text: str) -> None:
        self.events.append(Event(t=time.time(), kind=kind, text=text))

    def get(self, mid: str) -> Measured:
        return next(m for m in self.measurements if m.id == mid)

    def latest_states(self) -> list[Measured]:
        """Each state's latest measurement (a label at one commit), in order of first appearance:
        what the Numbers table, the plot and the live view show. Keyed by the label alone, two
        culprits' reverts (both "HEAD+revert") showed as one row, the second's number beside the
        first's summary."""
        latest: dict[tuple[str, str], Measured] = {}
        for m in self.measurements:
            latest[(m.label, m.ref)] = m
        return list(latest.values())

    def hyp(self, hid: str) -> Hypothesis:
        return next(h for h in self.hypotheses if h.id == hid)

"""``targets.toml``: which alerts start which hunts, and how the service runs them.

```toml
token = "..."                 # bearer token for every mutation (or $SLEUTH_TOKEN); none: no mutations
concurrency = 1               # hunts (and approvals) at a time
leave_hunts_running = false   # true: a service that dies leaves its hunts running (the next adopts them)
db = "/var/lib/sleuth/runs.db"  # default: $SLEUTH_DB or the XDG data dir

[[targets]]
name = "eagle3-gpu-node-1"
match = { alertname = "ThroughputRegression", host = "gpu-node-1" }   # every label must equal
repo = "/srv/sglang"
host = "gpu-node-1"           # an ssh alias; omit for this machine
launch = "..."                # default: the alert's annotations.launch_command
benchmark = "sleuth bench --model M --requests 8 --max-tokens 256"   # default: annotations.benchmark_command
metric = "tok_per_s"          # default: the alert's label ``metric`` (p99_ttft_ms, output_throughput, ...)
good_value = 94.0             # default: annotations.good_value
lower_is_better = false       # default: the alert's annotations.direction, else from the metric's name
good_ref = "v0.5.3"           # default: the alert's annotations.good_ref, else the reflog
slots = 1                     # servers the host holds at once (default: the alert's, else 1)
launch_timeout = 1800         # seconds from launch to healthy (default: the alert's, else 1800)
busy_wait = 600               # seconds a launch waits for GPUs another process holds (default: the alert's, else 600)
setup = "pip install -e python/"   # run in each probe's worktree before the launch (a build)
trace_paths = true                  # launches print their imports: commits touching none are not bisected
pip_log = "/var/log/pip.log"        # the host's pip log: what changed, when no earlier hunt stored a snapshot
wheelhouse = "/opt/wheelhouse"      # the previous versions' wheels, tried in a scratch overlay (never installed)
policy = "methodical"
budget = { max_probes = 20, max_wall_s = 1800, samples = 5 }
```

The first target whose ``match`` labels all equal the alert's labels takes it; an alert no target
matches is recorded and answered ``unmatched``. What a target names fills in what the alert
does not carry: a Prometheus rule rarely knows the launch command, the benchmark or the good value.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent.alerts import AlertError, bench_config
from agent.state import Budget
from tools.bench import SERVER_METRICS
from tools.metric import higher_is_better
from tools.server import misspelt_placeholder
from tools.validation import load_toml_model


class ConfigError(ValueError):
    """The config file is unusable; the message names the file and the field."""


class ServeTarget(BaseModel):
    """One ``[[targets]]`` table: which alerts it takes and how to hunt them. What it names wins
    over the alert's annotations (a Prometheus rule rarely knows the launch command)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key ("good_reff") was silently nothing

    name: str = Field(min_length=1, description="what the page and the logs call it")
    match: dict[str, str] = Field(
        min_length=1, description="labels an alert must carry, each equal (the first target that matches takes it)"
    )
    repo: str = Field(min_length=1, description="the serving stack's checkout, on the host")
    host: str | None = Field(None, description="ssh alias or user@host[:port]; omitted: this machine")
    ssh_config: str | None = Field(None, description="an ssh_config file to read the alias from")
    known_hosts: str | None = Field(None, description="a known_hosts file (host keys are always checked)")
    launch: str | None = Field(
        None, description="the server's launch command ({worktree}, {port}); default: annotations.launch_command"
    )
    benchmark: str | None = Field(
        None,
        description="the `sleuth bench` command line the server is measured with (its --model, --requests, "
        "--max-tokens, --concurrency...); default: annotations.benchmark_command. The service hunts servers: "
        "a project's own benchmark command is `sleuth hunt --bench`'s",
    )
    metric: str | None = Field(None, description="what to hunt (a metric sleuth bench measures); default: the label")
    good_value: float | None = Field(None, description="the metric before the drop; default: annotations.good_value")
    lower_is_better: bool | None = Field(None, description="needed when the metric's name does not say")
    good_ref: str | None = Field(None, description="the known-good ref; default: annotations.good_ref, else the reflog")
    slots: int | None = Field(default=None, ge=1, description="servers the host holds at once (default 1)")
    launch_timeout: float | None = Field(default=None, gt=0, description="seconds from launch to healthy")
    busy_wait: float | None = Field(
        default=None, ge=0, description="seconds a launch waits for GPUs another process holds"
    )
    setup: str | None = Field(None, description="a command run in each probe's worktree before launch (a build)")
    trace_paths: bool | None = Field(None, description="launches print their imports, so untouched commits are pruned")
    pip_log: str | None = Field(None, description="pip's log on the host: evidence of when packages changed")
    wheelhouse: str | None = Field(None, description="a folder of old wheels to A/B packages against")
    policy: str = Field("methodical", description="methodical, bisect-only or llm")
    model: str | None = Field(None, description="the LLM policy's model")
    base_url: str | None = Field(None, description="the LLM policy's OpenAI-compatible endpoint")
    budget: Budget = Field(Budget(), description="probes, wall time and samples a hunt may spend")

    @model_validator(mode="after")
    def _server_benchmark(self) -> ServeTarget:
        """A benchmark that is not a `sleuth bench` line with a model failed only when an alert came
        (`annotations.benchmark_command unusable`): said when the file is read instead."""
        if self.benchmark is not None:
            try:
                bench_config({"benchmark_command": self.benchmark}, "benchmark")
            except AlertError as exc:
                raise ValueError(
                    f"benchmark: '{self.benchmark}' is not a `sleuth bench --model M ...` line ({exc}); the service "
                    "hunts servers, a project's own benchmark command is `sleuth hunt --bench`'s"
                ) from exc
        return self

    @model_validator(mode="after")
    def _port_in_launch(self) -> ServeTarget:
        """A launch must listen on the port sleuth gives it (``{port}``), or every state waits out
        the launch timeout."""
        if self.launch is not None and (why := misspelt_placeholder(self.launch, ("worktree", "port"))):
            raise ValueError(f"launch: {why}")
        if self.launch is not None and "{port}" not in self.launch:
            raise ValueError(
                f"launch: '{self.launch}' has no {{port}}: the server must listen on the port sleuth gives it"
            )
        return self

    @model_validator(mode="after")
    def _known_metric(self) -> ServeTarget:
        if self.metric is not None:
            if self.metric not in SERVER_METRICS:
                raise ValueError(f"metric: '{self.metric}' is not a metric sleuth bench measures")
            if self.lower_is_better is None and higher_is_better(self.metric) is None:
                raise ValueError(f"lower_is_better: needed, the name '{self.metric}' does not say which way is better")
        return self

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match.items())

    def complete(self, labels: dict[str, str], annotations: dict[str, str]) -> tuple[dict, dict]:
        """The alert's labels and annotations with what this target names filled in (the
        target wins: it is what the operator configured for this host)."""
        ann, lab = dict(annotations), dict(labels)
        for key, value in (
            ("launch_command", self.launch),
            ("benchmark_command", self.benchmark),
            ("good_ref", self.good_ref),
            ("good_value", None if self.good_value is None else str(self.good_value)),
            ("repo", self.repo),
            ("slots", None if self.slots is None else str(self.slots)),
            ("launch_timeout", None if self.launch_timeout is None else f"{self.launch_timeout:g}"),
            ("busy_wait", None if self.busy_wait is None else f"{self.busy_wait:g}"),
            ("setup", self.setup),
            ("trace_paths", None if self.trace_paths is None else str(self.trace_paths).lower()),
            ("pip_log", self.pip_log),
            ("wheelhouse", self.wheelhouse),
        ):
            if value is not None:
                ann[key] = value
        if self.metric:
            lab["metric"] = self.metric
        if self.lower_is_better is not None:
            ann["direction"] = "lower_is_better" if self.lower_is_better else "higher_is_better"
        return lab, ann


class ServeConfig(BaseModel):
    """``targets.toml``: the service's settings and its targets."""

    model_config = ConfigDict(extra="forbid")  # "tokn" left the service with no token, silently

    token: str | None = Field(
        None, description="bearer token for every mutation (else $SLEUTH_TOKEN; none: mutations refused)"
    )
    concurrency: int = Field(default=1, ge=1, le=64, description="hunts and approvals at a time")
    # Default false: a hunt dies with the service that started it (SIGTERM: its servers and
    # worktrees are cleaned up), so after a crash the only driver of a run is the one the next
    # service starts, and an operator who kills the service stops the GPU work too. True: hunts
    # outlive a service crash or upgrade (minutes of launches are not thrown away); the next
    # service adopts them, watching until they end, and resumes only runs whose driver is dead.
    leave_hunts_running: bool = Field(
        False, description="true: hunts outlive a service that dies, and the next service adopts them"
    )
    db: str | None = Field(None, description="the run store (default $SLEUTH_DB or the XDG data dir)")
    targets: list[ServeTarget] = Field([], description="the [[targets]] tables, matched in order")

    def bearer(self) -> str | None:
        return self.token or os.environ.get("SLEUTH_TOKEN") or None

    def target_for(self, labels: dict[str, str]) -> ServeTarget | None:
        return next((t for t in self.targets if t.matches(labels)), None)


def load_config(path: str | Path | None) -> ServeConfig:
    return ServeConfig() if path is None else load_toml_model(path, ServeConfig, ConfigError)


def local_problem(cfg: ServeConfig) -> str | None:
    """The first path a target names that cannot work on this machine, as ``targets[i].field:
    why``: a repository that is not a git checkout (a target without ``host`` runs here), or an
    ssh config or known_hosts file that is not there. Said when the service starts, where a typo
    failed each alert's hunt job in turn. A remote host's paths are its own: not checked here."""
    for i, t in enumerate(cfg.targets):
        where = f"targets[{i}]"
        for field in ("ssh_config", "known_hosts"):
            value = getattr(t, field)
            if value is not None and not Path(value).expanduser().is_file():
                return f"{where}.{field}: '{value}' is not a file"
        if t.host is None:
            repo = Path(t.repo).expanduser()
            if not repo.is_dir():
                return f"{where}.repo: '{t.repo}' is not a folder on this machine (the target has no host)"
            if not _is_git_checkout(repo):
                return f"{where}.repo: '{t.repo}' is not a git repository"
    return None


def _is_git_checkout(path: Path) -> bool:
    from tools.git import CliGit, GitError

    try:
        CliGit(path, timeout=30)  # it asks git for the checkout's top, as every hunt's git does
    except GitError:
        return False
    return True

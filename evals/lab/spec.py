"""The scenario spec: a regression world as data (TOML), validated by pydantic.

Everything a scenario can vary is here: calibration of the system, the history before the
known-good point, the changes after it (pulled or committed), uncommitted patches, env vars,
launch flags, a dependency version, the hardware state, the alert and the truth. See
``docs/reference/lab-recipes.md`` for the reference; ``load_spec`` turns any problem into one line naming
the file and the field.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evals.lab.recipes import KERNELS, SITES, TEMPLATES
from tools.bench import SERVER_METRICS
from tools.metric import higher_is_better


class SpecError(ValueError):
    """A spec that cannot be built; the message is one line: ``file: field: reason``."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Effect(_Strict):
    """How much a change slows one named cost: ``add_us`` per call, or ``scale`` x its base kernel."""

    cost: str
    add_us: float | None = Field(default=None, gt=0)
    scale: float | None = Field(default=None, gt=0)

    @field_validator("cost")
    @classmethod
    def _known_cost(cls, v: str) -> str:
        if v not in SITES:
            raise ValueError(f"unknown cost '{v}' (known: {', '.join(sorted(SITES))})")
        return v

    @model_validator(mode="after")
    def _one_amount(self) -> Effect:
        if (self.add_us is None) == (self.scale is None):
            raise ValueError("give exactly one of add_us or scale")
        return self

    def added_us(self, costs: dict[str, float]) -> float:
        """The extra simulated microseconds per call of the site."""
        if self.add_us is not None:
            return self.add_us
        base = SITES[self.cost].base_kernel
        return costs[base] * (self.scale - 1.0)  # type: ignore[operator]


class Edit(_Strict):
    """One file touched by a change: harmless lines, a named template, and/or an effect."""

    path: str
    lines: int = Field(default=0, ge=0, le=2000)
    template: str | None = None
    effect: Effect | None = None

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        if v.startswith("/") or ".." in Path(v).parts or not v or v.endswith("/"):
            raise ValueError(f"'{v}' must be a relative file path inside the repo")
        return v

    @field_validator("template")
    @classmethod
    def _known_template(cls, v: str | None) -> str | None:
        if v is not None and v not in TEMPLATES:
            raise ValueError(f"unknown template '{v}' (known: {', '.join(sorted(TEMPLATES))})")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Edit:
        if self.effect is not None and self.template is None:
            site = SITES[self.effect.cost]
            if site.path != self.path:
                raise ValueError(f"cost '{self.effect.cost}' is paid in {site.path}, not in {self.path}")
        if self.template is not None:
            tpl = TEMPLATES[self.template]
            if tpl.path is not None and tpl.path != self.path:
                raise ValueError(f"template '{self.template}' edits {tpl.path}, not {self.path}")
            if self.effect is not None and not tpl.effect_costs:
                raise ValueError(f"template '{self.template}' cannot carry an effect")
            if self.effect is not None and self.effect.cost not in tpl.effect_costs:
                raise ValueError(f"template '{self.template}' can only affect {', '.join(tpl.effect_costs)}")
        if self.lines == 0 and self.template is None and self.effect is None:
            self.lines = 6
        return self


class Commit(_Strict):
    """A commit; ``filler = N`` instead expands to N generated harmless commits; ``reverts = ID``
    is ``git revert`` of an earlier commit of the spec (its files as they were before it, the
    message "Revert "SUBJECT"" / "This reverts commit SHA."), a revert of a revert re-lands it."""

    id: str | None = None
    subject: str | None = None
    body: str = ""
    author: str = "Dev Contributor <dev@minisglang.example>"
    edits: list[Edit] = []
    filler: int | None = Field(default=None, ge=1, le=5000)
    reverts: str | None = None

    @model_validator(mode="after")
    def _shape(self) -> Commit:
        if self.filler is not None:
            if self.subject or self.edits or self.id or self.reverts:
                raise ValueError("a filler entry takes only 'filler'")
        elif self.reverts is not None:
            if self.subject or self.edits:
                raise ValueError("a revert takes its subject and files from the commit it reverts")
        elif not self.subject or not self.edits:
            raise ValueError("a commit needs a subject and at least one edit")
        if not re.fullmatch(r"[^<>]+ <[^<>]+>", self.author):
            raise ValueError(f"author '{self.author}' must look like 'Name <email>'")
        return self


class Patch(Edit):
    """An uncommitted working-tree change."""

    id: str | None = None


class EnvVar(_Strict):
    """An env var set on the host: by a ``sitecustomize.py`` or by the env file the launch sources."""

    id: str | None = None
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    value: str
    via: Literal["sitecustomize", "env_file"] = "sitecustomize"
    effect: Effect | None = None

    @model_validator(mode="after")
    def _runtime_effect(self) -> EnvVar:
        if self.effect is not None and SITES[self.effect.cost].base_kernel is None:
            raise ValueError(f"an env var can only scale a cost with a base kernel, not '{self.effect.cost}'")
        return self


class Dependency(_Strict):
    """A package changed on the host from ``good`` to ``bad`` (an upgrade or a downgrade): the
    device runtime ``minitorch`` (its kernel table), or a kernel package the runtime loads (its
    ``effect`` scales a kernel in the ``bad`` version), or a package nothing imports (no effect)."""

    id: str | None = None
    name: str = Field(default="minitorch", pattern=r"^[a-z][a-z0-9_]*$")
    good: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    bad: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    effect: Effect | None = None

    @model_validator(mode="after")
    def _differs(self) -> Dependency:
        if self.good == self.bad:
            raise ValueError("good and bad versions are the same")
        if self.effect is not None and SITES[self.effect.cost].base_kernel is None:
            raise ValueError(f"a dependency can only scale a cost with a base kernel, not '{self.effect.cost}'")
        return self


class GpuProcess(_Strict):
    """Another process on the GPUs (a stray server, a training job): ``nvidia-smi`` lists it, and it
    takes ``sm_share`` of every GPU's compute, so each compute kernel of ours runs 1 / (1 - share)
    as long. It leaves the memory a server needs (it does not stop a launch)."""

    pid: int = Field(ge=2)
    name: str = "python"
    used_mib: int = Field(default=20000, ge=0)
    sm_share: float = Field(default=0.2, ge=0, lt=0.9)


class Hardware(_Strict):
    """What ``nvidia-smi`` reports now; ``nominal_*`` is what the machine should report."""

    id: str | None = None
    name: str = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    count: int = Field(default=8, ge=1, le=16)
    compute_cap: str = Field(default="12.0", pattern=r"^\d+\.\d+$")
    driver_version: str = "580.95.05"
    cuda_version: str = "13.0"
    max_sm_clock_mhz: int = 2430
    sm_clock_mhz: int = 2310
    mem_clock_mhz: int = 14001
    power_draw_w: float = 231.0
    power_limit_w: float = 600.0
    temperature_c: int = 54
    pcie_gen: int = 5
    pcie_gen_max: int = 5
    pcie_width: int = 16
    pcie_width_max: int = 16
    memory_total_mib: int = 97887
    memory_used_mib: int = 88412
    utilization_pct: int = 97
    throttle_reasons: str = "Not Active"
    pstate: str = "P0"
    other_processes: list[GpuProcess] = []

    def foreign_sm_share(self) -> float:
        return min(0.9, sum(p.sm_share for p in self.other_processes))

    @model_validator(mode="after")
    def _sane(self) -> Hardware:
        if not 0 < self.sm_clock_mhz <= self.max_sm_clock_mhz:
            raise ValueError("sm_clock_mhz must be in (0, max_sm_clock_mhz]")
        if not (0 < self.pcie_gen <= self.pcie_gen_max and 0 < self.pcie_width <= self.pcie_width_max):
            raise ValueError("PCIe link gen/width must be in (0, max]")
        return self


class Speculative(_Strict):
    num_steps: int = Field(default=2, ge=1, le=8)
    accept_rate: float = Field(default=0.6, gt=0, lt=1)


class System(_Strict):
    """Calibration: the model's shape and what each kernel costs (simulated microseconds)."""

    model: str = "Kimi-K2.5"
    layers: int = Field(default=61, ge=1, le=200)
    tp: int = Field(default=8, ge=1, le=64)
    noise_cv: float = Field(default=0.03, ge=0, le=0.5)
    launch_cv: float = Field(default=0.01, ge=0, le=0.5)
    speculative: Speculative = Speculative()
    runtime_version: str = Field(default="2.9.0", pattern=r"^\d+\.\d+\.\d+$")
    # The host's NCCL (a system library, not a pip package): minitorch logs it when a server takes
    # its GPUs, as vLLM logs "using nccl==2.21.5"; only the server's log shows it.
    nccl_version: str = Field(default="2.21.5", pattern=r"^\d+\.\d+\.\d+$")
    # Simulated seconds from launch to healthy (weights, then CUDA-graph capture): by default about
    # ten benchmark samples of the seed's workload, the ratio of a real node (minutes vs seconds).
    launch_s: float = Field(default=50.0, ge=0, le=36_000)
    # The host runs this much slower than when the alert's good value was taken (a noisy neighbour,
    # a BIOS power profile), and no reading shows it: every kernel's cost scaled.
    slowdown: float = Field(default=1.0, ge=1.0, le=10.0)
    costs: dict[str, float] = {}

    @field_validator("costs")
    @classmethod
    def _known_kernels(cls, v: dict[str, float]) -> dict[str, float]:
        for name, us in v.items():
            if name not in KERNELS:
                raise ValueError(f"unknown kernel '{name}' (known: {', '.join(sorted(KERNELS))})")
            if us < 0:
                raise ValueError(f"kernel '{name}' cost must be >= 0")
        return v

    def kernel_costs(self) -> dict[str, float]:
        return {name: self.costs.get(name, k.us) for name, k in KERNELS.items()}


class Launch(_Strict):
    """Launch flags of the alerting configuration; ``good_flags`` when a flag changed since good."""

    flags: list[str] = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2"]
    good_flags: list[str] | None = None


class Alert(_Strict):
    name: str = "ThroughputRegression"
    host: str = "gpu-node-1"
    service: str = "minisglang"
    # A name sleuth bench measures (tools.bench.SERVER_METRICS): tok_per_s, output_throughput,
    # p99_ttft_ms, median_itl_ms, p99_tpot_ms, p99_e2e_latency_ms, ...; its direction from its name.
    metric: str = "tok_per_s"
    good: float = Field(gt=0)
    bad: float = Field(gt=0)
    summary: str | None = None
    give_good_ref: bool = False
    # What the host's operator hands the hunt for a package change (lab dependencies): pip's log
    # and the wheelhouse of previous versions. Without both, the hunt falls back on the dist-info
    # times and fetches the previous release with pip from the host's own index (the lab's is a
    # local directory: PIP_FIND_LINKS in the host's env file, no network).
    give_pip_log: bool = True
    give_wheelhouse: bool = True
    requests: int = Field(default=4, ge=1)
    max_tokens: int = Field(default=64, ge=1)
    # The workload's shape (bench_serving's --max-concurrency, --random-input, --request-rate).
    concurrency: int = Field(default=1, ge=1, le=256)
    input_len: int | None = Field(default=None, ge=1, le=100_000)
    request_rate: float | None = Field(default=None, gt=0)

    @field_validator("metric")
    @classmethod
    def _measured(cls, v: str) -> str:
        if v not in SERVER_METRICS:
            raise ValueError(f"'{v}' is not a metric sleuth bench measures (e.g. tok_per_s, p99_ttft_ms)")
        if higher_is_better(v) is None:
            raise ValueError(f"'{v}' does not say which way is better")
        return v

    @property
    def higher_is_better(self) -> bool:
        return bool(higher_is_better(self.metric))


class Truth(_Strict):
    """Which changes (by id) cause the regression; empty means none (noise only)."""

    culprits: list[str] = []
    # "external": a real drop that nothing in the repository, the packages or the readings explains
    # (``system.slowdown``); the right verdict names no change.
    kind: Literal["external"] | None = None
    note: str = ""

    @model_validator(mode="after")
    def _external_names_nothing(self) -> Truth:
        if self.kind == "external" and self.culprits:
            raise ValueError("an external truth names no culprits")
        return self


class History(_Strict):
    filler: int = Field(default=6, ge=0, le=5000)
    commits: list[Commit] = []


class Scenario(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    description: str = ""
    seed: int = 0
    time_scale: float = Field(default=0.2, gt=0, le=10)
    start_date: str = Field(default="2026-01-12T09:00:00+00:00")
    system: System = System()
    hardware: Hardware = Hardware()
    history: History = History()
    pulled: list[Commit] = []
    committed: list[Commit] = []
    uncommitted: list[Patch] = []
    env: list[EnvVar] = []
    dependency: list[Dependency] = []  # one [dependency] table or several [[dependency]]
    launch: Launch = Launch()
    alert: Alert
    truth: Truth = Truth()

    @field_validator("dependency", mode="before")
    @classmethod
    def _one_or_many(cls, value):
        return [value] if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _coherent(self) -> Scenario:
        if self.pulled and self.committed:
            raise ValueError(
                "pulled: give either 'pulled' (a fast-forward pull) or 'committed' (local commits), not both"
            )
        ids = self.change_ids()
        for cid in self.truth.culprits:
            if cid not in ids:
                raise ValueError(f"truth.culprits: no change has id '{cid}'")
        seen: set[str] = set()
        for cid in ids:
            if cid in seen:
                raise ValueError(f"duplicate change id '{cid}'")
            seen.add(cid)
        for dep in self.dependency:
            if dep.name == "minitorch" and dep.bad != self.system.runtime_version:
                raise ValueError("dependency.bad: must equal system.runtime_version (the installed one)")
        names = [d.name for d in self.dependency]
        if len(set(names)) != len(names):
            raise ValueError(f"dependency: a package is named twice ({', '.join(names)})")
        return self

    @model_validator(mode="after")
    def _reverts_earlier(self) -> Scenario:
        seen: set[str] = set()
        for c in [*self.history.commits, *self.pulled, *self.committed]:
            if c.reverts is not None and c.reverts not in seen:
                raise ValueError(f"reverts: '{c.reverts}' is not the id of an earlier commit")
            if c.id:
                seen.add(c.id)
        return self

    def change_ids(self) -> list[str]:
        ids = [c.id for c in [*self.history.commits, *self.pulled, *self.committed] if c.id]
        ids += [p.id for p in self.uncommitted if p.id] + [e.id for e in self.env if e.id]
        ids += [d.id for d in self.dependency if d.id]
        if self.hardware.id:
            ids.append(self.hardware.id)
        if self.launch.good_flags is not None:
            ids.append("launch")
        return ids


def _field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not part.startswith(("function-", "model-")):
            out += ("." if out else "") + part
    return out


def load_spec(path: str | Path) -> Scenario:
    """Read and validate a spec; any problem raises SpecError(``file: field: reason``)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError as exc:
        raise SpecError(f"{p}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{p}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{p}: invalid TOML: {exc}") from exc  # the path: a suite's cases are all case.toml
    if data.get("kind") == "real":  # a real case's case.toml: sleuth eval hunts it, nothing is built
        raise SpecError(f'{p}: a real case (kind = "real"), not a lab scenario: run it with `sleuth eval {p.parent}`')
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = _field_path(err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if not _field_path(err["loc"]) and (m := re.match(r"^([\w.\[\]]+): (.*)$", msg)):
            field, msg = m.group(1), m.group(2)  # a whole-scenario check that names its field
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field missing"
        raise SpecError(f"{p.name}: {field}: {msg}") from exc

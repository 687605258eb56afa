"""Build a scenario: ``DIR/repo`` (the agent's checkout), ``DIR/host`` (the machine), truth and alert.

The repo is a real git repository of the minisglang stack. Identities and dates are fixed, so
the same spec gives the same SHAs on every machine. The known-good point is reached with a real
``git pull origin main`` and the later commits arrive with another one, so the reflog says
``pull origin main: Fast-forward`` exactly like the seeds. Everything is built in a sibling temp
dir and renamed into place: a failure leaves nothing half-built.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from evals.lab.recipes import KERNELS, SITES, STACK_PKG, TEMPLATES, harmless_block, insert_at_site, strip_markers
from evals.lab.spec import Commit, Dependency, Edit, Hardware, Scenario

LAB_DIR = Path(__file__).parent
STACK_DIR = LAB_DIR / "stack"
RUNTIME_DIR = LAB_DIR / "runtime"
UPSTREAM_URL = "https://github.com/minisglang/minisglang.git"
EXECUTABLE = {"scripts/launch_server.sh"}
# Kernel costs are stated at this SM clock (a healthy card under load); lower clocks slow compute.
REFERENCE_SM_CLOCK_MHZ = Hardware.model_fields["sm_clock_mhz"].default


class LabError(RuntimeError):
    """A build that cannot proceed (target not empty, git failed)."""


@dataclass
class Change:
    """A change after (or at) the good point, as the scorer sees it."""

    id: str | None
    kind: str  # commit | uncommitted | env | dependency | hardware | config
    ref: str
    summary: str
    effect: str | None = None


@dataclass
class BuildResult:
    root: Path
    repo: Path
    host: Path
    good_sha: str
    head_sha: str
    pre_pull_sha: str | None
    changes: list[Change] = field(default_factory=list)
    truth: dict = field(default_factory=dict)
    alert: dict = field(default_factory=dict)


def _read_stack() -> dict[str, str]:
    return {
        str(p.relative_to(STACK_DIR)): p.read_text()
        for p in sorted(STACK_DIR.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


class _Git:
    """git with a pinned identity, clock and config: the source of deterministic SHAs."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def __call__(self, *args: str, when: datetime | None = None, author: str | None = None) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        name, _, email = (author or "Lab Builder <lab@minisglang.example>").partition(" <")
        stamp = (when or datetime(2026, 1, 1)).isoformat()
        env.update(
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_CONFIG_NOSYSTEM="1",
            GIT_AUTHOR_NAME=name,
            GIT_AUTHOR_EMAIL=email.rstrip(">"),
            GIT_AUTHOR_DATE=stamp,
            GIT_COMMITTER_NAME=name,
            GIT_COMMITTER_EMAIL=email.rstrip(">"),
            GIT_COMMITTER_DATE=stamp,
        )
        cmd = [
            "git",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.autocrlf=false",
            "-c",
            "pull.rebase=false",
            "-c",
            "advice.detachedHead=false",
            *args,
        ]
        proc = subprocess.run(cmd, cwd=self.cwd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise LabError(f"git {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc.stdout.strip()


WORLD_FILE = "world.json"  # a built scenario's build settings (``launch_scale``), beside its alert


def built_launch_scale(root: str | Path) -> float | None:
    """The launch scale a built scenario was built with (None: not a lab build, or built before
    ``WORLD_FILE`` was written)."""
    try:
        return float(json.loads((Path(root) / WORLD_FILE).read_text())["launch_scale"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def default_launch_scale() -> float:
    """How much of the spec's simulated launch time a built host spends: 1.0 (realistic, for
    ``bench/``) unless ``$SLEUTH_LAB_LAUNCH_SCALE`` says otherwise (the tests and the demo run
    launches at a few percent of it, so a hunt of a dozen launches stays fast)."""
    raw = os.environ.get("SLEUTH_LAB_LAUNCH_SCALE", "1")
    try:
        value = float(raw)
    except ValueError:
        raise LabError(f"$SLEUTH_LAB_LAUNCH_SCALE: '{raw}' is not a number") from None
    if not 0 <= value <= 10:
        raise LabError(f"$SLEUTH_LAB_LAUNCH_SCALE: {value} is outside [0, 10]")
    return value


class _Tree:
    """The stack's files with their site markers, and the changes applied to them."""

    def __init__(self, files: dict[str, str], spec: Scenario, launch_scale: float = 1.0) -> None:
        self.files = files
        self.spec = spec
        self.launch_scale = launch_scale
        self.costs = spec.system.kernel_costs()
        self.extra_kernels: dict[str, dict] = {}
        # Each commit with an id: (sha, subject, its paths' texts before it; None: no such file),
        # what a later ``reverts`` puts back.
        self.landed: dict[str, tuple[str, str, dict[str, str | None]]] = {}
        self.variant_used: dict[str, int] = {}
        self.cutlass_added_us: float | None = None

    def apply(self, edit: Edit, salt: str) -> None:
        text = self.files.get(edit.path)
        if text is None:
            topic = Path(edit.path).stem.replace("_", " ")
            text = f'"""{topic.capitalize()}."""\n'
            text += "\n".join(harmless_block(topic, max(edit.lines, 6), salt)) + "\n"
        elif edit.template is not None:
            text = TEMPLATES[edit.template].render(text, edit.lines, salt)
        elif edit.lines:
            text = TEMPLATES["generic"].render(text, edit.lines, salt)
        if edit.template == "sm120_moe_runner":
            self.cutlass_added_us = edit.effect.added_us(self.costs) if edit.effect else 0.0
        elif edit.effect is not None:
            site = SITES[edit.effect.cost]
            used = self.variant_used.get(edit.effect.cost, 0)
            if used >= len(site.variants):
                raise LabError(f"{edit.path}: more slowdowns at '{edit.effect.cost}' than the lab has recipes for")
            snippet = site.variants[used]
            self.variant_used[edit.effect.cost] = used + 1
            text = insert_at_site(text, edit.effect.cost, snippet)
            self.extra_kernels[snippet.kernel] = {"us": edit.effect.added_us(self.costs), "class": site.klass}
        self.files[edit.path] = text

    def write(self, root: Path, paths: list[str] | None = None) -> None:
        for rel in paths if paths is not None else self.files:
            dest = root / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(strip_markers(self.files[rel]))
            if rel in EXECUTABLE:
                dest.chmod(0o755)

    def profile(self, version: str, extra_us: dict[str, float] | None = None, host: Path | None = None) -> dict:
        kernels = {n: {"us": us, "class": KERNELS[n].klass} for n, us in self.costs.items()}
        if self.cutlass_added_us is not None:
            kernels["moe_experts_cutlass"]["us"] = self.costs["moe_experts"] + self.cutlass_added_us
        kernels.update(self.extra_kernels)
        for name, us in (extra_us or {}).items():
            kernels[name] = {**kernels[name], "us": kernels[name]["us"] + us}
        if self.spec.system.slowdown != 1.0:  # the host is slower, and nothing reports it
            kernels = {n: {**k, "us": k["us"] * self.spec.system.slowdown} for n, k in kernels.items()}
        env_effects = []
        for env in self.spec.env:
            if env.effect is not None:
                base = SITES[env.effect.cost].base_kernel
                added = env.effect.added_us(self.costs)
                env_effects.append(
                    {
                        "var": env.name,
                        "value": env.value,
                        "kernel": base,
                        "scale": (self.costs[base] + added) / self.costs[base],
                    }
                )
        return {
            "version": version,
            "nccl_version": self.spec.system.nccl_version,
            "kernels": kernels,
            "env_effects": env_effects,
            "time_scale": self.spec.time_scale,
            "seed": self.spec.seed,
            "reference_sm_clock_mhz": REFERENCE_SM_CLOCK_MHZ,
            "noise_cv": self.spec.system.noise_cv,
            "launch_cv": self.spec.system.launch_cv,
            # The host's GPUs: a server holds --tp of them (lock files) until it exits.
            "gpu_dir": str(host / "gpus") if host is not None else None,
            "gpu_count": self.spec.hardware.count,
            # Another process's share of every GPU's compute (nvidia-smi lists it).
            "foreign_sm_share": self.spec.hardware.foreign_sm_share(),
            "gpu_memory_gib": round(self.spec.hardware.memory_total_mib / 1024, 2),
            # Simulated seconds of a launch, as a real server spends them: weights, then graph capture.
            "launch": {
                "weights_s": round(0.6 * self.spec.system.launch_s * self.launch_scale, 4),
                "capture_s": round(0.4 * self.spec.system.launch_s * self.launch_scale, 4),
            },
        }


class _History:
    """Commits into the upstream repo, one fixed timestamp apart."""

    def __init__(self, git: _Git, tree: _Tree, root: Path, start: datetime, seed: int) -> None:
        self.git, self.tree, self.root, self.clock, self.seed = git, tree, root, start, seed
        self.count = 0

    def tick(self, minutes: int = 47) -> datetime:
        self.clock += timedelta(minutes=minutes)
        return self.clock

    def commit(self, c: Commit, filler_of: str) -> list[tuple[str, Commit]]:
        if c.filler is not None:
            return [self._one(self._filler(i)) for i in range(c.filler)]
        return [self._one(c)]

    def _filler(self, i: int) -> Commit:
        n = self.count + i
        areas = [
            "mem_cache/radix_cache.py",
            "managers/tokenizer_manager.py",
            "lora/lora_manager.py",
            "multimodal_gen/runtime/pipelines.py",
            "layers/sampler.py",
            "utils.py",
            "docs_helpers.py",
        ]
        area = areas[(n * 7 + self.seed) % len(areas)]
        verbs = ["Refactor", "Clean up", "Add tests for", "Tidy", "Document", "Simplify", "Rename helpers in"]
        subject = f"{verbs[(n + self.seed) % len(verbs)]} {Path(area).stem.replace('_', ' ')} (#{1000 + n})"
        return Commit(
            subject=subject,
            author="Maintainer Bot <maint@minisglang.example>",
            edits=[Edit(path=f"{STACK_PKG}/{area}", lines=6 + (n * 5) % 17)],
        )

    def _one(self, c: Commit) -> tuple[str, Commit]:
        self.count += 1
        if c.reverts is not None:
            return self._revert(c)
        before = {e.path: self.tree.files.get(e.path) for e in c.edits}
        for k, edit in enumerate(c.edits):
            self.tree.apply(edit, salt=f"{self.seed}:{self.count}:{k}")
        self.tree.write(self.root, sorted({e.path for e in c.edits}))
        self.git("add", "-A")
        when = self.tick()
        msg = [c.subject or ""] + (["-m", c.body] if c.body else [])
        self.git("commit", "-q", "-m", *msg, when=when, author=c.author)
        sha = self.git("rev-parse", "HEAD")
        if c.id:
            self.tree.landed[c.id] = (sha, c.subject or "", before)
        return sha, c

    def _revert(self, c: Commit) -> tuple[str, Commit]:
        """``git revert`` of an earlier commit of the spec, as a person runs it: its paths as they
        were before it, the message git writes. Reverting a revert re-lands the first."""
        assert c.reverts is not None
        sha, subject, before = self.tree.landed[c.reverts]
        undone = {p: self.tree.files.get(p) for p in before}
        for path, text in before.items():
            if text is None:
                self.tree.files.pop(path, None)
                (self.root / path).unlink(missing_ok=True)
            else:
                self.tree.files[path] = text
        self.tree.write(self.root, [p for p, t in before.items() if t is not None])
        self.git("add", "-A")
        title = f'Revert "{subject}"'
        self.git("commit", "-q", "-m", title, "-m", f"This reverts commit {sha}.", when=self.tick(), author=c.author)
        new = self.git("rev-parse", "HEAD")
        if c.id:
            self.tree.landed[c.id] = (new, title, undone)
        return new, c.model_copy(update={"subject": title})


def _kind_of_commit_change(sha: str, c: Commit) -> Change:
    effects = [f"{e.path}: {e.effect.cost}" for e in c.edits if e.effect]
    return Change(c.id, "commit", sha, c.subject or "", "; ".join(effects) or None)


def install_dist(site: Path, name: str, version: str, files: dict[str, str], when: float | None = None) -> None:
    """``files`` into ``site`` as pip would leave them: the package and its ``dist-info`` (so
    ``importlib.metadata`` sees name and version), written at ``when`` (its files' times, which
    is what a hunt reads as "installed at")."""
    for rel, text in {**files, **_dist_info(name, version, files)}.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
        if when is not None:
            os.utime(site / rel, (when, when))


def write_wheel(wheelhouse: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel of ``files`` (a zip laid out as site-packages, with its dist-info)."""
    import zipfile

    wheelhouse.mkdir(parents=True, exist_ok=True)
    path = wheelhouse / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for rel, text in sorted({**files, **_dist_info(name, version, files)}.items()):
            z.writestr(rel, text)
    return path


def _dist_info(name: str, version: str, files: dict[str, str]) -> dict[str, str]:
    info = f"{name}-{version}.dist-info"
    record = [f"{rel},," for rel in sorted(files)] + [f"{info}/{f},," for f in ("METADATA", "WHEEL", "RECORD")]
    return {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: perf-sleuth-lab\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/INSTALLER": "pip\n",
        f"{info}/RECORD": "\n".join(record) + "\n",
    }


def _write_host(spec: Scenario, tree: _Tree, host: Path, final_host: Path) -> None:
    (host / "bin").mkdir(parents=True)
    (host / "gpus").mkdir()
    smi = host / "bin" / "nvidia-smi"
    smi.write_text("#!/usr/bin/env python3\n" + (RUNTIME_DIR / "nvidia_smi.py").read_text())
    smi.chmod(0o755)
    hw = spec.hardware.model_dump(exclude={"id"})
    hw["uuid_prefix"] = f"{spec.seed & 0xFFFFFFFF:08x}"
    (host / "hardware.json").write_text(json.dumps(hw, indent=2) + "\n")

    kernel_pkgs = [d.name for d in spec.dependency if d.name != "minitorch"]

    def runtime_files(version: str, extra: dict[str, float] | None) -> dict[str, str]:
        profile = tree.profile(version, extra, final_host) | {"kernel_packages": kernel_pkgs}
        return {
            "minitorch/__init__.py": (RUNTIME_DIR / "minitorch" / "__init__.py").read_text(),
            "minitorch/_profile.json": json.dumps(profile, indent=2) + "\n",
        }

    def package_files(dep: Dependency, version: str) -> dict[str, str]:
        scale = {}
        if version == dep.bad and dep.effect is not None:
            base = SITES[dep.effect.cost].base_kernel
            assert base is not None
            scale = {base: (tree.costs[base] + dep.effect.added_us(tree.costs)) / tree.costs[base]}
        text = f'"""{dep.name}: a package of the lab host."""\n\n__version__ = "{version}"\n'
        return {f"{dep.name}/__init__.py": text + f"KERNEL_SCALE = {scale!r}\n"}

    site, wheels = host / "site-packages", host / "wheelhouse"
    deps = {d.name: d for d in spec.dependency}
    runtime = deps.get("minitorch")
    slowdown: dict[str, float] = {}
    if runtime is not None and runtime.effect is not None:
        slowdown = {SITES[runtime.effect.cost].base_kernel: runtime.effect.added_us(tree.costs)}  # type: ignore[dict-item]
    # The host's timeline: everything installed long before the history starts; the changed
    # packages upgraded by pip at 02:14 the night before the alert fires (pip's log says the same).
    setup_at = datetime.fromisoformat(spec.start_date).timestamp() - 60 * 86400
    pip_at = datetime.fromisoformat(spec.start_date) + timedelta(days=29, hours=-7)
    changed = {d.name for d in spec.dependency}
    runtime_at = pip_at.timestamp() + 3 if "minitorch" in changed else setup_at
    install_dist(
        site,
        "minitorch",
        spec.system.runtime_version,
        runtime_files(spec.system.runtime_version, slowdown),
        when=runtime_at,
    )
    for dep in spec.dependency:
        if dep.name != "minitorch":
            install_dist(site, dep.name, dep.bad, package_files(dep, dep.bad), when=pip_at.timestamp() + 3)
        files = runtime_files(dep.good, None) if dep.name == "minitorch" else package_files(dep, dep.good)
        write_wheel(wheels, dep.name, dep.good, files)
        if dep.name == "minitorch":  # unpacked too: the old layout, for a PYTHONPATH by hand
            install_dist(wheels / f"minitorch-{dep.good}", "minitorch", dep.good, files)
    if spec.dependency:
        names = " ".join(d.name for d in spec.dependency)
        day = pip_at.strftime("%Y-%m-%dT%H:%M")
        log = [f"{day}:00 pip install -U {names}"]
        for d in spec.dependency:
            log += [
                f"{day}:02   Attempting uninstall: {d.name}",
                f"{day}:02     Found existing installation: {d.name} {d.good}",
            ]
        log.append(f"{day}:03 Successfully installed " + " ".join(f"{d.name}-{d.bad}" for d in spec.dependency))
        (host / "pip.log").write_text("\n".join(log) + "\n")
    else:
        # The operator's pip log records nothing since the host was set up. Without it a hunt would
        # read the dist-info times against the lab's made-up dates, and every package this machine's
        # own Python installed (after those dates, in real time) would look newly installed.
        (host / "pip.log").write_text("# pip's log on the lab host: nothing installed since it was set up\n")
    site_env = [e for e in spec.env if e.via == "sitecustomize"]
    pythonpath = [str(final_host / "site-packages")]
    if site_env:
        (host / "sitecustomize").mkdir()
        lines = ['"""Set at interpreter start-up for every Python process on this host."""', "import os", ""]
        lines += [f"os.environ.setdefault({e.name!r}, {e.value!r})" for e in site_env]
        (host / "sitecustomize" / "sitecustomize.py").write_text("\n".join(lines) + "\n")
        pythonpath.insert(0, str(final_host / "sitecustomize"))
    models = host / "models"
    (models / spec.system.model).mkdir(parents=True)
    (models / spec.system.model / "config.json").write_text(
        json.dumps({"architectures": ["KimiK25ForConditionalGeneration"], "num_hidden_layers": spec.system.layers})
        + "\n"
    )
    (models / f"{spec.system.model}-eagle3").mkdir()
    (models / f"{spec.system.model}-eagle3" / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "accept_rate": spec.system.speculative.accept_rate})
        + "\n"
    )
    env_lines = [
        "# The lab host's login environment: source it before launching the server.",
        f'export PATH="{final_host / "bin"}:$PATH"',
        "# A PYTHONPATH set by the caller comes first (e.g. to try another minitorch from host/wheelhouse).",
        f'export PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{":".join(pythonpath)}"',
        f'export MINISGLANG_MODELS="{final_host / "models"}"',
    ]
    if spec.dependency:  # the host's package index: a local mirror (pip download works offline)
        env_lines += [f'export PIP_FIND_LINKS="{final_host / "wheelhouse"}"', "export PIP_NO_INDEX=1"]
    env_lines += [f"export {e.name}={shlex.quote(e.value)}" for e in spec.env if e.via == "env_file"]
    (host / "env.sh").write_text("\n".join(env_lines) + "\n")


def launch_command(spec: Scenario, host: Path, flags: list[str]) -> str:
    """The command template the alert carries: ``{worktree}`` and ``{port}`` are filled per probe."""
    base = ["--model-path", spec.system.model, "--tp", str(spec.system.tp), "--host", "127.0.0.1", "--port", "{port}"]
    return f". {shlex.quote(str(host / 'env.sh'))} && exec {{worktree}}/scripts/launch_server.sh " + " ".join(
        shlex.quote(a) if a != "{port}" else a for a in base + flags
    )


def benchmark_command(spec: Scenario) -> str:
    a = spec.alert
    shape = f" --concurrency {a.concurrency}" if a.concurrency > 1 else ""
    shape += f" --input-len {a.input_len}" if a.input_len else ""
    shape += f" --request-rate {a.request_rate:g}" if a.request_rate else ""
    return (
        f"sleuth bench --endpoint http://127.0.0.1:{{port}}/v1 --model {shlex.quote(spec.system.model)} "
        f"--requests {a.requests} --max-tokens {a.max_tokens}{shape} --time-scale {spec.time_scale} --json"
    )


def _alert(spec: Scenario, res: BuildResult, final_root: Path, launch_scale: float) -> dict:
    a = spec.alert
    mode = "eagle3" if "--speculative-algorithm" in spec.launch.flags else "baseline"
    summary = a.summary or f"{mode} throughput {a.good:g} -> {a.bad:g} tok/s on {a.host}"
    labels = {
        "alertname": a.name,
        "host": a.host,
        "service": a.service,
        "metric": a.metric,
        "mode": mode,
        "severity": "page",
    }
    ann = {
        "summary": summary,
        "description": f"{a.metric} fell from {a.good:g} to {a.bad:g} ({(a.bad - a.good) / a.good * 100:+.1f}%)",
        "good_value": f"{a.good:g}",
        "bad_value": f"{a.bad:g}",
        "direction": "higher_is_better" if a.higher_is_better else "lower_is_better",
        "repo": str(final_root / "repo"),
        "launch_command": launch_command(spec, final_root / "host", spec.launch.flags),
        "benchmark_command": benchmark_command(spec),
        "time_scale": f"{spec.time_scale:g}",
        # One server per host when it takes every GPU (a TP-8 server on an 8-GPU node).
        "slots": str(max(1, spec.hardware.count // spec.system.tp)),
        # 1800 s on a real node; here in the lab's wall seconds (its clock and launch time scaled).
        "launch_timeout": f"{max(60.0, 1800 * spec.time_scale * launch_scale):g}",
        # A launch waits for GPUs another process holds: 600 s on a real node, scaled the same way.
        "busy_wait": f"{max(5.0, 600 * spec.time_scale * launch_scale):g}",
        # The lab's stack is Python and its operator (us) allows it: launches print their imports.
        "trace_paths": "true",
    }
    if a.give_pip_log:  # where the host's operator keeps pip's log
        ann["pip_log"] = str(final_root / "host" / "pip.log")
    if spec.dependency and a.give_wheelhouse:  # ...and the previous versions' wheels
        ann["wheelhouse"] = str(final_root / "host" / "wheelhouse")
    if spec.launch.good_flags is not None:
        ann["good_launch_command"] = launch_command(spec, final_root / "host", spec.launch.good_flags)
    if a.give_good_ref:
        ann["good_ref"] = res.good_sha
    starts = datetime.fromisoformat(spec.start_date) + timedelta(days=30)
    fingerprint = hashlib.sha256(f"{spec.name}:{a.name}:{a.host}".encode()).hexdigest()[:16]
    alert = {
        "status": "firing",
        "labels": labels,
        "annotations": ann,
        "startsAt": starts.isoformat(),
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": f"http://prometheus.example:9090/graph?g0.expr={a.metric}",
        "fingerprint": fingerprint,
    }
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{a.name}"}}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "perf-sleuth",
        "groupLabels": {"alertname": a.name},
        "commonLabels": labels,
        "commonAnnotations": ann,
        "externalURL": "http://alertmanager.example:9093",
        "alerts": [alert],
    }


def _truth(spec: Scenario, res: BuildResult) -> dict:
    culprits = set(spec.truth.culprits)
    causes = [c for c in res.changes if c.id in culprits]
    herrings = [c for c in res.changes if c.id not in culprits]
    kinds = sorted({c.kind for c in causes})
    kind = "none" if not causes else kinds[0] if len(kinds) == 1 else "multiple"
    if spec.truth.kind == "external":
        kind = "external"
    as_dict = lambda c: {"id": c.id, "kind": c.kind, "ref": c.ref, "summary": c.summary, "effect": c.effect}  # noqa: E731
    return {
        "scenario": spec.name,
        "kind": kind,
        "root_causes": [as_dict(c) for c in causes],
        "red_herrings": [as_dict(c) for c in herrings],
        "good_sha": res.good_sha,
        "head_sha": res.head_sha,
        "pre_pull_sha": res.pre_pull_sha,
        "alert": {"good": spec.alert.good, "bad": spec.alert.bad},
        "note": spec.truth.note,
    }


def _build_into(spec: Scenario, tmp: Path, final: Path, launch_scale: float) -> BuildResult:
    tree = _Tree(_read_stack(), spec, launch_scale)
    upstream, repo, host = tmp / ".upstream", tmp / "repo", tmp / "host"
    upstream.mkdir(parents=True)
    ugit = _Git(upstream)
    ugit("init", "-q")
    hist = _History(ugit, tree, upstream, datetime.fromisoformat(spec.start_date), spec.seed)
    tree.write(upstream)
    ugit("add", "-A")
    ugit(
        "commit",
        "-q",
        "-m",
        "Initial import of minisglang 0.5.3",
        when=hist.tick(0),
        author="Maintainer Bot <maint@minisglang.example>",
    )
    changes: list[Change] = []
    for c in spec.history.commits or []:
        for sha, done in hist.commit(c, "history"):
            if done.id:
                changes.append(_kind_of_commit_change(sha, done))
    if spec.history.filler:
        hist.commit(Commit(filler=spec.history.filler), "history")
    good = ugit("rev-parse", "HEAD")

    repo.mkdir()
    git = _Git(repo)
    git("init", "-q")
    git("remote", "add", "origin", str(upstream))
    git("pull", "origin", "main", when=hist.tick(60))
    pre_pull = None
    if spec.pulled:
        for c in spec.pulled:
            changes += [_kind_of_commit_change(sha, done) for sha, done in hist.commit(c, "pulled") if done.subject]
        pre_pull = good
        git("pull", "origin", "main", when=hist.tick(60 * 14))
    for c in spec.committed:
        local = _History(git, tree, repo, hist.clock, spec.seed)
        local.count = hist.count
        for sha, done in local.commit(c, "local"):
            changes.append(_kind_of_commit_change(sha, done))
        hist.clock, hist.count = local.clock, local.count
    git("remote", "set-url", "origin", UPSTREAM_URL)
    head = git("rev-parse", "HEAD")

    for k, patch in enumerate(spec.uncommitted):
        tree.apply(patch, salt=f"{spec.seed}:wt:{k}")
        tree.write(repo, [patch.path])
        changes.append(
            Change(
                patch.id,
                "uncommitted",
                patch.path,
                f"uncommitted change to {patch.path}",
                patch.effect.cost if patch.effect else None,
            )
        )
    for env in spec.env:
        changes.append(
            Change(
                env.id,
                "env",
                env.name,
                f"{env.name}={env.value} set via {env.via}",
                env.effect.cost if env.effect else None,
            )
        )
    for d in spec.dependency:
        changes.append(
            Change(
                d.id,
                "dependency",
                d.name,
                f"{d.name} {'upgraded' if _version(d.bad) > _version(d.good) else 'downgraded'} {d.good} -> {d.bad}",
                d.effect.cost if d.effect else None,
            )
        )
    hw = spec.hardware
    if hw.id:
        ref = (
            "clocks.sm"
            if hw.sm_clock_mhz < 0.9 * hw.max_sm_clock_mhz
            else "pcie.link"
            if (hw.pcie_gen, hw.pcie_width) != (hw.pcie_gen_max, hw.pcie_width_max)
            else "gpu.processes"
        )
        changes.append(
            Change(
                hw.id,
                "hardware",
                ref,
                f"SM clock {hw.sm_clock_mhz}/{hw.max_sm_clock_mhz} MHz, PCIe Gen{hw.pcie_gen} x{hw.pcie_width}",
            )
        )
    if spec.launch.good_flags is not None:
        diff = [f for f in spec.launch.flags if f.startswith("--") and f not in spec.launch.good_flags]
        diff += [f for f in spec.launch.good_flags if f.startswith("--") and f not in spec.launch.flags]
        changes.append(
            Change(
                "launch",
                "config",
                diff[0] if diff else "flags",
                f"launch flags {' '.join(spec.launch.good_flags)} -> {' '.join(spec.launch.flags)}",
            )
        )
    _write_host(spec, tree, host, final / "host")
    shutil.rmtree(upstream)
    res = BuildResult(final, final / "repo", final / "host", good, head, pre_pull, changes)
    res.truth = _truth(spec, res)
    res.alert = _alert(spec, res, final, tree.launch_scale)
    (tmp / "truth.json").write_text(json.dumps(res.truth, indent=2) + "\n")
    (tmp / "alert.json").write_text(json.dumps(res.alert, indent=2) + "\n")
    # How it was built, beyond its spec: a replay under another policy rebuilds it alike (it took
    # the launch scale from its own environment: a trial's replay launched 50 s servers where the
    # run had launched scaled ones, 157 s against 50).
    (tmp / WORLD_FILE).write_text(json.dumps({"launch_scale": tree.launch_scale}) + "\n")
    return res


def build(spec: Scenario, out_dir: str | Path, launch_scale: float | None = None) -> BuildResult:
    """Build ``spec`` into ``out_dir`` (absent or empty); atomic: all of it or nothing.
    ``launch_scale`` multiplies the spec's simulated launch time (default: ``default_launch_scale``)."""
    launch_scale = default_launch_scale() if launch_scale is None else launch_scale
    final = Path(out_dir).resolve()
    if final.exists() and (not final.is_dir() or any(final.iterdir())):
        raise LabError(f"{final}: exists and is not an empty directory")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.building-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        res = _build_into(spec, tmp, final, launch_scale)
        if final.exists():
            final.rmdir()
        tmp.rename(final)
        return res
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))

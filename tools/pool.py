"""Probe pools: a k-way bisection's k probes measured on k hosts at once.

Two kinds, the same ``tools.bisect.Probe`` to the bisection:

- ``SSHProbePool`` (``pool.toml``): hosts reached as any ``Host`` is (this machine, or SSH with
  known_hosts checking), each measuring in its own clone of the repository with its own Measurer
  and cache;
- ``RayProbePool``: each probe a Ray task pinned to the node that holds the hardware by a custom
  resource (``{"host:gpu-node-1": 1}``, which that node declares with ``ray start --resources``);
  the node measures in its clone and keeps a disk cache there, so later samples of a commit extend
  the earlier ones.

A commit is measured on one host only (the first one that took it): top-up samples of a state
must come from the same machine, or host-to-host differences would pass for a regression. Every
host must have the commits being bisected (a clone fetched up to the bad ref).

```toml
# pool.toml
[[hosts]]
name = "gpu-node-1"
host = "gpu-node-1"        # an ssh alias; omit for this machine
repo = "/srv/sglang"       # a clone on that host
# ssh_config = "...", known_hosts = "...", workdir = "/tmp/sleuth-pool"
```
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tools.bisect import Probe, ProbeError
from tools.git import open_repo
from tools.host import Host, HostError, LocalHost
from tools.measure import MeasureCache, Measurer, Workload
from tools.text import first_line
from tools.validation import load_toml_model


class PoolError(ValueError):
    """The pool file is unusable, or a host of it cannot be reached."""


class PoolHost(BaseModel):
    name: str = Field(min_length=1)
    host: str | None = None
    repo: str = Field(min_length=1)
    ssh_config: str | None = None
    known_hosts: str | None = None
    workdir: str = "/tmp/sleuth-pool"


class PoolConfig(BaseModel):
    hosts: list[PoolHost] = Field(min_length=1)


def load_pool(path: str | Path) -> PoolConfig:
    return load_toml_model(path, PoolConfig, PoolError)


class LostProbe(ProbeError):
    """A commit's samples came from a pool host that stopped answering: they cannot be topped up
    on another host (host-to-host differences would pass for a regression), so the bisection
    skips it (it stays a suspect), or, for an end of the range, cannot go on."""


class _Sticky:
    """Which slot measures which commit: the first free slot takes a new commit; a commit seen
    before waits for its own slot. A slot whose host stopped answering is ``lost``: no new commit
    goes there, and its commits raise ``LostProbe``; with every slot lost, ``HostError``."""

    def __init__(self, slots: list[str]) -> None:
        self.slots = list(slots)
        self.busy: set[str] = set()
        self.owner: dict[str, str] = {}
        self.lost: dict[str, str] = {}  # slot -> why
        self.cond = threading.Condition()

    def acquire(self, sha: str) -> str:
        with self.cond:
            while True:
                owner = self.owner.get(sha)
                if owner in self.lost:
                    raise LostProbe(f"{sha[:10]} was measured on {owner}, which stopped answering ({self.lost[owner]})")
                if not self.slots:
                    raise HostError(f"every pool host stopped answering: {'; '.join(self.lost.values())}")
                slot = owner or next((s for s in self.slots if s not in self.busy), None)
                if slot is not None and slot not in self.busy:
                    self.busy.add(slot)
                    self.owner[sha] = slot
                    return slot
                self.cond.wait()

    def release(self, slot: str) -> None:
        with self.cond:
            self.busy.discard(slot)
            self.cond.notify_all()

    def lose(self, slot: str, why: str, sha: str, fresh: bool) -> None:
        """``slot``'s host stopped answering while measuring ``sha``; a ``fresh`` commit (no sample
        of it taken yet) goes back to be taken by another slot."""
        with self.cond:
            self.lost[slot] = why
            if slot in self.slots:
                self.slots.remove(slot)
            self.busy.discard(slot)
            if fresh:
                self.owner.pop(sha, None)
            self.cond.notify_all()


class SSHProbePool:
    """The hosts of a ``pool.toml``, each measuring in its own clone; ``k`` = the number of hosts."""

    def __init__(self, cfg: PoolConfig, log_dir: str | Path, hosts: dict[str, Host] | None = None) -> None:
        from tools.ssh import SSHHost  # paramiko only when a pool names SSH hosts

        self.cfg = cfg
        self.hosts: dict[str, Host] = dict(hosts or {})
        self.measurers: dict[str, Measurer] = {}
        self.used: dict[str, list[str]] = {h.name: [] for h in cfg.hosts}
        for h in cfg.hosts:
            if h.name not in self.hosts:
                self.hosts[h.name] = (
                    LocalHost()
                    if h.host is None
                    else SSHHost(h.host, ssh_config=h.ssh_config, known_hosts=h.known_hosts)
                )
            host = self.hosts[h.name]
            try:
                git = open_repo(h.repo, host)
            except Exception as exc:
                raise PoolError(f"pool host {h.name}: {exc}") from exc
            logs = Path(log_dir) / h.name
            self.measurers[h.name] = Measurer(host, git, logs, MeasureCache(), pid_dir=logs / "servers")
        self.sticky = _Sticky([h.name for h in cfg.hosts])

    @property
    def k(self) -> int:
        return len(self.cfg.hosts)

    def probe_fn(self, launch: str, workload: Workload) -> Probe:
        inner = {name: m.probe_fn(launch, workload) for name, m in self.measurers.items()}

        def probe(sha: str, n: int) -> list[float]:
            while True:
                slot = self.sticky.acquire(sha)
                fresh = sha not in self.used[slot]
                try:
                    self.used[slot].append(sha)
                    return inner[slot](sha, n)
                except HostError as exc:  # that host is gone: the others go on without it
                    self.sticky.lose(slot, first_line(exc, 200), sha, fresh)
                    if not fresh:
                        raise LostProbe(f"{sha[:10]}: {slot} stopped answering ({first_line(exc, 200)})") from exc
                finally:
                    self.sticky.release(slot)

        return probe

    @property
    def lost(self) -> dict[str, str]:
        """The hosts that stopped answering mid-bisection, and why."""
        return dict(self.sticky.lost)

    def close(self) -> None:
        """Stop every host's servers and remove its worktrees (a lost host's are forgotten), then
        close the connections."""
        for m in self.measurers.values():
            m.close()
        for h in self.hosts.values():
            h.close()


def _node_probe(repo: str, workdir: str, launch: str, workload: dict, sha: str, start: int, n: int) -> list[float]:
    """Runs on the pinned Ray node: samples [start, start + n) of the commit, measured in ``repo``
    there, cached on that node's disk (so a top-up extends what an earlier task measured)."""
    from tools.measure import State

    host = LocalHost()
    cache_dir = Path(workdir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    measurer = Measurer(host, open_repo(repo, host), cache_dir / "logs", MeasureCache(cache_dir / "cache.json"))
    state = State(label=f"probe-{sha[:10]}", ref=sha, launch=launch)
    return measurer.measure(state, Workload.model_validate(workload), start + n).samples[start : start + n]


class RayProbePool:
    """Probes as Ray tasks pinned by custom resources: ``nodes`` maps each resource name (the
    node's, e.g. ``host:gpu-node-1``) to the repository clone on that node."""

    def __init__(self, nodes: dict[str, str], address: str | None = None, workdir: str = "/tmp/sleuth-pool") -> None:
        try:
            import ray
        except ImportError as exc:
            raise PoolError("Ray is not installed: pip install 'perf-sleuth[ray]'") from exc
        if not ray.is_initialized():
            ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        self.ray, self.nodes, self.workdir = ray, nodes, workdir
        self.used: dict[str, list[str]] = {name: [] for name in nodes}
        self.sticky = _Sticky(list(nodes))
        self.task = ray.remote(_node_probe)

    @property
    def k(self) -> int:
        return len(self.nodes)

    def probe_fn(self, launch: str, workload: Workload) -> Probe:
        handed: dict[str, int] = {}
        lock = threading.Lock()
        wl: dict[str, Any] = workload.model_dump(mode="json")

        def probe(sha: str, n: int) -> list[float]:
            with lock:
                start = handed.get(sha, 0)
                handed[sha] = start + n
            slot = self.sticky.acquire(sha)
            try:
                self.used[slot].append(sha)
                ref = self.task.options(num_cpus=1, resources={slot: 1}, max_retries=0).remote(
                    self.nodes[slot], f"{self.workdir}/{slot.replace(':', '_')}", launch, wl, sha, start, n
                )
                try:
                    return self.ray.get(ref)
                except Exception as exc:  # the node's ProbeError (or its death) comes back wrapped
                    raise ProbeError(f"{slot}: {str(exc).strip().splitlines()[-1][:300]}") from exc
            finally:
                self.sticky.release(slot)

        return probe

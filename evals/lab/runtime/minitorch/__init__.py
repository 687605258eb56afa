"""minitorch: the emulated GPU runtime of a lab host (stands in for torch.cuda + NCCL).

The lab copies this package into a scenario's ``host/site-packages`` next to a generated
``_profile.json`` (kernel costs of this library version, env-var effects, time scale, seed).
Kernels are launched asynchronously onto a stream and only cost wall time at
``synchronize()``, exactly like a real device: CPU-side Python overhead overlaps device time,
so simulated throughput does not depend on how fast the host interpreter walks the layers.

Speed comes from three places, all visible to a careful engineer:
- the kernels the serving code launches (its own code path),
- this library's version (its kernel cost table, see ``__version__``),
- the machine: clocks and PCIe link read from ``nvidia-smi`` at start, and env vars.
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

_PROFILE = json.loads((Path(__file__).parent / "_profile.json").read_text())
__version__: str = _PROFILE["version"]

# Wall-clock slack (seconds): a batch queued within this of the host thread's return from the
# previous ``synchronize`` runs back to back with it (the host's short launch gap overlaps the device).
_BACK_TO_BACK_SLACK_S = 0.001


def _query_gpu() -> dict[str, str]:
    """Read the GPU state the way a real runtime would learn it: from the driver (nvidia-smi)."""
    fields = [
        "name",
        "compute_cap",
        "clocks.sm",
        "clocks.max.sm",
        "pcie.link.gen.current",
        "pcie.link.gen.max",
        "pcie.link.width.current",
        "pcie.link.width.max",
    ]
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"minitorch: no CUDA device found (nvidia-smi failed: {exc})") from exc
    first = out.strip().splitlines()[0]
    return dict(zip(fields, (v.strip() for v in first.split(",")), strict=True))


def _launch_seed() -> int:
    """This process's noise stream: ``MINITORCH_SEED`` where the launch sets it, else the world's
    seed and how many processes of this host drew one before (a counter beside the GPU locks).

    Every process once drew the world's seed itself, so every launch of a world had one launch
    factor and one sequence of sample noise: two states' samples moved together position by
    position, an A/B saw only the effect, and a world's level sat a per-world 2-5 % off its
    spec (two seed worlds of one spec measured 93.5 and 89.5 at their known-good commits). A
    real node's launches differ; the lab's now do, and a world still replays the same sequence
    of launches from its build."""
    if "MINITORCH_SEED" in os.environ:
        return int(os.environ["MINITORCH_SEED"])
    base, gpu_dir = int(_PROFILE["seed"]), _PROFILE.get("gpu_dir")
    if not gpu_dir:
        return base
    Path(gpu_dir).mkdir(parents=True, exist_ok=True)
    fd = os.open(os.path.join(gpu_dir, "launches"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        count = int(os.read(fd, 32).decode() or 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, f"{count + 1}".encode())
    finally:
        os.close(fd)  # closing the descriptor drops the lock
    return base * 1_000_003 + count


class Device:
    """One emulated GPU (all TP ranks move in lock step, so one device models the group)."""

    def __init__(self) -> None:
        self.info = _query_gpu()
        self.kernels: dict[str, dict] = _PROFILE["kernels"]
        self.time_scale = float(os.environ.get("MINITORCH_TIME_SCALE", _PROFILE["time_scale"]))
        self.rng = random.Random(_launch_seed())
        self.noise_cv = float(_PROFILE["noise_cv"])
        # A per-process factor: two launches of the same server are never quite the same.
        self.launch_factor = max(0.5, self.rng.gauss(1.0, float(_PROFILE["launch_cv"])))
        # Kernel costs in the profile were measured at the reference (normal under-load) SM clock.
        compute = float(_PROFILE["reference_sm_clock_mhz"]) / max(1.0, float(self.info["clocks.sm"]))
        link_max = float(self.info["pcie.link.gen.max"]) * float(self.info["pcie.link.width.max"])
        link_now = float(self.info["pcie.link.gen.current"]) * float(self.info["pcie.link.width.current"])
        # Another process on the GPUs takes its share of the SMs: compute kernels wait for the rest.
        compute /= 1.0 - float(_PROFILE.get("foreign_sm_share", 0.0))
        self.class_factor = {"compute": compute, "comm": link_max / max(1.0, link_now), "host": 1.0}
        self.env_factor: dict[str, float] = {}
        for eff in _PROFILE.get("env_effects", []):
            if os.environ.get(eff["var"]) == eff["value"]:
                self.env_factor[eff["kernel"]] = self.env_factor.get(eff["kernel"], 1.0) * eff["scale"]
        # Kernel packages (a FlashInfer, an sgl-kernel): whichever version is first on the path
        # brings its own kernels; a slower build scales the kernel it provides.
        for name in _PROFILE.get("kernel_packages", []):
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            for kernel, scale in getattr(mod, "KERNEL_SCALE", {}).items():
                self.env_factor[kernel] = self.env_factor.get(kernel, 1.0) * float(scale)
        self._lock = threading.Lock()
        self._pending_us = 0.0
        self._pending_since = 0.0  # wall time the first kernel of the pending batch was queued
        self._busy_until = 0.0
        # (wall time the host thread returned from the last synchronize, wall time the device was
        # free from then on): see ``synchronize`` for why the two differ.
        self._returned = (0.0, 0.0)
        # A kernel's cost per unit of work on this machine (profile x clocks x link x env), worked
        # out once: the walk of the layers launches hundreds of kernels per step, and its CPU
        # time has to stay well under the simulated device time on a slow, loaded host.
        self._unit_us: dict[str, float] = {}
        self._graph_depth = 0
        self.clock_us = 0.0  # simulated device time consumed so far
        self.counting = os.environ.get("MINITORCH_COUNT_KERNELS") == "1"
        self.calls: dict[str, int] = {}  # kernel -> launches (what a profiler's kernel table counts)
        self.eager_calls: dict[str, int] = {}  # ... of which outside a captured graph
        self.work: dict[str, float] = {}  # kernel -> summed work (its cost is us x work)

    def compute_capability(self) -> tuple[int, int]:
        major, _, minor = self.info["compute_cap"].partition(".")
        return int(major), int(minor or 0)

    def _unit(self, kernel: str) -> float:
        spec = self.kernels.get(kernel)
        if spec is None:
            raise RuntimeError(f"minitorch: no kernel image for '{kernel}' in minitorch {__version__}")
        unit = spec["us"] * self.class_factor[spec["class"]] * self.env_factor.get(kernel, 1.0)
        self._unit_us[kernel] = unit
        return unit

    def launch(self, kernel: str, work: float = 1.0) -> None:
        """Queue one kernel; eager launches also pay the host launch overhead.

        One host thread issues to the stream (the scheduler's, as in SGLang), so the pending batch
        needs no lock here; ``synchronize`` runs on that same thread."""
        unit = self._unit_us.get(kernel)
        cost = (unit if unit is not None else self._unit(kernel)) * work
        if self._graph_depth == 0:
            cost += self.kernels["launch_overhead"]["us"]
        if self._pending_us == 0.0:
            self._pending_since = time.perf_counter()
        self._pending_us += cost
        if self.counting:
            self._count(kernel, work)

    def _count(self, kernel: str, work: float) -> None:
        """The kernel table (a profiler's view), kept only when asked for: the bookkeeping costs CPU
        time on the walk of the layers, which must stay well under the simulated device time."""
        with self._lock:
            self.calls[kernel] = self.calls.get(kernel, 0) + 1
            self.work[kernel] = self.work.get(kernel, 0.0) + work
            if self._graph_depth == 0:
                self.eager_calls[kernel] = self.eager_calls.get(kernel, 0) + 1

    @contextmanager
    def graph_replay(self):
        """Kernels inside run as one captured graph: no per-kernel launch overhead."""
        self._graph_depth += 1
        try:
            yield
        finally:
            self._graph_depth -= 1

    def synchronize(self) -> float:
        """Wait for the queued kernels; returns the simulated microseconds they took.

        The device started on the batch when its first kernel was queued (or when it finished the
        previous batch, if later), as a real stream does: the host's walk of the layers overlaps
        the device's work, so a loaded host CPU costs throughput only once that walk outlasts
        the device time, not from its first millisecond.

        A thread that sleeps until the device is done wakes late on a loaded host (the OS runs it
        when a core frees up, often milliseconds later). A real host thread spinning on a CUDA
        event does not, so that oversleep is the emulator's, not the device's: a batch queued
        right after the thread returns runs from when the device was free, and the oversleep
        never accumulates into simulated time. A host that is genuinely late (its walk outlasted
        the device time, so it never slept) still leaves the device idle, as on a real GPU."""
        us, self._pending_us = self._pending_us, 0.0
        since = self._pending_since
        if us <= 0:
            return 0.0
        us *= self.launch_factor * max(0.2, self.rng.gauss(1.0, self.noise_cv))
        now = time.perf_counter()
        returned, free = self._returned
        start = free if since - returned <= _BACK_TO_BACK_SLACK_S else since
        self._busy_until = max(self._busy_until, start) + us * 1e-6 * self.time_scale
        delay = self._busy_until - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
            self._returned = (time.perf_counter(), self._busy_until)
        else:
            self._returned = (now, now)
        self.clock_us += us
        return us


class _GpuClaim:
    """The GPUs this process holds: one ``flock`` per GPU on ``host/gpus/N.lock``.

    A real runtime allocates ``mem_fraction_static`` of every GPU it uses; a second server on the
    same GPUs finds too little free memory and fails at start. Here each GPU is a lock file held
    by an open descriptor for the life of the process, so the kernel releases it when the process
    exits, however it exits (SIGKILL included), exactly like device memory."""

    def __init__(self) -> None:
        self.held: list[tuple[int, int]] = []  # (gpu index, fd)

    def reserve(self, count: int, mem_fraction: float) -> list[int]:
        gpu_dir = _PROFILE.get("gpu_dir")
        total = int(_PROFILE.get("gpu_count", count))
        total_gib = float(_PROFILE.get("gpu_memory_gib", 95.6))
        if count > total:
            raise RuntimeError(f"tp_size={count} needs {count} GPUs, but this host has {total}")
        if not gpu_dir:
            return list(range(count))
        Path(gpu_dir).mkdir(parents=True, exist_ok=True)
        for i in range(total):
            if len(self.held) == count:
                break
            fd = os.open(os.path.join(gpu_dir, f"{i}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            self.held.append((i, fd))
        if len(self.held) < count:
            busy = next(i for i in range(total) if i not in {g for g, _ in self.held})
            self.release()
            free = total_gib * 0.08
            need = total_gib * mem_fraction
            raise RuntimeError(
                f"Not enough memory on GPU {busy}: {free:.2f} GiB free of {total_gib:.2f} GiB, "
                f"mem_fraction_static={mem_fraction} needs {need:.2f} GiB. "
                "The memory capacity is unbalanced. Some GPUs may be occupied by other processes."
            )
        return [g for g, _ in self.held]

    def release(self) -> None:
        for _, fd in self.held:
            os.close(fd)
        self.held = []


def simulated_wait(seconds: float) -> float:
    """Spend ``seconds`` of simulated host time (weight loading, graph capture): scaled by the
    runtime's time scale, like every device cost. Returns the simulated seconds."""
    scale = float(os.environ.get("MINITORCH_TIME_SCALE", _PROFILE["time_scale"]))
    if seconds > 0:
        time.sleep(seconds * scale)
    return seconds


LAUNCH_COSTS: dict[str, float] = _PROFILE.get("launch", {})


class _Cuda:
    """``minitorch.cuda``: the lazily created default device."""

    _device: Device | None = None
    _init_lock = threading.Lock()
    _claim = _GpuClaim()

    def reserve(self, count: int, mem_fraction: float) -> list[int]:
        """Take ``count`` GPUs for this process (RuntimeError when they are occupied); says which
        NCCL it runs on, as a real stack's start-up log does (the host's, not a pip package)."""
        gpus = self._claim.reserve(count, mem_fraction)
        print(f"minitorch is using nccl=={_PROFILE.get('nccl_version', '2.21.5')}", file=sys.stderr, flush=True)
        return gpus

    def device(self) -> Device:
        with self._init_lock:
            if self._device is None:
                self._device = Device()
            return self._device

    def is_available(self) -> bool:
        try:
            self.device()
        except RuntimeError:
            return False
        return True

    def launch(self, kernel: str, work: float = 1.0) -> None:
        device = self._device
        (device if device is not None else self.device()).launch(kernel, work)

    def synchronize(self) -> float:
        return self.device().synchronize()

    def graph_replay(self):
        return self.device().graph_replay()

    def get_device_capability(self) -> tuple[int, int]:
        return self.device().compute_capability()

    def get_device_name(self) -> str:
        return self.device().info["name"]


cuda = _Cuda()

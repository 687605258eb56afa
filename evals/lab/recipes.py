"""What the lab can write into a scenario repo: kernels, cost sites and code edits.

A *site* is a place on the serving stack's executed path (marked ``# @site NAME`` in the stack
templates) where a change can add work: e.g. ``allreduce_eager`` is the end of
``PyNcclCommunicator.all_reduce``. A slowdown is written as code a reviewer would recognise (an
extra stream fence, a gather-then-cast, an extra sync) that launches a new kernel; the kernel's
cost goes into the runtime's profile. Harmless edits are plausible code off the hot path.
Templates are named edits for the seed story (NCCL env propagation, hidden-state capture, the
sm120 condition in server_args, ...).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

STACK_PKG = "python/minisglang"


@dataclass(frozen=True)
class Kernel:
    us: float  # simulated microseconds per call at work=1 on a nominal device
    klass: str  # compute (scales with SM clock) | comm (PCIe link) | host (CPU side)


# The calibration defaults; see docs/reference/lab-recipes.md for how they add up to the seed's numbers.
KERNELS: dict[str, Kernel] = {
    "attention_decode_triton": Kernel(40, "compute"),
    "attention_extend_triton": Kernel(50, "compute"),
    "attention_decode_flashinfer": Kernel(38, "compute"),
    "attention_extend_flashinfer": Kernel(48, "compute"),
    "moe_topk": Kernel(8, "compute"),
    "moe_experts": Kernel(80, "compute"),
    "moe_experts_cutlass": Kernel(72, "compute"),
    "allreduce_custom": Kernel(22, "comm"),
    "allreduce_nccl": Kernel(59, "comm"),
    "lm_head": Kernel(300, "compute"),
    "draft_step": Kernel(850, "compute"),
    "scheduler": Kernel(400, "host"),
    "launch_overhead": Kernel(10, "host"),
}


@dataclass(frozen=True)
class Snippet:
    kernel: str
    lines: tuple[str, ...]  # relative to the site's indentation; {work} is the site's work expression


@dataclass(frozen=True)
class Site:
    path: str
    base_kernel: str | None
    klass: str
    work: str
    variants: tuple[Snippet, ...]
    where: str


def _s(kernel: str, *lines: str) -> Snippet:
    return Snippet(kernel, lines)


SITES: dict[str, Site] = {
    "allreduce_eager": Site(
        f"{STACK_PKG}/distributed/pynccl.py",
        "allreduce_nccl",
        "comm",
        "batch.work()",
        (
            _s(
                "nccl_stream_fence",
                "# Fence the eager communicator against in-flight piecewise graphs (PCG) before returning.",
                'torch.cuda.launch("nccl_stream_fence", {work})',
            ),
            _s(
                "nccl_barrier_allreduce",
                "# Barrier so every rank observes the reduced buffer before the next collective.",
                'torch.cuda.launch("nccl_barrier_allreduce", {work})',
            ),
        ),
        "every eager all-reduce (extend, verify, decode without CUDA graphs)",
    ),
    "allreduce_graph": Site(
        f"{STACK_PKG}/distributed/custom_all_reduce.py",
        "allreduce_custom",
        "comm",
        "batch.work()",
        (
            _s(
                "ca_registered_copy",
                "# Copy through the registered IPC buffer: in-place registration breaks under PCG.",
                'torch.cuda.launch("ca_registered_copy", {work})',
            ),
            _s("ca_flag_sync", "# Re-arm the peer flags after each call.", 'torch.cuda.launch("ca_flag_sync", {work})'),
        ),
        "every all-reduce inside a captured CUDA graph (decode)",
    ),
    "allreduce_dispatch": Site(
        f"{STACK_PKG}/distributed/parallel_state.py",
        None,
        "comm",
        "batch.work()",
        (
            _s(
                "tp_group_sync",
                "# Synchronize the group before dispatch so capture and replay see the same buffers.",
                'torch.cuda.launch("tp_group_sync", {work})',
            ),
        ),
        "every tensor-parallel all-reduce, both paths",
    ),
    "attention_decode": Site(
        f"{STACK_PKG}/layers/attention/triton_backend.py",
        "attention_decode_triton",
        "compute",
        "batch.work()",
        (
            _s(
                "triton_kv_gather_cast",
                "# Gather the paged KV into a contiguous buffer, then cast to bf16 for the split-k kernel.",
                'torch.cuda.launch("triton_kv_gather_cast", {work})',
            ),
        ),
        "every attention call in decode with the triton backend",
    ),
    "attention_extend": Site(
        f"{STACK_PKG}/layers/attention/triton_backend.py",
        "attention_extend_triton",
        "compute",
        "batch.work()",
        (
            _s(
                "triton_prefix_copy",
                "# Materialise the shared prefix so extend reads a contiguous KV.",
                'torch.cuda.launch("triton_prefix_copy", {work})',
            ),
        ),
        "every attention call in extend/verify with the triton backend",
    ),
    "flashinfer_decode": Site(
        f"{STACK_PKG}/layers/attention/flashinfer_mla_backend.py",
        "attention_decode_flashinfer",
        "compute",
        "batch.work()",
        (
            _s(
                "mla_kv_gather_cast",
                "# Gather-then-cast: fewer memory transactions than casting the whole paged cache.",
                'torch.cuda.launch("mla_kv_gather_cast", {work})',
            ),
        ),
        "every attention call in decode with the flashinfer backend",
    ),
    "flashinfer_extend": Site(
        f"{STACK_PKG}/layers/attention/flashinfer_mla_backend.py",
        "attention_extend_flashinfer",
        "compute",
        "batch.work()",
        (
            _s(
                "mla_ragged_cast",
                "# Cast the ragged KV once per extend.",
                'torch.cuda.launch("mla_ragged_cast", {work})',
            ),
        ),
        "every attention call in extend/verify with the flashinfer backend",
    ),
    "moe_topk": Site(
        f"{STACK_PKG}/layers/moe/topk.py",
        "moe_topk",
        "compute",
        "batch.work()",
        (
            _s(
                "topk_sorted_ids",
                "# Sort routed expert ids so expert-load statistics are deterministic.",
                'torch.cuda.launch("topk_sorted_ids", {work})',
            ),
        ),
        "every MoE layer's routing",
    ),
    "moe_experts": Site(
        f"{STACK_PKG}/models/deepseek_v2.py",
        "moe_experts",
        "compute",
        "batch.work()",
        (
            _s(
                "moe_shared_expert_sync",
                "# Run the shared expert on the main stream instead of the alt stream.",
                'torch.cuda.launch("moe_shared_expert_sync", {work})',
            ),
        ),
        "every MoE layer's expert GEMMs",
    ),
    "layer": Site(
        f"{STACK_PKG}/models/deepseek_v2.py",
        None,
        "compute",
        "batch.work()",
        (
            _s(
                "aux_hidden_capture",
                "# Capture auxiliary hidden states for the EAGLE-3 draft head.",
                'torch.cuda.launch("aux_hidden_capture", {work})',
            ),
        ),
        "every decoder layer",
    ),
    "model_forward": Site(
        f"{STACK_PKG}/models/kimi_k25.py",
        None,
        "compute",
        "batch.work()",
        (
            _s(
                "vision_tower_probe",
                "# Probe the vision tower so mixed batches keep a stable graph shape.",
                'torch.cuda.launch("vision_tower_probe", {work})',
            ),
        ),
        "every forward pass of the target model",
    ),
    "draft": Site(
        f"{STACK_PKG}/models/llama_eagle3.py",
        "draft_step",
        "compute",
        "batch.work()",
        (
            _s(
                "draft_hidden_norm",
                "# Re-normalise the fused hidden states before the draft head.",
                'torch.cuda.launch("draft_hidden_norm", {work})',
            ),
        ),
        "every EAGLE-3 draft step",
    ),
    "verify": Site(
        f"{STACK_PKG}/speculative/eagle3.py",
        None,
        "compute",
        "num_seqs",
        (
            _s(
                "verify_logits_copy",
                "# Copy verified logits to host for acceptance statistics.",
                'torch.cuda.launch("verify_logits_copy", {work})',
            ),
        ),
        "every EAGLE-3 verify pass",
    ),
    "step": Site(
        f"{STACK_PKG}/managers/scheduler.py",
        "scheduler",
        "host",
        "1.0",
        (
            _s(
                "scheduler_metrics_sync",
                "# Collect per-step metrics (blocks on the device).",
                'torch.cuda.launch("scheduler_metrics_sync", {work})',
            ),
        ),
        "every scheduler step",
    ),
    "graph_replay": Site(
        f"{STACK_PKG}/compilation/compile.py",
        None,
        "compute",
        "batch.work()",
        (
            _s(
                "graph_static_input_copy",
                "# Copy inputs into the graph's static buffers on every replay (PCG).",
                'torch.cuda.launch("graph_static_input_copy", {work})',
            ),
        ),
        "every CUDA-graph replay (decode)",
    ),
}


# ---------------------------------------------------------------------------------------------
# Harmless code


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40] or "change"


def harmless_block(topic: str, n: int, salt: str) -> list[str]:
    """``n`` lines of plausible, never-called-on-the-hot-path Python about ``topic``."""
    if n <= 0:
        return []
    h = hashlib.sha256(f"{salt}:{topic}".encode()).hexdigest()
    name = f"{_slug(topic)}_{h[:6]}"
    if n < 7:
        lines = ["", f"_{name.upper()}_DEFAULTS = ("]
        lines += [f'    "{name}_{i}",' for i in range(max(0, n - 3))]
        lines.append(")")
        return lines[:n] if n >= 3 else [f"# {topic}: see {name}"] * n
    body = n - 7
    lines = [
        "",
        "",
        f"def _{name}(overrides: dict | None = None) -> dict:",
        f'    """Settings for {topic} (defaults, then per-deployment overrides)."""',
        "    table = {",
    ]
    lines += [f'        "{name}_{i}": {int(h[i % 60 : i % 60 + 4], 16) % 997},' for i in range(body)]
    lines += ["    }", "    return {**table, **(overrides or {})}"]
    return lines


@dataclass(frozen=True)
class Template:
    path: str | None  # None: any file
    effect_costs: tuple[str, ...]
    render: Callable[[str, int, str], str] = field(repr=False)  # (text, lines, salt) -> text


def _replace(text: str, old: str, new: str) -> str:
    """Replace an anchor the stack template must contain; a missing anchor is a lab bug, not a no-op."""
    if old not in text:
        raise KeyError(f"template anchor not found: {old.strip()!r}")
    return text.replace(old, new)


def _append(text: str, lines: list[str]) -> str:
    return text.rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def _pad(lines: list[str], want: int, topic: str, salt: str) -> list[str]:
    return lines + harmless_block(topic, want - len(lines), salt)


def _nccl_env_propagation(text: str, n: int, salt: str) -> str:
    compact = [
        "",
        "",
        "def _propagate_nccl_env() -> None:",
        "    import os as _os",
        '    for key, value in {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}.items():',
        "        _os.environ.setdefault(key, value)",
    ]
    full = [
        "",
        "",
        "_NCCL_TUNING = {",
        '    "NCCL_PROTO": "LL",',
        '    "NCCL_ALGO": "Ring",',
        '    "NCCL_P2P_LEVEL": "SYS",',
        "}",
        "",
        "",
        "def _propagate_nccl_env() -> None:",
        '    """Export NCCL tuning before any communicator exists, so spawned workers inherit it."""',
        "    import os as _os",
        "",
        "    for key, value in _NCCL_TUNING.items():",
        "        _os.environ.setdefault(key, value)",
    ]
    core = full if n >= len(full) else compact
    return _append(text, _pad(core, n, "nccl env", salt))


def _aux_hidden_capture(text: str, n: int, salt: str) -> str:
    core = [
        "",
        "",
        "def set_eagle3_layers_to_capture(model, layer_ids=None) -> list[int]:",
        '    """Choose which decoder layers expose auxiliary hidden states to the EAGLE-3 head."""',
        "    num_layers = len(model.layers)",
        "    if layer_ids is None:",
        "        layer_ids = [2, num_layers // 2, num_layers - 3]",
        "    model.capture_aux_hidden_states = True",
        "    return [i for i in layer_ids if 0 <= i < num_layers]",
    ]
    return _append(text, _pad(core, n, "aux hidden capture", salt))


def _gather_then_cast(text: str, n: int, salt: str) -> str:
    old = '        torch.cuda.launch("attention_decode_flashinfer", batch.work())\n'
    new = [
        "        # KV gather-then-cast: gather the pages this batch reads, cast only those to bf16.",
        "        pages = self._gather_kv_pages(batch)",
        "        self._cast_pages(pages)",
        '        torch.cuda.launch("attention_decode_flashinfer", batch.work())',
    ]
    text = _replace(text, old, "\n".join(new) + "\n")
    helpers = [
        "",
        "    def _gather_kv_pages(self, batch) -> int:",
        "        return batch.num_tokens * 64",
        "",
        "    def _cast_pages(self, pages: int) -> None:",
        "        self.workspace_mb = max(self.workspace_mb, pages // 1024)",
    ]
    return _append(text, _pad(helpers, n - len(new), "flashinfer mla gather cast", salt))


def _sm120_moe_runner(text: str, n: int, salt: str) -> str:
    text = _replace(
        text,
        "from minisglang.utils import is_sm100_supported\n",
        "from minisglang.utils import is_sm100_supported, is_sm120_supported\n",
    )
    return _replace(
        text, "            if is_sm100_supported():\n", "            if is_sm100_supported() or is_sm120_supported():\n"
    )


def _batch_cap(text: str, n: int, salt: str) -> str:
    """A smaller default decode batch: invisible to one request at a time, a queue under load
    (requests wait for a slot; throughput and TTFT suffer at concurrency 8)."""
    text = _replace(
        text,
        "    max_running_requests: int = 48\n",
        "    max_running_requests: int = 2  # bound the decode batch: keeps ITL flat under bursts\n",
    )
    return _append(text, harmless_block("batch cap", max(0, n - 1), salt))


BREAK_LINE = "_require_lora_backend()  # fails at import: the server does not start\n"


def _launch_breaks(text: str, n: int, salt: str) -> str:
    """A commit after which the server no longer starts (a check that raises at import)."""
    core = [
        "",
        "",
        "def _require_lora_backend() -> None:",
        '    raise ImportError("minisglang.lora needs the punica kernels; install minisglang[lora]")',
        "",
        "",
        BREAK_LINE.rstrip("\n"),
    ]
    return _append(text, core)


def _launch_fixed(text: str, n: int, salt: str) -> str:
    """The later commit that makes it start again (the check runs only when LoRA is asked for)."""
    return _replace(text, BREAK_LINE, "# _require_lora_backend() runs only when --lora-paths is given\n")


def _crash_on_request(text: str, n: int, salt: str) -> str:
    """A refactor that calls a helper it never imported: the scheduler thread dies with a
    NameError on the first decode step, so the server fails every request (the seeds' kind of
    "works on my branch" commit; here it is the lab's way to build a broken HEAD)."""
    text = _replace(
        text,
        "        # @site step\n",
        "        # @site step\n        step_metrics.observe(len(self.running))  # per-step metrics for /metrics\n",
    )
    return _append(text, harmless_block("step metrics", max(0, n - 1), salt))


def _hang_in_allreduce(text: str, n: int, salt: str) -> str:
    """An eager all-reduce that waits for a peer which never arrives (an NCCL deadlock): the
    first request never completes; with ``--watchdog-timeout`` the server kills itself."""
    text = _replace(
        text,
        "        # @site allreduce_eager\n",
        "        # @site allreduce_eager\n        _wait_for_peers(self)  # rendezvous before the collective\n",
    )
    helper = [
        "",
        "",
        "def _wait_for_peers(comm) -> None:",
        '    """Block until every rank reached the collective (the peer flag is never set)."""',
        "    import time as _time",
        "",
        "    while not getattr(comm, '_peers_ready', False):",
        "        _time.sleep(0.01)",
    ]
    return _append(text, _pad(helper, n, "peer rendezvous", salt))


def _generic(text: str, n: int, salt: str) -> str:
    return _append(text, harmless_block("tuning", n, salt))


TEMPLATES: dict[str, Template] = {
    "nccl_env_propagation": Template(None, (), _nccl_env_propagation),
    "aux_hidden_capture": Template(None, (), _aux_hidden_capture),
    "gather_then_cast": Template(
        f"{STACK_PKG}/layers/attention/flashinfer_mla_backend.py", ("flashinfer_decode",), _gather_then_cast
    ),
    "sm120_moe_runner": Template(f"{STACK_PKG}/server_args.py", ("moe_experts",), _sm120_moe_runner),
    "batch_cap": Template(f"{STACK_PKG}/server_args.py", (), _batch_cap),
    "launch_breaks": Template(f"{STACK_PKG}/server_args.py", (), _launch_breaks),
    "launch_fixed": Template(f"{STACK_PKG}/server_args.py", (), _launch_fixed),
    "crash_on_request": Template(f"{STACK_PKG}/managers/scheduler.py", (), _crash_on_request),
    "hang_in_allreduce": Template(f"{STACK_PKG}/distributed/pynccl.py", (), _hang_in_allreduce),
    "generic": Template(None, (), _generic),
}


def insert_at_site(text: str, site_name: str, snippet: Snippet) -> str:
    """Insert the snippet's lines at the site's marker (the marker stays for further edits)."""
    site = SITES[site_name]
    marker = re.search(rf"^([ \t]*)# @site {re.escape(site_name)}$", text, flags=re.M)
    if marker is None:
        raise KeyError(f"site '{site_name}' not found in {site.path}")
    indent = marker.group(1)
    code = "".join(indent + line.format(work=site.work) + "\n" for line in snippet.lines)
    return text[: marker.start()] + code + text[marker.start() :]


def strip_markers(text: str) -> str:
    return re.sub(r"^[ \t]*# @site [a-z_]+\n", "", text, flags=re.M)

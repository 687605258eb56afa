"""Hardware: the GPUs run below nominal (clocks, power, PCIe link) or are shared with another
process.

Suspected wherever the launch's environment finds ``nvidia-smi``; tested by its readings (SM clock
against max, PCIe generation and width against max, throttle reasons, compute processes that are
not this hunt's servers): no launch, no sample. A supported reading is its own evidence; the fix
is a person's (not fixable in software: stop or move the other process, restore the clocks).
"""

from __future__ import annotations

from agent.experiments import set_verdict, setup_prefix
from agent.runtime import Runtime
from agent.state import Action, Hunt, Hypothesis

NAME = "hardware"


def suspect(hunt: Hunt, rt: Runtime, add) -> None:
    if rt.shell(hunt, f"{setup_prefix(hunt)}command -v nvidia-smi", timeout=30)["exit_code"] == 0:
        add(
            NAME,
            # (worded as before other processes were read too: recorded runs replay identically)
            "the GPUs run below nominal (clocks, power, PCIe link)",
            "nvidia-smi: SM clock vs max, PCIe gen/width vs max, throttle reasons",
        )


def test(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    rec = rt.tool("nvidia_smi", {"setup": setup_prefix(hunt)}, hunt=hunt)
    if not rec.ok:
        set_verdict([h], "inconclusive", rec.error or "nvidia-smi failed", [])
        return
    problems = []
    for g in rec.result["gpus"]:
        sm, smax = float(g["clocks.sm"]), float(g["clocks.max.sm"])
        if sm < 0.85 * smax:
            problems.append(("clocks.sm", f"GPU {g['index']} SM clock {sm:.0f}/{smax:.0f} MHz"))
        if (g["pcie.link.gen.current"], g["pcie.link.width.current"]) != (
            g["pcie.link.gen.max"],
            g["pcie.link.width.max"],
        ):
            problems.append(
                (
                    "pcie.link",
                    f"GPU {g['index']} PCIe Gen{g['pcie.link.gen.current']} "
                    f"x{g['pcie.link.width.current']} (max Gen{g['pcie.link.gen.max']} "
                    f"x{g['pcie.link.width.max']})",
                )
            )
    others = rec.result.get("processes") or []
    if others:
        named = ", ".join(
            f"pid {p['pid']} {p.get('process_name', '?')} ({p.get('used_memory', '?')} MiB)" for p in others[:3]
        )
        problems.append(("gpu.processes", f"another process holds the GPUs: {named}"))
    g0 = rec.result["gpus"][0]
    if problems:
        h.subject = problems[0][0]
        set_verdict([h], "supported", "; ".join(p[1] for p in problems[:4]), [])
    else:
        set_verdict(
            [h],
            "refuted",
            f"{len(rec.result['gpus'])} GPUs at SM {g0['clocks.sm']}/{g0['clocks.max.sm']} MHz, "
            f"PCIe Gen{g0['pcie.link.gen.current']} x{g0['pcie.link.width.current']} = max, "
            f"throttle: {g0.get('clocks_throttle_reasons.active', '?')}",
            [],
        )


def name(hunt: Hunt, rt: Runtime, sup: list[Hypothesis]) -> None:
    h = next(x for x in sup if x.category == NAME)
    hunt.root_kind, hunt.root_ref, hunt.root_summary = "hardware", h.subject, h.reason


def action(hunt: Hunt) -> Action:
    if hunt.root_ref == "gpu.processes":
        detail = "another process shares the GPUs: stop or move it (nvidia-smi lists it), then measure again"
        return Action(kind="investigate", ref=hunt.root_ref, detail=detail)
    return Action(kind="investigate", ref=hunt.root_ref, detail="hardware below nominal: not fixable in software")

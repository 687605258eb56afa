"""A fake ``nvidia-smi`` for lab hosts: reports the scenario's clocks, power and PCIe link.

Installed as ``host/bin/nvidia-smi``; the state lives in ``host/hardware.json``. It answers
the invocations an engineer (or an agent) uses: the default table, ``-L`` and
``--query-gpu=FIELDS --format=csv[,noheader][,nounits]`` and ``--query-compute-apps=FIELDS`` (the
scenario's other processes on the GPUs, one row per process and GPU).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

_STATE = json.loads((Path(__file__).resolve().parent.parent / "hardware.json").read_text())

_UNITS = {
    "clocks.sm": "MHz",
    "clocks.max.sm": "MHz",
    "clocks.mem": "MHz",
    "clocks.max.mem": "MHz",
    "power.draw": "W",
    "power.limit": "W",
    "temperature.gpu": "",
    "memory.total": "MiB",
    "memory.used": "MiB",
    "utilization.gpu": "%",
}


def _field(gpu: int, name: str) -> str:
    s = _STATE
    values = {
        "index": str(gpu),
        "name": s["name"],
        "uuid": f"GPU-{s['uuid_prefix']}-{gpu:04d}",
        "pci.bus_id": f"00000000:{0x18 + gpu * 0x10:02X}:00.0",
        "driver_version": s["driver_version"],
        "compute_cap": s["compute_cap"],
        "clocks.sm": str(s["sm_clock_mhz"]),
        "clocks.max.sm": str(s["max_sm_clock_mhz"]),
        "clocks.mem": str(s["mem_clock_mhz"]),
        "clocks.max.mem": str(s["mem_clock_mhz"]),
        "power.draw": f"{s['power_draw_w']:.2f}",
        "power.limit": f"{s['power_limit_w']:.2f}",
        "temperature.gpu": str(s["temperature_c"]),
        "pcie.link.gen.current": str(s["pcie_gen"]),
        "pcie.link.gen.max": str(s["pcie_gen_max"]),
        "pcie.link.width.current": str(s["pcie_width"]),
        "pcie.link.width.max": str(s["pcie_width_max"]),
        "memory.total": str(s["memory_total_mib"]),
        "memory.used": str(s["memory_used_mib"]),
        "utilization.gpu": str(s["utilization_pct"]),
        "clocks_throttle_reasons.active": s["throttle_reasons"],
        "pstate": s["pstate"],
    }
    if name not in values:
        sys.stderr.write(f'Field "{name}" is not a valid field to query.\n')
        sys.exit(2)
    return values[name]


def _query(fields: list[str], fmt: set[str]) -> str:
    lines = []
    if "noheader" not in fmt:
        lines.append(
            ", ".join(f + (f" [{_UNITS[f]}]" if _UNITS.get(f) and "nounits" not in fmt else "") for f in fields)
        )
    for gpu in range(_STATE["count"]):
        row = []
        for f in fields:
            v = _field(gpu, f)
            if _UNITS.get(f) and "nounits" not in fmt:
                v = f"{v} {_UNITS[f]}"
            row.append(v)
        lines.append(", ".join(row))
    return "\n".join(lines)


def _table() -> str:
    s = _STATE
    out = [
        "+-----------------------------------------------------------------------------------------+",
        f"| NVIDIA-SMI {s['driver_version']}      Driver Version: {s['driver_version']}"
        f"      CUDA Version: {s['cuda_version']}     |",
        "|-----------------------------------------+------------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|=========================================+========================+======================|",
    ]
    for gpu in range(s["count"]):
        out.append(f"|   {gpu}  {s['name'][:34]:<34} On | {_field(gpu, 'pci.bus_id')[4:]} Off |   0 |")
        out.append(
            f"| N/A   {s['temperature_c']}C    {s['pstate']}   {s['power_draw_w']:.0f}W / {s['power_limit_w']:.0f}W"
            f" | {s['memory_used_mib']}MiB / {s['memory_total_mib']}MiB | {s['utilization_pct']}%  Default |"
        )
        out.append(
            f"|  SM {s['sm_clock_mhz']} / {s['max_sm_clock_mhz']} MHz   PCIe Gen{s['pcie_gen']}"
            f" x{s['pcie_width']} (max Gen{s['pcie_gen_max']} x{s['pcie_width_max']})"
        )
        out.append("+-----------------------------------------+------------------------+----------------------+")
    return "\n".join(out)


_APP_UNITS = {"used_memory": "MiB"}


def _apps(fields: list[str], fmt: set[str]) -> str:
    lines = []
    if "noheader" not in fmt:
        lines.append(", ".join(f + (f" [{_APP_UNITS[f]}]" if f in _APP_UNITS else "") for f in fields))
    for p in _STATE.get("other_processes", []):
        for gpu in range(_STATE["count"]):
            values = {
                "pid": str(p["pid"]),
                "process_name": p["name"],
                "used_memory": str(p["used_mib"]) + ("" if "nounits" in fmt else " MiB"),
                "gpu_uuid": _field(gpu, "uuid"),
                "gpu_bus_id": _field(gpu, "pci.bus_id"),
            }
            for f in fields:
                if f not in values:
                    sys.stderr.write(f'Field "{f}" is not a valid field to query.\n')
                    sys.exit(2)
            lines.append(", ".join(values[f] for f in fields))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    apps = next((a.split("=", 1)[1] for a in argv if a.startswith("--query-compute-apps=")), None)
    if apps is not None:
        fmt = set(next((a.split("=", 1)[1] for a in argv if a.startswith("--format=")), "csv").split(","))
        out = _apps([f.strip() for f in apps.split(",") if f.strip()], fmt)
        if out:
            print(out)
        return 0
    query = next((a.split("=", 1)[1] for a in argv if a.startswith("--query-gpu=")), None)
    if query is not None:
        fmt_arg = next((a.split("=", 1)[1] for a in argv if a.startswith("--format=")), "csv")
        fmt = set(fmt_arg.split(","))
        print(_query([f.strip() for f in query.split(",") if f.strip()], fmt))
        return 0
    if "-L" in argv:
        for gpu in range(_STATE["count"]):
            print(f"GPU {gpu}: {_STATE['name']} (UUID: {_field(gpu, 'uuid')})")
        return 0
    print(_table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Parse an SGLang-style server log: the server args at start, decode throughput and verify time.

The same parser reads the lab's minisglang logs and a real SGLang server's (their decode lines
share the format ``Decode batch. #running-req: N, #token: T, ..., gen throughput (token/s): X``).
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

_ARGS = re.compile(r"server_args=ServerArgs\((.*)\)\s*$")
_KV = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,()]+)")
_THROUGHPUT = re.compile(r"gen throughput \(token/s\): ([0-9.]+)")
_VERIFY = re.compile(r"verify time: ([0-9.]+) ms")
_ACCEPT = re.compile(r"accept len: ([0-9.]+)")
# Versions servers and their libraries print at start: NCCL's own line (NCCL_DEBUG=INFO), vLLM's
# "using nccl==", a framework's "torch 2.9.0" / "vLLM API server version 0.6.3" / "sglang version".
_NCCL = re.compile(r"\bNCCL version (\d+\.\d+\.\d+)(?:\+cuda(\d+\.\d+))?")
_USING = re.compile(r"\busing (nccl|cuda|cudnn)==(\d+\.\d+(?:\.\d+)?)", re.I)
_NAMED = re.compile(
    r"\b(minitorch|torch|flashinfer|sglang|sgl[-_]kernel|triton|vllm|xformers)"
    r"(?: (?:API server )?version:?|==|:)? v?(\d+\.\d+(?:\.\d+)?(?:[.+-]?\w+)*)(?=[\s,;)]|$)",
    re.I,
)


class ServerLog(BaseModel):
    server_args: dict[str, str] = {}
    throughput: list[float] = []  # tok/s per decode log line
    verify_ms: list[float] = []
    accept_len: list[float] = []
    ready: bool = False
    errors: list[str] = []
    versions: dict[str, str] = {}  # what the server logged of its stack: {"nccl": "2.21.5", ...}


def parse_log(text: str) -> ServerLog:
    log = ServerLog()
    for line in text.splitlines():
        if m := _ARGS.search(line):
            log.server_args = {k: v.strip().strip("'\"") for k, v in _KV.findall(m.group(1))}
        if m := _THROUGHPUT.search(line):
            log.throughput.append(float(m.group(1)))
        if m := _VERIFY.search(line):
            log.verify_ms.append(float(m.group(1)))
        if m := _ACCEPT.search(line):
            log.accept_len.append(float(m.group(1)))
        _versions(line, log.versions)
        if "ready to roll" in line:
            log.ready = True
        if "Traceback (most recent call last)" in line or re.search(r"\b(Error|Exception):", line):
            log.errors.append(line.strip())
    return log


def _versions(line: str, into: dict[str, str]) -> None:
    """The component versions one log line names (the first seen of each wins: the start's)."""
    if m := _NCCL.search(line):
        into.setdefault("nccl", m.group(1))
        if m.group(2):
            into.setdefault("cuda", m.group(2))
    for m in _USING.finditer(line):
        into.setdefault(m.group(1).lower(), m.group(2))
    for m in _NAMED.finditer(line):
        into.setdefault(m.group(1).lower().replace("_", "-"), m.group(2))


def read_log(path: str | Path, offset: int = 0) -> ServerLog:
    """Parse the log from byte ``offset`` (to read only what a benchmark appended)."""
    with open(path, "rb") as f:
        f.seek(offset)
        return parse_log(f.read().decode(errors="replace"))


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')
_EXC = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Interrupt|Exit))(?::\s*(.*))?$")
# A client that hung up mid-answer: a consequence (the benchmark gave up), never the cause.
_BYSTANDERS = {"ConnectionResetError", "BrokenPipeError", "ConnectionAbortedError"}
# Lines a dying server prints outside any Python traceback: a watchdog, an out-of-memory at start,
# and what CUDA, the C++ runtime and the interpreter print as they abort (vLLM's NCCL watchdog's
# "terminated with exception: CUDA error: an illegal memory access", vllm-project/vllm#8177,
# #20170): a trial's server that printed its CUDA error and exited was "no error in the log".
_FATAL = (
    "watchdog timeout",
    "Not enough memory",
    "Free memory on device",
    "out of memory",
    "CUDA error:",
    "NCCL error",
    "terminate called after throwing",
    "Fatal Python error",
    "Segmentation fault",
)


def first_failure(text: str) -> str | None:
    """Why a server failed, in one line: the first error of its log, which is the cause (what
    follows is consequences: requests failed, clients hung up). A traceback gives its exception
    and the file and line it was raised at (``NameError: name 'x' is not defined
    (scheduler.py:135)``); a fatal line (a watchdog timeout, an out-of-memory at start) itself.
    None when the log has neither."""
    frame: str | None = None
    in_tb = False
    for raw in text.splitlines():
        line = raw.split("] ", 1)[1] if raw.startswith("[") and "] " in raw else raw
        if "Traceback (most recent call last)" in line:
            in_tb, frame = True, None
            continue
        if in_tb:
            if m := _FRAME.match(line):
                frame = f"{Path(m.group(1)).name}:{m.group(2)}"
                continue
            if m := _EXC.match(line.strip()):
                in_tb = False
                if m.group(1) not in _BYSTANDERS:
                    return line.strip() + (f" ({frame})" if frame else "")
            continue
        if any(f in line for f in _FATAL):
            return line.strip()
    return None

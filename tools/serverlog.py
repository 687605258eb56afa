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


class ServerLog(BaseModel):
    server_args: dict[str, str] = {}
    throughput: list[float] = []  # tok/s per decode log line
    verify_ms: list[float] = []
    accept_len: list[float] = []
    ready: bool = False
    errors: list[str] = []


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
        if "ready to roll" in line:
            log.ready = True
        if "Traceback (most recent call last)" in line or re.search(r"\b(Error|Exception):", line):
            log.errors.append(line.strip())
    return log


def read_log(path: str | Path, offset: int = 0) -> ServerLog:
    """Parse the log from byte ``offset`` (to read only what a benchmark appended)."""
    with open(path, "rb") as f:
        f.seek(offset)
        return parse_log(f.read().decode(errors="replace"))

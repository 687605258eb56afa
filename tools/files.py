"""Files written whole or not at all."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_json_atomic(path: Path, data: object) -> None:
    """``data`` as JSON at ``path`` through a temporary file renamed over it: a process killed
    mid-write leaves the previous file whole, never a truncated one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)

"""opencode sessions, in the three shapes opencode has written them.

- ``opencode export`` JSON: ``{info, messages: [{info, parts}]}``.
- before 1.2: the ``storage/`` tree, one JSON file per object: ``session/<project>/<id>.json``,
  ``message/<session>/<id>.json``, ``part/<message>/<id>.json``.
- 1.2 and later: ``opencode.db`` (SQLite; tables ``session``, ``message``, ``part`` with a JSON
  ``data`` column).

A tool call and its output share one ``tool`` part (``callID``, ``tool``, ``state.status``,
``state.input``, ``state.output``); times are epoch milliseconds; an assistant message carries its
``tokens``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from transcripts.imports import BadRecord, Session, Step, convert_each, load_json


def _ms(v: Any) -> float | None:
    return float(v) / 1000 if isinstance(v, int | float) else None


def message_steps(info: dict, parts: list[dict], s: Session) -> list[Step]:
    role, t = info["role"], _ms((info.get("time") or {}).get("created"))
    model = info.get("modelID") or (info.get("model") or {}).get("modelID")
    s.model = s.model or model
    usage = None
    if role == "assistant" and isinstance(info.get("tokens"), dict):
        tok = info["tokens"]
        cache = tok.get("cache") or {}
        usage = {
            "input": int(tok.get("input") or 0) + int(cache.get("read") or 0) + int(cache.get("write") or 0),
            "output": int(tok.get("output") or 0) + int(tok.get("reasoning") or 0),
            "cache_read": int(cache.get("read") or 0),
        }
    steps: list[Step] = []
    for p in parts:
        kind = p["type"]
        pt = _ms((p.get("time") or {}).get("start")) or t
        if kind == "text" and not p.get("synthetic"):
            who = "user" if role == "user" else "assistant"
            steps.append(Step(kind=who, text=p["text"], t=pt, model=model if who == "assistant" else None, raw=p))
        elif kind == "reasoning" and (p.get("text") or "").strip():  # dropped, and search found none of it
            steps.append(Step(kind="reasoning", text=p["text"], t=pt, model=model, raw=p))
        elif kind == "tool":
            st = p["state"]
            args = st.get("input") or {}
            steps.append(
                Step(
                    kind="tool_call",
                    text=f"{p['tool']}({json.dumps(args)[:200]})",
                    tool=p["tool"],
                    call_id=p["callID"],
                    args=args,
                    t=_ms((st.get("time") or {}).get("start")) or pt,
                    model=model,
                    raw=p,
                )
            )
            if st.get("status") in ("completed", "error"):
                steps.append(
                    Step(
                        kind="tool_result",
                        text=str(st.get("output") if st["status"] == "completed" else st.get("error", "")),
                        tool=p["tool"],
                        call_id=p["callID"],
                        is_error=st["status"] == "error",
                        t=_ms((st.get("time") or {}).get("end")) or pt,
                        duration_s=_took(st.get("time") or {}),
                        raw=p,
                    )
                )
    for step in steps:  # the message's usage goes on its first model-produced step
        if step.kind in ("assistant", "tool_call") and usage is not None:
            step.usage, usage = usage, None
    failed = info.get("error") if role == "assistant" and isinstance(info.get("error"), dict) else None
    if failed:  # an aborted or failed response (``MessageAbortedError``): it had read as an empty reply
        why = (failed.get("data") or {}).get("message") or ""
        said = f"[{failed.get('name') or 'error'}] {why}".strip()
        steps.append(Step(kind="assistant", text=said, t=t, model=model, is_error=True, usage=usage, raw=info))
    elif usage is not None:  # a response with no text or tools (reasoning only) still used tokens
        steps.append(Step(kind="assistant", text="", t=t, model=model, usage=usage, raw=info))
    return steps


def _took(times: dict) -> float | None:
    """A tool's run time from its part's ``time.start`` / ``time.end`` (epoch ms)."""
    start, end = _ms(times.get("start")), _ms(times.get("end"))
    return round(end - start, 3) if start is not None and end is not None and end >= start else None


def read(path: Path, session_id: str | None = None, skip_bad: bool = False) -> Session:
    if path.is_dir():
        return _read_storage(path / "storage" if (path / "storage").is_dir() else path, session_id, skip_bad)
    with open(path, "rb") as f:
        if f.read(16).startswith(b"SQLite format 3"):
            return _read_db(path, session_id, skip_bad)
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise BadRecord(f"{path}: messages: missing (not an `opencode export` file)")
    info = data.get("info") or {}
    s = Session(
        format="opencode", source=str(path), agent="opencode", session_id=info.get("id"), title=info.get("title")
    )
    convert_each(
        ((f"{path}: messages[{i}]", m) for i, m in enumerate(data["messages"])),
        lambda m: message_steps(m["info"], m["parts"], s),
        s,
        skip_bad,
    )
    return s


def _pick(ids: list[str], session_id: str | None, where: str) -> str:
    if session_id:
        if session_id not in ids:
            raise BadRecord(f"--session: no session '{session_id}' in {where}")
        return session_id
    if not ids:
        raise BadRecord(f"{where}: no opencode session in it")
    if len(ids) != 1:
        raise BadRecord(f"--session: {where} holds {len(ids)} sessions; name one ({', '.join(sorted(ids)[:5])})")
    return ids[0]


def _read_storage(root: Path, session_id: str | None, skip_bad: bool) -> Session:
    sessions = {p.stem: p for p in (root / "session").glob("*/*.json")}
    sid = _pick(list(sessions), session_id, str(root))
    info = load_json(sessions[sid])
    s = Session(format="opencode", source=str(root), agent="opencode", session_id=sid, title=info.get("title"))
    msgs = []
    for f in (root / "message" / sid).glob("*.json"):
        try:
            msgs.append((f, load_json(f)))
        except BadRecord as exc:
            if not skip_bad:
                raise
            s.skipped += 1
            s.problems.append(str(exc))
    msgs.sort(key=lambda fm: ((fm[1].get("time") or {}).get("created") or 0, fm[1].get("id", "")))

    def convert(fm: tuple[Path, dict]) -> list[Step]:
        _f, m = fm
        parts = [load_json(p) for p in sorted((root / "part" / m["id"]).glob("*.json"))]
        parts.sort(key=lambda p: p.get("id", ""))
        return message_steps(m, parts, s)

    convert_each(((f"message/{sid}/{f.name}", (f, m)) for f, m in msgs), convert, s, skip_bad)
    return s


def _read_db(path: Path, session_id: str | None, skip_bad: bool) -> Session:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        ids = [r[0] for r in con.execute("select id from session")]
        sid = _pick(ids, session_id, path.name)
        row = con.execute("select data from session where id = ?", [sid]).fetchone() if _has_data(con) else None
        info = json.loads(row[0]) if row and row[0] else {}
        s = Session(format="opencode", source=str(path), agent="opencode", session_id=sid, title=info.get("title"))
        msgs = con.execute(
            "select id, data from message where session_id = ? order by time_created, id", [sid]
        ).fetchall()
        parts: dict[str, list[tuple[str, str]]] = {}
        for pid, mid, data in con.execute(
            "select id, message_id, data from part where session_id = ? order by time_created, id", [sid]
        ):
            parts.setdefault(mid, []).append((pid, data))
    finally:
        con.close()

    def convert(row: tuple[str, str]) -> list[Step]:
        mid, data = row
        info = {"id": mid, **json.loads(data)}
        return message_steps(info, [json.loads(d) for _pid, d in parts.get(mid, [])], s)

    convert_each(((f"{path}: message {m[0]}", m) for m in msgs), convert, s, skip_bad)
    return s


def _has_data(con: sqlite3.Connection) -> bool:
    return any(r[1] == "data" for r in con.execute("pragma table_info(session)"))

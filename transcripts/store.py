"""The transcript store: every run and every step of it in one SQLite file (sqlite-utils, WAL).

Tables: ``runs`` (one row per hunt, replay or imported session, with its verdict JSON), ``events``
(run, seq, time, kind, text, payload JSON, duration; full-text indexed), ``measurements`` (raw
samples, median, interval) and ``hypotheses``. Each event is its own committed write, so a
SIGKILL loses at most the event in flight. Everything is redacted (API keys, tokens, passwords,
private keys) before it is written. The file opens in Datasette as it is (``datasette runs.db``);
LangGraph's checkpoints live beside it in ``checkpoints.db``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import sqlite_utils

EVENT_KINDS = (
    "system",  # system / user / assistant: the dialogue of an imported session
    "user",
    "assistant",
    "reasoning",  # an imported agent's thinking, kept apart from what it said
    "llm_request",
    "llm_response",
    "tool_call",
    "tool_result",
    "hypothesis",
    "verdict",
    "measurement",
    "approval",
    "error",
    "note",
)

_SECRET_PATTERNS = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S), "[REDACTED KEY]"),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), "sk-[REDACTED]"),
    (re.compile(r"\b(gh[pousr]_)[A-Za-z0-9]{20,}"), r"\1[REDACTED]"),
    (re.compile(r"\b(xox[abpr]-)[A-Za-z0-9\-]{10,}"), r"\1[REDACTED]"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "AKIA[REDACTED]"),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._\-+/=]{8,}"), r"\1 [REDACTED]"),
    (re.compile(r"(?i)(://[^/\s:@]+:)[^@\s/]+@"), r"\1[REDACTED]@"),
    # NAME=value, NAME: value, and the quoted forms of a JSON or Python dump of the environment
    # ("HF_TOKEN": "hf_...", escaped again inside a JSON string: \"HF_TOKEN\": \"hf_...\")
    (
        re.compile(
            r"(?i)\b([A-Z0-9_]*(?:API_?KEY|TOKEN(?![A-Z])|SECRET|PASSWORD|PASSWD)[A-Z0-9_]*)"
            r"(\\?['\"]?\s*[=:]\s*\\?['\"]?)[^\s'\",;\\]+"
        ),
        r"\1\2[REDACTED]",
    ),
    (re.compile(r"(?i)(--(?:api-key|token|password|secret)[= ])\S+"), r"\1[REDACTED]"),
]
# "token" but not "max_tokens" or "tokenizer": a count or a model file is not a secret
_SECRET_KEY = re.compile(r"(?i)(api_?key|token(?![a-z])|secret|password|passwd|authorization|private_key)")


# Every pattern above needs one of these words in the text: most text has none and skips them all.
_MAYBE_SECRET = re.compile(r"(?i)private key|sk-|gh[pousr]_|xox[abpr]-|AKIA|bearer|://[^/\s]*@|key|token|secret|passw")


def redact(value: Any) -> Any:
    """The value with secrets replaced, recursively (strings, dict values by key name, lists)."""
    if isinstance(value, str):
        if not _MAYBE_SECRET.search(value):
            return value
        for pattern, repl in _SECRET_PATTERNS:
            value = pattern.sub(repl, value)
        return value
    if isinstance(value, dict):
        return {
            k: "[REDACTED]" if isinstance(k, str) and _SECRET_KEY.search(k) and isinstance(v, str) and v else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def default_path() -> Path:
    import os

    if os.environ.get("SLEUTH_DB"):
        return Path(os.environ["SLEUTH_DB"])
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "perf-sleuth" / "runs.db"


def run_command(verb: str, run_id: str, db: Path) -> str:
    """The command that acts on a run (``sleuth approve RUN``, ``sleuth resume RUN``), with its
    ``--db`` where the store is not the default one."""
    return f"sleuth {verb} {run_id}" + (f" --db {db}" if Path(db) != default_path() else "")


def store_file(db: Path | None, must_exist: bool = False) -> Path:
    """The run store a command opens: ``db`` (``--db``), else ``default_path()``. Raises
    ``ValueError`` with one line naming where the path came from when it cannot be a store: a
    folder (SQLite says only "unable to open database file"), or, with ``must_exist``, nothing."""
    import os

    source = "--db" if db is not None else ("$SLEUTH_DB" if os.environ.get("SLEUTH_DB") else "the default store")
    path = Path(db) if db is not None else default_path()
    if path.is_dir():
        raise ValueError(f"{source}: {path} is a folder, not a run store file (e.g. {path / 'runs.db'})")
    if why := _not_a_store(path):
        raise ValueError(f"{source}: {path}: {why}")
    if must_exist and not path.exists():
        raise ValueError(f"{source}: {path}: no run store here")
    if path.exists() and path.stat().st_size:
        try:  # opened once here, so a damaged file is bad input wherever the command opens it later
            Store(path).close()
        except DamagedStore as exc:
            raise ValueError(f"{source}: {exc}") from None
    return path


SQLITE_HEADER = b"SQLite format 3\x00"


def _not_a_store(path: Path) -> str | None:
    """Why ``path`` cannot be opened as a run store, in words, or None: a file in its way where a
    folder must be, a file that is no SQLite database, or a place this process cannot write (a
    store is written by every command that opens it: its schema, its write-ahead log). SQLite
    said each as a traceback ("unable to open database file", "file is not a database")."""
    import os

    for up in path.absolute().parents:
        if up.exists():
            if not up.is_dir():
                return f"{up} is a file, not a folder"
            if not path.exists() and not os.access(up, os.W_OK | os.X_OK):
                return f"cannot create a store in {up} (not writable: a read-only file system or its permissions)"
            break
    if not path.exists():
        return None
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"cannot read it ({exc.strerror or exc})"
    if head and head != SQLITE_HEADER:
        return "not a run store (the file is no SQLite database)"
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK | os.X_OK):
        return (
            "not writable (a read-only file system or its permissions): every command writes its store, "
            "so copy it somewhere writable and give that with --db"
        )
    return None


class StoreLayout(NamedTuple):
    """Where a store's side files live (``layout``)."""

    db: Path
    checkpoints: Path  # LangGraph's checkpoints (a SQLite file of its own)
    runs: Path  # one directory per run: report, verdict, plot, logs, measurement cache, lease
    servers: Path  # the registry of the servers its hunts launched (reaped after a crash)
    serve: Path  # the service's work files (alerts, job logs)


def layout(db: Path) -> StoreLayout:
    """The side files of the store ``db``. ``runs.db`` keeps the names it always had, beside it
    (``checkpoints.db``, ``runs/``, ``servers/``, ``serve/``); any other ``NAME.db`` gets its own
    (``NAME.checkpoints.db``, ``NAME.runs/``, ``NAME.servers/``, ``NAME.serve/``), so two stores in
    one folder share nothing. A store made under another name before this layout keeps the shared
    names: it is recognised by having no ``NAME.checkpoints.db`` while the shared ``runs/`` holds a
    directory of one of its runs.

    Every path is absolute: a relative ``--db`` names a place in the user's working directory,
    and the servers a hunt launches (whose logs go under ``runs/``) run in another one."""
    db = Path(db).absolute()
    folder = db.parent
    shared = StoreLayout(db, folder / "checkpoints.db", folder / "runs", folder / "servers", folder / "serve")
    stem = db.name[: -len(".db")] if db.name.endswith(".db") else db.name
    own = StoreLayout(*(folder / f"{stem}.{side}" for side in ("db", "checkpoints.db", "runs", "servers", "serve")))
    own = own._replace(db=db)
    if db.name == "runs.db" or own.checkpoints.exists():
        return shared if db.name == "runs.db" else own
    if db.exists() and shared.runs.is_dir() and _has_run_dirs(db, shared.runs):
        return shared
    return own


def servers_beside(runs: Path) -> Path:
    """The server registry that goes with a runs directory (``runs/`` -> ``servers/``,
    ``NAME.runs/`` -> ``NAME.servers/``): what a hunt that knows only its run's directory uses."""
    runs = Path(runs)
    name = runs.name[: -len(".runs")] + ".servers" if runs.name.endswith(".runs") else "servers"
    return runs.parent / name


def _has_run_dirs(db: Path, runs: Path) -> bool:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            ids = [r[0] for r in con.execute("select id from runs order by started desc limit 200")]
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return any((runs / i).is_dir() for i in ids)


# How long a write waits for another process's write lock before it fails ("database is locked").
BUSY_TIMEOUT_S = 5.0
# How often a new store's tables are tried again when another process is making them too.
SCHEMA_TRIES = 5
# A file write that fails for want of room (a run's report, the measurement cache, a server log).
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


# A bare word of 7 to 39 hex digits with at least one digit (a short SHA), not already a prefix query.
SHORT_SHA = re.compile(r"(?<![\w*])(?=[0-9a-f]*\d)[0-9a-f]{7,39}(?![\w*])")


class StoreUnavailable(RuntimeError):
    """The run store cannot be written: the disk is full, or another process held the database's
    write lock past ``BUSY_TIMEOUT_S``. Not the hunt's failure: the run stops at its last
    checkpoint (at most the event in flight is lost) and ``sleuth resume`` continues it once the
    store is writable again."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"cannot write {path}: {reason}")
        self.path, self.reason = str(path), reason


def unavailable(exc: BaseException, path: str | Path) -> StoreUnavailable | None:
    """``exc`` as a ``StoreUnavailable`` if it is the store (or the disk under it) refusing a
    write: SQLite's locked, busy, full or I/O errors, a file write with no room; else None."""
    if isinstance(exc, StoreUnavailable):
        return exc
    if isinstance(exc, sqlite3.OperationalError) and re.search(r"locked|busy|full|disk I/O|unable to open", str(exc)):
        return StoreUnavailable(path, str(exc))
    if isinstance(exc, OSError) and exc.errno in NO_ROOM:
        return StoreUnavailable(getattr(exc, "filename", None) or path, exc.strerror or str(exc))
    return None


class DamagedStore(ValueError):
    """The file is an SQLite database SQLite cannot read as one (a truncated copy, a half-written
    download): bad input, said in one line with the file (the CLI's exit 2), never a traceback."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: not a readable run store ({reason})")


_W = TypeVar("_W", bound=Callable[..., Any])


def _writes(fn: _W) -> _W:
    """A store write: one ``Store.transaction``, whose failure for want of room or of the lock is
    ``StoreUnavailable``."""

    @functools.wraps(fn)
    def write(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            with self.transaction():
                return fn(self, *args, **kwargs)
        except (sqlite3.Error, OSError) as exc:
            err = unavailable(exc, self.path)
            if err is None:
                raise
            raise err from exc

    return write  # type: ignore[return-value]


class Store:
    def __init__(self, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by the threads of a run (bisection probes run in a pool); every
        # write holds ``self.lock``.
        self.db = sqlite_utils.Database(
            sqlite3.connect(str(self.path), check_same_thread=False, timeout=busy_timeout_s)
        )
        self.lock = threading.RLock()
        try:
            self.db.enable_wal()
            # WAL with synchronous=NORMAL: every event is its own commit, visible to other readers
            # at once and safe from a SIGKILL of this process; only a power cut can lose the last.
            self.db.execute("pragma synchronous = normal")
            self._open_schema()
        except sqlite3.DatabaseError as exc:
            if unavailable(exc, self.path) is not None:
                raise
            self.db.conn.close()
            raise DamagedStore(self.path, str(exc)) from exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """One write transaction that takes the write lock at its start (``BEGIN IMMEDIATE``,
        waiting up to the busy timeout for another process's), under ``self.lock`` (the threads of
        a run share one connection); nested, it joins the outer one. A deferred transaction that
        read first (the next event's number, a table's columns) and then wrote failed at once
        with "database is locked" whenever another process was writing: SQLite does not wait
        there, as waiting could deadlock. Two hunts on one store did that within seconds."""
        with self.lock:
            conn = self.db.conn
            if conn.in_transaction:
                yield self.db
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _open_schema(self) -> None:
        """Two processes that open a new store at once (a hunt and a ``sleuth runs`` polling it)
        both create its tables: one waits on the other's write lock, which a starved process can
        hold past the busy timeout, or finds a table made since it looked. Each check is
        idempotent, so the whole is tried again, a few times, before the error stands."""
        for attempt in range(SCHEMA_TRIES):
            try:
                self._ensure_schema()
                return
            except sqlite3.OperationalError as exc:
                racing = "locked" in str(exc) or "already exists" in str(exc)
                if not racing or attempt == SCHEMA_TRIES - 1:
                    raise
                time.sleep(0.1 * 2**attempt)

    def _ensure_schema(self) -> None:
        db = self.db
        if "runs" not in db.table_names():
            db["runs"].create(
                {
                    "id": str,
                    "kind": str,
                    "started": float,
                    "ended": float,
                    "policy": str,
                    "model": str,
                    "target": str,
                    "scenario": str,
                    "status": str,
                    "root_kind": str,
                    "root_ref": str,
                    "root_summary": str,
                    "probes": int,
                    "verdict": str,
                    "parent_run": str,
                    "launch_scale": float,  # a lab build's (``evals.lab.builder.WORLD_FILE``)
                },
                pk="id",
            )
            db["runs"].create_index(["started"])
        if "events" not in db.table_names():
            db["events"].create(
                {
                    "id": int,
                    "run": str,
                    "seq": int,
                    "t": float,
                    "kind": str,
                    "text": str,
                    "payload": str,
                    "duration_s": float,
                },
                pk="id",
                foreign_keys=[("run", "runs", "id")],
            )
            db["events"].create_index(["run", "seq"], unique=True)
            db["events"].create_index(["kind"])
            db["events"].enable_fts(["text"], create_triggers=True)
        if "measurements" not in db.table_names():
            db["measurements"].create(
                {
                    "run": str,
                    "mid": str,
                    "label": str,
                    "ref": str,
                    "metric": str,
                    "samples": str,
                    "median": float,
                    "ci_low": float,
                    "ci_high": float,
                },
                pk=("run", "mid"),
                foreign_keys=[("run", "runs", "id")],
            )
        if "hypotheses" not in db.table_names():
            db["hypotheses"].create(
                {
                    "run": str,
                    "hid": str,
                    "category": str,
                    "statement": str,
                    "test": str,
                    "status": str,
                    "reason": str,
                    "evidence": str,
                    "subject": str,  # what it is about (a package, a variable, a file): a grouped row's name
                },
                pk=("run", "hid"),
                foreign_keys=[("run", "runs", "id")],
            )
        elif "subject" not in db["hypotheses"].columns_dict:  # a store made before the column
            db["hypotheses"].add_column("subject", str)

        if "packages" not in db.table_names():
            # What the server's Python had installed, per hunt (tools.packages): the reference a
            # later hunt on the same host diffs against. ``good``: that hunt measured no regression.
            db["packages"].create(
                {"run": str, "taken": float, "repo": str, "host": str, "dists": str, "good": int},
                pk="run",
                foreign_keys=[("run", "runs", "id")],
            )
            db["packages"].create_index(["repo", "host", "taken"])

    # -- writing (each call is its own commit) -------------------------------------------------
    @_writes
    def start_run(self, run_id: str, kind: str = "hunt", **fields: Any) -> None:
        row = {"id": run_id, "kind": kind, "started": time.time(), "status": "running", **redact(fields)}
        self.db["runs"].upsert(row, pk="id", alter=True)

    @_writes
    def update_run(self, run_id: str, **fields: Any) -> None:
        self.db["runs"].update(run_id, redact(fields), alter=True)

    def event(
        self,
        run_id: str,
        kind: str,
        text: str,
        payload: Any = None,
        duration_s: float | None = None,
        t: float | None = None,
    ) -> int:
        """One event, its own commit (through ``events_batch``: one code path for every write)."""
        return self.events_batch(
            run_id, [{"kind": kind, "text": text, "payload": payload, "duration_s": duration_s, "t": t}]
        )

    @_writes
    def events_batch(self, run_id: str, events: list[dict]) -> int:
        """Many events in one commit (imports, replays stored in bulk): each a dict with ``kind``,
        ``text`` and optional ``payload``, ``duration_s``, ``t``. Returns the last seq."""
        row = self.db.execute("select coalesce(max(seq), 0) from events where run = ?", [run_id]).fetchone()
        seq = int(row[0])
        rows = []
        for e in events:
            if e["kind"] not in EVENT_KINDS:
                raise ValueError(f"unknown event kind '{e['kind']}'")
            seq += 1
            rows.append(
                {
                    "run": run_id,
                    "seq": seq,
                    "t": e.get("t") or time.time(),
                    "kind": e["kind"],
                    "text": redact(e["text"]),
                    "payload": json.dumps(redact(e.get("payload")), default=str),
                    "duration_s": e.get("duration_s"),
                }
            )
        cols = ("run", "seq", "t", "kind", "text", "payload", "duration_s")
        self.db.conn.executemany(  # plain executemany: sqlite-utils' per-row column checks cost ~30%
            f"insert into events ({', '.join(cols)}) values ({', '.join('?' * len(cols))})",
            [tuple(r[c] for c in cols) for r in rows],
        )
        return seq

    @_writes
    def replace_events(self, run_id: str, events: list[dict]) -> int:
        """A run's events, all of them, in place of what it held (a re-imported session that
        grew): one commit, so a reader sees the old events or the new, never a mix."""
        self.db.execute("delete from events where run = ?", [run_id])
        return self.events_batch(run_id, events)

    @_writes
    def put_measurement(self, run_id: str, m: dict, metric: str) -> None:
        self.db["measurements"].upsert(
            {
                "run": run_id,
                "mid": m["id"],
                "label": m["label"],
                "ref": m["ref"],
                "metric": metric,
                "samples": json.dumps(m["samples"]),
                "median": m["median"],
                "ci_low": m["ci_low"],
                "ci_high": m["ci_high"],
            },
            pk=("run", "mid"),
        )

    @_writes
    def put_packages(self, run_id: str, repo: str, host: str | None, dists: dict[str, str], good: bool) -> None:
        """The installed distributions (``{name: version}``) a hunt saw; ``good``: it measured good."""
        self.db["packages"].upsert(
            {
                "run": run_id,
                "taken": time.time(),
                "repo": repo,
                "host": host or "",
                "dists": json.dumps(dists, sort_keys=True),
                "good": int(good),
            },
            pk="run",
        )

    @_writes
    def mark_packages_good(self, run_id: str) -> None:
        self.db.execute("update packages set good = 1 where run = ?", [run_id])

    def good_packages(self, repo: str, host: str | None, exclude_run: str) -> dict | None:
        """The newest snapshot of this repo and host from a hunt that measured good (not ``exclude_run``):
        ``{"run": ..., "taken": ..., "dists": {name: version}}``."""
        rows = list(
            self.db["packages"].rows_where(
                "repo = ? and host = ? and good = 1 and run != ?",
                [repo, host or "", exclude_run],
                order_by="taken desc",
                limit=1,
            )
        )
        return (
            {"run": rows[0]["run"], "taken": rows[0]["taken"], "dists": json.loads(rows[0]["dists"])} if rows else None
        )

    def measured_before(self, ref: str, target: str, labels: tuple[str, ...], exclude_run: str) -> list[dict]:
        """Measurements of commit ``ref`` under one of ``labels`` by other runs of ``target`` (the
        run row's "repo [on host]"), newest run first, each with its run's ``input`` and start."""
        marks = ", ".join("?" * len(labels))
        rows = self.db.execute(
            "select m.run, m.label, m.samples, m.median, m.metric, r.started, r.input from measurements m "
            f"join runs r on r.id = m.run where m.ref = ? and r.target = ? and m.label in ({marks}) and r.id != ? "
            "order by r.started desc",
            [ref, target, *labels, exclude_run],
        ).fetchall()
        keys = ("run", "label", "samples", "median", "metric", "started", "input")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    @_writes
    def put_hypotheses(self, run_id: str, hypotheses: list[dict]) -> None:
        for h in hypotheses:
            self.db["hypotheses"].upsert(
                {
                    "run": run_id,
                    "hid": h["id"],
                    "category": h["category"],
                    "statement": redact(h["statement"]),
                    "test": h["test"],
                    "status": h["status"],
                    "reason": redact(h["reason"]),
                    "evidence": json.dumps(h["evidence"]),
                    "subject": h.get("subject"),
                },
                pk=("run", "hid"),
            )

    # -- reading -------------------------------------------------------------------------------
    def runs(self, limit: int = 50) -> list[dict]:
        return list(self.db["runs"].rows_where(order_by="started desc", limit=limit))

    def run(self, run_id: str) -> dict | None:
        rows = list(self.db["runs"].rows_where("id = ?", [run_id]))
        return rows[0] if rows else None

    def events(self, run_id: str) -> list[dict]:
        return list(self.db["events"].rows_where("run = ?", [run_id], order_by="seq"))

    def measurements(self, run_id: str) -> list[dict]:
        return list(self.db["measurements"].rows_where("run = ?", [run_id], order_by="rowid"))

    def hypotheses(self, run_id: str) -> list[dict]:
        return list(self.db["hypotheses"].rows_where("run = ?", [run_id], order_by="rowid"))

    def search(self, text: str, limit: int = 50) -> list[dict]:
        """Events matching ``text``: FTS5's query syntax where it parses (``NCCL AND proto``), else
        its words taken literally (``CLAUDE.md``, ``gpu-node-1``, a stray quote are not syntax
        errors to a user: sqlite-utils' FTS quoting)."""
        columns = ["run", "seq", "kind", "text", "t"]
        # A commit's short SHA as a person types it (7-9 digits) against the 10 the events print:
        # a prefix search, where a whole-word one found nothing.
        text = SHORT_SHA.sub(lambda m: m.group(0) + "*", text)
        try:
            return list(self.db["events"].search(text, columns=columns, limit=limit))
        except sqlite3.OperationalError:
            pass
        try:
            return list(self.db["events"].search(text, columns=columns, limit=limit, quote=True))
        except sqlite3.OperationalError:  # no word in it at all (a lone quote): nothing matches
            return []

    def close(self) -> None:
        self.db.close()

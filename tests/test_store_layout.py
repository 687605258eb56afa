"""Two stores in one folder share no side file; ``runs.db`` and stores made before the layout keep
the names they had."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.conftest import MINIMAL_SPEC, sleuth_in_process
from transcripts.store import Store, layout, servers_beside


def test_runs_db_keeps_its_names_and_any_other_store_gets_its_own(tmp_path):
    shared = layout(tmp_path / "runs.db")
    assert (shared.checkpoints, shared.runs, shared.servers, shared.serve) == (
        tmp_path / "checkpoints.db",
        tmp_path / "runs",
        tmp_path / "servers",
        tmp_path / "serve",
    )
    a, b = layout(tmp_path / "a.db"), layout(tmp_path / "b.db")
    assert a.checkpoints == tmp_path / "a.checkpoints.db" and a.runs == tmp_path / "a.runs"
    assert a.servers == tmp_path / "a.servers" and a.serve == tmp_path / "a.serve"
    assert not set(a[1:]) & set(b[1:]) and not set(a[1:]) & set(shared[1:])
    assert servers_beside(a.runs) == a.servers and servers_beside(shared.runs) == shared.servers


def test_a_store_made_before_the_layout_keeps_the_shared_names(tmp_path):
    old = tmp_path / "old.db"
    s = Store(old)
    s.start_run("r1", status="concluded")
    s.close()
    (tmp_path / "runs" / "r1").mkdir(parents=True)  # where the old layout put its run
    sqlite3.connect(tmp_path / "checkpoints.db").close()
    assert layout(old).runs == tmp_path / "runs" and layout(old).checkpoints == tmp_path / "checkpoints.db"
    fresh = tmp_path / "fresh.db"
    Store(fresh).close()  # a new store beside it, even once its file exists, gets its own names
    assert layout(fresh).runs == tmp_path / "fresh.runs"


def test_a_relative_store_path_is_where_the_user_stood_whatever_directory_a_server_runs_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rel = layout(Path("r.db"))
    assert rel == layout(tmp_path / "r.db") and all(p.is_absolute() for p in rel)


def test_two_hunts_with_two_stores_in_one_folder_share_no_side_file(tmp_path, write_spec, monkeypatch):
    from evals.lab.builder import build
    from evals.lab.spec import load_spec

    res = build(load_spec(write_spec(MINIMAL_SPEC)), tmp_path / "scenario")
    store = tmp_path / "stores"
    store.mkdir()
    monkeypatch.chdir(store)  # "b" is named relative to here: its servers' logs must still be found
    ids = {}
    for name, db in (("a", store / "a.db"), ("b", Path("b.db"))):  # a one-probe budget: every side file written
        proc = sleuth_in_process("hunt", "--alert", res.root / "alert.json", "--db", db, "--json", "--max-probes", "1")
        verdict = json.loads(proc.stdout)
        ids[name] = verdict["run_id"]
        assert verdict["cost"]["samples"] > 0, verdict  # HEAD launched and served
    listing = sorted(p.name for p in store.iterdir())
    assert "checkpoints.db" not in listing and "runs" not in listing and "servers" not in listing
    for name in ("a", "b"):
        assert (store / f"{name}.checkpoints.db").is_file()
        assert [p.name for p in (store / f"{name}.runs").iterdir()] == [ids[name]]
        assert (store / f"{name}.runs" / ids[name] / "report.md").is_file()
        shown = sleuth_in_process("show", ids[name], "--db", store / f"{name}.db", "--json")
        assert shown.returncode == 0 and json.loads(shown.stdout)["run"]["id"] == ids[name]

"""The Ray backend (optional extra `perf-sleuth[ray]`): a local Ray head on 127.0.0.1 with the
dashboard off runs a small suite, one Ray task per scenario run; the driver alone writes the store;
the results are the local backend's in kind; an interrupted set resumes without re-running what
finished. Marked `ray` (left out of the default run, which does not install Ray; `.ci/run` runs
these after installing the extra)."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from evals.backends import LocalBackend, RayBackend
from evals.runner import run_set, set_rows
from tests.test_eval import LOUD, TINY
from tools.bisect import BisectConfig, bisect
from tools.git import open_repo
from tools.measure import Workload
from tools.pool import RayProbePool
from transcripts.store import Store

ray = pytest.importorskip("ray")
# One worker holds the module (its Ray head is made once): .ci/run runs these beside the slow step.
pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def ray_head():
    # one machine standing in for a cluster: it offers the lab resource and two "nodes" for pinned probes
    backend = RayBackend(resource="sleuth-lab", local_cpus=2, local_resources={"host:node-a": 1, "host:node-b": 1})
    backend._init()
    assert ray.is_initialized()
    yield backend
    backend.shutdown()


def test_a_suite_through_ray_matches_the_local_backend_in_kind(ray_head, tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "tiny.toml").write_text(textwrap.dedent(LOUD))  # what is tested is the backend
    specs = [suite / "tiny.toml"]
    store = Store(tmp_path / "runs.db")
    try:
        ray_set, ray_rows = run_set(specs, store, backend=ray_head)
        local_set, local_rows = run_set(specs, store, backend=LocalBackend(1))
        sets = {s["id"]: s for s in store.db["eval_sets"].rows}
        assert sets[ray_set]["backend"] == "ray" and sets[local_set]["backend"] == "local"
        for rows in (ray_rows, local_rows):
            score = json.loads(rows[0]["score"])
            assert rows[0]["error"] is None and score["exact"] and score["repo_intact"]
            assert score["approval_before_mutation"]
        # the same kind of result: the same verdict shape, a replayable run stored by the driver
        v_ray, v_local = json.loads(ray_rows[0]["verdict"]), json.loads(local_rows[0]["verdict"])
        assert v_ray.keys() == v_local.keys() and v_ray["root_cause"]["ref"] == v_local["root_cause"]["ref"]
        assert store.run(ray_rows[0]["run_id"])["input"] and store.events(ray_rows[0]["run_id"])
    finally:
        store.close()


def test_an_interrupted_ray_set_resumes_without_rerunning_finished_scenarios(ray_head, tmp_path):
    (tmp_path / "tiny.toml").write_text(textwrap.dedent(TINY))
    (tmp_path / "other.toml").write_text(textwrap.dedent(TINY).replace('name = "tiny"', 'name = "other"'))
    specs = [tmp_path / "tiny.toml", tmp_path / "other.toml"]
    store = Store(tmp_path / "runs.db")
    try:
        first, _ = run_set(specs[:1], store, backend=ray_head)  # "interrupted" after one of two
        store.db["eval_sets"].update(first, {"specs": json.dumps([str(s) for s in specs])})
        done: list[str] = []
        _set, _rows = run_set(
            specs, store, backend=ray_head, set_id=first, on_done=lambda got, sc: done.append(got["scenario"])
        )
        assert done == ["other"]  # only what was missing ran
        assert sorted(r["scenario"] for r in set_rows(store, first)) == ["other", "tiny"]
    finally:
        store.close()


def test_k_probes_pinned_to_the_nodes_that_hold_the_hardware(ray_head, tiny, tmp_path):
    """A 2-way bisection whose probes are Ray tasks pinned by custom resources, each node measuring
    in its own clone: the same culprit as on one host, and both nodes measured."""
    repo, good = tiny
    for name in ("a", "b"):
        subprocess.run(["git", "clone", "-q", str(repo), str(tmp_path / name)], check=True)
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    head = git("rev-parse", "HEAD")
    parents = open_repo(str(repo)).rev_list(good, head)
    pool = RayProbePool({"host:node-a": str(tmp_path / "a"), "host:node-b": str(tmp_path / "b")},
                        workdir=str(tmp_path / "ray"))  # fmt: skip
    probe = pool.probe_fn("", Workload(command="python3 bench.py", metric="value"))
    res = bisect(parents, good, head, probe, BisectConfig(k=2, higher_is_better=False))
    assert [c.sha for c in res.culprits] == [git("log", "--format=%H", "--grep", "change 2")]
    assert pool.used["host:node-a"] and pool.used["host:node-b"]
    assert not set(pool.used["host:node-a"]) & set(pool.used["host:node-b"])  # a commit stays on its node

"""A burst of alerts: every well-formed one recorded once, one hunt per fingerprint, the malformed
answered 422 and not stored, and the service answering GET /runs all along (bench/burst.py times it)."""

from __future__ import annotations

from collections import Counter

from evals.burst import make_burst, post_burst
from tests.test_serve import CONFIG, TARGET_EXTRA, TOKEN, Service
from transcripts.store import Store


def test_a_burst_of_alerts_loses_nothing_and_starts_one_hunt_per_fingerprint(tmp_path):
    burst = make_burst(120, fingerprints=4, seed=11)
    kinds = Counter(s.kind for s in burst)
    assert all(kinds[k] for k in ("firing", "resolved", "unmatched", "malformed"))  # the mix is there
    with Service(tmp_path, CONFIG.format(token=TOKEN, repo=tmp_path / "repo") + TARGET_EXTRA) as service:
        got = post_burst(service.url, TOKEN, burst, threads=12)
        store = Store(service.db)
        alerts = list(store.db["serve_alerts"].rows)
        jobs = list(store.db["serve_jobs"].rows) if "serve_jobs" in store.db.table_names() else []
        store.close()
    assert len(got.alerts) == len(burst)
    for sent, status, body, _t in got.alerts:
        if sent.kind == "malformed":
            assert status == 422, (sent.payload, body)
            continue
        assert status == 200, (sent.payload, body)
        action = body["alerts"][0]["action"]
        expected = {"firing": {"queued", "joined"}, "resolved": {"recorded"}, "unmatched": {"unmatched"}}
        assert action in expected[sent.kind], (sent.kind, action)
    # every well-formed alert recorded exactly once, nothing from the malformed ones
    assert len(alerts) == len(burst) - kinds["malformed"]
    assert Counter(a["status"] for a in alerts) == Counter(
        {"firing": kinds["firing"] + kinds["unmatched"], "resolved": kinds["resolved"]}
    )
    # one hunt per firing fingerprint of the matched target, whatever the order of arrival
    firing = {s.fingerprint for s in burst if s.kind == "firing"}
    hunts = [j for j in jobs if j["kind"] == "hunt"]
    assert sorted(j["fingerprint"] for j in hunts) == sorted(firing)
    queued = [b["alerts"][0] for s, _st, b, _t in got.alerts if s.kind == "firing"]
    assert sum(a["action"] == "queued" for a in queued) == len(firing)
    by_fp = {j["fingerprint"]: j["run_id"] for j in hunts}
    assert all(a["run_id"] == by_fp[a["fingerprint"]] for a in queued)  # the joined ones name that hunt
    # the service kept answering reads all along
    assert got.reads and all(status == 200 for status, _t in got.reads)


def test_two_clicks_on_approve_at_once_queue_one_approval(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    with Service(tmp_path, CONFIG.format(token=TOKEN, repo=tmp_path / "repo") + TARGET_EXTRA) as service:
        s = Store(service.db)
        s.start_run("waiting", status="awaiting_approval")
        s.close()

        def click(_i: int) -> httpx.Response:
            return httpx.post(
                f"{service.url}/runs/waiting/approve",
                json={"reason": "ok"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(click, range(8)))
        store = Store(service.db)
        jobs = [j for j in store.db["serve_jobs"].rows if j["run_id"] == "waiting"]
        store.close()
    assert [r.status_code for r in answers] == [202] * 8
    assert len(jobs) == 1 and jobs[0]["kind"] == "approve"
    assert {r.json()["job"]["id"] for r in answers} == {jobs[0]["id"]}  # every click told of the one job

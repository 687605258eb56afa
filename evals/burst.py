"""A burst of alerts against a running ``sleuth serve``: what an Alertmanager storm looks like.

``make_burst`` builds N webhook payloads, shuffled with a seed: firing alerts repeating a few
fingerprints (one hunt each is right), resolved ones, alerts for labels no target matches, and
malformed payloads (a 422 each, nothing stored). ``post_burst`` posts them from a pool of threads
while another thread keeps asking ``GET /runs``, and returns every answer with its time. The test
(``tests/test_serve_burst.py``) checks that nothing is lost or duplicated; ``bench/burst.py``
reports the rates and answer times.
"""

from __future__ import annotations

import copy
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

BASE = {
    "version": "4",
    "groupKey": '{}:{alertname="ThroughputRegression"}',
    "status": "firing",
    "receiver": "perf-sleuth",
    "commonLabels": {"alertname": "ThroughputRegression", "service": "minisglang"},
    "commonAnnotations": {"summary": "throughput 89 -> 70 tok/s", "good_value": "89"},
}


@dataclass
class Sent:
    kind: str  # firing, resolved, unmatched, malformed
    fingerprint: str | None
    payload: dict


@dataclass
class Answers:
    alerts: list[tuple[Sent, int, dict | None, float]] = field(default_factory=list)  # sent, status, body, seconds
    reads: list[tuple[int, float]] = field(default_factory=list)  # GET /runs: status, seconds
    wall_s: float = 0.0


def _alert(status: str, fingerprint: str, labels: dict | None = None) -> dict:
    return {
        "status": status,
        "labels": {"host": "gpu-node-1", **(labels or {})},
        "annotations": {},
        "startsAt": "2026-12-02T09:00:00Z",
        "fingerprint": fingerprint,
    }


def make_burst(n: int = 200, fingerprints: int = 5, seed: int = 7) -> list[Sent]:
    rng = random.Random(seed)
    fps = [f"{rng.getrandbits(64):016x}" for _ in range(fingerprints)]
    out: list[Sent] = []
    for i in range(n):
        roll = rng.random()
        fp = rng.choice(fps)
        if roll < 0.6:
            p = {**BASE, "alerts": [_alert("firing", fp)]}
            out.append(Sent("firing", fp, p))
        elif roll < 0.75:
            p = {**BASE, "status": "resolved", "alerts": [_alert("resolved", fp)]}
            out.append(Sent("resolved", fp, p))
        elif roll < 0.85:
            other = f"{rng.getrandbits(64):016x}"
            p = {**BASE, "commonLabels": {"alertname": "DiskFull"}, "alerts": [_alert("firing", other)]}
            out.append(Sent("unmatched", other, p))
        else:
            p = copy.deepcopy({**BASE, "alerts": [_alert("firing", fp)]})
            broken = i % 3
            if broken == 0:
                p["alerts"][0]["status"] = "pending"
            elif broken == 1:
                p.pop("version")
            else:
                p["alerts"][0]["labels"] = "not-a-dict"
            out.append(Sent("malformed", None, p))
    return out


def post_burst(url: str, token: str, burst: list[Sent], threads: int = 16) -> Answers:
    """Post every payload (``threads`` at a time) while ``GET /runs`` is asked without pause."""
    answers, done = Answers(), threading.Event()
    headers = {"Authorization": f"Bearer {token}"}

    def read() -> None:
        with httpx.Client(timeout=30) as c:
            while not done.is_set():
                t0 = time.perf_counter()
                r = c.get(f"{url}/runs")
                answers.reads.append((r.status_code, time.perf_counter() - t0))

    def post(sent: Sent) -> None:
        with httpx.Client(timeout=30) as c:
            t0 = time.perf_counter()
            r = c.post(f"{url}/alerts/alertmanager", json=sent.payload, headers=headers)
            took = time.perf_counter() - t0
            body = r.json() if r.headers.get("content-type", "").startswith("application/json") else None
            answers.alerts.append((sent, r.status_code, body, took))

    reader = threading.Thread(target=read)
    reader.start()
    t0 = time.perf_counter()
    try:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(post, burst))
    finally:
        answers.wall_s = time.perf_counter() - t0
        done.set()
        reader.join()
    return answers


def p99(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(0.99 * (len(s) - 1)))] if s else 0.0

"""A burst of alerts against the service: how fast they are taken, and whether reads stay fast.

    .venv/bin/python bench/burst.py [--alerts 200] [--threads 16]

Starts the service's app on uvicorn on 127.0.0.1 (its queue not started: the hunts stay queued,
so what is measured is intake, not hunting), measures ``GET /runs`` idle, then posts the burst
(``evals.burst``: firing repeats of five fingerprints, resolved, unmatched and malformed alerts)
from a pool of threads while ``GET /runs`` is asked without pause, and prints alerts/s accepted,
answer times, reads during the burst against idle, and the correctness counts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evals.burst import make_burst, p99, post_burst
from tests.test_serve import CONFIG, TARGET_EXTRA, TOKEN, Service
from transcripts.store import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alerts", type=int, default=200)
    ap.add_argument("--threads", type=int, default=16)
    args = ap.parse_args()
    burst = make_burst(args.alerts, fingerprints=5, seed=7)
    tmp = Path(tempfile.mkdtemp(prefix="sleuth-burst-"))
    with Service(tmp, CONFIG.format(token=TOKEN, repo=tmp / "repo") + TARGET_EXTRA) as service:
        idle = []
        with httpx.Client() as c:
            for _ in range(50):
                t0 = time.perf_counter()
                c.get(f"{service.url}/runs")
                idle.append(time.perf_counter() - t0)
        got = post_burst(service.url, TOKEN, burst, threads=args.threads)
        store = Store(service.db)
        stored = store.db["serve_alerts"].count
        hunts = Counter(j["fingerprint"] for j in store.db["serve_jobs"].rows if j["kind"] == "hunt")
        store.close()
    kinds = Counter(s.kind for s in burst)
    times = [t for _s, _st, _b, t in got.alerts]
    reads = [t for _st, t in got.reads]
    statuses = Counter(st for _s, st, _b, _t in got.alerts)
    print(f"burst: {len(burst)} alerts ({dict(kinds)}), {args.threads} threads, {got.wall_s:.2f} s")
    print(f"accepted: {len(burst) / got.wall_s:.0f} alerts/s; answers {dict(statuses)}")
    print(
        f"alert answer: median {statistics.median(times) * 1000:.1f} ms, p99 {p99(times) * 1000:.1f} ms, "
        f"max {max(times) * 1000:.1f} ms"
    )
    print(
        f"GET /runs: idle median {statistics.median(idle) * 1000:.1f} ms; during the burst {len(reads)} reads, "
        f"median {statistics.median(reads) * 1000:.1f} ms, p99 {p99(reads) * 1000:.1f} ms, "
        f"max {max(reads) * 1000:.1f} ms "
        f"(p99 / idle median = {p99(reads) / statistics.median(idle):.1f}x)"
    )
    firing = {s.fingerprint for s in burst if s.kind == "firing"}
    print(
        f"stored {stored} of {len(burst) - kinds['malformed']} well-formed alerts; "
        f"hunts {sum(hunts.values())} for {len(firing)} firing fingerprints (max per fingerprint {max(hunts.values())})"
    )


if __name__ == "__main__":
    main()

"""The lab's emulated device keeps simulated time, not the host's scheduling luck.

Each case runs a lab host's real ``minitorch`` (as a scenario installs it) in its own interpreter
with a fake clock in place of ``time``: sleeping advances it by the delay plus an oversleep, so
what a loaded host does to a sleeping thread is exact and the same every run, with no wall time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from evals.lab.builder import build
from evals.lab.spec import load_spec
from tests.conftest import MINIMAL_SPEC

BATCH_S = 0.020  # one batch of device work, in (fake) wall seconds
N = 10

DRIVER = textwrap.dedent(
    """
    import json, sys
    import minitorch

    class Clock:
        def __init__(self, oversleep):
            self.t, self.oversleep = 100.0, oversleep
        def perf_counter(self):
            return self.t
        monotonic = perf_counter
        def sleep(self, delay):
            self.t += delay + self.oversleep

    oversleep, walk, gap, batch_s, n = (float(x) for x in sys.argv[1:])
    clock = Clock(oversleep)
    minitorch.time = clock
    d = minitorch.cuda.device()
    d.noise_cv, d.launch_factor = 0.0, 1.0
    kernel = next(k for k in d.kernels if k != "launch_overhead")
    spec = d.kernels[kernel]
    unit_us = spec["us"] * d.class_factor[spec["class"]] * d.env_factor.get(kernel, 1.0)
    d.time_scale = batch_s / (unit_us * 1e-6)  # one launch of it: batch_s of wall time
    spans = []
    for _ in range(int(n)):
        start = clock.t
        with d.graph_replay():  # no per-launch overhead: one kernel, one batch
            d.launch(kernel)
        clock.t += walk  # the host walks the layers
        d.synchronize()
        spans.append(clock.t - start)
        clock.t += gap  # the host before its next batch
    print(json.dumps(spans))
    """
)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    root = tmp_path_factory.mktemp("clock")
    (root / "t.toml").write_text(MINIMAL_SPEC)
    return build(load_spec(root / "t.toml"), root / "s").root / "host"


def run(host, *, oversleep: float, walk: float, gap: float) -> list[float]:
    env = dict(os.environ, PATH=f"{host / 'bin'}:{os.environ['PATH']}", PYTHONPATH=str(host / "site-packages"))
    args = [str(x) for x in (oversleep, walk, gap, BATCH_S, N)]
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, *args], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(proc.stdout)


def test_a_thread_woken_late_does_not_add_its_oversleep_to_device_time(host):
    """5 ms late at every wake-up (a loaded host): back-to-back batches still take 20 ms each."""
    spans = run(host, oversleep=0.005, walk=0.0, gap=0.0001)
    # The first batch's span includes its own oversleep; later ones absorb it: the device was done
    # on time, only the thread that waited for it was late.
    assert spans[0] == pytest.approx(BATCH_S + 0.005)
    assert spans[1:] == pytest.approx([BATCH_S] * (N - 1), abs=2e-4), spans


def test_a_host_whose_walk_outlasts_the_device_still_leaves_it_idle(host):
    """The host's own CPU walk (30 ms) is longer than the device's work (20 ms): the host sets the
    pace, as on a real GPU; no device time is banked for later."""
    spans = run(host, oversleep=0.0, walk=0.030, gap=0.0001)
    assert spans == pytest.approx([0.030] * N), spans


def test_a_device_idle_between_requests_starts_afresh(host):
    """A second of waiting for a request is not device time to spend later: each batch after it
    takes its full 20 ms (plus the oversleep of its own wake-up)."""
    spans = run(host, oversleep=0.005, walk=0.0, gap=1.0)
    assert spans == pytest.approx([BATCH_S + 0.005] * N), spans

"""How often two launches in flight are handed the same port: the kernel's free port vs
``tools.ports``.

    .venv/bin/python bench/port_clash.py [--draws 4000] [--launchers 16] [--window 0.2]

``--launchers`` threads each draw a port for a "server" that, like a real one loading its
weights, binds it ``--window`` seconds later; the port is in flight until then. Two ways to draw:

- kernel: ``bind(('127.0.0.1', 0))``, read the number, close (what ``tools.server`` did);
- tools.ports: drawn below the ephemeral range, checked free, locked until the server binds.

A draw that hands out a port another launch still has in flight is a clash: one of the two
servers fails with "address already in use", or worse, the other's health poll is answered by
the wrong server. Printed: clashes per method, and the draws per second each manages.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import ports
from tools.host import LocalHost


class InFlight:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ports: dict[int, int] = {}
        self.clashes = 0

    def enter(self, port: int) -> None:
        with self.lock:
            self.clashes += self.ports.get(port, 0) > 0
            self.ports[port] = self.ports.get(port, 0) + 1

    def leave(self, port: int) -> None:
        with self.lock:
            self.ports[port] -= 1


def kernel_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launcher(method: str, draws: int, window: float, flight: InFlight) -> None:
    host = LocalHost()
    for _ in range(draws):
        if method == "kernel":
            port = kernel_port()
            flight.enter(port)
            time.sleep(window)
            flight.leave(port)
        else:
            with ports.claimed(host) as port:
                flight.enter(port)
                time.sleep(window)
                flight.leave(port)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--launchers", type=int, default=16)
    ap.add_argument("--window", type=float, default=0.2)
    args = ap.parse_args()
    clashes = {}
    for method in ("kernel", "tools.ports"):
        flight = InFlight()
        each = args.draws // args.launchers
        threads = [
            threading.Thread(target=launcher, args=(method, each, args.window, flight)) for _ in range(args.launchers)
        ]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - t0
        clashes[method] = flight.clashes
        n = each * args.launchers
        print(f"{method:12} {flight.clashes:4d} clashes in {n} draws ({n / took:.0f} draws/s)")
    k, p = clashes["kernel"], clashes["tools.ports"]
    print(f"kernel / tools.ports clashes: {k / p:.1f}x" if p else f"tools.ports: no clash (kernel: {k})")


if __name__ == "__main__":
    main()

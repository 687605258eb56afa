"""A server's port: drawn where the kernel hands out nothing on its own, never given to two
launches at once, and a port someone took anyway costs a retry, never a verdict."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from tests.conftest import git_in
from tools import ports
from tools.bench import BenchConfig
from tools.git import LocalGit
from tools.host import LocalHost
from tools.measure import HostBusy, Measurer, State, StateFailure, Workload
from tools.server import PORT_ATTEMPTS, ServerError, launch


class DrawnHost(LocalHost):
    """This machine, except that the port draw answers ``draws`` (one list per draw, in turn)."""

    def __init__(self, draws: list[list[int]]) -> None:
        self.draws = draws
        self.avoided: list[list[int]] = []

    def free_ports(self, avoid=frozenset()):  # type: ignore[override]
        self.avoided.append(sorted(avoid))
        return self.draws.pop(0)


class RemoteLikeHost(LocalHost):
    """This machine seen as another host is: no ``free_ports`` of its own, so the draw runs there
    as a ``python3 -c`` script, as it does over SSH."""

    free_ports = None  # type: ignore[assignment]


def _ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_a_drawn_port_is_below_the_ephemeral_range_and_free_on_every_address():
    for _ in range(5):
        with ports.claimed(LocalHost()) as port:
            assert 10000 <= port < _ephemeral_low()
            with socket.socket() as s:
                s.bind(("", port))  # nothing holds it


def test_another_host_draws_its_ports_with_the_same_function_run_there(monkeypatch):
    """Over SSH the draw is ``pick_free``'s own source run by the host's python3; here it runs on
    this machine the same way (a command, not a call), and skips what it is told to avoid."""
    ran: list[list[str]] = []
    host = RemoteLikeHost()
    real_run = LocalHost.run

    def run(self, cmd, cwd=None, env=None, timeout=None):
        ran.append(cmd)
        return real_run(self, cmd, cwd=cwd, env=env, timeout=timeout)

    monkeypatch.setattr(RemoteLikeHost, "run", run)
    low = _ephemeral_low()
    avoid = set(range(10000, 10000 + (low - 10000) // 2))  # half the range below it: drawn around
    drawn = ports._drawn(host, avoid)
    assert ran and ran[0][:2] == ["python3", "-c"] and "def pick_free" in ran[0][2]
    assert drawn and not set(drawn) & avoid and all(10000 <= p < low for p in drawn)


def test_a_port_another_launch_holds_is_never_handed_out_twice():
    host = DrawnHost([[23456, 23457], [23456, 23457]])
    with ports.claimed(host) as first, ports.claimed(host) as second:
        assert (first, second) == (23456, 23457)


def test_when_every_drawn_port_is_held_the_draw_says_so():
    host = DrawnHost([[23458], [23458]])
    with ports.claimed(host), pytest.raises(ports.PortError, match="another process"), ports.claimed(host):
        pass


@pytest.mark.parametrize(
    ("tail", "clash"),
    [
        ("OSError: [Errno 98] Address already in use", True),
        ("[Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use", True),
        ("NameError: name 'torch' is not defined", False),
    ],
)
def test_a_taken_port_is_told_apart_from_a_broken_server(tail, clash):
    assert ports.clashed(tail) is clash


SERVE = f"""{sys.executable} -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
print("binding", sys.argv[1], flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
' {{port}}"""


def test_a_server_whose_port_was_taken_meanwhile_is_launched_again_on_another(tmp_path):
    with socket.socket() as squatter:  # bound, never listening: a health poll is refused
        squatter.bind(("127.0.0.1", 0))
        taken = squatter.getsockname()[1]
        host = DrawnHost([[taken], [0]])
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            free = probe.getsockname()[1]
        host.draws[1] = [free]
        server = launch(SERVE, tmp_path, tmp_path / "server.log", host=host, health_timeout_s=30)
        try:
            assert server.port == free and server.alive()
            assert host.avoided == [[], [taken]]  # the second draw skips the taken port
            log = (tmp_path / "server.log").read_text()
            assert f"binding {free}" in log and "Address already in use" not in log  # a clean log
        finally:
            server.stop()


def test_a_port_taken_at_every_attempt_ends_the_launch_with_the_clash(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        taken = squatter.getsockname()[1]
        host = DrawnHost([[taken]] * PORT_ATTEMPTS)
        with pytest.raises(ServerError) as err:
            launch(SERVE, tmp_path, tmp_path / "server.log", host=host, health_timeout_s=30)
    assert err.value.clash and "Address already in use" in str(err.value)
    assert host.draws == []  # every attempt was made


def test_a_server_that_fails_for_its_own_reasons_is_not_launched_again(tmp_path):
    host = DrawnHost([[0]])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        host.draws[0] = [probe.getsockname()[1]]
    with pytest.raises(ServerError) as err:
        launch("echo 'NameError: boom' >&2; exit 1", tmp_path, tmp_path / "s.log", host=host, health_timeout_s=30)
    assert not err.value.clash and "NameError: boom" in str(err.value)


def test_a_state_whose_every_port_was_taken_is_untestable_there_never_broken(tmp_path):
    """The measurer's view: what was launched never ran, so nothing is said about it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = git_in(repo)
    git("init", "-q")
    (repo / "README").write_text("x\n")
    git("add", ".")
    git("commit", "-qm", "init")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        host = DrawnHost([[squatter.getsockname()[1]]] * PORT_ATTEMPTS)
        with Measurer(host, LocalGit(repo), tmp_path / "logs") as m, pytest.raises(HostBusy, match="port") as err:
            state = State(label="x", ref=git("rev-parse", "HEAD"), launch=SERVE)
            m.measure(state, Workload(bench=BenchConfig(endpoint="-", model="m")), 1)
    assert not isinstance(err.value, StateFailure) and not m.broken

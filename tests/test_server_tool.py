"""Servers launch on a Host from a template, answer through the SSH forward, and never outlive a failure."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from evals.lab.measure import export_worktree
from tools.bench import BenchConfig, run_bench
from tools.host import LocalHost
from tools.server import ServerError, launch


def group_gone(pid: int) -> bool:
    out = subprocess.run(["ps", "-o", "stat=", "-s", str(pid)], capture_output=True, text=True).stdout
    return all(s.startswith("Z") for s in out.split())


@pytest.fixture(scope="module")
def bad_tree(seed_scenario, tmp_path_factory):
    return export_worktree(seed_scenario.repo, tmp_path_factory.mktemp("srv") / "tree")


def test_launch_bench_and_stop_through_ssh(seed_scenario, bad_tree, ssh_host, tmp_path):
    ann = json.loads((seed_scenario.root / "alert.json").read_text())["commonAnnotations"]
    cmd = ann["launch_command"].replace("--speculative-algorithm", "--decode-log-interval 5 --speculative-algorithm")
    server = launch(cmd, bad_tree, tmp_path / "remote.log", host=ssh_host)
    try:
        assert server.local_port != server.port  # reached through the SSH forward
        cfg = BenchConfig(
            endpoint=f"{server.base_url}/v1", model="Kimi-K2.5", requests=2, max_tokens=24, time_scale=0.2
        )
        res = run_bench(cfg, server=server)
        assert res.errors == 0 and res.completion_tokens == 48
        assert res.verify_ms is not None and res.verify_ms > 20  # read from the remote log
        log = server.log()
        assert log.server_args["speculative_algorithm"] == "EAGLE3"
    finally:
        server.stop()
    assert group_gone(server.pid)
    assert not server.alive()


@pytest.mark.parametrize("where", ["local", "ssh"])
def test_a_server_that_dies_at_start_raises_with_the_log_tail(where, request, bad_tree, tmp_path):
    host = LocalHost() if where == "local" else request.getfixturevalue("ssh_host")
    marker = uuid.uuid4().hex
    cmd = f"echo starting {marker}; echo 'ValueError: unknown attention backend: cuda' >&2; exit 3"
    with pytest.raises(ServerError) as err:
        launch(cmd, bad_tree, tmp_path / "dead.log", host=host, health_timeout_s=20)
    msg = str(err.value)
    assert "exited before it became healthy" in msg and f"starting {marker}" in msg
    assert "ValueError: unknown attention backend: cuda" in msg


def test_a_server_that_never_gets_healthy_is_killed_with_its_children(bad_tree, tmp_path):
    marker = f"sleuth-hang-{uuid.uuid4().hex}"
    cmd = f"bash -c 'sleep 60; : {marker}' & sleep 60; : {marker}"
    with pytest.raises(ServerError, match="not healthy after 1 s"):
        launch(cmd, bad_tree, tmp_path / "hang.log", health_timeout_s=1)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left == ""


class _LostHost(LocalHost):
    """This machine, while ``down``: every command fails as a dropped SSH link does."""

    down = True

    def run(self, *args, **kwargs):
        from tools.host import HostError

        if self.down:
            raise HostError("ssh root@127.0.0.1:22822: cannot connect (Connection refused)")
        return super().run(*args, **kwargs)


def test_a_server_the_host_could_not_be_asked_to_stop_stays_registered_and_the_next_start_stops_it(tmp_path):
    """A dropped link: the hunt's stop could not reach the node, and its registration was removed
    all the same, so nothing ever stopped that server; the resumed hunt's launch made two on a
    one-slot node (trial 8, a real mlx-lm server over SSH)."""
    from tools.server import Server, reap

    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    registry = tmp_path / "servers"
    registry.mkdir()
    entry = registry / f"{proc.pid}.json"
    dead_owner = subprocess.Popen(["true"])  # the hunt that launched it, gone
    dead_owner.wait()
    entry.write_text(json.dumps({"pid": proc.pid, "owner": dead_owner.pid, "host": "localhost"}))
    host = _LostHost()
    try:
        Server(command="", host=host, port=0, local_port=0, log_path="", pid=proc.pid, pid_file=entry).stop(0.5)
        assert entry.exists() and proc.poll() is None  # not stopped, and still known to be there
        host.down = False  # the link is back: the next start on that host
        assert reap(registry, host) == [proc.pid]
        proc.wait(timeout=30)
        assert not entry.exists() and group_gone(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_server_still_registered_to_this_process_is_stopped_when_its_measurer_closes(tmp_path):
    """A service killed mid-hunt (its hunt told by the kernel to stop) left the hunt's server
    running, holding every GPU of the node until the next service started: the hunt's bookkeeping
    had lost it, its registration had not. Closing the measurer stops what this process still has
    registered; a server another live process owns is left alone."""
    import os

    from tools.git import CliGit
    from tools.measure import Measurer
    from tools.server import reap

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    registry = tmp_path / "servers"
    registry.mkdir()
    mine, theirs = (subprocess.Popen(["sleep", "300"], start_new_session=True) for _ in range(2))
    other_owner = subprocess.Popen(["sleep", "300"])  # another hunt, alive
    try:
        for proc, owner in ((mine, os.getpid()), (theirs, other_owner.pid)):
            (registry / f"{proc.pid}.json").write_text(
                json.dumps({"pid": proc.pid, "owner": owner, "host": "localhost"})
            )
        assert reap(registry, LocalHost()) == []  # at a start: both owners alive, both in use
        Measurer(LocalHost(), CliGit(repo), tmp_path / "logs", pid_dir=registry).close()
        mine.wait(timeout=30)
        assert group_gone(mine.pid) and not (registry / f"{mine.pid}.json").exists()
        assert theirs.poll() is None and (registry / f"{theirs.pid}.json").exists()
    finally:
        for proc in (mine, theirs, other_owner):
            if proc.poll() is None:
                proc.kill()

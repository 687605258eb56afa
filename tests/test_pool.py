"""Probe pools: a k-way bisection measuring its k probes on k hosts at once - here this machine
and a real sshd on 127.0.0.1, each in its own clone - finds the same culprit as one host, and a
commit's samples all come from the one host that first measured it."""

from __future__ import annotations

import json
import subprocess
import threading
import time

from tests.conftest import sleuth_in_process
from tools.pool import _Sticky


def clone(src, dst) -> None:
    subprocess.run(["git", "clone", "-q", str(src), str(dst)], check=True)


def test_a_k_way_bisection_over_a_pool_of_a_local_and_an_ssh_host(tiny, sshd, tmp_path):
    repo, good = tiny
    clone(repo, tmp_path / "clone-local")
    clone(repo, tmp_path / "clone-remote")
    (tmp_path / "ssh_config").write_text(
        f"Host pool-node\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n  IdentityFile {sshd.client_key}\n"
    )
    (tmp_path / "pool.toml").write_text(
        f"""
[[hosts]]
name = "here"
repo = "{tmp_path / "clone-local"}"

[[hosts]]
name = "node"
host = "pool-node"
repo = "{tmp_path / "clone-remote"}"
ssh_config = "{tmp_path / "ssh_config"}"
known_hosts = "{sshd.known_hosts}"
"""
    )
    proc = sleuth_in_process(
        "bisect", "--repo", repo, "--good", good, "--bench", "python3 bench.py", "--lower-is-better",
        "--pool", tmp_path / "pool.toml", "--workdir", tmp_path / "work", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads(proc.stdout)
    change2 = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%H", "--grep", "change 2"], capture_output=True, text=True
    ).stdout.strip()
    assert [c["sha"] for c in res["culprits"]] == [change2]
    assert res["pool"]["here"] >= 1 and res["pool"]["node"] >= 1  # both hosts measured commits
    # the user's repo was only read; the clones' checkouts too (probes run in scratch worktrees)
    status = subprocess.run(["git", "-C", str(tmp_path / "clone-remote"), "status", "--porcelain"], capture_output=True)
    assert status.stdout == b""


def test_a_commit_is_measured_on_the_host_that_took_it_first():
    sticky = _Sticky(["a", "b"])
    assert sticky.acquire("c1") == "a" and sticky.acquire("c2") == "b"
    got: list[str] = []
    waiter = threading.Thread(target=lambda: got.append(sticky.acquire("c1")))
    waiter.start()
    sticky.release("b")  # b is free, but c1 belongs to a: it waits for a
    time.sleep(0.1)
    assert got == []
    sticky.release("a")
    waiter.join(timeout=5)
    assert got == ["a"]


def test_a_bad_pool_file_names_the_field(tiny, tmp_path):
    repo, good = tiny
    (tmp_path / "pool.toml").write_text("[[hosts]]\nname = 'x'\n")
    proc = sleuth_in_process(
        "bisect",
        "--repo",
        repo,
        "--good",
        good,
        "--bench",
        "true",
        "--lower-is-better",
        "--pool",
        tmp_path / "pool.toml",
    )
    assert proc.returncode == 2
    assert "--pool: " in proc.stderr and "pool.toml: hosts.0.repo: Field required" in proc.stderr


def test_a_pool_host_that_stops_answering_leaves_the_bisection_to_the_others(tmp_path):
    """A k-way bisection whose SSH host goes away after the first round: the commits that host
    had measured are skipped (their samples cannot be topped up elsewhere), the ones it was given
    next go to the host still answering, and the culprit is found there. It ended the bisection
    ('failed: the host stopped answering')."""
    from tests.conftest import one_slow_commit, sleuth_exe
    from tests.sshd import Sshd, require_sshd

    require_sshd()
    repo, good, slow = one_slow_commit(tmp_path / "proj", 16, 11)
    clone(repo, tmp_path / "clone-local")
    clone(repo, tmp_path / "clone-remote")
    (tmp_path / "sshd").mkdir()
    server = Sshd(tmp_path / "sshd").start()
    (tmp_path / "ssh_config").write_text(
        f"Host pool-node\n  HostName 127.0.0.1\n  Port {server.port}\n  User root\n  IdentityFile {server.client_key}\n"
    )
    (tmp_path / "pool.toml").write_text(
        f'[[hosts]]\nname = "here"\nrepo = "{tmp_path / "clone-local"}"\n\n'
        f'[[hosts]]\nname = "node"\nhost = "pool-node"\nrepo = "{tmp_path / "clone-remote"}"\n'
        f'ssh_config = "{tmp_path / "ssh_config"}"\nknown_hosts = "{server.known_hosts}"\n'
    )
    proc = subprocess.Popen(
        [sleuth_exe(), "bisect", "--repo", str(repo), "--good", good, "--bench", "python3 bench.py",
         "--lower-is-better", "--pool", str(tmp_path / "pool.toml"), "--workdir", str(tmp_path / "work"), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the first round's probes are printed once both are measured
            if line.lstrip().startswith("probe "):
                break
        server.drop()
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    res = json.loads(out)
    assert [c["sha"] for c in res["culprits"]] == [slow]
    assert list(res["pool_lost"]) == ["node"] and res["pool"]["node"] >= 1
    assert "Traceback" not in err, err[-3000:]

"""The dependency hypothesis: packages that changed on the host under the server are found (from
pip's log, or from a snapshot an earlier good hunt stored), tried at their old versions in a
scratch overlay (the host's site-packages never written), localized by halving and proposed as a
pin a person runs."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from evals.lab.builder import build
from evals.lab.spec import load_spec
from tests.conftest import sleuth_in_process
from tools.packages import diff, from_pip_log, overlay_dir, pip_log_changes, wheel_name, with_pythonpath
from transcripts.store import Store, layout

PIP_LOG = """\
2026-03-01T02:14:07 pip install -U torch flashinfer-python
2026-03-01T02:14:09     Found existing installation: torch 2.8.0
2026-03-01T02:14:09     Found existing installation: flashinfer_python 0.6.14
2026-03-01T02:14:10 Successfully installed flashinfer-python-0.6.15 torch-2.9.0
2026-03-02T08:00:00 pip install -U flashinfer-python
2026-03-02T08:00:01     Found existing installation: flashinfer-python 0.6.15
2026-03-02T08:00:02 Successfully installed flashinfer-python-0.6.16
"""


def test_pips_log_gives_each_package_its_first_old_and_last_new_version():
    assert pip_log_changes(PIP_LOG) == {"flashinfer-python": ("0.6.14", "0.6.16"), "torch": ("2.8.0", "2.9.0")}


def test_a_log_of_trials_that_ends_where_it_began_gives_its_last_change():
    """A trial's log: 3.20.1 installed, back to 3.19.3, then 3.20.1 again (the regression). The
    first old and last new version are one (3.20.1 -> 3.20.1), and the change was dropped."""
    log = (
        "2026-12-07T21:50:00 Successfully installed simplejson-3.20.1\n"
        "2026-12-07T22:00:00     Found existing installation: simplejson 3.20.1\n"
        "2026-12-07T22:00:01 Successfully installed simplejson-3.19.3\n"
        "2026-12-07T22:16:00     Found existing installation: simplejson 3.19.3\n"
        "2026-12-07T22:16:01 Successfully installed simplejson-3.20.1\n"
    )
    assert pip_log_changes(log) == {"simplejson": ("3.19.3", "3.20.1")}
    assert [c.describe() for c in from_pip_log(log, {"simplejson": "3.20.1"})] == ["simplejson 3.19.3 -> 3.20.1"]


def test_a_logged_change_counts_only_while_the_logged_version_is_installed():
    now = {"torch": "2.9.0", "flashinfer_python": "0.6.15"}  # flashinfer was put back by hand since
    assert [(c.name, c.old, c.new) for c in from_pip_log(PIP_LOG, now)] == [("torch", "2.8.0", "2.9.0")]


def test_a_snapshot_diff_names_upgrades_downgrades_additions_and_removals():
    got = diff(
        {"torch": "2.9.0", "Triton": "3.1", "nccl": "2.21"}, {"torch": "2.8.0", "triton": "3.1", "xformers": "0.1"}, "s"
    )
    assert [c.describe() for c in got] == ["nccl 2.21 was removed", "torch 2.9.0 -> 2.8.0", "xformers 0.1 was added"]


def test_an_overlay_goes_first_on_the_path_after_the_launch_setup():
    launch = ". /host/env.sh && exec {worktree}/launch.sh --port {port}"
    export = "export PYTHONPATH=/tmp/o${PYTHONPATH:+:$PYTHONPATH}"
    assert (
        with_pythonpath(launch, "/tmp/o")
        == f". /host/env.sh && {export} && exec {{worktree}}/launch.sh --port {{port}}"
    )
    assert overlay_dir("r1", ["a==1", "b==2"]) == overlay_dir("r1", ["b==2", "a==1"])  # a resumed hunt hits its cache
    assert wheel_name("flashinfer-python", "0.6.14") == "flashinfer_python-0.6.14-"


def test_the_store_keeps_snapshots_and_finds_the_newest_good_one_of_a_host(tmp_path):
    store = Store(tmp_path / "r.db")
    for run, good in (("a", True), ("b", True), ("c", False)):
        store.start_run(run)
        store.put_packages(run, "/repo", "gpu-1", {"torch": run}, good=good)
    store.start_run("d")
    store.put_packages("d", "/repo", "gpu-2", {"torch": "d"}, good=True)
    assert store.good_packages("/repo", "gpu-1", exclude_run="z")["dists"] == {"torch": "b"}
    store.mark_packages_good("c")
    assert store.good_packages("/repo", "gpu-1", exclude_run="z")["run"] == "c"
    assert store.good_packages("/repo", "gpu-1", exclude_run="c")["run"] == "b"  # never its own snapshot
    assert store.good_packages("/other", "gpu-1", exclude_run="z") is None


def tree_digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode() + p.read_bytes())
    return h.hexdigest()


SEVERAL = Path(__file__).resolve().parents[1] / "evals" / "suites" / "core" / "deps_several.toml"


@pytest.fixture
def several(tmp_path: Path, write_spec):
    """Three packages changed on the host (runtime harmless, kernel package slower, a helper no one
    imports); no history hypothesis, to keep it short: the reflog has no pull and no good ref."""
    text = SEVERAL.read_text().replace("give_good_ref = true", "give_good_ref = false")
    # The kernel package's step twice the core scenario's (1.3x its MoE GEMMs): the subject is the
    # overlay and the halving, and on a slow machine the 1.3x step's halves stayed undecided.
    text = text.replace("scale = 1.3", "scale = 2.0")
    return build(load_spec(write_spec(text)), tmp_path / "lab")


def test_several_changed_packages_are_tried_old_in_an_overlay_and_halved_to_the_one_that_matters(several, tmp_path):
    site = several.host / "site-packages"
    before = tree_digest(site)
    db = tmp_path / "r.db"
    proc = sleuth_in_process("hunt", "--alert", several.root / "alert.json", "--db", db, "--json")
    assert proc.returncode == 0, proc.stdout[-3000:]
    v = json.loads(proc.stdout)
    assert v["root_cause"]["kind"] == "dependency" and v["root_cause"]["ref"] == "minikernels"
    assert "minikernels 0.6.15 -> 0.6.16" in v["root_cause"]["summary"] and "pip's log" in v["root_cause"]["summary"]
    deps = {h["statement"].split()[0]: h for h in v["hypotheses"] if h["category"] == "dependencies"}
    assert set(deps) == {"minikernels", "minitorch", "tqdmish"}
    assert deps["minikernels"]["status"] == "supported"
    assert deps["minitorch"]["status"] == deps["tqdmish"]["status"] == "refuted"
    assert "localization" in deps["tqdmish"]["reason"]
    assert v["proposed_action"]["kind"] == "pin" and v["proposed_action"]["ref"] == "minikernels==0.6.15"
    assert "`pip install minikernels==0.6.15`" in v["proposed_action"]["detail"]
    assert v["status"] == "awaiting_approval"
    # Nothing was installed: the host's site-packages are as they were, the overlays are gone.
    assert tree_digest(site) == before
    assert not [p for p in Path("/tmp").glob(f"sleuth-overlay-{v['run_id']}-*")]
    # Approved, it is a person's command to run: still nothing installed.
    proc = sleuth_in_process("approve", v["run_id"], "--db", db, "--json")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert json.loads(proc.stdout)["proposed_action"]["status"] == "approved"
    assert tree_digest(site) == before


def test_without_a_wheelhouse_or_an_index_that_has_them_the_packages_are_named_but_left_untested(several, tmp_path):
    alert = json.loads((several.root / "alert.json").read_text())
    del alert["alerts"][0]["annotations"]["wheelhouse"]
    path = tmp_path / "alert.json"
    path.write_text(json.dumps(alert))
    for wheel in (several.host / "wheelhouse").glob("*.whl"):  # the host's own index (pip) lost them too
        wheel.unlink()
    proc = sleuth_in_process("hunt", "--alert", path, "--db", tmp_path / "r.db", "--json")
    v = json.loads(proc.stdout)
    deps = [h for h in v["hypotheses"] if h["category"] == "dependencies"]
    assert deps and all(h["status"] == "inconclusive" for h in deps)
    assert all("(no --wheelhouse) and pip download failed" in h["reason"] for h in deps), deps[0]["reason"]
    assert v["status"] == "inconclusive" and v["root_cause"] is None
    report = (layout(tmp_path / "r.db").runs / v["run_id"] / "report.md").read_text()
    assert "packages changed since pip's log" in report and "minikernels 0.6.15 -> 0.6.16" in report
    assert "(untested: the old versions cannot be tried: no wheel of" in report


NO_LOG = Path(__file__).resolve().parents[1] / "evals" / "suites" / "core" / "deps_no_log.toml"


def test_with_no_pip_log_and_no_wheelhouse_dist_info_times_name_it_and_pip_fetches_the_release_before(
    tmp_path, write_spec
):
    """A host that kept nothing: the dist-info times say what was installed after the known-good
    commit was left, and pip (the host's own index: the lab's is a local directory) fetches the
    release before each into scratch space for the A/B. Nothing is installed."""
    helper = '[[dependency]]\nid = "helper"\nname = "tqdmish"\ngood = "4.66.0"\nbad = "4.67.1"\n\n'
    assert helper in NO_LOG.read_text()
    text = NO_LOG.read_text().replace(helper, "")  # only the kernel package, to keep it short
    text = text.replace("scale = 1.3", "scale = 2.0")  # louder, as ``several``: the subject is the fetch
    lab = build(load_spec(write_spec(text)), tmp_path / "lab")
    site = lab.host / "site-packages"
    before = tree_digest(site)
    proc = sleuth_in_process("hunt", "--alert", lab.root / "alert.json", "--db", tmp_path / "r.db", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:]
    v = json.loads(proc.stdout)
    assert v["root_cause"]["kind"] == "dependency" and v["root_cause"]["ref"] == "minikernels"
    summary = v["root_cause"]["summary"]
    assert "minikernels 0.6.16 installed 2027-06-30 02:00 UTC" in summary and "the dist-info times" in summary
    # The release before, as the index has it, is what the A/B tried and what the pin names.
    assert v["proposed_action"]["ref"] == "minikernels==0.6.15"
    assert "`pip install minikernels==0.6.15`" in v["proposed_action"]["detail"]
    assert tree_digest(site) == before
    assert not [p for p in Path("/tmp").glob(f"sleuth-overlay-{v['run_id']}-*")]


def test_an_earlier_good_hunts_snapshot_is_the_reference_when_there_is_no_pip_log(several, tmp_path):
    """Hunt 1 runs before the upgrade (the old wheels installed) and measures good: its snapshot is
    stored. The packages change; hunt 2, without a pip log, diffs against that snapshot."""
    site = several.host / "site-packages"
    saved = tmp_path / "saved-site"
    os.rename(site, saved)
    import zipfile

    for wheel in (several.host / "wheelhouse").glob("*.whl"):
        zipfile.ZipFile(wheel).extractall(site)
    alert = json.loads((several.root / "alert.json").read_text())
    ann = alert["alerts"][0]["annotations"]
    del ann["pip_log"]
    path, before = tmp_path / "alert.json", tmp_path / "before.json"
    path.write_text(json.dumps(alert))
    ann["good_value"] = "1"  # a routine check before the upgrade: now is far above it, on any load
    before.write_text(json.dumps(alert))
    db = tmp_path / "r.db"
    first = json.loads(sleuth_in_process("hunt", "--alert", before, "--db", db, "--json", "--samples", "3").stdout)
    assert first["root_cause"]["kind"] == "none", first["root_cause"]  # good before the upgrade
    os.rename(site, tmp_path / "old-site")
    os.rename(saved, site)
    # The host's NCCL (no pip package: only the server's log shows it) was upgraded the same night.
    profile = site / "minitorch" / "_profile.json"
    profile.write_text(profile.read_text().replace('"nccl_version": "2.21.5"', '"nccl_version": "2.23.4"'))
    second = json.loads(sleuth_in_process("hunt", "--alert", path, "--db", db, "--json").stdout)
    why = [(h["category"], h["subject"] if "subject" in h else h["statement"][:40], h["status"], h["reason"][:200])
           for h in second["hypotheses"]]  # fmt: skip
    assert second["root_cause"]["kind"] == "dependency" and second["root_cause"]["ref"] == "minikernels", why
    assert f"the snapshot of run {first['run_id']}" in second["root_cause"]["summary"]
    shown = json.loads(sleuth_in_process("show", second["run_id"], "--db", db, "--json").stdout)
    said = [e["text"] for e in shown["events"] if e["kind"] == "note"]
    logged = "dependencies: nccl 2.21.5 -> 2.23.4 (in the server's log) since the snapshot of run"
    assert any(t.startswith(logged) and "not a pip package, not tested" in t for t in said), said[:20]
    assert not any(h["statement"].startswith(("log:", "nccl")) for h in second["hypotheses"])  # no overlay for it


def test_the_server_log_names_the_versions_of_its_stack():
    from tools.serverlog import parse_log

    log = parse_log(
        "[2026-01-12 09:00:01] minitorch 2.9.0, attention_backend=triton\n"
        "node-1:4242:4242 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "INFO 01-12 09:00:02 pynccl.py:69] vLLM is using nccl==2.23.4\n"
        "INFO 01-12 09:00:03 api_server.py:527] vLLM API server version 0.6.3.post1\n"
    )
    # The first line of each wins (the start's); NCCL's own line before vLLM's.
    assert log.versions == {"minitorch": "2.9.0", "nccl": "2.21.5", "cuda": "12.4", "vllm": "0.6.3.post1"}


def test_dist_info_times_name_what_was_installed_after_the_known_good_time_and_pin_below_it():
    from tools.packages import installed_since, wheel_version

    times = {"torch": 1_000.0, "flashinfer-python": 3_000.0, "pip": None, "numpy": 2_500.0}
    versions = {"torch": "2.9.0", "flashinfer-python": "0.6.15", "pip": "24.0", "numpy": "2.1.0"}
    found = installed_since(times, versions, since=2_000.0)
    assert [c.name for c in found] == ["flashinfer-python", "numpy"]  # torch is older; pip has no time
    fi = found[0]
    assert fi.replaced and fi.old is None and fi.pin == "flashinfer-python<0.6.15"  # until fetched
    assert fi.model_copy(update={"old": "0.6.14"}).pin == "flashinfer-python==0.6.14"
    assert "installed 1970-01-01 00:50 UTC over an earlier version" in fi.describe()
    assert wheel_version("flashinfer_python-0.6.14-cp39-abi3-linux_x86_64.whl", "flashinfer-python") == "0.6.14"
    assert wheel_version("numpy-2.0.0-cp311-cp311-manylinux_2_17_x86_64.whl", "flashinfer-python") is None
    assert wheel_version("README.txt", "numpy") is None


BENCH_WITH_LIB = """\
import time
import mylib
t0 = time.perf_counter()
for _ in range(3):
    mylib.work()
print(f"{time.perf_counter() - t0:.4f}")
"""


def test_a_benchmark_command_in_its_own_venv_has_its_changed_package_found_tried_and_pinned(tmp_path):
    """A trial's project ran its benchmark with its own venv's python: the snapshot read the
    host's python3 (no such package there) and, given the change by pip's log, the hunt said "a
    benchmark command has no launch to put old versions in". The snapshot is read with the
    interpreter the command names, and the old version goes first on the command's PYTHONPATH."""
    import subprocess
    import sys
    import sysconfig
    import zipfile

    from evals.lab.builder import write_wheel
    from tests.conftest import bench_repo

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    wheels = tmp_path / "wheelhouse"
    for version, cost in (("1.0", 0.02), ("1.1", 0.08)):
        write_wheel(
            wheels, "mylib", version, {"mylib/__init__.py": f"import time\n\ndef work():\n    time.sleep({cost})\n"}
        )
    zipfile.ZipFile(wheels / "mylib-1.1-py3-none-any.whl").extractall(purelib)  # what pip install -U did
    log = tmp_path / "pip.log"
    log.write_text(
        "2026-12-07T10:00:00 pip install -U mylib\n"
        "2026-12-07T10:00:01     Found existing installation: mylib 1.0\n"
        "2026-12-07T10:00:02 Successfully installed mylib-1.1\n"
    )
    repo, _git, head = bench_repo(tmp_path / "proj", BENCH_WITH_LIB)
    before = tree_digest(Path(purelib))
    proc = sleuth_in_process(
        "hunt", "--repo", repo, "--good", head, "--good-value", "0.06", "--bench", f"{venv}/bin/python bench.py",
        "--lower-is-better", "--pip-log", log, "--wheelhouse", wheels, "--db", tmp_path / "r.db", "--json",
    )  # fmt: skip
    v = json.loads(proc.stdout)
    assert v["root_cause"]["kind"] == "dependency" and v["root_cause"]["ref"] == "mylib", v["summary"]
    assert "mylib 1.0 -> 1.1" in v["root_cause"]["summary"]
    assert v["proposed_action"]["ref"] == "mylib==1.0"
    assert (
        f"in the benchmark's environment: `{venv}/bin/python -m pip install mylib==1.0`"
        in v["proposed_action"]["detail"]
    )
    assert tree_digest(Path(purelib)) == before  # the venv as it was: the old version only in an overlay
    # A log whose every change is gone since (reinstalled by hand) is read and said, not passed over.
    log.write_text(log.read_text() + (
        "2026-12-07T11:00:00     Found existing installation: mylib 1.1\n"
        "2026-12-07T11:00:01 Successfully installed mylib-1.2\n"
    ))  # fmt: skip
    db = tmp_path / "r2.db"
    sleuth_in_process(
        "hunt", "--repo", repo, "--good", head, "--good-value", "0.06", "--bench", f"{venv}/bin/python bench.py",
        "--lower-is-better", "--pip-log", log, "--max-probes", "3", "--db", db, "--json",
    )  # fmt: skip
    said = [e["text"] for e in Store(db).events(Store(db).runs()[0]["id"]) if "pip's log" in e["text"]]
    assert any("records 1 install(s) (mylib 1.0 -> 1.2), none of them a change still installed" in t for t in said), (
        said
    )

"""A non-editable install (a wheel, as ``pip install perf-sleuth`` gives) carries every file the
packages track: the lab's stack, the service's templates, the real cases' histories, licences and
fixtures. A new user's ``pip install .`` once lacked the real cases' bundles (``*.bundle`` was not
package data), and ``sleuth eval`` of a real case crashed on a fetch of a file that was not there."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGES = ("agent", "tools", "evals", "transcripts")


def test_the_wheel_carries_every_file_the_packages_track(tmp_path):
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "pyproject.toml", "README.md", *PACKAGES],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    src = tmp_path / "src"  # built from a copy: an in-tree build would leave build/ in the checkout
    for name in tracked:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path, src],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    [wheel] = tmp_path.glob("perf_sleuth-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = [n for n in tracked if n.startswith(PACKAGES) and not n.endswith(".gitignore")]
    assert len(wanted) > 300 and "evals/suites/real/lizard_jsx_regex/history.bundle" in wanted
    assert [n for n in wanted if n not in shipped] == []

"""What the server's Python has installed, what changed since a good state, and how to try the
old versions without touching the host.

A package upgraded under a server (torch, FlashInfer, a kernel package, NCCL's wheel) is one of
the commonest causes of a regression and lies outside the repository. Three pieces:

- a *snapshot*: every distribution the launch's Python sees (``importlib.metadata``: name,
  version, where, when its ``dist-info`` was written), read on the host through the launch's own
  setup (its env file, its ``PYTHONPATH``), plus the driver version from ``nvidia-smi``;
- the *changes* against a reference: a snapshot stored by an earlier hunt that measured good on
  this host, else pip's log (``Found existing installation: X 1.0`` ... ``Successfully installed
  X-2.0``);
- an *overlay*: the old versions unpacked from wheels (a wheelhouse the user names) into a
  scratch directory on the host, put first on ``PYTHONPATH`` for one launch. The host's
  site-packages are never written; nothing is installed, the proposal says what to pin.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import time

from pydantic import BaseModel

# Run with the launch's setup before it: prints one JSON line.
SNAPSHOT_PY = r"""
import importlib.metadata as md, json, os, platform, re, subprocess
try:  # module -> the distributions that provide it (Python 3.10+)
    provided = md.packages_distributions()
except AttributeError:
    provided = {}
tops = {}
for module, names in provided.items():
    for n in names:
        tops.setdefault(re.sub(r"[-_.]+", "-", n).lower(), []).append(module)
dists = {}
for d in md.distributions():
    name = re.sub(r"[-_.]+", "-", d.metadata["Name"] or "").lower()
    if not name or name in dists:
        continue  # the first on sys.path wins, as an import would
    path = getattr(d, "_path", None)
    when = None
    for f in ("INSTALLER", "RECORD", "METADATA"):
        try:
            when = os.path.getmtime(os.path.join(str(path), f)); break
        except (OSError, TypeError):
            pass
    needs = []
    for req in d.requires or []:
        if "extra ==" not in req.replace("extra==", "extra =="):
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
            if m:
                needs.append(re.sub(r"[-_.]+", "-", m.group(1)).lower())
    dists[name] = {"version": d.version, "location": str(path.parent) if path else "", "installed_at": when,
                   "top": sorted(set(tops.get(name, []))), "requires": needs}
try:
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
except Exception:
    driver = None
print(json.dumps({"python": platform.python_version(), "driver": driver, "dists": dists}))
"""


LOGGED = "log:"  # the stored name of a version only the server logged (NCCL, CUDA): not a pip package


class Change(BaseModel):
    """One package whose version differs between the reference and now."""

    name: str
    old: str | None  # None: not installed in the reference (added since), or unknown (``replaced``)
    new: str | None  # None: removed since
    source: str  # "snapshot <run>", "pip log" or "dist-info times"
    # Installed after the known-good time over an earlier version whose number nothing recorded
    # (a reference from dist-info times): the old version is the release before ``new``, as the
    # host's package index has it (``pip download``), once the test has fetched it.
    replaced: bool = False
    installed_at: float | None = None

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.old}" if self.old else f"{self.name}<{self.new}"

    def describe(self) -> str:
        if self.name.startswith(LOGGED):  # a version only the server's log shows (NCCL, CUDA)
            return f"{self.name.removeprefix(LOGGED)} {self.old or '-'} -> {self.new or '-'} (in the server's log)"
        if self.replaced:
            when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(self.installed_at)) if self.installed_at else "?"
            before = f"over {self.old}" if self.old else "over an earlier version"
            return f"{self.name} {self.new} installed {when} UTC {before}"
        if self.old is None:
            return f"{self.name} {self.new} was added"
        if self.new is None:
            return f"{self.name} {self.old} was removed"
        return f"{self.name} {self.old} -> {self.new}"


def norm(name: str) -> str:
    """PEP 503 normalisation: ``Flash_Infer`` and ``flash-infer`` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def workload_dists(modules: set[str], provides: dict[str, list[str]], requires: dict[str, list[str]]) -> set[str]:
    """The distributions a workload runs: those providing a module it imported (by top-level
    name), and everything they require, transitively (a wheel of native libraries such as
    NCCL's is loaded by the package that requires it, never imported by name). PEP 503 names."""
    tops = {m.split(".")[0] for m in modules}
    # A distribution whose files say nothing of its modules is taken at its name (``foo-bar``: ``foo_bar``).
    found = {norm(d) for d, names in provides.items() if tops & set(names or [norm(d).replace("-", "_")])}
    needs = {norm(d): [norm(r) for r in rs] for d, rs in requires.items()}
    todo = list(found)
    while todo:
        for r in needs.get(todo.pop(), []):
            if r not in found:
                found.add(r)
                todo.append(r)
    return found


def snapshot_command(setup_prefix: str, python: str = "python3") -> str:
    return f"{setup_prefix}{python} -c {shlex.quote(SNAPSHOT_PY)}"


def diff(reference: dict[str, str], now: dict[str, str], source: str) -> list[Change]:
    """Changed versions between two ``{name: version}`` maps (names normalised), sorted by name."""
    ref = {norm(k): v for k, v in reference.items()}
    cur = {norm(k): v for k, v in now.items()}
    return [
        Change(name=n, old=ref.get(n), new=cur.get(n), source=source)
        for n in sorted(ref.keys() | cur.keys())
        if ref.get(n) != cur.get(n)
    ]


_FOUND = re.compile(r"Found existing installation: (\S+) (\S+)")
_INSTALLED = re.compile(r"Successfully installed (.+)$")


def pip_log_changes(text: str) -> dict[str, tuple[str | None, str]]:
    """``{name: (old, new)}`` from pip's log, the oldest version a package had in the log and the
    newest it was given (a package installed twice shows its first old and its last new). Where
    those are one version (a log of trials: 3.20.1, back to 3.19.3, to 3.20.1 again), or the first
    install added it, the change is the last install that changed it (3.19.3 -> 3.20.1): it had
    read as no change at all."""
    found: dict[str, str] = {}  # the version each package had before the install under way
    first: dict[str, str | None] = {}
    last_change: dict[str, tuple[str | None, str]] = {}
    out: dict[str, tuple[str | None, str]] = {}
    for line in text.splitlines():
        if m := _FOUND.search(line):
            found[norm(m.group(1))] = m.group(2)
        elif m := _INSTALLED.search(line):
            for item in m.group(1).split():
                name, _, version = item.rpartition("-")
                if name and version:
                    key = norm(name)
                    before = found.pop(key, None)
                    first.setdefault(key, before)
                    if before != version:
                        last_change[key] = (before, version)
                    out[key] = (first[key], version)
    for key, (old, new) in out.items():
        last = last_change.get(key)
        if last is not None and last[1] == new and last[0] is not None and (old == new or old is None):
            out[key] = last  # (None, v): added in the log, then changed: the change is what a test can undo
    return out


def from_pip_log(text: str, now: dict[str, str]) -> list[Change]:
    """The changes pip's log records, for packages still installed at the logged version."""
    cur = {norm(k): v for k, v in now.items()}
    changes = []
    for name, (old, new) in sorted(pip_log_changes(text).items()):
        if cur.get(name) == new and old != new:
            changes.append(Change(name=name, old=old, new=new, source="pip log"))
    return changes


def installed_since(installed_at: dict[str, float | None], versions: dict[str, str], since: float) -> list[Change]:
    """The packages whose ``dist-info`` was written after ``since`` (a reference when there is no
    stored snapshot and no pip log): each replaced an earlier version nothing recorded, or was
    new; which, and from what, the index's previous release says when the test fetches it."""
    out = []
    for name in sorted(installed_at):
        when = installed_at[name]
        if when is not None and when > since and name in versions:
            out.append(
                Change(
                    name=norm(name),
                    old=None,
                    new=versions[name],
                    source="dist-info times",
                    replaced=True,
                    installed_at=when,
                )
            )
    return out


# pip, run with the launch's setup before it (so the host's own index configuration applies):
# the wheels of the given requirements, no dependencies, into a scratch directory.
DOWNLOAD = "-m pip download --no-deps --only-binary=:all: --disable-pip-version-check -q -d"


def download_command(setup_prefix: str, dest: str, specs: list[str], python: str = "python3") -> str:
    return f"{setup_prefix}{python} {DOWNLOAD} {shlex.quote(dest)} " + " ".join(shlex.quote(x) for x in specs)


def wheel_version(filename: str, name: str) -> str | None:
    """The version in a wheel's file name when it is a wheel of ``name`` (``name-VERSION-...whl``)."""
    stem = norm(name).replace("-", "_")
    parts = filename.split("-")
    if len(parts) >= 3 and filename.endswith(".whl") and norm(parts[0]).replace("-", "_") == stem:
        return parts[1]
    return None


def wheel_name(name: str, version: str) -> str:
    """The file-name stem pip gives a pure wheel of name==version (``-`` becomes ``_``)."""
    return f"{norm(name).replace('-', '_')}-{version}-"


# Run on the host: unpack the named wheels into DEST (a wheel is a zip laid out as site-packages).
OVERLAY_PY = r"""
import sys, zipfile, os, json
dest, wheels = sys.argv[1], json.loads(sys.argv[2])
os.makedirs(dest, exist_ok=True)
for w in wheels:
    with zipfile.ZipFile(w) as z:
        z.extractall(dest)
print(dest)
"""


def overlay_dir(run_id: str, pins: list[str]) -> str:
    """Where one set of old versions is unpacked on the host: scratch space named after the run and
    the pins (the same pins: the same directory, so a resumed hunt's measurement cache still hits)."""
    digest = hashlib.sha256(json.dumps(sorted(pins)).encode()).hexdigest()[:10]
    return f"/tmp/sleuth-overlay-{run_id}-{digest}"


def with_pythonpath(template: str, first: str) -> str:
    """The launch with ``first`` put in front of ``PYTHONPATH`` right before its last step (after
    an env file it sources, which would otherwise set it again)."""
    export = f"export PYTHONPATH={shlex.quote(first)}${{PYTHONPATH:+:$PYTHONPATH}}"
    parts = template.split(" && ")
    return " && ".join([*parts[:-1], export, parts[-1]])

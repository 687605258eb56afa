"""The dependency hypothesis: a package changed on the host under the server.

Stated only where something recorded a change since the last good measurement here: the newest
package snapshot a hunt on this repo and host stored while measuring good (every hunt stores one),
pip's log on the host (``--pip-log``), a requirement or lock file whose pins moved between the good
commit and HEAD with the environment following them, or the reflog entry that moved HEAD off the
good commit with the dist-info times after it. A commit's date is not evidence: bisecting old
history, the environment is always newer than the good commit. Only packages the workload runs are
suspects (the modules its traced run imported, and what their distributions require). Without
evidence the category says so in one line and states nothing.

Tested by an A/B of now against a launch with the previous versions first on ``PYTHONPATH``:
wheels from the user's wheelhouse (``--wheelhouse``) unpacked into scratch space on the host
(``tools.packages``); the host's site-packages are never written. Several changed packages are
localized by halving; the proposal is "pin PKG==OLD" with the exact command, which a person
approves and runs (nothing is installed automatically).
"""

from __future__ import annotations

import json
import re
import shlex
import time

from agent import experiments
from agent.categories.history import last_move
from agent.runtime import Runtime
from agent.state import Action, Hunt, Hypothesis, Measured
from tools.metric import last_json
from tools.packages import (
    LOGGED,
    OVERLAY_PY,
    Change,
    diff,
    download_command,
    from_pip_log,
    installed_since,
    norm,
    overlay_dir,
    pip_log_changes,
    snapshot_command,
    wheel_name,
    wheel_version,
    with_pythonpath,
    workload_dists,
)

CATEGORY = "dependencies"


NAME = CATEGORY


def snapshot(hunt: Hunt, rt: Runtime) -> None:
    """What the launch's Python has installed now, on the hunt and in the store (the reference of
    a later hunt when this one measures good)."""
    cmd = snapshot_command(experiments.setup_prefix(hunt), experiments.launch_python(hunt))
    res = rt.shell(hunt, cmd, timeout=120, name="package_snapshot")
    got = (last_json(res["stdout"]) or {}) if res["exit_code"] == 0 else {}
    hunt.packages = {
        "dists": {k: v["version"] for k, v in got.get("dists", {}).items()},
        "installed_at": {k: v.get("installed_at") for k, v in got.get("dists", {}).items()},
        "driver": got.get("driver"),
        "python": got.get("python"),
        "logged": {} if hunt.target.command else rt.logged_versions(hunt, "now"),
        "provides": {k: v.get("top") or [] for k, v in got.get("dists", {}).items()},
        "requires": {k: v.get("requires") or [] for k, v in got.get("dists", {}).items()},
    }
    _logged_vs_installed(hunt, rt)
    if rt.store is not None and rt.cassette is None and hunt.packages["dists"]:  # a replay records nothing new
        rt.store.put_packages(
            hunt.run_id, hunt.target.repo, hunt.target.host, _stored(hunt.packages), good=hunt.root_kind == "none"
        )


def _stored(packages: dict) -> dict[str, str]:
    """What a snapshot stores: the distributions, and what the server logged under ``log:NAME``
    (a later hunt diffs both: NCCL from a system package changes too, and pip never sees it); a
    logged version of an installed distribution is that distribution's."""
    dists = packages["dists"]
    installed = {norm(k) for k in dists}
    logged = {LOGGED + k: v for k, v in (packages.get("logged") or {}).items() if norm(k) not in installed}
    return {**dists, **logged}


def _logged_vs_installed(hunt: Hunt, rt: Runtime) -> None:
    """A server that logs another version of a package than the launch's Python has installed
    loads it from elsewhere (a vendored copy, LD_LIBRARY_PATH): say so, it is what runs."""
    dists = {norm(k): v for k, v in hunt.packages["dists"].items()}
    odd = [
        f"{name} {v} (installed: {dists[norm(name)]})"
        for name, v in hunt.packages["logged"].items()
        if norm(name) in dists and dists[norm(name)] != v
    ]
    if odd:
        said = "; ".join(odd)
        rt.say(hunt, "plan", f"dependencies: the server logs other versions than the launch's Python has: {said}")


def changes(hunt: Hunt, rt: Runtime) -> list[Change]:
    """The packages that changed since the last good measurement here, by the first evidence
    there is (``_recorded``), narrowed to those the workload runs (``_imported``); none when
    nothing recorded a change, said on the hunt in one line."""
    now = hunt.packages.get("dists") or {}
    if not now:
        rt.say(hunt, "plan", "dependencies: the launch's Python could not be read; not stated")
        return []
    found = _recorded(hunt, rt, now)
    if found is None:
        return []
    found = _imported(hunt, rt, found)
    hunt.package_changes = [c.model_dump() for c in found]
    return found


def _recorded(hunt: Hunt, rt: Runtime, now: dict[str, str]) -> list[Change] | None:
    """What recorded a change, the first of: an earlier hunt's snapshot that measured good here;
    pip's log (``--pip-log``); a requirement or lock file whose pins moved between the good commit
    and HEAD, where the environment followed the pin; the reflog entry that moved HEAD off the good
    commit, with the dist-info times after it. A commit's date is none of these (it says when the
    code was written, not when it last measured good here). None: no evidence, said."""
    t = hunt.target

    def live() -> dict | None:
        return rt.store.good_packages(t.repo, t.host, hunt.run_id) if rt.store is not None else None

    ref = rt.observe(hunt, "package_reference", {"repo": t.repo, "host": t.host}, live)
    if ref:
        hunt.package_reference = f"the snapshot of run {ref['run']} (measured good)"
        if t.pip_log:  # given, and not read: said (a trial's log was passed over without a word)
            rt.say(
                hunt,
                "plan",
                f"dependencies: the reference is the snapshot of run {ref['run']}, which measured good here; "
                f"pip's log {t.pip_log} is not read (a good snapshot comes first)",
            )
        return diff(ref["dists"], _stored(hunt.packages), f"snapshot of run {ref['run']}")
    if t.pip_log:
        res = rt.shell(hunt, f"cat {shlex.quote(t.pip_log)}", timeout=30)
        if res["exit_code"] != 0:
            rt.say(hunt, "plan", f"dependencies: cannot read the pip log {t.pip_log}: {res['stderr'].strip()[:200]}")
            return None
        hunt.package_reference = f"pip's log {t.pip_log}"
        found = from_pip_log(res["stdout"], now)
        logged = pip_log_changes(res["stdout"])
        if logged and not found:  # read, and why nothing of it counts (a trial saw no word of its log)
            listed = ", ".join(f"{k} {o or '?'} -> {n}" for k, (o, n) in sorted(logged.items())[:5])
            rt.say(
                hunt,
                "plan",
                f"dependencies: pip's log {t.pip_log} records {len(logged)} install(s) ({listed}), none of them "
                "a change still installed at the logged version",
            )
        return found
    good, move = _good_commit(hunt, rt)
    moved = False
    if good is not None:
        pinned, moved = _pinned(hunt, rt, good, now)
        if pinned is not None:
            return pinned
    if (left := _left_good(hunt, rt, good, move)) is not None and hunt.packages.get("installed_at"):
        since, how = left
        found = installed_since(hunt.packages["installed_at"], now, since)
        hunt.package_reference = f"the dist-info times (installed after {_utc(since)}, {how})"
        return found
    pins = "no moved pin the environment followed" if moved else "no pin moved between the good commit and HEAD"
    rt.say(
        hunt,
        "plan",
        f"dependencies: no evidence of a package change (no earlier good hunt here, no --pip-log, {pins}, "
        "no reflog entry leaving the good commit): no hypothesis",
    )
    return None


def _good_commit(hunt: Hunt, rt: Runtime) -> tuple[str | None, dict | None]:
    """The known-good commit: the alert's good ref, else where the reflog's last move left; with
    that move when it is the one (``_left_good`` reads no reflog again)."""
    if hunt.target.good_ref:
        return rt.resolve(hunt, hunt.target.good_ref), None
    reflog = rt.tool("git_reflog", {"limit": 50}, hunt=hunt)
    left = last_move(reflog.result["entries"]) if reflog.ok else None
    return (left["old_sha"], left) if left else (None, None)


def _pinned(hunt: Hunt, rt: Runtime, good: str, now: dict[str, str]) -> tuple[list[Change] | None, bool]:
    """The pins that moved between ``good`` and HEAD in the repository's requirement or lock files
    and that the launch's Python now has installed (the environment followed them), and whether
    any pin moved at all. None where none was followed; moved pins the environment did not follow
    are said and left out."""
    rec = rt.tool("git_pin_moves", {"a": good, "b": "HEAD"}, hunt=hunt)
    moved = [m for m in rec.result["moves"] if m["old"] and m["new"]] if rec.ok else []
    if not moved:
        return None, False
    installed = {norm(k): v for k, v in now.items()}
    followed = [m for m in moved if installed.get(m["name"]) == m["new"]]
    if len(followed) < len(moved):
        other = ", ".join(
            f"{m['name']} {m['old']} -> {m['new']} (installed: {installed.get(m['name'], 'none')})"
            for m in moved
            if m not in followed
        )
        rt.say(hunt, "plan", f"dependencies: pins moved that the environment does not follow: {other}")
    if not followed:
        return None, True
    files = ", ".join(sorted({m["file"] for m in followed}))
    hunt.package_reference = f"the pins in {files} between {good[:10]} and HEAD"
    return [Change(name=m["name"], old=m["old"], new=m["new"], source=f"pin in {m['file']}") for m in followed], True


def _left_good(hunt: Hunt, rt: Runtime, good: str | None, move: dict | None) -> tuple[float, str] | None:
    """When HEAD left the known-good commit here, by the reflog (``move``, the last pull, reset,
    merge, rebase or checkout ``_good_commit`` found; for the alert's good ref, the newest entry
    leaving it): packages installed after it are suspects. None where the reflog never had HEAD at
    the good commit (a fresh clone at HEAD): then nothing here says when it last measured good."""
    if good is None:
        return None
    if move is None:
        reflog = rt.tool("git_reflog", {"limit": 50}, hunt=hunt)
        entries = reflog.result["entries"] if reflog.ok else []
        move = next((e for e in entries if e["old_sha"] == good), None)
    if move is None:
        return None
    return _epoch(move["time"]), f"when HEAD left {move['old_sha'][:10]}: '{move['action']}'"


def _imported(hunt: Hunt, rt: Runtime, found: list[Change]) -> list[Change]:
    """Of the changed packages, those the workload runs: distributions providing a module its
    traced run imported, and what they require (``tools.packages.workload_dists``). A version only
    the server's log shows is kept (it is what runs). Where no trace can be read, all are kept and
    that is said."""
    pip = [c for c in found if not c.name.startswith(LOGGED)]
    if not pip:
        return found
    now = hunt.get(hunt.reproduced) if hunt.reproduced else None
    traced = rt.workload_imports(hunt, now.ref) if now is not None else {"modules": None, "why": "not measured"}
    if traced["modules"] is None:
        rt.say(hunt, "plan", f"dependencies: which packages the workload imports is unknown ({traced['why']})")
        return found
    dists = hunt.packages.get("provides") or {}
    used = workload_dists(set(traced["modules"]), dists, hunt.packages.get("requires") or {})
    kept = [c for c in found if c.name.startswith(LOGGED) or norm(c.name) in used]
    left = [c.name for c in pip if norm(c.name) not in used]
    if left:
        shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        rt.say(
            hunt,
            "plan",
            f"dependencies: {len(left)} changed package(s) the workload does not import left out: {shown}",
        )
    return kept


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))


def suspect(hunt: Hunt, rt: Runtime, add) -> None:
    """One hypothesis per changed package, all tested by one A/B first. A component only the
    server's log shows (NCCL, CUDA) has no wheel an overlay could roll back: it is said, and named
    in the summary if nothing else explains the drop."""
    found = changes(hunt, rt)
    logged = [c for c in found if c.name.startswith(LOGGED)]
    if logged:
        said = ", ".join(c.describe() for c in logged)
        rt.say(hunt, "plan", f"dependencies: {said} since {hunt.package_reference}: not a pip package, not tested")
    for c in found:
        if c.name.startswith(LOGGED):
            continue
        add(
            CATEGORY,
            f"{c.describe()} on the host (per {hunt.package_reference}) slows it",
            "A/B: now vs the previous versions (wheelhouse, else pip download) first on PYTHONPATH, then halving",
            c.name,
        )


def _change(hunt: Hunt, name: str | None) -> Change:
    return next(Change.model_validate(c) for c in hunt.package_changes if c["name"] == name)


def overlay(hunt: Hunt, rt: Runtime, group: list[Hypothesis]) -> tuple[str | None, str]:
    """The previous versions of ``group`` unpacked into a scratch directory on the host: (dir, "")
    or (None, why not)."""
    t = hunt.target
    pins = [_change(hunt, h.subject) for h in group]
    added = [c.name for c in pins if c.old is None and not c.replaced]
    if added:
        return None, f"added since the reference: an overlay cannot take {', '.join(added)} away"
    files: list[str] = []
    if t.wheelhouse:
        listing = rt.shell(hunt, f"ls -1 {shlex.quote(t.wheelhouse)}", timeout=30)
        files = listing["stdout"].split() if listing["exit_code"] == 0 else []
    wheels, missing = [], []
    for c in pins:
        stem = wheel_name(c.name, c.old or "")
        hit = next((f for f in sorted(files) if f.lower().startswith(stem.lower()) and f.endswith(".whl")), None)
        if hit is None or c.old is None:
            missing.append(c)
        else:
            wheels.append(f"{(t.wheelhouse or '').rstrip('/')}/{hit}")
    dest = overlay_dir(hunt.run_id, [c.pin for c in pins])
    rt.scratch.append(dest)  # removed when the hunt's process is done with the host
    if missing:
        got, why = _download(hunt, rt, missing, dest + ".wheels")
        if got is None:
            return None, why
        wheels += got
    python = experiments.launch_python(hunt)
    cmd = f"{experiments.setup_prefix(hunt)}{python} -c {shlex.quote(OVERLAY_PY)} {shlex.quote(dest)} "
    res = rt.shell(hunt, cmd + shlex.quote(json.dumps(wheels)), timeout=300)
    if res["exit_code"] != 0:
        return None, f"unpacking the wheels failed: {res['stderr'].strip()[-200:]}"
    return dest, ""


def _download(hunt: Hunt, rt: Runtime, missing: list[Change], dest: str) -> tuple[list[str] | None, str]:
    """The previous versions no wheelhouse holds, fetched by pip with the host's own index
    configuration (the launch's setup first: its env file, its pip config) into scratch space:
    ``name==old``, or ``name<new`` where the old version is unknown (the index's previous
    release, recorded on the change once fetched). (wheel paths, "") or (None, why not)."""
    where = f"in {hunt.target.wheelhouse}" if hunt.target.wheelhouse else "no --wheelhouse"
    rt.scratch.append(dest)
    specs = [c.pin for c in missing]
    cmd = download_command(experiments.setup_prefix(hunt), dest, specs, experiments.launch_python(hunt))
    cmd += f" && ls -1 {shlex.quote(dest)}"
    res = rt.shell(hunt, cmd, timeout=600, name="pip_download")
    if res["exit_code"] != 0:
        err = (res["stderr"].strip().splitlines() or ["exit " + str(res["exit_code"])])[-1][:200]
        return None, f"no wheel of {', '.join(specs)} ({where}) and pip download failed: {err}"
    files = res["stdout"].split()
    paths = []
    for c in missing:
        hit = next((f for f in files if wheel_version(f, c.name)), None)
        if hit is None:
            return None, f"pip download of {c.pin} gave no wheel of {c.name}"
        if c.old is None:  # the release before: now the change knows what it was
            version = wheel_version(hit, c.name)
            for entry in hunt.package_changes:
                if entry["name"] == c.name:
                    entry["old"] = version
        paths.append(f"{dest}/{hit}")
    rt.say(hunt, "test", f"dependencies: fetched {', '.join(p.rsplit('/', 1)[-1] for p in paths)} with pip ({where})")
    return paths, ""


def _measure_old(hunt: Hunt, rt: Runtime, group: list[Hypothesis], label: str) -> Measured | str:
    where, why = overlay(hunt, rt, group)
    if where is None:
        return why
    if hunt.target.command:  # a benchmark command: the old versions first on its PYTHONPATH
        return rt.planned(hunt, label, "WORKTREE", env={"PYTHONPATH": where})
    return rt.planned(hunt, label, "WORKTREE", launch=with_pythonpath(hunt.target.launch, where))


# A benchmark command that sets PYTHONPATH itself would override the old versions put first on it.
_SETS_PYTHONPATH = re.compile(r"(^|[\s;&|])(export\s+)?PYTHONPATH=")


def test(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    group = [x for x in hunt.hypotheses if x.category == CATEGORY and x.status == "open"]
    if hunt.target.command and _SETS_PYTHONPATH.search(hunt.target.command):
        why = "the benchmark command sets PYTHONPATH itself: old versions put first on it would not be seen"
        experiments.set_verdict(group, "inconclusive", why, [])
        return
    old = _measure_old(hunt, rt, group, "deps-old")
    if isinstance(old, str):
        experiments.set_verdict(group, "inconclusive", f"the old versions cannot be tried: {old}", [])
        return
    now = hunt.get(hunt.reproduced)  # type: ignore[arg-type]
    cmp, now, old = experiments.ab(hunt, rt, now, old, "now", "deps-old", better="b")
    text = experiments.fmt(cmp, now, old, hunt.target.metric)
    status = experiments.verdict_of(hunt, cmp, old, now)
    experiments.set_verdict(group, status, text + experiments.under_said(hunt, cmp, old, now), [now.id, old.id])
    if status == "supported" and len(group) > 1:
        _localize(hunt, rt, group, now, old)


def _localize(hunt: Hunt, rt: Runtime, group: list[Hypothesis], now: Measured, old: Measured) -> None:
    """Halve the changed packages: half of them at their old version vs now, until one is left.
    A half holds the culprit when it recovers at least half of what all of them recover."""
    full = old.median - now.median

    def state_for(half: list[Hypothesis]) -> Measured | None:
        m = _measure_old(hunt, rt, half, f"deps-old {'+'.join(x.subject or '' for x in half)}")
        return None if isinstance(m, str) else m

    def words(half: list[Hypothesis], moved: bool, numbers: str) -> str:
        names = ", ".join(x.subject or "" for x in half)
        if moved:
            return f"localization: only {names} at the old version already recovers it ({numbers})"
        return f"localization: {names} at the old version recovers nothing ({numbers})"

    suspects, now, alone = experiments.halve(hunt, rt, list(group), now, "now", full, state_for, words, top=old)
    last = suspects[0]
    if len(group) > 1 and alone is None:  # named by elimination: its own A/B must show it too
        m = _measure_old(hunt, rt, [last], f"deps-old {last.subject}")
        if not isinstance(m, str):
            cmp, now, m = experiments.ab(hunt, rt, now, m, "now", m.label, better="b")
            if not experiments.explains(hunt, cmp, m, now):
                # Load or drift misled a halving step: name what is known (all of them recover it).
                for x in group:
                    x.status, x.reason = (
                        "supported",
                        f"{x.reason}; halving inconclusive: {last.subject} alone does not "
                        f"recover it ({experiments.fmt(cmp, now, m, hunt.target.metric)})",
                    )
                rt.say(hunt, "localize", "the packages that matter: could not be told apart; all of them named")
                return
            last.reason += f"; alone: {experiments.fmt(cmp, now, m, hunt.target.metric)}"
            last.evidence = [now.id, m.id]
    rt.say(hunt, "localize", f"the package that matters: {last.subject}")


def name(hunt: Hunt, rt: Runtime, sup: list[Hypothesis]) -> None:
    named = [_change(hunt, h.subject) for h in sup if h.category == CATEGORY]
    hunt.root_kind, hunt.root_ref = "dependency", ", ".join(c.name for c in named)
    hunt.root_summary = "; ".join(c.describe() for c in named) + f" on the host (per {hunt.package_reference})"


def action(hunt: Hunt) -> Action:
    """Pin the culprit(s) back: the exact command, for a person to run with the interpreter the
    workload runs (a project's own venv: its python's pip, not the host's)."""
    pins = [_change(hunt, name.strip()).pin for name in (hunt.root_ref or "").split(",") if name.strip()]
    python = experiments.launch_python(hunt)
    pip = "pip" if python == "python3" else f"{python} -m pip"
    cmd = f"{pip} install " + " ".join(shlex.quote(p) for p in pins)
    where = "the benchmark's environment" if hunt.target.command else "the server's environment"
    return Action(
        kind="pin",
        ref=", ".join(pins),
        detail=f"pin {', '.join(pins)} in {where}: `{cmd}` (nothing is installed automatically)",
    )

"""Real regressions from public repositories, packaged to run offline.

A lab scenario is built from a spec; a real case is a public project's own history: a git bundle of
the commits a hunt needs (cut shallow below the known-good ref, so a case weighs a megabyte or two,
not the project's whole history), the project's licence beside it, and ``case.toml`` saying where it
comes from and what is true:

    kind = "real"
    name = "lizard_jsx_regex"
    project = "terryyin/lizard"                       # on GitHub
    description = "..."
    report = "https://github.com/terryyin/lizard/issues/253"   # the regression as reported
    fix = "https://github.com/terryyin/lizard/commit/03fe38e..." # and how it was fixed
    licence = "LICENSE.txt"                           # the project's, kept beside the bundle
    bundle = "history.bundle"                         # git bundle create ... <bad>
    shallow = ["97dda39..."]                          # the bundle's boundary commits
    good = "<full sha>"                               # known good
    bad = "<full sha>"                                # known bad (the bundle's head)
    culprit = "<full sha>"                            # the truth
    bench = "python3 {case}/bench.py"                 # run in the probe's worktree; prints one number
    lower_is_better = true
    traits = ["merged side branch"]                   # what the case exercises

``sleuth eval`` runs a case like a lab scenario (``evals.job``): the bundle is unpacked into a
scratch repository (never the case directory), hunted with ``--good``/``--bench`` and scored with
the culprit as the truth. Everything needed is committed: CI has no network.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.state import Target

SHA = r"^[0-9a-f]{40}$"
GIT_TIMEOUT_S = 300  # a local bundle unpacks in seconds; a hung git must not hang an evaluation


class RealCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str = Field(pattern=r"^real$")
    name: str = Field(pattern=r"^[a-z0-9_]+$")
    project: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    description: str
    report: str = Field(pattern=r"^https://")
    fix: str = Field(pattern=r"^https://")
    licence: str
    bundle: str
    shallow: list[str] = []
    good: str = Field(pattern=SHA)
    bad: str = Field(pattern=SHA)
    culprit: str = Field(pattern=SHA)
    bench: str
    lower_is_better: bool = True
    metric: str = "value"
    setup: str | None = None
    traits: list[str] = []

    @field_validator("shallow")
    @classmethod
    def _shas(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if not re.match(SHA, s)]
        if bad:
            raise ValueError(f"not a full commit SHA: {bad[0]}")
        return v


def is_real(text: str) -> bool:
    """Is this spec text a real case (``kind = "real"``) rather than a lab scenario?"""
    try:
        return tomllib.loads(text).get("kind") == "real"
    except tomllib.TOMLDecodeError:
        return False


def load_case(path: Path, text: str | None = None) -> RealCase:
    """A case from its ``case.toml`` (``text``: its contents, when read elsewhere)."""
    return RealCase.model_validate(tomllib.loads(text if text is not None else path.read_text()))


@dataclass
class BuiltCase:
    """A case unpacked for a hunt: its scratch repository, the hunt's target and the truth (the
    shape the evaluation scores, as a lab scenario's ``truth.json``)."""

    root: Path
    repo: Path
    target: Target
    truth: dict = field(default_factory=dict)


def case_git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """git in a case's repository (quiet about detached checkouts, bounded by ``GIT_TIMEOUT_S``)."""
    base = ["git", "-C", str(repo), "-c", "advice.detachedHead=false"]
    return subprocess.run([*base, *args], check=check, capture_output=True, text=True, timeout=GIT_TIMEOUT_S)


def unbundle(case_dir: Path, case: RealCase, repo: Path) -> None:
    """The case's history into a new repository at ``repo``, HEAD at the bad commit (detached is
    avoided: a branch ``main``, as a user's checkout would be). The shallow boundary is declared
    first, so git accepts a history cut below the known-good ref."""
    repo.mkdir(parents=True)

    def git(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return case_git(repo, *args, check=check)

    git("init", "-q", "-b", "main")
    if case.shallow:
        (repo / ".git" / "shallow").write_text("".join(f"{s}\n" for s in case.shallow))
    bundle = str((case_dir / case.bundle).resolve())
    if git("fetch", "-q", bundle, f"{case.bad}:refs/heads/sleuth-case", check=False).returncode != 0:
        git("fetch", "-q", bundle, "HEAD:refs/heads/sleuth-case")  # a bundle made with HEAD as its ref
    head = git("rev-parse", "sleuth-case").stdout.strip()
    if head != case.bad:
        raise ValueError(f"{case_dir / case.bundle}: its head is {head}, not the case's bad commit {case.bad}")
    git("checkout", "-q", "-B", "main", case.bad)
    git("branch", "-q", "-D", "sleuth-case")
    for sha in (case.good, case.culprit):
        if git("cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode != 0:
            raise ValueError(f"{case_dir / case.bundle}: does not hold {sha} (cut too shallow?)")


def build_case(spec: Path, dest: Path, text: str | None = None, case_dir: Path | None = None) -> BuiltCase:
    """Unpack a case into ``dest`` (``case_dir``: where its bundle and bench live, by default the
    spec's folder) and say how to hunt it and what is true."""
    case = load_case(spec, text)
    where = (case_dir or spec.parent).resolve()
    repo = dest / "repo"
    unbundle(where, case, repo)
    target = Target(
        repo=str(repo),
        command=case.bench.replace("{case}", str(where)),
        metric=case.metric,
        higher_is_better=not case.lower_is_better,
        good_ref=case.good,
        setup=case.setup,
        summary=case.description,
    )
    truth = {
        "scenario": case.name,
        "kind": "commit",
        "root_causes": [{"kind": "commit", "ref": case.culprit}],
        "good_sha": case.good,
        "head_sha": case.bad,
        "real": {"project": case.project, "report": case.report, "fix": case.fix, "traits": case.traits},
    }
    return BuiltCase(root=dest, repo=repo, target=target, truth=truth)

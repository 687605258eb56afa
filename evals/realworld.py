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

A server case gives ``launch`` instead of ``bench``: a real inference server started per probe
from the worktree (``{case}``, ``{worktree}`` and ``{port}`` filled), benchmarked over streaming HTTP
(``requests`` requests of ``max_tokens`` tokens to ``served_model``), ``metric`` one of
``BenchResult.metrics()`` (``median_ttft_ms``, ``tok_per_s``, ...). Its runtime lives outside the
project's environment: ``needs`` lists modules the interpreter ``$SLEUTH_CASE_PYTHON`` must import,
and a case whose needs are missing is refused in one line, before anything is built.

``sleuth eval`` runs a case like a lab scenario (``evals.job``): the bundle is unpacked into a
scratch repository (never the case directory), hunted with ``--good``/``--bench`` and scored with
the culprit as the truth. Everything needed is committed: CI has no network.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent.state import Target
from tools.bench import BenchConfig

SHA = r"^[0-9a-f]{40}$"
GIT_TIMEOUT_S = 300  # a local bundle unpacks in seconds; a hung git must not hang an evaluation


class RealCase(BaseModel):
    """``case.toml`` of a real regression (``evals/suites/real/NAME/``)."""

    # strict: `lower_is_better = "yes"` or `requests = "10"` is refused, not coerced
    model_config = ConfigDict(extra="forbid", strict=True)

    kind: str = Field(pattern=r"^real$", description='always "real" (what tells it from a lab scenario)')
    name: str = Field(pattern=r"^[a-z0-9_]+$", description="the case's folder name")
    project: str = Field(pattern=r"^[\w.-]+/[\w.-]+$", description="owner/name on GitHub")
    description: str = Field(description="what got slower, by how much, why, and how it was fixed")
    report: str = Field(pattern=r"^https://", description="the regression as reported (an issue or PR)")
    fix: str = Field(pattern=r"^https://", description="how it was fixed (a commit or PR)")
    licence: str = Field(description="the project's licence file, kept beside the bundle")
    bundle: str = Field(description="git bundle create ... BAD: the commits the hunt needs")
    shallow: list[str] = Field([], description="the bundle's boundary commits (cut shallow below good)")
    good: str = Field(pattern=SHA, description="known good (full SHA)")
    bad: str = Field(pattern=SHA, description="known bad, the bundle's head (full SHA)")
    culprit: str = Field(pattern=SHA, description="the truth the hunt is scored against (full SHA)")
    bench: str | None = Field(None, description="a command run in the probe's worktree printing one number, or...")
    launch: str | None = Field(
        None, description="...a server launched per probe ({case}, {worktree}, {port}) and benchmarked"
    )
    served_model: str | None = Field(None, description="with launch: the model the requests name ({case} filled)")
    requests: int = Field(default=10, ge=1, description="with launch: streaming requests per sample")
    max_tokens: int = Field(default=64, ge=1, description="with launch: tokens asked per request")
    needs: list[str] = Field(
        [], description="modules the case's interpreter ($SLEUTH_CASE_PYTHON) must import, else it is refused"
    )
    lower_is_better: bool = Field(True, description="which way the number is better")
    metric: str = Field(
        "value", description="with launch: a name of BenchResult.metrics() (median_ttft_ms, tok_per_s, ...)"
    )
    setup: str | None = Field(None, description="a build run in each probe's worktree first (cmake ...)")
    traits: list[str] = Field([], description="what the case exercises, for the corpus table")

    # A check of several fields says which ones first ("FIELD/FIELD: reason"): ``case_problem``
    # reports them as the field, as it reports any one field's error.
    @model_validator(mode="after")
    def _one_workload(self) -> RealCase:
        if (self.bench is None) == (self.launch is None):
            raise ValueError("bench/launch: give exactly one of bench (a command) or launch (a server)")
        if self.launch is not None and (not self.served_model or self.metric == "value"):
            raise ValueError(
                "launch/served_model/metric: a launch case names its served_model and its metric (e.g. median_ttft_ms)"
            )
        return self

    @model_validator(mode="after")
    def _distinct_ends(self) -> RealCase:
        if self.bad == self.good:
            raise ValueError("bad: the same commit as good (the range would be empty)")
        if self.culprit == self.good:
            raise ValueError("culprit: the same commit as good (the culprit comes after the known-good commit)")
        return self

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


CASE_PYTHON_ENV = "SLEUTH_CASE_PYTHON"  # the interpreter a server case's launch runs (its ``needs``)


def case_python() -> str:
    return os.environ.get(CASE_PYTHON_ENV) or "python3"


def missing_needs(case: RealCase) -> list[str]:
    """The modules of ``case.needs`` that the case's interpreter cannot import (a server case's
    runtime, such as mlx, is installed beside the project, not in it: docs/guides/real-inference-server.md)."""
    if not case.needs:
        return []
    code = (
        "import importlib, sys\n"
        "for m in sys.argv[1:]:\n"
        "    try: importlib.import_module(m)\n"
        "    except Exception: print(m)\n"
    )
    try:
        got = subprocess.run([case_python(), "-c", code, *case.needs], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return list(case.needs)
    return got.stdout.split() if got.returncode == 0 else list(case.needs)


class CaseError(ValueError):
    """A case that cannot be run as written, in one line naming its file and the field."""


def case_problem(exc: ValidationError) -> str:
    """A validation error of ``case.toml`` in one line, ``FIELD: reason``. An unknown key comes
    first (a typo, ``cullprit``, otherwise shows only as "culprit: Field required"), with the field
    it probably meant; a check of several fields names them (``bench/launch: ...``)."""
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    err = errors[0]
    field = ".".join(str(x) for x in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        near = difflib.get_close_matches(field, list(RealCase.model_fields), n=1)
        msg = "unknown field" + (f" (did you mean {near[0]}?)" if near else "")
    elif not field and (m := re.match(r"^([\w/]+): (.*)$", msg)):
        field, msg = m.group(1), m.group(2)  # a check of several fields, named by it
    return f"{field or '(top level)'}: {msg}"


def load_case(path: Path, text: str | None = None) -> RealCase:
    """A case from its ``case.toml`` (``text``: its contents, when read elsewhere); ``CaseError``
    (``PATH: FIELD: reason``, one line) when it is not valid TOML or not a valid case."""
    try:
        data = tomllib.loads(text if text is not None else path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise CaseError(f"{path}: invalid TOML: {exc}") from exc
    try:
        return RealCase.model_validate(data)
    except ValidationError as exc:
        raise CaseError(f"{path}: {case_problem(exc)}") from exc


@dataclass
class BuiltCase:
    """A case unpacked for a hunt: its scratch repository, the hunt's target and the truth (the
    shape the evaluation scores, as a lab scenario's ``truth.json``)."""

    root: Path
    repo: Path
    target: Target
    truth: dict = field(default_factory=dict)


def git_said(stderr: str) -> str:
    """git's own words in one line: every line, its "error:"/"fatal:" dropped, a line that ends in
    a colon joined to what follows ("Repository lacks these prerequisite commits: SHA"), where
    the last line alone said only a SHA or "did not send all necessary objects"."""
    out: list[str] = []
    for raw in stderr.strip().splitlines():
        line = re.sub(r"^(error|fatal|warning): ", "", raw.strip())
        if not line:
            continue
        if out and out[-1].endswith(":"):
            out[-1] += " " + line
        else:
            out.append(line)
    said = "; ".join(out)
    return said if len(said) <= 400 else said[:397] + "..."


def case_git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """git in a case's repository (quiet about detached checkouts, bounded by ``GIT_TIMEOUT_S``)."""
    base = ["git", "-C", str(repo), "-c", "advice.detachedHead=false"]
    proc = subprocess.run([*base, *args], check=False, capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    if check and proc.returncode:  # git's own words, not only "returned non-zero exit status"
        raise RuntimeError(
            f"git {args[0]} failed ({proc.returncode}): {git_said(proc.stderr or proc.stdout) or 'no output'}"
        )
    return proc


def _fetch_history(case_dir: Path, case: RealCase, repo: Path) -> None:
    """The bundle's commits into a new repository at ``repo`` (its branch ``sleuth-case`` at the
    bad commit; nothing checked out). The shallow boundary is declared first, so git accepts a
    history cut below the known-good ref."""
    repo.mkdir(parents=True)

    def git(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return case_git(repo, *args, check=check)

    git("init", "-q", "-b", "main")
    if case.shallow:
        (repo / ".git" / "shallow").write_text("".join(f"{s}\n" for s in case.shallow))
    bundle = str((case_dir / case.bundle).resolve())
    # Its ref at the bad commit (HEAD, as the guide's recipe makes it, or a branch), else its first:
    # one fetch, so git's words are about this bundle (a second try said "couldn't find remote ref").
    heads = [line.split()[:2] for line in git("bundle", "list-heads", bundle).stdout.splitlines() if line.strip()]
    ref = next((r for sha, r in heads if sha == case.bad), heads[0][1] if heads else "HEAD")
    git("fetch", "-q", bundle, f"{ref}:refs/heads/sleuth-case")
    head = git("rev-parse", "sleuth-case").stdout.strip()
    if head != case.bad:
        raise ValueError(f"{case_dir / case.bundle}: its head is {head}, not the case's bad commit {case.bad}")


def unbundle(case_dir: Path, case: RealCase, repo: Path) -> None:
    """The case's history into a new repository at ``repo``, HEAD at the bad commit (detached is
    avoided: a branch ``main``, as a user's checkout would be). The shallow boundary is declared
    first, so git accepts a history cut below the known-good ref."""
    _fetch_history(case_dir, case, repo)

    def git(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return case_git(repo, *args, check=check)

    git("checkout", "-q", "-B", "main", case.bad)
    git("branch", "-q", "-D", "sleuth-case")
    for sha in (case.good, case.culprit):
        if git("cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode != 0:
            raise ValueError(f"{case_dir / case.bundle}: does not hold {sha} (cut too shallow?)")


def history_problem(case_dir: Path, case: RealCase) -> str | None:
    """What is wrong with the case's history, as ``FIELD: reason`` in one line (None: nothing):
    a bundle that cannot be unpacked (git's words), a head other than ``bad``, a ``good`` or
    ``culprit`` it does not hold, a culprit that does not descend from good or is not an ancestor
    of bad. Checked before any run (a fetch into scratch space, no checkout: a second or so); the
    hunt found it only once started ("crashed: ValueError")."""
    import tempfile

    bundle = case_dir / case.bundle
    with tempfile.TemporaryDirectory(prefix="sleuth-case-check-") as tmp:
        repo = Path(tmp) / "repo"
        try:
            _fetch_history(case_dir, case, repo)
        except RuntimeError as exc:
            return f"bundle: {bundle} cannot be unpacked: {exc}"
        except ValueError:
            head = case_git(repo, "rev-parse", "sleuth-case").stdout.strip()
            return f"bad: {bundle}'s head is {head}, not {case.bad}"

        def holds(sha: str) -> bool:
            return case_git(repo, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0

        def is_ancestor(a: str, b: str) -> bool:
            return case_git(repo, "merge-base", "--is-ancestor", a, b, check=False).returncode == 0

        for name in ("good", "culprit"):
            if not holds(getattr(case, name)):
                return f"{name}: {getattr(case, name)} is not in {bundle} (cut too shallow? shallow lists its boundary)"
        if not is_ancestor(case.good, case.culprit):
            return f"culprit: {case.culprit} does not descend from good {case.good}"
        if not is_ancestor(case.culprit, case.bad):
            return f"culprit: {case.culprit} is not an ancestor of bad {case.bad}"
    return None


def needs_said(case: RealCase, where: Path) -> str | None:
    """What the case's interpreter lacks of its ``needs``, in one line naming where to read how
    to make it (the case's SOURCE.md); None when it has them all."""
    missing = missing_needs(case)
    if not missing:
        return None
    python = case_python()
    if os.sep in python and not Path(python).is_file():  # a path that names no interpreter at all
        return f"{case.name}: ${CASE_PYTHON_ENV} is {python}: no such file (the interpreter that has {missing[0]})"
    return (
        f"{case.name}: needs {', '.join(missing)} importable by ${CASE_PYTHON_ENV} ({python}): "
        f"see {where / 'SOURCE.md'}"
    )


def build_case(
    spec: Path, dest: Path, text: str | None = None, case_dir: Path | None = None, check_needs: bool = True
) -> BuiltCase:
    """Unpack a case into ``dest`` (``case_dir``: where its bundle and bench live, by default the
    spec's folder) and say how to hunt it and what is true. ``check_needs``: refuse a case whose
    interpreter lacks its ``needs`` (off only to look at its history)."""
    case = load_case(spec, text)
    where = (case_dir or spec.parent).resolve()
    if check_needs and (said := needs_said(case, where)):
        raise ValueError(said)
    repo = dest / "repo"
    unbundle(where, case, repo)
    target = Target(
        repo=str(repo),
        metric=case.metric,
        higher_is_better=not case.lower_is_better,
        good_ref=case.good,
        setup=case.setup,
        # No summary: the description names the cause (the truth the hunt is scored against), and
        # a case is hunted as a person would from the CLI, told only --good and --bench.
    )
    if case.bench is not None:
        target.command = case.bench.replace("{case}", str(where))
    else:
        assert case.launch is not None and case.served_model is not None
        target.launch = case.launch.replace("{case}", str(where))
        target.workload = BenchConfig(
            endpoint="http://unset/v1",
            model=case.served_model.replace("{case}", str(where)),
            requests=case.requests,
            max_tokens=case.max_tokens,
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

"""One scenario run of an evaluation, as a worker executes it (in a local process or a Ray task):
build the scenario from its spec, fingerprint the repo, hunt it with the chosen policy (the graph
stops at the approval interrupt: nothing is approved in an evaluation), fingerprint the repo again
and send back everything the run recorded, as plain data. A scenario that crashes comes back as a
failed run with its error.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import traceback
from pathlib import Path

from pydantic import BaseModel, Field

from agent.state import LLMSettings
from transcripts.recording import export_run
from transcripts.store import Store


class Job(BaseModel):
    spec: str  # path of the spec file
    repeat: int = 0
    policy: str = "methodical"
    model: str | None = None
    llm: LLMSettings | None = None  # the LLM policy's endpoint and limits (the API key stays in the env)
    spec_text: str | None = None  # the spec itself, for a worker that does not share the driver's disk
    # A real case's folder (bundle, bench script, licence) by file name, for such a worker too: a
    # lab spec builds everything from its text, a real case needs these bytes. Never in a dump.
    case_files: dict[str, bytes] | None = Field(default=None, exclude=True)
    max_probes: int = 20
    max_wall_s: float = 900


def shipped(job: Job) -> Job:
    """The job as a worker on another machine needs it: the spec's text and, for a real case, the
    files of its folder (``case_files``), so nothing is read from the driver's disk there."""
    from evals.realworld import is_real

    text = job.spec_text if job.spec_text is not None else Path(job.spec).read_text()
    files = job.case_files
    if files is None and is_real(text):
        folder = Path(job.spec).parent  # a server case keeps its model in a subfolder
        files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    return job.model_copy(update={"spec_text": text, "case_files": files})


def _candidates(repo: Path, truth: dict, spec_text: str) -> int:
    """What the hunt could have blamed: commits since the good point, patches, env vars."""
    git = ["git", "-C", str(repo)]
    n = int(
        subprocess.run(
            [*git, "rev-list", "--count", f"{truth['good_sha']}..{truth['head_sha']}"], capture_output=True, text=True
        ).stdout.strip()
        or 0
    )
    status = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True).stdout.splitlines()
    return n + len(status) + spec_text.count("[[env]]")


def run_job(job: Job) -> dict:
    """In a worker process: build, hunt, fingerprint; everything the run recorded, as plain data."""
    from agent.graph import Hunter
    from agent.hunt_cmd import target_from_alert
    from agent.state import Budget, Hunt, new_run_id
    from evals.fingerprint import fingerprint
    from evals.lab.builder import build
    from evals.lab.spec import load_spec
    from evals.realworld import build_case, is_real

    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="sleuth-eval-"))
    spec_path = Path(job.spec)  # a real case is its folder's case.toml: named by the folder
    name = spec_path.parent.name if spec_path.name == "case.toml" else spec_path.stem
    out: dict = {"job": job.model_dump(), "scenario": name}
    try:
        spec_text = job.spec_text if job.spec_text is not None else Path(job.spec).read_text()
        spec_file = work / Path(job.spec).name
        spec_file.write_text(spec_text)
        if is_real(spec_text):  # a public project's own history (evals.realworld), not a lab build
            case_dir = Path(job.spec).parent
            if job.case_files is not None:  # shipped: this worker does not share the driver's disk
                case_dir = work / "case-files"
                case_dir.mkdir()
                for name, data in job.case_files.items():
                    (case_dir / name).parent.mkdir(parents=True, exist_ok=True)
                    (case_dir / name).write_bytes(data)
            res = build_case(spec_file, work / "case", spec_text, case_dir=case_dir)
            target, scenario, spec = res.target, None, None
        else:
            res = build(load_spec(spec_file), work / "scenario")
            target = target_from_alert(res.root / "alert.json", str(res.repo))
            scenario, spec = str(res.root), spec_text
        out["scenario"], out["truth"] = res.truth["scenario"], res.truth
        out["candidates"] = _candidates(res.repo, res.truth, spec_text)
        before = fingerprint(res.repo)
        db = work / "runs.db"
        hunter = Hunter(db, work / "runs")
        hunt = Hunt(
            run_id=new_run_id(),
            policy=job.policy,
            model=job.model,
            llm=job.llm,
            target=target,
            budget=Budget(max_probes=job.max_probes, max_wall_s=job.max_wall_s),
        )
        try:
            result = hunter.start(hunt, scenario=scenario, spec=spec)
        finally:
            hunter.close()
        out["repo_intact"] = fingerprint(res.repo) == before
        store = Store(db)
        try:
            out |= export_run(store, hunt.run_id)
        finally:
            store.close()
        from agent.report import verdict

        out["verdict"] = verdict(result)
    except Exception as exc:  # a crashed scenario is a failed run with its error; the set goes on
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()
    finally:  # everything kept is in ``out``: the scenario's build, its clone and its run go
        shutil.rmtree(work, ignore_errors=True)  # (were left in /tmp: 700 after a day of CI runs)
    out["wall_s"] = time.perf_counter() - t0
    return out

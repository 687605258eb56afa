"""The HTTP side of ``sleuth serve`` (FastAPI): alerts in, runs out, a person's approval.

    POST /alerts/alertmanager   Alertmanager webhook v4          (bearer token)
    POST /alerts                one plain alert                  (bearer token)
    POST /runs/{id}/cancel      stop its queued or running hunt  (bearer token)
    GET  /runs                  runs, newest first (JSON; HTML for a browser)
    GET  /runs/{id}             one run (JSON; HTML for a browser), its plot at /runs/{id}/plot.png
    POST /runs/{id}/approve     queue the approved action        (bearer token)
    POST /runs/{id}/reject      record the rejection             (bearer token)
    GET  /health

Mutations need the bearer token of the config (or ``$SLEUTH_TOKEN``); with none configured they
are refused. Reads are open when the service listens on loopback only, and need the token too
otherwise. JSON or HTML is chosen by the request's ``Accept`` header.
"""

from __future__ import annotations

import hmac
import json
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from pydantic import BaseModel, Field

from agent.serve import pages
from agent.serve.config import ServeConfig
from agent.serve.payloads import Alert, AlertmanagerPayload
from agent.serve.queue import HuntQueue
from agent.verdict import action_of
from transcripts.store import Store, layout
from transcripts.timeline import timeline_rows


class DecisionIn(BaseModel):
    reason: str = Field(default="", max_length=2000)
    branch: str | None = Field(default=None, max_length=200, pattern=r"^[A-Za-z0-9._/-]+$")


def job_status(job: dict) -> str:
    """A run that has no row yet, as its job tells: queued (or starting), failed before it began,
    or cancelled before it began."""
    return job["status"] if job["status"] in ("failed", "cancelled") else "queued"


def while_deciding(status: str, job: dict | None) -> str:
    """A run's status while a person's decision is being carried out: applying / rejecting."""
    if job and job["kind"] in ("approve", "reject") and job["status"] in ("queued", "starting", "running"):
        return "applying" if job["kind"] == "approve" else "rejecting"
    return status


def wants_html(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "text/html" in accept and "application/json" not in accept.split(",")[0]


def create_app(config: ServeConfig, db: Path, queue: HuntQueue, loopback: bool = True) -> FastAPI:
    app = FastAPI(title="perf-sleuth", version="1")
    runs_dir = layout(db).runs

    def _token_ok(request: Request) -> bool:
        token = config.bearer()
        got = request.headers.get("authorization", "")
        return bool(token) and got.startswith("Bearer ") and hmac.compare_digest(got[7:].encode(), token.encode())

    def mutation(request: Request) -> None:
        if not config.bearer():
            raise HTTPException(403, "mutations are disabled: set token in the config or SLEUTH_TOKEN")
        if not _token_ok(request):
            given = request.headers.get("authorization", "").startswith("Bearer ")
            said = "the bearer token does not match" if given else "a bearer token is required"
            raise HTTPException(401, said, headers={"WWW-Authenticate": "Bearer"})

    def read(request: Request) -> None:
        if not loopback and not _token_ok(request):
            raise HTTPException(401, "a bearer token is required off loopback", headers={"WWW-Authenticate": "Bearer"})

    def store() -> Store:
        return Store(db)

    def run_json(s: Store, run_id: str) -> dict[str, Any]:
        row = s.run(run_id)
        job = queue.job_for_run(run_id)
        if row is None:
            if job is None:
                raise HTTPException(404, f"no run '{run_id}'")
            return {"id": run_id, "status": job_status(job), "job": job, "verdict": None, "error": job.get("error")}
        verdict = json.loads(row["verdict"]) if row.get("verdict") else None
        out = {k: v for k, v in row.items() if k not in ("verdict", "input", "spec")}
        out["verdict"] = verdict
        out["job"] = job
        out["status"] = while_deciding(row["status"], job)
        out["hypotheses"] = s.hypotheses(run_id)
        out["measurements"] = s.measurements(run_id)
        events = s.events(run_id)
        out["events"] = len(events)
        told = [e for e in events if e["kind"] not in ("tool_call", "tool_result", "llm_request", "llm_response")]
        out["phase"] = next((json.loads(e["payload"]).get("phase") for e in reversed(told) if e["payload"]), None)
        # A hunt says each step in its notes (its tool calls, dozens, are in `sleuth show`); an
        # imported session's calls are what its agent did, each on one row with what it got back
        # (the page had shown four messages of a session's 28 events).
        shown = timeline_rows(events) if row.get("kind") == "imported" else told
        out["latest"] = [{k: e[k] for k in ("seq", "t", "kind", "text")} for e in shown]
        return out

    @app.get("/health")
    def health() -> dict:
        return {"ok": True}

    @app.post("/alerts/alertmanager", dependencies=[Depends(mutation)])
    def alertmanager(payload: AlertmanagerPayload) -> dict:
        taken = []
        for a in payload.alerts:
            merged = a.model_copy(
                update={
                    "labels": {**payload.commonLabels, **a.labels},
                    "annotations": {**payload.commonAnnotations, **a.annotations},
                }
            )
            taken.append(queue.take(merged, source="alertmanager"))
        return {"alerts": taken}

    @app.post("/alerts", dependencies=[Depends(mutation)])
    def plain(alert: Alert) -> dict:
        return queue.take(alert, source="plain")

    def run_rows() -> list[dict]:
        s = store()
        try:
            rows = [
                {
                    k: r.get(k)
                    for k in (
                        "id",
                        "started",
                        "ended",
                        "policy",
                        "target",
                        "status",
                        "root_kind",
                        "root_ref",
                        "root_summary",
                        "probes",
                    )
                }
                | {"action": action_of(r)}  # what a person decided: the status says "concluded" either way
                for r in s.runs(limit=200)
            ]
        finally:
            s.close()
        hunts = queue.targets_of_runs()
        for r in rows:
            r["status"] = while_deciding(r["status"], queue.job_for_run(r["id"]))
            r["service_target"] = hunts.get(r["id"])  # None: a run this service did not start
        waiting = [
            {
                "id": j["run_id"],
                "status": job_status(j),
                "target": where_hunted(j["target"]),
                "service_target": j["target"],
                "started": None,
                "root_summary": j.get("error"),
            }
            for j in queue.runs_without_row()
        ]
        return waiting + rows

    def where_hunted(name: str | None) -> str | None:
        """A queued hunt's ``target`` as its run's row will say it (the repo, "on HOST"): it said the
        target's name until the hunt started, and the repo from then on."""
        t = next((x for x in config.targets if x.name == name), None)
        if t is None:
            return name
        return t.repo + (f" on {t.host}" if t.host else "")

    @app.get("/runs", dependencies=[Depends(read)])
    def runs(request: Request):
        rows = run_rows()
        return HTMLResponse(pages.runs_page(rows)) if wants_html(request) else {"runs": rows}

    @app.get("/", include_in_schema=False, dependencies=[Depends(read)])
    def index() -> HTMLResponse:
        return HTMLResponse(pages.runs_page(run_rows()))

    @app.get("/runs/{run_id}", dependencies=[Depends(read)])
    def run(run_id: str, request: Request):
        s = store()
        try:
            data = run_json(s, run_id)
        finally:
            s.close()
        if wants_html(request):
            report = runs_dir / run_id / "report.md"
            return HTMLResponse(pages.run_page(data, report.read_text() if report.exists() else None))
        return data

    @app.get("/runs/{run_id}/plot.png", dependencies=[Depends(read)])
    def plot(run_id: str):
        png = runs_dir / Path(run_id).name / "hunt.png"
        if not png.exists():
            raise HTTPException(404, "no plot yet")
        return FileResponse(png, media_type="image/png")

    def _decide(run_id: str, body: DecisionIn, approved: bool) -> JSONResponse:
        s = store()
        try:
            row = s.run(run_id)
        finally:
            s.close()
        if row is None:
            raise HTTPException(404, f"no run '{run_id}'")
        if row["status"] != "awaiting_approval":
            raise HTTPException(409, f"run '{run_id}' is not awaiting approval ({row['status']})")
        job = queue.decide(run_id, approved, body.reason or ("approved" if approved else "rejected"), body.branch)
        if job["kind"] != ("approve" if approved else "reject"):  # the other decision came first
            # It answered 202 with the other job, and this one was dropped without a word (trial 15).
            raise HTTPException(409, f"run '{run_id}' has a {job['kind']} queued already ({job.get('reason') or ''})")
        return JSONResponse({"run_id": run_id, "job": job}, status_code=202)

    @app.post("/runs/{run_id}/approve", dependencies=[Depends(mutation)])
    def approve(run_id: str, body: DecisionIn) -> JSONResponse:
        return _decide(run_id, body, True)

    @app.post("/runs/{run_id}/reject", dependencies=[Depends(mutation)])
    def reject(run_id: str, body: DecisionIn) -> JSONResponse:
        if not body.reason.strip():
            raise HTTPException(422, "reason: a rejection says why")
        return _decide(run_id, body, False)

    @app.post("/runs/{run_id}/cancel", dependencies=[Depends(mutation)])
    def cancel(run_id: str) -> JSONResponse:
        """Stop a hunt a person does not want (a false alarm, the wrong target): a queued one never
        starts, a running one stops at its last checkpoint (before, neither could be stopped but
        by stopping the service)."""
        job = queue.cancel(run_id)
        if job is None:
            raise HTTPException(409, f"run '{run_id}' has no queued or running hunt of this service to cancel")
        return JSONResponse({"run_id": run_id, "job": job}, status_code=202)

    return app

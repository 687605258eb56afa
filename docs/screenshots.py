"""Make the README's screenshots from a real lab hunt (nothing drawn by hand).

    .venv/bin/python docs/screenshots.py [--out docs/images]

Runs ``sleuth demo`` (the seed scenario, launches at 2 % of their simulated time) into a scratch
store, starts ``sleuth serve`` on that store on 127.0.0.1, opens the run's page in headless
Chromium (Debian's ``chromium`` through Playwright, as the end-to-end test does) and saves:

- ``page.png``: the run's page, awaiting approval (root cause, grouped hypotheses, plot, buttons);
- ``plot.png``: the hunt's plot as the report and the page show it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
BOTTOM_OF_PLOT = "(document.querySelector('img')?.getBoundingClientRect().bottom ?? 2376) + window.scrollY + 24"


def _sleuth() -> list[str]:
    return [sys.executable, "-c", "from agent.cli import main; main()"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SLEUTH_LAB_LAUNCH_SCALE": os.environ.get("SLEUTH_LAB_LAUNCH_SCALE", "0.02")}
    with tempfile.TemporaryDirectory(prefix="sleuth-shots-") as tmp:
        db = Path(tmp) / "runs.db"
        demo = subprocess.run([*_sleuth(), "demo", "--db", str(db), "--json"], capture_output=True, text=True,
                              env=env, timeout=600)  # fmt: skip
        if demo.returncode != 0:
            sys.exit(f"sleuth demo failed: {demo.stderr[-2000:]}")
        run_id = json.loads(demo.stdout)["run_id"]
        shutil.copy(Path(tmp) / "runs" / run_id / "hunt.png", args.out / "plot.png")
        port = _free_port()
        (Path(tmp) / "targets.toml").write_text('token = "screenshots"\n')
        where = ["--bind", f"127.0.0.1:{port}", "--config", str(Path(tmp) / "targets.toml"), "--db", str(db)]
        serve = subprocess.Popen(
            [*_sleuth(), "serve", *where],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"{url}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            from playwright.sync_api import sync_playwright

            with sync_playwright() as p:
                chromium = shutil.which("chromium") or "/usr/bin/chromium"
                browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"{url}/runs/{run_id}")
                page.wait_for_selector("#status")
                page.wait_for_function("document.images.length === 0 || [...document.images].every(i => i.complete)")
                # down to the plot; the timeline below it is long and says nothing a screenshot needs
                bottom = page.evaluate(BOTTOM_OF_PLOT)
                clip = {"x": 0, "y": 0, "width": 1280, "height": min(int(bottom), 3000)}
                page.screenshot(path=str(args.out / "page.png"), full_page=True, clip=clip)
                browser.close()
        finally:
            serve.terminate()
            serve.wait(timeout=30)
    for name in ("page.png", "plot.png"):
        print(f"{args.out / name}: {(args.out / name).stat().st_size} bytes (run {run_id})")


if __name__ == "__main__":
    main()

"""Every slowdown the lab can write is real: built into a commit, served, and measured as intended.

For every cost site and every recipe (variant) of it, and the templates that carry an effect, a
commit adds ``ADD_US`` simulated microseconds per call of the site. The commit and its parent
are launched with a configuration that executes the site, serve the same request, and the
server's device clock (``/get_server_info``) must move by exactly what the kernel table says:
the new kernel's summed work (calls x the batch's work each) x ADD_US, plus the launch overhead
of each eager call. The noise is off
(``noise_cv = 0``), so the tolerance is tight and a machine under load cannot fail it. A recipe
whose code does not import what it calls (the old ``model_forward``) fails here: the server dies
on the request.

One scenario holds all the recipes as consecutive commits (a build per recipe would cost a
build and two launches each); each case compares its commit with its parent.
"""

from __future__ import annotations

import json
import tomllib
import urllib.request

import pytest

from evals.lab.builder import build
from evals.lab.recipes import KERNELS, SITES, TEMPLATES
from evals.lab.spec import Scenario
from tools.git import LocalGit
from tools.server import launch

ADD_US = 25.0
EAGLE = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2"]
FLASHINFER = ["--attention-backend", "flashinfer"]
# The configuration under which each site is on the executed path.
FLAGS = {"allreduce_eager": EAGLE, "draft": EAGLE, "verify": EAGLE}
FLAGS |= {"flashinfer_decode": FLASHINFER, "flashinfer_extend": FLASHINFER}


def _cases() -> list[dict]:
    cases = []
    for site_name, site in SITES.items():
        for i, snippet in enumerate(site.variants):
            cases.append(
                {
                    "id": f"{site_name}-{i}",
                    "path": site.path,
                    "site": site_name,
                    "kernel": snippet.kernel,
                    "flags": FLAGS.get(site_name, []),
                }
            )
    for name, tpl in TEMPLATES.items():
        for cost in tpl.effect_costs:
            kernel = "moe_experts_cutlass" if name == "sm120_moe_runner" else SITES[cost].variants[0].kernel
            cases.append(
                {
                    "id": f"template-{name}",
                    "path": tpl.path,
                    "site": cost,
                    "template": name,
                    "kernel": kernel,
                    "flags": FLAGS.get(cost, []),
                    "replaces": "moe_experts" if name == "sm120_moe_runner" else None,
                }
            )
    # Commits in order of configuration, so each configuration's parents line up.
    return sorted(cases, key=lambda c: (json.dumps(c["flags"]), c["id"]))


CASES = _cases()


def _scenario_of(cases: list[dict]) -> dict[str, int]:
    """The lab gives the n-th slowdown at a site its n-th recipe, and has as many as the site has
    variants: a template that carries a site's effect uses one too, so it goes into a second
    scenario when the plain variants took them all."""
    used: dict[tuple[int, str], int] = {}
    out: dict[str, int] = {}
    for case in sorted(cases, key=lambda c: ("template" in c, c["id"])):
        takes = case.get("template") != "sm120_moe_runner"  # it swaps the MoE kernel instead
        n = 0
        while takes and used.get((n, case["site"]), 0) >= len(SITES[case["site"]].variants):
            n += 1
        if takes:
            used[(n, case["site"])] = used.get((n, case["site"]), 0) + 1
        out[case["id"]] = n
    return out


SCENARIO = _scenario_of(CASES)


def _spec(n: int) -> str:
    """Scenario ``n``: its cases as consecutive commits, in order of configuration."""
    # Four layers instead of 61 and no simulated launch time: the same code paths, a fraction of the time.
    lines = [f'name = "recipes{n}"', "seed = 5", "[system]", "noise_cv = 0.0", "launch_cv = 0.0", "layers = 4"]
    lines += ["launch_s = 0.0"]
    lines += ["[history]", "filler = 1", "[launch]", "flags = []"]
    for case in CASES:
        if SCENARIO[case["id"]] != n:
            continue
        edit = f'{{ path = "{case["path"]}", effect = {{ cost = "{case["site"]}", add_us = {ADD_US} }}'
        if case.get("template"):
            edit += f', template = "{case["template"]}"'
        lines += ["[[committed]]", f'id = "{case["id"]}"', f'subject = "recipe {case["id"]}"', f"edits = [{edit} }}]"]
    lines += ["[alert]", "good = 90", "bad = 80"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def recipe_lab(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("MINITORCH_COUNT_KERNELS", "1")  # the servers keep their kernel table (they inherit it)
    shas: dict[str, tuple[str, int]] = {}
    worlds: list[tuple[LocalGit, str]] = []
    for n in sorted(set(SCENARIO.values())):
        scen = build(Scenario.model_validate(tomllib.loads(_spec(n))), tmp_path_factory.mktemp("recipes") / f"s{n}")
        truth = json.loads((scen.root / "truth.json").read_text())
        shas |= {c["id"]: (c["ref"], n) for c in truth["red_herrings"] if c["id"]}
        ann = json.loads((scen.root / "alert.json").read_text())["commonAnnotations"]
        worlds.append((LocalGit(scen.repo), ann["launch_command"]))
    served: dict[tuple[str, str], dict] = {}

    def serve(sha: str, n: int, flags: list[str], logs) -> dict:
        """Launch ``sha`` with ``flags``, send one request, read the device clock and kernel table."""
        key = (sha, " ".join(flags))
        git, launch_cmd = worlds[n]
        if key not in served:
            with git.worktree(sha) as wt:
                server = launch(launch_cmd + " " + " ".join(flags), wt, logs / f"{sha[:8]}.log", health_timeout_s=60)
                try:
                    body = json.dumps({"prompt": "hello " * 40, "max_tokens": 24, "seed": 1}).encode()
                    req = urllib.request.Request(f"{server.base_url}/v1/completions", body, method="POST")
                    with urllib.request.urlopen(req, timeout=60) as resp:
                        assert json.loads(resp.read())["usage"]["completion_tokens"] == 24
                    with urllib.request.urlopen(f"{server.base_url}/get_server_info", timeout=30) as resp:
                        served[key] = json.loads(resp.read())
                finally:
                    server.stop()
        return served[key]

    yield shas, serve
    mp.undo()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_recipe_slows_what_it_says_by_what_it_says(case, recipe_lab, tmp_path):
    shas, serve = recipe_lab
    sha, n = shas[case["id"]]
    parent = f"{sha}^"
    before, after = serve(parent, n, case["flags"], tmp_path), serve(sha, n, case["flags"], tmp_path)
    k = case["kernel"]
    calls, eager = after["kernel_calls"].get(k, 0), after["eager_kernel_calls"].get(k, 0)
    work = after["kernel_work"].get(k, 0.0)
    assert calls > 0, f"{k} never ran under {case['flags'] or 'the default flags'}: the site is not executed"
    if case.get("replaces"):  # a kernel swapped for a slower one (moe_experts -> cutlass + ADD_US)
        assert after["kernel_calls"].get(case["replaces"], 0) == 0
        expected = work * ADD_US
    else:
        expected = work * ADD_US + eager * KERNELS["launch_overhead"].us
    added = after["device_time_us"] - before["device_time_us"]
    assert added == pytest.approx(expected, rel=0.02), (case["id"], added, expected, calls, eager)

"""The methodical policy: the senior engineer's method from the seeds, deterministic, no LLM.

Reproduce first and quantify noise. Then a ledger of hypotheses ordered by cost and prior, each
stated with the test that could refute it before the test runs:

1. hardware: nvidia-smi clocks, PCIe link and throttle reasons against their maxima (no probe);
2. environment: the tuning variables the server's Python sees (NCCL_*, CUDA_*, ...), blanked vs as-is;
3. uncommitted changes: HEAD vs the working tree (one A/B for all patches); a patch to code the
   server does not execute (a backend the log says is not in use) is demoted, with the reason;
4. history: the last pull or reset in the reflog (its old SHA), or the alert's good ref, vs HEAD;
5. config: the launch that produced the good value vs the current one.

A supported hypothesis is localized (bisection for history, one variable or file at a time for
env and patches), confirmed by an A/B (HEAD vs HEAD with the culprit reverted) and turned into a
proposed action. A confirmation that fails sends the hunt back to the ledger. It never reads
truth.json and knows nothing of any particular scenario.
"""

from __future__ import annotations

import json
import shlex
from functools import cache

from agent import broken, dependencies, multiple
from agent.runtime import Runtime
from agent.state import Action, Hunt, Hypothesis, Measured
from tools.bisect import BisectConfig, BisectResult, ProbeError, bisect
from tools.measure import BrokenState
from tools.stats import compare_launches, shortfall_p

SUSPICIOUS_ENV = (
    "NCCL_",
    "CUDA_",
    "TORCH_",
    "PYTORCH_",
    "SGLANG_",
    "MINISGLANG_",
    "VLLM_",
    "OMP_",
    "MKL_",
    "TRITON_",
    "FLASHINFER_",
    "NVIDIA_TF32",
    "LD_PRELOAD",
    "MALLOC_",
)
NOT_TUNING = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH"}
# A patch under one of these path words is on the path only when the server args say so.
CODE_PATHS = {
    "flashinfer": ("attention_backend", "flashinfer"),
    "triton_backend": ("attention_backend", "triton"),
    "eagle": ("speculative_algorithm", "EAGLE"),
    "cutlass": ("moe_runner_backend", "cutlass"),
}


# -- helpers ---------------------------------------------------------------------------------
def _better(hunt: Hunt, a: Measured, b: Measured) -> bool:
    """Is a better than b in the metric's direction?"""
    return (a.median > b.median) == hunt.target.higher_is_better


def explains(hunt: Hunt, cmp, fast: Measured, slow: Measured) -> bool:
    """Does the A/B show a difference that could explain the regression: significant, in the
    right direction, and at least the smallest effect that matters? A significant 4 % step
    cannot explain a 21 % drop; with a noisy neighbour such steps are common."""
    return cmp.verdict == "different" and _better(hunt, fast, slow) and abs(cmp.delta_pct) >= min_effect_pct(hunt)


def min_effect_pct(hunt: Hunt) -> float:
    t = hunt.target
    if t.good_value and t.bad_value:
        return max(2.0, 0.25 * abs(t.good_value - t.bad_value) / t.good_value * 100)
    return 5.0


def ab(
    hunt: Hunt,
    rt: Runtime,
    a: Measured,
    b: Measured,
    label_a: str,
    label_b: str,
    alpha: float = 0.01,
    better: str | None = None,
    n: int | None = None,
):
    """Compare two states on samples taken together: ``n`` (the budget's samples per state, at
    least 6) new samples of each, interleaved on two warm servers or in balanced launches on a
    one-slot host.
    Samples either side got earlier (the reproduction, another A/B, the bisection) are not used:
    taken at another time, under another load, they make drift look like a difference (two warm
    servers measured one after the other under a neighbour's changing load differed by 9 % on a
    change that does nothing). While unknown, more fresh rounds (as many again, then twice as
    many), joined to the first. One of many tests of the same question passes a smaller
    ``alpha`` (Bonferroni). ``a`` and ``b`` may be measured states or ``Runtime.planned`` ones.

    ``better`` ("a" or "b"): the side that must be better for the hypothesis under test to
    explain the regression. Then an unknown answer whose one-sided test already rules out a gain
    of the smallest effect that matters stops there (``p_shortfall`` <= alpha): more samples, a
    launch or more on a one-slot host, could only make a difference too small to matter
    significant. "either": no side is named (a model's compare); the test is on the side that
    measures better so far (the other one is further still from such a gain)."""
    n = n or max(hunt.budget.samples, 6)  # 5 + 5 reach p <= 0.01 only if independent: see fresh_ab
    a, b = rt.measure_pair(hunt, a, b, n, fresh=True)
    cmp = _ab_round(hunt, a, b, alpha, better)
    for more in (n, 2 * n):
        if cmp.verdict != "unknown" or ruled_out(cmp):
            break
        more_a, more_b = rt.measure_pair(hunt, a, b, more, fresh=True)
        a, b = rt.joined(hunt, a, more_a), rt.joined(hunt, b, more_b)
        cmp = _ab_round(hunt, a, b, alpha, better)
    return cmp, a, b


def _ab_round(hunt: Hunt, a: Measured, b: Measured, alpha: float, better: str | None):
    cmp = launch_aware(hunt, a, b, alpha)
    if better == "either":
        better = "a" if _better(hunt, a, b) else "b"
    if better is not None:
        fast, slow = (a, b) if better == "a" else (b, a)
        cmp.p_shortfall = shortfall_p(
            fast.samples, fast.groups, slow.samples, slow.groups, min_effect_pct(hunt), hunt.target.higher_is_better
        )
    return cmp


def ruled_out(cmp) -> bool:
    """Did the one-sided test rule out a gain large enough to explain the regression?"""
    return cmp.verdict == "unknown" and cmp.p_shortfall is not None and cmp.p_shortfall <= cmp.alpha


def launch_aware(hunt: Hunt, a: Measured, b: Measured, alpha: float = 0.01):
    """Compare two measured states, counting samples of one launch as correlated."""
    return compare_launches(
        a.samples, a.groups, b.samples, b.groups, alpha=alpha, min_effect_pct=min_effect_pct(hunt), interval=False
    )


def fresh_ab(hunt: Hunt, rt: Runtime, a: tuple[str, str], b: tuple[str, str], n: int):
    """A confirmation: a fresh A/B of (label, ref) a against b on servers launched for it, ``n``
    new samples each (at least 6: 5 + 5 is the fewest with which a rank test can reach p <= 0.01
    at all, and only with independent samples; in launches of two or three they count for less,
    and 6 + 6 still reaches it at a design effect up to 1.4), never samples from the bisection
    or the ledger's tests; while the answer is unknown, more fresh rounds, as ``ab``."""
    n = max(n, 6)
    ma, mb = rt.fresh_pair(hunt, a, b, n)
    cmp = launch_aware(hunt, ma, mb)
    for more in (n, 2 * n):
        if cmp.verdict != "unknown":
            break
        more_a, more_b = rt.measure_pair(hunt, ma, mb, more, fresh=True, relaunch=True)
        ma, mb = rt.joined(hunt, ma, more_a), rt.joined(hunt, mb, more_b)
        cmp = launch_aware(hunt, ma, mb)
    return cmp, ma, mb


def _fmt(cmp, a: Measured, b: Measured, metric: str) -> str:
    text = (
        f"{a.label} {a.median:.4g} vs {b.label} {b.median:.4g} {metric} ({cmp.delta_pct:+.1f}%, "
        f"p={cmp.p_value:.2g}, {cmp.verdict}"
    )
    if ruled_out(cmp):
        text += f"; a gain that could explain the drop ruled out, p={cmp.p_shortfall:.2g}"
    return text + ")"


def setup_prefix(hunt: Hunt) -> str:
    """The launch template's setup part (everything before its last ``&&``), ready to prepend."""
    parts = hunt.target.launch.split(" && ")
    prefix = " && ".join(parts[:-1]).replace("{worktree}", shlex.quote(hunt.target.repo)).replace("{port}", "0")
    return f"{prefix} && " if prefix else ""


def launch_env(hunt: Hunt, rt: Runtime) -> dict[str, str]:
    """The environment a Python server sees when started the launch's way (sitecustomize included)."""
    dump = "python3 -c 'import json, os; print(json.dumps(dict(os.environ)))'"
    res = rt.shell(hunt, setup_prefix(hunt) + dump, timeout=60)
    try:
        return json.loads(res["stdout"].strip().splitlines()[-1]) if res["exit_code"] == 0 else {}
    except (ValueError, IndexError):
        return {}


def tuning_vars(env: dict[str, str]) -> list[str]:
    """The tuning knobs among the variables: a variable holding a path is configuration (where
    models or libraries are), not a knob."""
    return sorted(k for k in env if k.startswith(SUSPICIOUS_ENV) and k not in NOT_TUNING and "/" not in env[k])


def changed_files(hunt: Hunt, rt: Runtime) -> list[str]:
    """Every path with uncommitted work: staged, unstaged or untracked (none if git fails)."""
    status = rt.tool("git_status", {}, hunt=hunt)
    if not status.ok:
        return []
    return sorted(set(status.result["staged"] + status.result["unstaged"] + status.result["untracked"]))


def server_args(hunt: Hunt, rt: Runtime) -> dict[str, str]:
    """The server args from the log of the reproduce run (what is actually executed)."""
    return rt.server_args(hunt, "now")


# -- phases ----------------------------------------------------------------------------------
def reproduce(hunt: Hunt, rt: Runtime) -> None:
    try:
        now = rt.measure(hunt, "now", "WORKTREE")
    except BrokenState as exc:  # it does not serve at all: that is the finding to hunt
        broken.reproduce(hunt, rt, exc)
        return
    t = hunt.target
    # The alert's good value is one number; "now" is a sample. While that number lies inside the
    # median's confidence interval, a drop cannot be told from noise: take more samples (twice, at
    # most) before concluding either way. One sample's noise (the CV) is not the median's.
    n = len(now.samples)
    for _ in range(2):
        if not t.good_value or not now.ci_low <= t.good_value <= now.ci_high:
            break
        n *= 2
        now = rt.measure(hunt, "now", "WORKTREE", samples=n)
    hunt.reproduced = now.id
    noise = now.cv * 100
    if t.good_value:
        change = (now.median - t.good_value) / t.good_value * 100  # the metric's own change, signed
        drop = -change if t.higher_is_better else change  # how much worse, in the metric's direction
        hunt.regression = {
            "metric": t.metric,
            "good": t.good_value,
            "bad": round(now.median, 3),
            "delta_pct": round(change, 2),
            "noise_cv_pct": round(noise, 2),
        }
        worse = "" if drop >= 0 else ", better than the alert's good value"
        rt.say(
            hunt,
            "reproduce",
            f"now {now.median:.4g} vs alert good {t.good_value:g}: {change:+.1f}%{worse} (noise CV {noise:.1f}%)",
        )
        if drop < 3.0 or now.ci_low <= t.good_value <= now.ci_high:
            hunt.root_kind, hunt.root_summary = (
                "none",
                (
                    f"no regression beyond noise: now {now.median:.2f} vs good {t.good_value:g} ({change:+.1f}%, "
                    f"median 95% CI [{now.ci_low:.4g}, {now.ci_high:.4g}] over {len(now.samples)} samples, "
                    f"noise CV {noise:.1f}%)"
                ),
            )
            hunt.status = "concluded"
    dependencies.snapshot(hunt, rt)  # stored with the run: a later hunt's reference when this one is good


def plan(hunt: Hunt, rt: Runtime, only: frozenset[str] | None = None) -> None:
    """State the hypotheses, cheapest and likeliest first, each with its test (of the categories
    in ``only``, when given: nothing is asked about a category left out)."""
    hs: list[Hypothesis] = []
    if hunt.head_broken:  # what can break a server outright: the patches or a commit
        only = frozenset({"uncommitted", "history"}) & (only or frozenset({"uncommitted", "history"}))

    def want(category: str) -> bool:
        return only is None or category in only

    def add(category, statement, test, subject=None) -> None:
        hs.append(Hypothesis(id=f"h{len(hs) + 1}", category=category, statement=statement, test=test, subject=subject))

    if want("hardware") and rt.shell(hunt, f"{setup_prefix(hunt)}command -v nvidia-smi", timeout=30)["exit_code"] == 0:
        add(
            "hardware",
            "the GPUs run below nominal (clocks, power, PCIe link)",
            "nvidia-smi: SM clock vs max, PCIe gen/width vs max, throttle reasons",
        )
    env = launch_env(hunt, rt) if want("environment") else {}
    for var in tuning_vars(env):
        add(
            "environment",
            f"{var}={env[var]} in the server's environment slows it",
            "A/B: the working tree with the tuning variables blanked vs as they are",
            var,
        )
    changed = changed_files(hunt, rt) if want("uncommitted") else []
    args = server_args(hunt, rt) if changed else {}
    for path in changed:
        add("uncommitted", f"the uncommitted change to {path} slows it", "A/B: HEAD vs the working tree", path)
        for word, (arg, value) in CODE_PATHS.items():
            if word in path.lower() and arg in args and value.lower() not in args[arg].lower():
                hs[-1].reason = f"not on the executed path: the server runs {arg}='{args[arg]}'"
    if want("dependencies"):
        dependencies.plan(hunt, rt, add)
    candidate = hunt.target.good_ref if want("history") else None
    how = "the alert's good ref"
    reflog = rt.tool("git_reflog", {"limit": 50}, hunt=hunt) if want("history") and candidate is None else None
    if candidate is None and reflog is not None and reflog.ok:
        for e in reflog.result["entries"]:
            if e["command"] in ("pull", "reset", "merge", "rebase", "checkout") and e["old_sha"] != "0" * 40:
                candidate, how = e["old_sha"], f"HEAD before '{e['action']}' ({e['time']})"
                break
    if candidate:
        hunt.good_candidate = rt.resolve(hunt, candidate)
        add(
            "history",
            f"a commit since {hunt.good_candidate[:10]} ({how}) slows it",
            f"A/B: {hunt.good_candidate[:10]} vs HEAD, then bisection",
            hunt.good_candidate,
        )
    if want("config") and hunt.target.good_launch and hunt.target.good_launch != hunt.target.launch:
        add("config", "a launch flag changed since the good run", "A/B: the good launch vs the current one")
    hunt.hypotheses = hs
    if hunt.head_broken:
        broken.restate(hunt)
    for h in hs:
        rt.say(hunt, "hypothesis", f"{h.id} [{h.category}] {h.statement} - test: {h.test}")


def next_open(hunt: Hunt) -> Hypothesis | None:
    return next((h for h in hunt.hypotheses if h.status == "open"), None)


def test(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    """Run the hypothesis' discriminating test and record the verdict (for its whole group).
    A test whose probe cannot launch leaves its hypotheses inconclusive, with the reason."""
    if hunt.head_broken:
        broken.test(hunt, rt, h)
        return
    fn = {
        "hardware": _test_hardware,
        "environment": _test_env,
        "uncommitted": _test_uncommitted,
        "history": _test_history,
        "config": _test_config,
        "dependencies": dependencies.test,
    }[h.category]
    try:
        fn(hunt, rt, h)
    except ProbeError as exc:
        group = [x for x in hunt.hypotheses if x.category == h.category and x.status == "open"] or [h]
        _verdict(group, "inconclusive", f"the test could not run: {str(exc).splitlines()[0]}", [])


def _verdict(group: list[Hypothesis], status, reason: str, evidence: list[str]) -> None:
    for g in group:
        g.status = status
        g.reason = f"{reason}; {g.reason}" if g.reason and status != "supported" else reason
        g.evidence = evidence
        if status == "refuted" and "not on the executed path" in g.reason:
            g.status = "demoted"


def _test_hardware(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    rec = rt.tool("nvidia_smi", {"setup": setup_prefix(hunt)}, hunt=hunt)
    if not rec.ok:
        _verdict([h], "inconclusive", rec.error or "nvidia-smi failed", [])
        return
    problems = []
    for g in rec.result["gpus"]:
        sm, smax = float(g["clocks.sm"]), float(g["clocks.max.sm"])
        if sm < 0.85 * smax:
            problems.append(("clocks.sm", f"GPU {g['index']} SM clock {sm:.0f}/{smax:.0f} MHz"))
        if (g["pcie.link.gen.current"], g["pcie.link.width.current"]) != (
            g["pcie.link.gen.max"],
            g["pcie.link.width.max"],
        ):
            problems.append(
                (
                    "pcie.link",
                    f"GPU {g['index']} PCIe Gen{g['pcie.link.gen.current']} "
                    f"x{g['pcie.link.width.current']} (max Gen{g['pcie.link.gen.max']} "
                    f"x{g['pcie.link.width.max']})",
                )
            )
    g0 = rec.result["gpus"][0]
    if problems:
        h.subject = problems[0][0]
        _verdict([h], "supported", "; ".join(p[1] for p in problems[:4]), [])
    else:
        _verdict(
            [h],
            "refuted",
            f"{len(rec.result['gpus'])} GPUs at SM {g0['clocks.sm']}/{g0['clocks.max.sm']} MHz, "
            f"PCIe Gen{g0['pcie.link.gen.current']} x{g0['pcie.link.width.current']} = max, "
            f"throttle: {g0.get('clocks_throttle_reasons.active', '?')}",
            [],
        )


def _test_env(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    group = [x for x in hunt.hypotheses if x.category == "environment" and x.status == "open"]
    patches = [x for x in hunt.hypotheses if x.category == "uncommitted" and x.status == "open"]
    if patches and _clean_clears(hunt, rt, group, patches):
        return
    cmp, now2, without, text = _blanked_vs_now(hunt, rt, "env-blanked", "WORKTREE", group)
    if explains(hunt, cmp, without, now2):
        _verdict(group, "supported", text, [now2.id, without.id])
        _localize_env(hunt, rt, group, now2)
    else:
        _verdict(group, "refuted", text, [now2.id, without.id])


def _blanked_vs_now(hunt: Hunt, rt: Runtime, label: str, ref: str, env: list[Hypothesis]):
    """A/B: what was reproduced ("now") vs ``ref`` with the suspected variables blanked, the
    blanked side the one that must be better; (comparison, now, blanked, its text)."""
    now = hunt.get(hunt.reproduced)  # type: ignore[arg-type]
    blanked = rt.planned(hunt, label, ref, env={x.subject: "" for x in env if x.subject})
    cmp, now, blanked = ab(hunt, rt, now, blanked, "now", label, better="b")
    return cmp, now, blanked, _fmt(cmp, now, blanked, hunt.target.metric)


def _clean_clears(hunt: Hunt, rt: Runtime, env: list[Hypothesis], patches: list[Hypothesis]) -> bool:
    """One A/B for every environment and patch suspect at once: now vs HEAD (no uncommitted
    change) with the tuning variables blanked. On a one-slot host each A/B costs launches; when
    the clean state is no faster, both groups are refuted by this one experiment instead of two.
    When it is faster, each group is tested on its own as before (returns False)."""
    cmp, now, clean, text = _blanked_vs_now(hunt, rt, "clean", "HEAD", env)
    if explains(hunt, cmp, clean, now):
        rt.say(hunt, "localize", f"HEAD with the tuning variables blanked is faster ({text}): each group on its own")
        return False
    why = f"one A/B for {len(env)} variable(s) and {len(patches)} changed file(s), HEAD with the variables blanked: "
    _verdict(env + patches, "refuted", why + text, [now.id, clean.id])
    # The variables change nothing that matters: the history A/B and the bisection run with them
    # blanked too, so this clean HEAD is already the history's HEAD (one launch fewer).
    hunt.probe_env = {x.subject: "" for x in env if x.subject}
    return True


def _localize_env(hunt: Hunt, rt: Runtime, group: list[Hypothesis], now: Measured) -> None:
    """One variable at a time: which blanked variable gives the speed back? With many variables,
    one test in a hundred would pass by chance at alpha 0.01: each gets alpha / len(group)
    (Bonferroni) and must also recover at least the smallest effect that matters."""
    alpha = 0.01 / max(1, len(group))
    for h in group:
        one = rt.planned(hunt, f"env-blank-{h.subject}", "WORKTREE", env={h.subject: ""})
        cmp, now, one = ab(hunt, rt, now, one, "now", one.label, alpha=alpha, better="b")
        if explains(hunt, cmp, one, now):
            h.status, h.reason, h.evidence = "supported", _fmt(cmp, now, one, hunt.target.metric), [now.id, one.id]
        else:
            h.status, h.reason, h.evidence = "refuted", _fmt(cmp, now, one, hunt.target.metric), [now.id, one.id]


def _test_uncommitted(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    group = [x for x in hunt.hypotheses if x.category == "uncommitted" and x.status == "open"]
    now = hunt.get(hunt.reproduced)  # type: ignore[arg-type]
    head = rt.planned(hunt, "HEAD", "HEAD")
    cmp, head, now = ab(hunt, rt, head, now, "HEAD", "now", better="a")
    text = _fmt(cmp, head, now, hunt.target.metric)
    if explains(hunt, cmp, head, now):
        _verdict(group, "supported", text, [head.id, now.id])
        if len(group) > 1:
            _localize_patch(hunt, rt, group, head, now)
    else:
        _verdict(group, "refuted", text, [head.id, now.id])


def _localize_patch(hunt: Hunt, rt: Runtime, group: list[Hypothesis], head: Measured, now: Measured) -> None:
    """Halve the changed files: HEAD plus half of them (a snapshot commit) vs HEAD, until one is left.
    A half reproduces the slowdown only if it is measurably slower than HEAD *and* carries at
    least half of the whole working tree's drop: a 2 % wobble is not the 24 % being hunted.
    Files on a path the server does not execute go last, so they are tested last."""
    full = now.median - head.median
    suspects = sorted(group, key=lambda x: "not on the executed path" in x.reason)
    while len(suspects) > 1:
        half = suspects[: len(suspects) // 2]
        rest = suspects[len(suspects) // 2 :]
        paths = [x.subject for x in half if x.subject]
        m = rt.planned(hunt, f"HEAD+{len(paths)} patch(es)", "WORKTREE", paths=paths)
        moved, head, m, numbers = halving_step(hunt, rt, head, m, "HEAD", full)
        if moved:
            cleared, suspects = rest, half
            why = f"localization: HEAD plus only [{', '.join(paths)}] already reproduces the slowdown ({numbers})"
        else:
            cleared, suspects = half, rest
            why = f"localization: HEAD plus this change (with [{', '.join(paths)}]) is as fast as HEAD ({numbers})"
        for x in cleared:
            x.status, x.reason, x.evidence = "refuted", why, [head.id, m.id]
    rt.say(hunt, "localize", f"the uncommitted change that matters: {suspects[0].subject}")


def halving_step(hunt: Hunt, rt: Runtime, base: Measured, m: Measured, base_label: str, full: float):
    """One step of a localization by halving: A/B ``base`` vs ``m`` (the state with half of the
    suspects changed). The half holds the culprit when ``m`` differs measurably from ``base`` and
    moved at least half of ``full`` (the signed change of all suspects together, from ``base``):
    a 2 % wobble is not the 24 % being hunted. Returns (holds it, base, m, the A/B in words)."""
    cmp, base, m = ab(hunt, rt, base, m, base_label, m.label)
    share = (m.median - base.median) / full if full else 0.0
    # share >= 0.5 > 0 also means m moved from base the way all the suspects together did (the
    # callers' ``full`` comes from an A/B that explained the drop, so its sign is the right one).
    moved = cmp.verdict == "different" and share >= 0.5
    return moved, base, m, _fmt(cmp, base, m, hunt.target.metric)


def _test_history(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    """The known-good commit vs HEAD, both under the bisection's environment (``probe_env``)."""
    env = hunt.probe_env or None
    good = rt.planned(hunt, "good-candidate", hunt.good_candidate, env=env)  # type: ignore[arg-type]
    head = rt.planned(hunt, "HEAD", "HEAD", env=env)
    cmp, good, head = ab(hunt, rt, good, head, "good-candidate", "HEAD", better="a")
    text = _fmt(cmp, good, head, hunt.target.metric)
    if env:
        text += f"; both with {', '.join(sorted(env))} blanked (they change nothing: see the clean A/B)"
    status = "supported" if explains(hunt, cmp, good, head) else "refuted"
    _verdict([h], status, text, [good.id, head.id])


def _test_config(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    t = hunt.target
    cur = rt.planned(hunt, "launch-now", "HEAD")
    old = rt.planned(hunt, "launch-good", "HEAD", launch=t.good_launch)
    cmp, old, cur = ab(hunt, rt, old, cur, "launch-good", "launch-now", better="a")
    text = _fmt(cmp, old, cur, t.metric)
    flags_now, flags_good = set(shlex.split(t.launch)), set(shlex.split(t.good_launch or ""))
    diff = sorted(f for f in (flags_now ^ flags_good) if f.startswith("--"))
    h.subject = diff[0] if diff else "flags"
    _verdict(
        [h],
        "supported" if explains(hunt, cmp, old, cur) else "refuted",
        text,
        [old.id, cur.id],
    )


# -- after the ledger ------------------------------------------------------------------------
def bisect_history(hunt: Hunt, rt: Runtime, good_ref: str, bad_ref: str) -> tuple[list[str], BisectResult]:
    """Bisect good..bad with the hunt's probes (budgeted, recorded); the culprits land in
    ``hunt.culprits`` and every probed commit's samples in its measurements."""
    good, head = rt.resolve(hunt, good_ref), rt.resolve(hunt, bad_ref)
    hunt.good_candidate = hunt.good_candidate or good
    parents = rt.rev_list(hunt, good, head)
    no_ops = _prune(hunt, rt, good, head, parents)
    rt.say(
        hunt, "localize", f"bisecting {len(parents) - len(no_ops)} of {len(parents)} commits {good[:10]}..{head[:10]}"
    )
    # No sandwich on the first bisection: the confirmation A/B (HEAD vs HEAD with the culprit
    # reverted) proves the same thing more directly. After a failed confirmation the second
    # bisection verifies each culprit against its parent with more samples.
    seen: dict[str, list[float]] = {}
    res = bisect(
        parents,
        good,
        head,
        rt.probe_fn(hunt, seen),
        BisectConfig(
            higher_is_better=hunt.target.higher_is_better,
            verify=bool(hunt.rejected_culprits),
            known_ref_samples=_known_samples(hunt, good, head, rt.probe_state(hunt, head).launch),
            no_ops=no_ops,
        ),
    )
    known = {m.ref for m in hunt.measurements}
    for sha, got in seen.items():
        if sha not in known:
            rt.record_samples(hunt, f"bisect {sha[:8]}", sha, got)
    hunt.culprits = [c.sha for c in res.culprits]
    return parents, res


def _prune(hunt: Hunt, rt: Runtime, good: str, head: str, parents: dict[str, list[str]]) -> list[str]:
    """The commits of the range that touch no file the workload executes (``tools.codepath``):
    the bisection neither probes nor blames them. Listed on the hunt with the reason."""
    paths = rt.code_paths(hunt, good, head)
    if not paths["traced"]:
        rt.say(hunt, "localize", f"no code-path pruning: {paths['why']}")
        return []
    pruned = [c for c in paths["commits"] if c["pruned"] and c["sha"] in parents]
    hunt.pruned = [{"sha": c["sha"], "files": c["files"], "reason": c["reason"]} for c in pruned]
    if pruned:
        listed = "; ".join(f"{c['sha'][:10]} ({c['reason']})" for c in pruned)
        rt.say(
            hunt,
            "localize",
            f"{len(pruned)} of {len(parents)} commits touch no executed file ({paths['why']}): {listed}",
        )
    return [c["sha"] for c in pruned]


def _known_samples(hunt: Hunt, good: str, head: str, launch: str) -> int:
    """Samples the hunt already holds of both ends as the bisection probes them (the target's
    launch under ``probe_env``, no patch): the history A/B's, reused as the references."""
    plain = [m for m in hunt.measurements if m.launch == launch and m.env == hunt.probe_env]
    have = {ref: max((len(m.samples) for m in plain if m.ref == ref), default=0) for ref in (good, head)}
    return min(have.values())


def subject_of(hunt: Hunt, rt: Runtime, sha: str) -> str:
    show = rt.tool("git_show_stat", {"ref": sha}, hunt=hunt)
    return show.result["commit"]["subject"] if show.ok else ""


def localize(hunt: Hunt, rt: Runtime) -> None:
    """Name the culprit of the first supported hypothesis (by category priority)."""
    if hunt.head_broken:
        broken.localize(hunt, rt, subject_of)
        return
    sup = [h for h in hunt.hypotheses if h.status == "supported"]
    history = next((h for h in hunt.hypotheses if h.category == "history" and h.status == "refuted"), None)
    if not sup and history is not None:
        # The known-good ref measures like HEAD here: whatever the alert saw is not in the code,
        # the environment the launch sees, the patches or the flags.
        if hunt.regression.get("delta_pct") is not None and not _alert_within_noise(hunt):
            _external(hunt, history)  # a drop beyond noise, and beyond the alert number's own noise
            return
        hunt.root_kind, hunt.status = "none", "concluded"
        r = hunt.regression
        within = (
            f"; the alert's good {r['good']:g} is within two sample sds of now ({r['bad']:g}, noise CV "
            f"{r['noise_cv_pct']:.1f}%): one run's noise, not a regression"
            if r.get("delta_pct") is not None
            else ""
        )
        hunt.root_summary = (
            f"no regression between the known-good ref and now on this machine ({history.reason}){within}; "
            "every hypothesis refuted. If the alert is real, look outside the repo: packages, driver, machine"
        )
        return
    if not sup:
        hunt.status = "inconclusive"
        hunt.root_summary = "no hypothesis was supported; the regression is real but unexplained" + _packages_said(hunt)
        return
    order = ["history", "dependencies", "environment", "uncommitted", "config", "hardware"]
    cats = sorted({h.category for h in sup}, key=order.index)
    if len(cats) > 1:  # several causes of different kinds: each one named, its share measured
        multiple.localize(hunt, rt, cats, lambda cat: name_cause(hunt, rt, cat, sup))
        return
    name_cause(hunt, rt, cats[0], sup)


def name_cause(hunt: Hunt, rt: Runtime, category: str, sup: list[Hypothesis]) -> None:
    """Name the cause a supported ``category`` points at in ``hunt.root_*`` (bisecting history)."""
    by = {h.category: h for h in reversed(sup)}
    if category == "history":
        h = by["history"]
        parents, res = bisect_history(hunt, rt, hunt.good_candidate, "HEAD")  # type: ignore[arg-type]
        subject = subject_of(hunt, rt, hunt.culprits[0])
        hunt.root_kind, hunt.root_ref = "commit", hunt.culprits[0]
        hunt.root_summary = f'{hunt.culprits[0][:10]} "{subject}"'
        pruned = f" ({len(hunt.pruned)} pruned: no executed file)" if hunt.pruned else ""
        h.reason += (
            f"; bisection: {len(parents)} commits{pruned}, {res.probes} probes, {res.samples} samples -> "
            + ", ".join(
                f"{c.sha[:10]} ({c.delta_pct:+.1f}% vs parent, verified={c.verified})"
                if c.delta_pct is not None
                else c.sha[:10]
                for c in res.culprits
            )
        )
        rt.say(hunt, "localize", f"culprit {hunt.root_summary}")
    elif category == "dependencies":
        dependencies.conclude(hunt, sup)
    elif category == "environment":
        named = [h for h in sup if h.category == "environment"]
        hunt.root_kind, hunt.root_ref = "env", named[0].subject
        hunt.root_summary = f"{named[0].statement}"
    elif category == "uncommitted":
        paths = [h.subject or "" for h in sup if h.category == "uncommitted"]
        hunt.root_kind, hunt.root_ref = "uncommitted", paths[0] if len(paths) == 1 else ", ".join(paths)
        hunt.root_summary = (
            f"the uncommitted change to {paths[0]} makes it slower than HEAD"
            if len(paths) == 1
            else f"the uncommitted changes ({len(paths)} files) make it slower than HEAD"
        )
    elif category == "config":
        hunt.root_kind, hunt.root_ref = "config", by["config"].subject
        hunt.root_summary = f"launch flag {by['config'].subject} changed since the good run"
    elif category == "hardware":
        hunt.root_kind, hunt.root_ref = "hardware", by["hardware"].subject
        hunt.root_summary = by["hardware"].reason


def _alert_within_noise(hunt: Hunt) -> bool:
    """The known-good commit measures like HEAD: is the alert's good value itself within the
    benchmark's noise of what is measured now? That value is one run, taken elsewhere and earlier:
    its own spread is at least one sample's (and a launch's level moves by a few percent on a
    one-slot host, which the median of one launch's samples does not show). Within two sample
    sds it is no evidence of a regression at all."""
    now = hunt.get(hunt.reproduced) if hunt.reproduced else None
    good = hunt.target.good_value
    if now is None or not good:
        return False
    return abs(good - now.median) <= 2 * now.cv * abs(now.median)


def _external(hunt: Hunt, history: Hypothesis) -> None:
    """A drop reproduced beyond noise that nothing in the repository explains: not ``none`` (which
    means "no regression beyond noise"), but ``external``, with what was measured and what remains
    to look at (packages, driver, the host)."""
    r = hunt.regression
    refuted = [h for h in hunt.hypotheses if h.status in ("refuted", "demoted") and h.category != "history"]
    cats = sorted({h.category for h in refuted})
    hunt.root_kind, hunt.status = "external", "concluded"
    hunt.root_summary = (
        f"a real drop that nothing in the repository explains: now {r['bad']:g} vs the alert's good {r['good']:g} "
        f"{r['metric']} ({r['delta_pct']:+.1f}%, noise CV {r['noise_cv_pct']:.1f}%), but the known-good commit "
        f"measures like HEAD ({history.reason})"
        + (f"; refuted too: {', '.join(cats)} ({len(refuted)} hypotheses)" if cats else "")
        + _packages_said(hunt)
        + ". What remains is outside the repository: installed packages (pip's log), the driver, the host"
    )
    hunt.action = Action(
        kind="investigate",
        detail="outside the repository: compare installed packages, driver and host with the good run",
    )


def _packages_said(hunt: Hunt) -> str:
    """What the external summary says of the packages: what changed (and was not shown to
    matter), or that nothing could be compared."""
    untested = [h for h in hunt.hypotheses if h.category == "dependencies" and h.status == "inconclusive"]
    if hunt.package_changes:
        named = ", ".join(f"{c['name']} {c['old']} -> {c['new']}" for c in hunt.package_changes[:6])
        why = f" (untested: {untested[0].reason})" if untested else ""
        return f"; packages changed since {hunt.package_reference}: {named}{why}"
    if hunt.package_reference:
        return f"; no package changed since {hunt.package_reference}"
    return "; packages: no reference to compare with (no earlier good hunt on this host, no --pip-log)"


def confirm(hunt: Hunt, rt: Runtime) -> bool:
    """A/B: HEAD vs HEAD with each bisected culprit reverted. A culprit whose revert recovers
    nothing is dropped (with several culprits, one can be noise); the first one kept is the root
    cause. Returns whether any culprit survived."""
    if hunt.head_broken:
        return broken.confirm(hunt, rt, _record_outcome)
    if hunt.root_kind == "multiple":
        return multiple.confirm(hunt, rt, _confirm_commits)
    ok = hunt.root_kind != "commit" or _confirm_commits(hunt, rt)  # the others: their own A/B already
    if ok:
        _explained(hunt, rt)
    return ok


def _explained(hunt: Hunt, rt: Runtime) -> None:
    """How much of the reproduced drop the one named cause recovers (its own A/B), on the verdict's
    ``regression.explained_pct``; under 80 % the summary says the rest is not explained."""
    category = {"commit": "history", "env": "environment", "dependency": "dependencies"}.get(
        hunt.root_kind or "", hunt.root_kind or ""
    )
    pct = multiple.share(hunt, {"kind": hunt.root_kind, "category": category, "confirmation": hunt.confirmation})
    if pct is None:
        return
    hunt.regression["explained_pct"] = pct
    if pct < 80:
        hunt.root_summary += f"; it recovers {pct:.0f}% of the drop: the rest is not explained"
        rt.say(hunt, "confirm", f"the named cause recovers {pct:.0f}% of the drop; the rest is not explained")


def _confirm_commits(hunt: Hunt, rt: Runtime) -> bool:
    """Each of ``hunt.culprits`` against its revert; the first kept becomes ``hunt.root_ref``."""
    kept: list[tuple[str, dict]] = []
    for sha in list(dict.fromkeys(hunt.culprits or [hunt.root_ref or ""])):
        hunt.root_ref = sha
        if _confirm_one(hunt, rt):
            kept.append((sha, hunt.confirmation))
        elif len(hunt.culprits) > 1:
            rt.say(hunt, "confirm", f"{sha[:10]} dropped: its revert recovers nothing")
    if not kept:
        return False
    first = hunt.culprits[0] if hunt.culprits else kept[0][0]
    hunt.culprits = [sha for sha, _ in kept]
    hunt.root_ref, hunt.confirmation = kept[0]
    if hunt.root_ref != first:
        hunt.root_summary = f'{hunt.root_ref[:10]} "{subject_of(hunt, rt, hunt.root_ref)}"'
    return True


def _confirm_one(hunt: Hunt, rt: Runtime) -> bool:
    """HEAD vs HEAD with ``hunt.root_ref`` reverted (or, if the revert conflicts, vs its parent)."""
    plan = rt.tool("git_prepare_revert", {"culprit": hunt.root_ref, "base": "HEAD"}, hunt=hunt)
    # After a failed confirmation, the next one takes more samples than the cached ones it failed on.
    n = hunt.budget.samples * (1 + len(hunt.rejected_culprits))
    if not plan.ok or plan.result["conflict"]:
        return _confirm_against_parent(hunt, rt, plan, n)
    revert = plan.result["revert_sha"]
    cmp, head, fixed = fresh_ab(hunt, rt, ("HEAD", "HEAD"), ("HEAD+revert", revert), n)
    ok = explains(hunt, cmp, fixed, head)
    text = _fmt(cmp, head, fixed, hunt.target.metric) + _freshness(head, fixed)
    return _record_confirmation(hunt, rt, ok, cmp, text, [head.id, fixed.id], revert_sha=revert, plan=plan.result)


def _freshness(a: Measured, b: Measured) -> str:
    launches = len(a.groups) + len(b.groups)
    return f"; fresh: {len(a.samples)} + {len(b.samples)} new samples" + (
        f" in {launches} launches" if launches else ""
    )


def _record_confirmation(hunt: Hunt, rt: Runtime, ok: bool, cmp, text: str, evidence: list[str], **extra) -> bool:
    """Keep a confirmation A/B's outcome on the hunt and say it."""
    hunt.regression["p_value"] = cmp.p_value
    return _record_outcome(hunt, rt, ok, text, evidence, p_value=cmp.p_value, delta_pct=cmp.delta_pct, **extra)


def _record_outcome(hunt: Hunt, rt: Runtime, ok: bool, text: str, evidence: list[str], **extra) -> bool:
    """Keep a confirmation's outcome (an A/B, or "does it serve") on the hunt and say it."""
    hunt.confirmation = {"ok": ok, "text": text, **extra, "evidence": evidence}
    rt.say(hunt, "confirm", ("confirmed: " if ok else "NOT confirmed: ") + text)
    return ok


def _confirm_against_parent(hunt: Hunt, rt: Runtime, plan, n: int) -> bool:
    """The revert cannot be built (later commits changed the same lines): prove the culprit by an
    A/B against its own parent instead; the fix is then a person's merge, not a prepared commit."""
    why = plan.error or f"the revert conflicts in {', '.join(plan.result['conflicting_files'])}"
    ref = hunt.root_ref or ""
    cmp, parent, culprit = fresh_ab(hunt, rt, ("culprit^", f"{ref}^"), ("culprit", ref), n)
    ok = explains(hunt, cmp, parent, culprit)
    text = f"{why}; instead: " + _fmt(cmp, parent, culprit, hunt.target.metric) + _freshness(parent, culprit)
    return _record_confirmation(hunt, rt, ok, cmp, text, [parent.id, culprit.id], why=why, conflict=True)


def confirm_failed(hunt: Hunt, rt: Runtime) -> None:
    """Self-correction: the culprit did not survive its A/B; say so and go back to the ledger."""
    why = hunt.confirmation.get("text") or hunt.confirmation.get("why")
    if hunt.root_kind == "commit" and hunt.root_ref and not hunt.rejected_culprits and not hunt.head_broken:
        # The history A/B stands; the bisection may have been misled by one noisy probe.
        # Bisect once more, this time verifying each culprit against its parent.
        hunt.rejected_culprits.append(hunt.root_ref)
        for h in hunt.hypotheses:
            if h.category == "history" and h.status == "supported":
                h.reason += f"; {hunt.root_ref[:10]} not confirmed ({why})"
        rt.say(hunt, "self-correction", f"{hunt.root_ref[:10]} not confirmed ({why}); bisecting again, verified")
        hunt.root_kind, hunt.root_ref, hunt.culprits = None, None, []
        return
    for h in hunt.hypotheses:
        if h.category == "history" and h.status == "supported":
            h.status = "inconclusive"
            h.reason += f"; confirmation failed: {why}"
    rt.say(hunt, "self-correction", f"{why}; back to the ledger")
    hunt.root_kind, hunt.root_ref, hunt.culprits = None, None, []
    if not any(h.status == "supported" for h in hunt.hypotheses):
        hunt.status = "inconclusive"
        hunt.root_summary = "the bisected commit did not survive its confirmation A/B; nothing else supported"


def propose(hunt: Hunt) -> None:
    hunt.action = multiple.propose(hunt, action_for) if hunt.root_kind == "multiple" else action_for(hunt)


def action_for(hunt: Hunt) -> Action:
    """The fix of the hunt's root cause (one kind), for a person to approve."""
    k, ref = hunt.root_kind, hunt.root_ref
    if k == "commit" and hunt.confirmation.get("conflict"):
        return Action(
            kind="investigate",
            ref=ref,
            detail=f"{hunt.confirmation['why']}: revert {ref} by hand (`git revert {ref}`) and resolve",
        )
    elif k == "commit":
        return Action(
            kind="revert",
            ref=ref,
            revert_sha=hunt.confirmation.get("revert_sha"),
            branch=f"sleuth/revert-{(ref or '')[:10]}",
            detail=f"revert {ref} on a new branch (the prepared revert commit)",
        )
    elif k == "env":
        return Action(kind="unset", ref=ref, detail=f"remove {ref} from the server's environment")
    elif k == "uncommitted":
        return Action(kind="restore", ref=ref, detail=f"discard the uncommitted change to {ref}")
    elif k == "config":
        return Action(kind="restore", ref=ref, detail=f"launch with the good flags ({ref})")
    elif k == "hardware":
        return Action(kind="investigate", ref=ref, detail="hardware below nominal: not fixable in software")
    elif k == "dependency":
        return dependencies.propose(hunt)
    else:
        return Action(kind="none")


# -- the policies a hunt can name -----------------------------------------------------------
class Methodical:
    """The senior engineer's method above: every hypothesis category, cheapest first."""

    name = "methodical"
    only: frozenset[str] | None = None

    def reproduce(self, hunt: Hunt, rt: Runtime) -> None:
        reproduce(hunt, rt)

    def plan(self, hunt: Hunt, rt: Runtime) -> None:
        plan(hunt, rt, self.only)

    def investigating(self, hunt: Hunt) -> bool:
        """Is there more to investigate before localizing? (An open hypothesis.)"""
        return next_open(hunt) is not None

    def investigate(self, hunt: Hunt, rt: Runtime) -> None:
        """One step of the loop: the next open hypothesis, its test, its verdict."""
        h = next_open(hunt)
        if h is not None:
            rt.say(hunt, "test", f"testing {h.id} [{h.category}]: {h.test}")
            test(hunt, rt, h)
            rt.say(hunt, "verdict", f"{h.id} {h.status}: {h.reason}")

    def localize(self, hunt: Hunt, rt: Runtime) -> None:
        localize(hunt, rt)

    def confirm(self, hunt: Hunt, rt: Runtime) -> bool:
        return confirm(hunt, rt)

    def confirm_failed(self, hunt: Hunt, rt: Runtime) -> None:
        confirm_failed(hunt, rt)

    def propose(self, hunt: Hunt) -> None:
        propose(hunt)


class BisectOnly(Methodical):
    """What a bisect-first on-call does: the history hypothesis only (no hardware, environment,
    uncommitted or config checks). A baseline for evaluations and a second policy for replays."""

    name = "bisect-only"
    only = frozenset({"history"})


POLICY_NAMES = ("methodical", "bisect-only", "llm")


@cache
def _policies() -> dict[str, Methodical]:
    from agent.llm_policy import LLMPolicy  # it builds on this module

    return {p.name: p for p in (Methodical(), BisectOnly(), LLMPolicy())}


def get_policy(name: str) -> Methodical:
    try:
        return _policies()[name]
    except KeyError:
        raise ValueError(f"unknown policy '{name}' (known: {', '.join(POLICY_NAMES)})") from None

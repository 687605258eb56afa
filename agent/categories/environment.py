"""Environment: a tuning variable the server's Python sees (NCCL_*, CUDA_*, ...) slows it.

Suspected: every tuning variable in the environment a launch gets (its setup and sitecustomize
included). Tested by one A/B: now vs HEAD with every variable blanked (the clean A/B, which
clears the uncommitted patches at the same time when it is no faster), else now vs the working
tree with the variables blanked; localized one variable at a time (Bonferroni). Fix: unset it.
Every other variable that could be a knob is suspected only once a drop is left that the
known-good commit does not explain (``rest``), tested by one A/B and halved where it counts.
"""

from __future__ import annotations

import json
import re
import statistics

from agent import joint
from agent.experiments import ab, explains, fmt, set_verdict, setup_prefix
from agent.multiple import EXPLAINED_PCT, fraction
from agent.runtime import Runtime
from agent.state import Action, Hunt, Hypothesis, Measured

NAME = "environment"

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


def suspect(hunt: Hunt, rt: Runtime, add) -> None:
    env = launch_env(hunt, rt)
    for var in tuning_vars(env):
        add(
            NAME,
            f"{var}={env[var]} in {where(hunt)} environment slows it",
            "A/B: the working tree with the tuning variables blanked vs as they are",
            var,
        )


def test(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    group = [x for x in hunt.hypotheses if x.category == "environment" and x.status == "open"]
    patches = [x for x in hunt.hypotheses if x.category == "uncommitted" and x.status == "open"]
    if patches and _clean_clears(hunt, rt, group, patches):
        return
    cmp, now2, without, text = _blanked_vs_now(hunt, rt, "env-blanked", "WORKTREE", group)
    if explains(hunt, cmp, without, now2):
        set_verdict(group, "supported", text, [now2.id, without.id])
        _localize_env(hunt, rt, group, now2)
    else:
        set_verdict(group, "refuted", text, [now2.id, without.id])
        # As when the clean A/B clears them: the variables change nothing, so the history A/B and
        # the bisection run with them blanked, and the clean HEAD and known-good commit measured
        # in the clean A/B's experiment (``_three_arms``) are the history A/B's first round.
        hunt.probe_env = _blanked(group)


def _blanked_vs_now(hunt: Hunt, rt: Runtime, label: str, ref: str, env: list[Hypothesis]):
    """A/B: what was reproduced ("now") vs ``ref`` with the suspected variables blanked, the
    blanked side the one that must be better; (comparison, now, blanked, its text)."""
    now = hunt.get(hunt.reproduced)  # type: ignore[arg-type]
    blanked = rt.planned(hunt, label, ref, env=_blanked(env))
    cmp, now, blanked = ab(hunt, rt, now, blanked, "now", label, better="b")
    return cmp, now, blanked, fmt(cmp, now, blanked, hunt.target.metric)


def _clean_clears(hunt: Hunt, rt: Runtime, env: list[Hypothesis], patches: list[Hypothesis]) -> bool:
    """One A/B for every environment and patch suspect at once: now vs HEAD (no uncommitted
    change) with the tuning variables blanked. On a one-slot host each A/B costs launches; when
    the clean state is no faster, both groups are refuted by this one experiment instead of two.
    When it is faster, each group is tested on its own as before (returns False).

    On a one-slot server host with the history still to test, the known-good commit (under the
    same blanked variables) is measured in the same experiment (``three_arms``): the history A/B's
    first round, for one launch (or two) fewer."""
    if _history_next(hunt):
        cmp, now, clean, text = _three_arms(hunt, rt, env)
    else:
        cmp, now, clean, text = _blanked_vs_now(hunt, rt, "clean", "HEAD", env)
    if explains(hunt, cmp, clean, now):
        faster = f"HEAD with the tuning variables blanked is faster ({text})"
        if not rt.dear_launches(hunt):
            rt.say(hunt, "localize", f"{faster}: each group on its own")
            return False
        said = f"{len(env)} variable(s) and {len(patches)} changed file(s) halved together between its ends"
        rt.say(hunt, "localize", f"{faster}: {said}")
        joint.localize(hunt, rt, env, patches, now, clean)
        if any(x.status == "supported" for x in env + patches):
            # Its A/B's clean HEAD (every variable blanked) is the bisection's: the history A/B's
            # first round is the one ``_three_arms`` took, the history judged as the fix leaves it.
            hunt.probe_env = _blanked(env)
        return True
    why = f"one A/B for {len(env)} variable(s) and {len(patches)} changed file(s), HEAD with the variables blanked: "
    set_verdict(env + patches, "refuted", why + text, [now.id, clean.id])
    # The variables change nothing that matters: the history A/B and the bisection run with them
    # blanked too, so this clean HEAD is already the history's HEAD (one launch fewer).
    hunt.probe_env = _blanked(env)
    return True


def _blanked(env: list[Hypothesis]) -> dict[str, str]:
    """The environment that blanks every suspected variable."""
    return {x.subject: "" for x in env if x.subject}


def _history_next(hunt: Hunt) -> bool:
    """Is the history A/B still to come, on a one-slot host where each of its launches counts?"""
    return (
        hunt.target.slots == 1
        and not hunt.target.command
        and hunt.good_candidate is not None
        and any(h.category == "history" and h.status == "open" for h in hunt.hypotheses)
    )


def _three_arms(hunt: Hunt, rt: Runtime, env: list[Hypothesis]):
    """The clean A/B and the history A/B's first round in one experiment: now (on its server still
    up from the reproduction, whose samples there count), clean HEAD, the known-good commit and
    clean HEAD again (``Runtime.measure_arms``). The clean A/B decides as ``ab`` does (more fresh rounds of now vs
    clean while unknown); the good commit's samples wait for the history test, which takes them as
    its first round once the variables turn out to change nothing (``hunt.history_round``).

    With the alert's good value known, the known-good commit is launched only if clean HEAD's
    first block leaves more than a fifth of the drop to it (``_good_needed``): where the working
    tree holds the whole drop, the history cannot explain any of it, and its launch and samples
    (9 real minutes on a GPU node) told nothing. Then ``hunt.history_unneeded`` says why, once the
    whole clean A/B agrees, and the history is left untested (``history.test``)."""
    blank = _blanked(env)
    now = hunt.get(hunt.reproduced)  # type: ignore[arg-type]
    clean = rt.planned(hunt, "clean", "HEAD", env=blank)
    good = rt.planned(hunt, "good-candidate", hunt.good_candidate, env=blank)  # type: ignore[arg-type]
    needed = _good_needed(hunt) if hunt.target.good_value else None
    now, clean, good = rt.measure_arms(hunt, [now, clean, good], rt.ab_samples(hunt), needed)  # type: ignore[assignment]
    cmp, now, clean = ab(hunt, rt, now, clean, "now", "clean", better="b", first=True)
    if good is None:
        pct = _given_back(hunt, now.samples, clean.samples)
        if explains(hunt, cmp, clean, now) and pct >= EXPLAINED_PCT:
            hunt.history_unneeded = (
                f"clean HEAD gives back {pct:.0f}% of the drop from now {now.median:.4g} to the alert's good "
                f"value {hunt.target.good_value:g} ({fmt(cmp, now, clean, hunt.target.metric)}), so no commit "
                "can hold a part of it that counts; the known-good commit was not launched"
            )
        rt.say(hunt, "localize", f"the known-good commit not launched: clean HEAD gives back {pct:.0f}% of the drop")
        return cmp, now, clean, fmt(cmp, now, clean, hunt.target.metric)
    # The history test takes this round only under the same blanked variables (``probe_env``):
    # set when the variables turn out to change nothing, here or in their own A/B. Before, a
    # clean HEAD faster than now (a patch the cause) wasted the good commit's launch and the
    # history A/B launched both again.
    hunt.history_round = [good.id, clean.id]
    return cmp, now, clean, fmt(cmp, now, clean, hunt.target.metric)


def _given_back(hunt: Hunt, now: list[float], clean: list[float]) -> float:
    """How much of the drop from ``now`` to the alert's good value clean HEAD gives back, in
    percent of its ratio (medians, ``multiple.fraction``: as a cause's share is weighed; negative
    where clean HEAD is worse; 0 where there is no drop to give back)."""
    good, n, c = hunt.target.good_value or 0.0, statistics.median(now), statistics.median(clean)
    drop = good - n if hunt.target.higher_is_better else n - good
    return fraction(c, n, good, n, signed=True) * 100 if drop > 0 else 0.0


def _good_needed(hunt: Hunt):
    """``Runtime.measure_arms``' question before the known-good commit's launch: does clean HEAD's
    first block leave a part of the drop that counts (over a fifth) for the history?"""
    return lambda now, clean: _given_back(hunt, now, clean) < EXPLAINED_PCT


def _localize_env(hunt: Hunt, rt: Runtime, group: list[Hypothesis], now: Measured) -> None:
    """One variable at a time: which blanked variable gives the speed back? With many variables,
    one test in a hundred would pass by chance at alpha 0.01: each gets alpha / len(group)
    (Bonferroni) and must also recover at least the smallest effect that matters."""
    alpha = 0.01 / max(1, len(group))
    for h in group:
        one = rt.planned(hunt, f"env-blank-{h.subject}", "WORKTREE", env={h.subject: ""})
        cmp, now, one = ab(hunt, rt, now, one, "now", one.label, alpha=alpha, better="b")
        if explains(hunt, cmp, one, now):
            h.status, h.reason, h.evidence = "supported", fmt(cmp, now, one, hunt.target.metric), [now.id, one.id]
        else:
            h.status, h.reason, h.evidence = "refuted", fmt(cmp, now, one, hunt.target.metric), [now.id, one.id]


# What a shell, a login or a scheduler sets, which no program reads as a speed knob: kept as they are
# when the rest of the environment is blanked (with every variable holding a path: where things
# are, not how they run; and credentials, which are no knob and without which a launch may fail).
KEPT_ENV = {
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TMP", "TEMP",
    "PWD", "OLDPWD", "HOSTNAME", "SHLVL", "_", "MAIL", "TZ", "DISPLAY", "COLUMNS", "LINES", "EDITOR",
    "VISUAL", "PAGER", "LS_COLORS", "COLORTERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "HISTSIZE",
    "HISTFILESIZE", "HISTCONTROL",
}  # fmt: skip
KEPT_PREFIXES = ("LC_", "SSH_", "XDG_", "DBUS_", "SLEUTH_")
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|CREDENTIAL", re.I)


def other_vars(env: dict[str, str]) -> list[str]:
    """The variables beyond the tuning prefixes that could be a knob: not what a shell or login
    sets, not a path, not a credential (a program's own switch: ``MYLIB_DEBUG=1``,
    ``PYTHONMALLOC=debug``)."""
    tuning = set(tuning_vars(env))
    return sorted(
        k
        for k, v in env.items()
        if k not in tuning
        and k not in KEPT_ENV
        and k not in NOT_TUNING
        and not k.startswith(KEPT_PREFIXES)
        and not SECRET_NAME.search(k)
        and "/" not in v
    )


def where(hunt: Hunt) -> str:
    """Whose environment a variable is in: the benchmark command's, or the server's."""
    return "the benchmark's" if hunt.target.command else "the server's"


def rest(hunt: Hunt, rt: Runtime) -> bool:
    """A drop that nothing in the repository explains (the known-good commit measures like HEAD,
    every tuning variable refuted) may still be a variable the tuning prefixes do not name: a
    program's own switch (``MYLIB_DEBUG=1``), ``PYTHONMALLOC``, ``PYTHONDEVMODE``. Suspected only
    now, on that measured drop, and tested by one A/B: now vs the working tree with every such
    variable blanked. Where that gives the speed back, one variable is found by halving them
    (``joint.localize``) and named as any tuning variable is; returns whether it was."""
    env = launch_env(hunt, rt)
    names = other_vars(env)
    if not names:
        return False
    listed = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    group = Hypothesis(
        id=f"h{len(hunt.hypotheses) + 1}",
        category=NAME,
        statement=f"a variable in {where(hunt)} environment beyond the tuning prefixes slows it ({listed})",
        test="A/B: the working tree with those variables blanked vs as they are",
    )
    hunt.hypotheses.append(group)
    rt.say(hunt, "hypothesis", f"{group.id} [{NAME}] {group.statement} - test: {group.test}")
    now = hunt.get(hunt.reproduced)  # type: ignore[arg-type]
    blanked = rt.planned(hunt, "env-rest-blanked", "WORKTREE", env=dict.fromkeys(names, ""))
    cmp, now, blanked = ab(hunt, rt, now, blanked, "now", "env-rest-blanked", better="b")
    text = fmt(cmp, now, blanked, hunt.target.metric)
    if not explains(hunt, cmp, blanked, now):
        set_verdict([group], "refuted", f"{len(names)} variable(s) blanked: {text}", [now.id, blanked.id])
        rt.say(hunt, "verdict", f"{group.id} refuted: {group.reason}")
        return False
    set_verdict(
        [group], "supported", f"{len(names)} variable(s) blanked give the speed back: {text}", [now.id, blanked.id]
    )
    rt.say(hunt, "verdict", f"{group.id} supported: {group.reason}")
    each = []
    for var in names:
        h = Hypothesis(
            id=f"h{len(hunt.hypotheses) + 1}",
            category=NAME,
            statement=f"{var}={env[var]} in {where(hunt)} environment slows it",
            test="localization: the variables halved between the two ends of that A/B",
            subject=var,
        )
        hunt.hypotheses.append(h)
        each.append(h)
    joint.localize(hunt, rt, each, [], now, blanked)
    return True


def name(hunt: Hunt, rt: Runtime, sup: list[Hypothesis]) -> None:
    named = [h for h in sup if h.category == NAME and h.subject]
    hunt.root_kind, hunt.root_ref, hunt.root_summary = "env", named[0].subject, named[0].statement


def action(hunt: Hunt) -> Action:
    return Action(kind="unset", ref=hunt.root_ref, detail=f"remove {hunt.root_ref} from {where(hunt)} environment")

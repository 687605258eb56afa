"""The hunt's plot: where in the range the step is, and what the fix did.

Two panels. The bisection panel puts every commit of the bisected range on the x axis in history
order (the known-good commit left, HEAD right), at one figure size whatever the range's length: a
short range labels every commit, a long one its ends, culprits, broken and measured commits, the
rest as a rug of ticks along the axis. Each measured commit with its samples and its
median's interval, unmeasured commits as ticks, pruned ones (no executed file) in grey, commits
that did not build or serve as crosses, the culprit(s) marked with their subject between the
parent and the culprit, and the alert's good and bad values as lines. A hunt with no bisection
(an env, patch, package or config cause) shows its measured states in order instead. The
confirmation panel shows HEAD vs HEAD with the fix (the fresh A/B) and, after an approved fix, its
re-measurement. The axis says which way is better. ``figure`` returns the matplotlib figure (the
tests read its panels back); ``plot`` writes the PNG the report and the page show.
"""

from __future__ import annotations

from pathlib import Path

from agent.state import Hunt

GOOD, BAD, POINT, SAMPLE, CULPRIT = "#2a9d2a", "#c23b22", "#1f5fa8", "#9a9a9a", "#d97706"
PANEL_WIDTH_IN = 9.0  # at 100 dpi: 900 px, 1250 with the confirmation; 460 px high


def _probe_launch(hunt: Hunt) -> str:
    from agent.runtime import with_env

    t = hunt.target
    return t.launch if t.command else with_env(t.launch, hunt.probe_env)


def _by_commit(hunt: Hunt) -> dict[str, list[float]]:
    """Every sample of each commit measured the way the bisection probes it (no patch, the
    bisection's environment): the history A/B's, the probes', the confirmation's HEAD."""
    launch, out = _probe_launch(hunt), {}
    for m in hunt.measurements:
        if m.launch == launch and m.env == hunt.probe_env:
            out.setdefault(m.ref, []).extend(m.samples)
    return out


def _culprit_subjects(hunt: Hunt) -> dict[str, str]:
    causes = list(hunt.root_causes)
    if hunt.root_kind == "commit":
        causes.append({"kind": "commit", "ref": hunt.root_ref, "summary": hunt.root_summary})
    subjects = {c["ref"]: c["summary"] for c in causes if c.get("kind") == "commit" and c.get("ref")}
    for sha in hunt.culprits:
        subjects.setdefault(sha, sha[:10])
    return subjects


def _axis_label(hunt: Hunt) -> str:
    return f"{hunt.target.metric} ({'higher' if hunt.target.higher_is_better else 'lower'} is better)"


def _alert_lines(ax, hunt: Hunt) -> None:
    if hunt.target.good_value:
        ax.axhline(hunt.target.good_value, color=GOOD, linestyle="--", label=f"alert good {hunt.target.good_value:g}")
    if hunt.target.bad_value:
        ax.axhline(hunt.target.bad_value, color=BAD, linestyle="--", label=f"alert bad {hunt.target.bad_value:g}")


def _interval(values: list[float]) -> tuple[float, float, float]:
    from tools.stats import summarize

    s = summarize(values)
    return s.median, s.ci_low, s.ci_high


def _bisection_panel(ax, hunt: Hunt) -> None:
    commits = [hunt.good_candidate or "", *hunt.bisected]
    samples = _by_commit(hunt)
    pruned = {p["sha"] for p in hunt.pruned}
    broken = {b["ref"] for b in hunt.broken}
    xs = range(len(commits))
    measured_x, meds, lows, highs = [], [], [], []
    for x, sha in enumerate(commits):
        got = samples.get(sha)
        if got:
            ax.plot([x + 0.15] * len(got), got, ".", color=SAMPLE, markersize=3)
            med, lo, hi = _interval(got)
            measured_x.append(x)
            meds.append(med)
            lows.append(med - lo)
            highs.append(hi - med)
    ax.errorbar(measured_x, meds, yerr=[lows, highs], fmt="o", capsize=4, color=POINT, label="measured (median, 95%)")
    bottom = min([*meds, hunt.target.bad_value or min(meds or [0])]) if meds else 0
    for x, sha in enumerate(commits):
        if sha[:10] in broken:
            ax.plot(x, bottom, "x", color=BAD, markersize=9, label="did not build or serve")
    subjects = _culprit_subjects(hunt)
    for sha, subject in subjects.items():
        if sha in commits:
            x = commits.index(sha)
            ax.axvspan(x - 0.5, x + 0.5, color=CULPRIT, alpha=0.18)
            ax.annotate(
                f"culprit: {subject[:60]}",
                xy=(x, max(meds) if meds else 0),
                xytext=(0, 14),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color=CULPRIT,
                arrowprops={"arrowstyle": "->", "color": CULPRIT},
            )
    _alert_lines(ax, hunt)
    shown = _labelled(commits, set(samples), set(subjects), broken)
    ax.set_xticks(shown)
    labels = []
    for x in shown:
        sha = commits[x]
        name = "good" if x == 0 else ("HEAD" if x == len(commits) - 1 else "")
        labels.append(f"{sha[:7]}\n{name}" if name else sha[:7])
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    for tick, x in zip(ax.get_xticklabels(), shown, strict=True):
        if commits[x] in pruned:
            tick.set_color(SAMPLE)  # pruned: touches no executed file, never probed
    rest = [x for x in xs if x not in set(shown)]
    if rest:  # the commits without a label: a rug along the axis, as dense as the history is
        ax.plot(rest, [0.0] * len(rest), "|", color=SAMPLE, markersize=6, transform=ax.get_xaxis_transform())
    ax.set_xlim(-0.6, len(commits) - 0.4)
    said = ["grey: pruned, no executed file"] if pruned & set(commits) else []  # a key to nothing read as one
    said += [f"{len(rest)} more as ticks on the axis"] if rest else []
    n = len(commits) - 1
    ax.set_xlabel(f"{n} commits of the range, in history order" + (f" ({'; '.join(said)})" if said else ""))
    ax.set_ylabel(_axis_label(hunt))
    ax.set_title("bisection", fontsize=9, loc="left")
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), fontsize=7, loc="best")


LABEL_EVERY_UP_TO = 24  # a range this short has every commit labelled
MAX_LABELS = 20  # a longer one: its ends, culprits, broken and measured commits, at most this many


def _labelled(commits: list[str], measured: set[str], culprits: set[str], broken: set[str]) -> list[int]:
    """The positions that get a label: every commit of a short range; of a long one the ends, the
    culprits and the commits that did not build or serve, then measured commits spread evenly
    over the range up to ``MAX_LABELS``. The plot keeps one size at any range length."""
    if len(commits) <= LABEL_EVERY_UP_TO:
        return list(range(len(commits)))
    must = {0, len(commits) - 1} | {x for x, sha in enumerate(commits) if sha in culprits or sha[:10] in broken}
    probed = [x for x, sha in enumerate(commits) if sha in measured and x not in must]
    room = max(0, MAX_LABELS - len(must))
    if len(probed) > room:
        step = len(probed) / room if room else 0
        probed = [probed[int(i * step)] for i in range(room)]
    return sorted(must | set(probed))


def _states_panel(ax, hunt: Hunt) -> None:
    ms = hunt.latest_states()
    xs = range(len(ms))
    for x, m in zip(xs, ms, strict=True):
        ax.plot([x + 0.15] * len(m.samples), m.samples, ".", color=SAMPLE, markersize=3)
    ax.errorbar(
        list(xs),
        [m.median for m in ms],
        yerr=[[m.median - m.ci_low for m in ms], [m.ci_high - m.median for m in ms]],
        fmt="o",
        capsize=4,
        color=POINT,
    )
    _alert_lines(ax, hunt)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{_short(m.label)}\n{m.ref[:8]}" for m in ms], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(_axis_label(hunt))
    ax.set_title("measured states, in order", fontsize=9, loc="left")
    if hunt.target.good_value or hunt.target.bad_value:
        ax.legend(fontsize=7)


# A tick label's most characters: a localization's state names every variable it holds
# ("clean+CLOUD_SDK_VERSION+CONTAINER_NAME+..."), and rotated labels that long left the figure no
# room for its axes (matplotlib: "Tight layout not applied"). The report's Numbers keep them whole.
TICK_CHARS = 28


def _short(label: str) -> str:
    return label if len(label) <= TICK_CHARS else label[: TICK_CHARS - 1] + "…"


def _confirmation_panel(ax, hunt: Hunt) -> None:
    ids = hunt.confirmation.get("evidence", [])
    sides = [m for i in ids for m in hunt.measurements if m.id == i]
    labels, meds, errs = [], [], [[], []]
    for x, m in enumerate(sides):
        ax.plot([x + 0.15] * len(m.samples), m.samples, ".", color=SAMPLE, markersize=3)
        labels.append(_short(m.label))
        meds.append(m.median)
        errs[0].append(m.median - m.ci_low)
        errs[1].append(m.ci_high - m.median)
    if hunt.after and "median" in hunt.after:  # not when the applied fix could not be re-measured
        a = hunt.after
        labels.append("after the\napproved fix")
        meds.append(a["median"])
        errs[0].append(a["median"] - a["ci_low"])
        errs[1].append(a["ci_high"] - a["median"])
    ax.errorbar(range(len(meds)), meds, yerr=errs, fmt="o", capsize=4, color=POINT)
    _alert_lines(ax, hunt)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_xlim(-0.6, max(1, len(labels)) - 0.4)
    ok = hunt.confirmation.get("ok")
    ax.set_title(f"confirmation ({'confirmed' if ok else 'not confirmed'})", fontsize=9, loc="left")
    ax.set_ylabel(_axis_label(hunt))


def figure(hunt: Hunt):
    """The hunt's figure: the bisection (or the measured states) and, when there is one, the
    confirmation. Its axes carry the titles, labels and annotations the tests read back."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    confirmed = bool(hunt.confirmation.get("evidence"))
    width = PANEL_WIDTH_IN + (3.5 if confirmed else 0)  # one size at any range length
    fig, axes = plt.subplots(
        1, 2 if confirmed else 1, figsize=(width, 4.6), dpi=100, squeeze=False,
        gridspec_kw={"width_ratios": [3, 1]} if confirmed else None,
    )  # fmt: skip
    (_bisection_panel if hunt.bisected else _states_panel)(axes[0][0], hunt)
    if confirmed:
        _confirmation_panel(axes[0][1], hunt)
    fig.suptitle(f"hunt {hunt.run_id}: {hunt.root_summary[:90]}", fontsize=9)
    fig.tight_layout()
    return fig


def plot(hunt: Hunt, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = figure(hunt)
    fig.savefig(path)
    plt.close(fig)

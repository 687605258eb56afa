"""The hunt's plot: the bisection in history order with the culprit marked, and the confirmation."""

from __future__ import annotations

from agent.plot import figure
from agent.runtime import with_env
from agent.state import Hunt, Measured, Target

LAUNCH = "exec {worktree}/serve.sh --port {port}"
SHAS = [f"{i:02d}" * 20 for i in range(6)]  # good, then five commits up to HEAD


def _m(i: int, label: str, ref: str, values: list[float], launch: str = LAUNCH) -> Measured:
    s = sorted(values)
    return Measured(
        id=f"m{i}", label=label, ref=ref, launch=with_env(launch, {}), samples=values, median=s[len(s) // 2],
        ci_low=s[0], ci_high=s[-1], cv=0.02,
    )  # fmt: skip


def _hunt(higher_is_better: bool = True) -> Hunt:
    t = Target(repo="/r", launch=LAUNCH, metric="tok_per_s", good_value=94, bad_value=60,
               higher_is_better=higher_is_better)  # fmt: skip
    good, head, culprit = SHAS[0], SHAS[5], SHAS[3]
    ms = [
        _m(1, "good-candidate", good, [92, 93, 94]),
        _m(2, "HEAD", head, [60, 61, 62]),
        _m(3, "bisect 03", culprit, [61, 60, 62]),
        _m(4, "bisect 02", SHAS[2], [93, 92, 91]),
        _m(5, "HEAD", head, [61, 60, 59]),
        _m(6, "HEAD+revert", "ff" * 20, [92, 93, 91]),
        _m(7, "launch-good", head, [80, 81, 82], launch=LAUNCH + " --cuda-graph"),  # another launch: not a probe
    ]
    return Hunt(
        run_id="r1", target=t, measurements=ms, good_candidate=good, bisected=SHAS[1:], culprits=[culprit],
        root_kind="commit", root_ref=culprit, root_summary=f'{culprit[:10]} "Fence the eager all-reduce"',
        pruned=[{"sha": SHAS[1], "files": ["docs/a.md"], "reason": "docs only"}],
        broken=[{"label": "bisect 04", "ref": SHAS[4][:10], "how": "does not build", "failure": "x"}],
        confirmation={"ok": True, "evidence": ["m5", "m6"]},
        after={"median": 92.5, "ci_low": 91, "ci_high": 94, "recovered_pct_of_drop": 95},
    )  # fmt: skip


def test_the_bisection_panel_shows_the_range_in_history_order_with_the_culprit_marked():
    fig = figure(_hunt())
    bisection, confirmation = fig.axes
    assert bisection.get_title(loc="left") == "bisection" and "history order" in bisection.get_xlabel()
    ticks = [t.get_text() for t in bisection.get_xticklabels()]
    assert [t.split("\n")[0] for t in ticks] == [s[:7] for s in SHAS]  # good ... HEAD, every commit
    assert ticks[0].endswith("good") and ticks[-1].endswith("HEAD")
    assert bisection.get_xticklabels()[1].get_color() != bisection.get_xticklabels()[2].get_color()  # pruned: grey
    notes = [c.get_text() for c in bisection.texts]
    assert notes == ['culprit: 0303030303 "Fence the eager all-reduce"']
    legend = [t.get_text() for t in bisection.get_legend().get_texts()]
    assert "did not build or serve" in legend and "alert good 94" in legend and "alert bad 60" in legend
    assert bisection.get_ylabel() == "tok_per_s (higher is better)"
    # the measured points: good, 02, the culprit 03, HEAD (both HEAD measurements pooled); not launch-good
    points = bisection.lines  # samples and markers; the errorbar's centre line holds the medians
    medians = next(line for line in points if line.get_marker() == "o").get_xdata()
    assert list(medians) == [0, 2, 3, 5]
    assert confirmation.get_title(loc="left") == "confirmation (confirmed)"
    labels = [t.get_text() for t in confirmation.get_xticklabels()]
    assert labels == ["HEAD", "HEAD+revert", "after the\napproved fix"]


def test_the_axis_keys_grey_only_where_a_commit_was_pruned():
    """A trial's plot said "grey: pruned" where nothing was: a key to nothing read as one."""
    assert "grey: pruned" in figure(_hunt()).axes[0].get_xlabel()
    unpruned = _hunt().model_copy(update={"pruned": []})
    assert figure(unpruned).axes[0].get_xlabel() == "5 commits of the range, in history order"


def test_a_lower_is_better_metric_says_so_and_a_hunt_without_bisection_shows_its_states():
    h = _hunt(higher_is_better=False).model_copy(update={"bisected": [], "confirmation": {}, "after": {}})
    fig = figure(h)
    (states,) = fig.axes
    assert states.get_title(loc="left") == "measured states, in order"
    assert states.get_ylabel() == "tok_per_s (lower is better)"
    assert [t.get_text().split("\n")[0] for t in states.get_xticklabels()][:2] == ["good-candidate", "HEAD"]


def test_a_long_range_keeps_one_figure_size_and_labels_only_what_matters():
    """205 commits: the ends, the culprit and the measured commits are labelled, the rest is a rug
    of ticks; the figure is as big as a six-commit one (it was 7,960 px wide)."""
    long = [f"{i:040x}" for i in range(206)]  # good, then 205 commits up to HEAD
    culprit = long[150]
    hunt = _hunt()
    measured = [long[i] for i in (0, 100, 150, 149, 175, 205)]
    hunt.measurements = [_m(i, f"bisect {i}", sha, [60 + i, 61 + i, 62 + i]) for i, sha in enumerate(measured)]
    hunt = hunt.model_copy(
        update={"good_candidate": long[0], "bisected": long[1:], "culprits": [culprit], "root_ref": culprit,
                "pruned": [], "broken": []}
    )  # fmt: skip
    short, wide = figure(_hunt()), figure(hunt)
    assert tuple(wide.get_size_inches()) == tuple(short.get_size_inches())
    w, h = wide.get_size_inches() * wide.dpi
    assert w <= 1300 and h <= 500
    bisection = wide.axes[0]
    ticks = [t.get_text().split("\n")[0] for t in bisection.get_xticklabels()]
    assert ticks == [long[i][:7] for i in (0, 100, 149, 150, 175, 205)]
    assert "205 commits" in bisection.get_xlabel() and "200 more as ticks" in bisection.get_xlabel()


def test_states_named_after_many_variables_are_cut_so_the_figure_keeps_its_axes():
    """A localization of twelve variables names its states after them: rotated labels that long
    left matplotlib no room ("Tight layout not applied"), the axes squeezed out of the figure."""
    import warnings

    from agent.plot import TICK_CHARS

    h = _hunt().model_copy(update={"bisected": [], "confirmation": {}, "after": {}})
    names = "+".join(f"SOME_LONG_VARIABLE_{i}" for i in range(12))
    h.measurements = [_m(i, f"clean+{names[: 20 * i]}", SHAS[i % 6], [60.0 + i, 61.0 + i]) for i in range(1, 12)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the tight-layout warning fails the test
        fig = figure(h)
    (states,) = fig.axes
    assert max(len(t.get_text().split("\n")[0]) for t in states.get_xticklabels()) <= TICK_CHARS

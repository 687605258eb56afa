"""Noisy bisection finds the step(s) in a commit graph with statistics, not single samples."""

from __future__ import annotations

import numpy as np
import pytest

from tools.bisect import BisectConfig, BisectError, ProbeError, bisect, log2_bound


def chain(n: int) -> tuple[list[str], dict[str, list[str]]]:
    shas = [f"c{i:04d}" for i in range(n + 1)]
    return shas, {shas[i]: [shas[i - 1]] for i in range(n, 0, -1)}


def noisy(levels, cv: float, seed: int, broken=frozenset()):
    rng = np.random.default_rng(seed)
    calls: list[tuple[str, int]] = []

    def probe(sha: str, n: int) -> list[float]:
        calls.append((sha, n))
        if sha in broken:
            raise ProbeError(f"{sha} does not launch")
        mu = levels(sha)
        return list(rng.normal(mu, cv * mu, n))

    return probe, calls


@pytest.mark.parametrize(("n", "cv"), [(8, 0.05), (32, 0.10), (128, 0.10)])
def test_one_step_is_found_within_the_log2_bound(n, cv):
    for seed in range(5):
        culprit = 1 + (seed * 37) % n
        shas, parents = chain(n)
        probe, _ = noisy(lambda s, c=culprit: 100 * (0.8 if int(s[1:]) >= c else 1), cv, seed)
        res = bisect(parents, shas[0], shas[-1], probe)
        assert [c.sha for c in res.culprits] == [shas[culprit]], (n, cv, seed)
        assert res.culprits[0].verified and res.culprits[0].delta_pct < -10
        assert res.probes <= 1.5 * log2_bound(n)


def test_a_single_sample_would_mislead_but_the_probe_takes_several():
    shas, parents = chain(16)
    probe, calls = noisy(lambda s: 100 * (0.8 if int(s[1:]) >= 9 else 1), 0.10, 3)
    res = bisect(parents, shas[0], shas[-1], probe)
    assert [c.sha for c in res.culprits] == ["c0009"]
    assert all(r.samples >= BisectConfig().initial_samples for r in res.records)
    assert res.samples == sum(n for _, n in calls)


def test_two_steps_give_two_culprits():
    shas, parents = chain(64)
    probe, _ = noisy(lambda s: 100 * (0.85 if int(s[1:]) >= 20 else 1) * (0.85 if int(s[1:]) >= 45 else 1), 0.04, 1)
    res = bisect(parents, shas[0], shas[-1], probe)
    assert [c.sha for c in res.culprits] == ["c0020", "c0045"]
    assert all(c.verified for c in res.culprits)


def _staircase(seed: int = 1):
    shas, parents = chain(64)
    probe, calls = noisy(
        lambda s: 100 * (0.85 if int(s[1:]) >= 20 else 1) * (0.85 if int(s[1:]) >= 45 else 1), 0.04, seed
    )
    return shas, parents, probe, calls


def test_a_sample_budget_spent_above_the_first_step_keeps_that_step_and_says_what_stopped_it():
    shas, parents, probe, _ = _staircase()
    first = bisect(parents, shas[0], shas[-1], probe, BisectConfig(max_culprits=1))  # what the first step costs
    cap = first.samples + 4  # then too few for the search above it
    shas, parents, probe, calls = _staircase()
    res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(max_total_samples=cap))
    assert [c.sha for c in res.culprits] == ["c0020"]
    assert res.stopped == f"sample budget of {cap} spent ({res.samples} taken)"
    assert res.samples == sum(n for _, n in calls) <= cap  # no sample past it was ever asked for
    whole = bisect(parents, shas[0], shas[-1], _staircase()[2])
    assert whole.stopped is None and [c.sha for c in whole.culprits] == ["c0020", "c0045"]


def test_a_sample_budget_too_small_for_the_ends_names_nothing():
    shas, parents, probe, calls = _staircase()
    res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(max_total_samples=15))
    assert res.culprits == [] and res.stopped == "sample budget of 15 spent (10 taken)"
    assert sum(n for _, n in calls) == 10  # good's ten; bad's ten would pass it


def test_a_budget_the_probe_raises_ends_the_bisection_keeping_the_step_found():
    """A hunt's budget (or `sleuth bisect --max-wall`) stops the probe itself; given as ``stop_on``
    it ends the bisection as the sample budget does: a step found before it stands."""

    class WallSpent(Exception):
        pass

    shas, parents, probe, calls = _staircase()
    first = bisect(parents, shas[0], shas[-1], probe, BisectConfig(max_culprits=1))

    def walled(sha: str, n: int) -> list[float]:
        if sum(k for _, k in calls) + n > first.samples + 4:
            raise WallSpent("wall-time budget of 9 s exhausted")
        return probe(sha, n)

    shas, parents, probe, calls = _staircase()
    res = bisect(parents, shas[0], shas[-1], walled, stop_on=(WallSpent,))
    assert [c.sha for c in res.culprits] == ["c0020"] and res.stopped == "wall-time budget of 9 s exhausted"
    with pytest.raises(WallSpent):  # not given: it ends the bisection as any error of the probe does
        bisect(parents, shas[0], shas[-1], walled)


def test_a_sample_budget_holds_with_several_probes_in_flight():
    """k probes measured at once each ask for samples: what the others have asked for counts."""
    for cap in (40, 55, 70):
        shas, parents, probe, calls = _staircase()
        res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(k=4, max_total_samples=cap))
        assert res.samples == sum(n for _, n in calls) <= cap and res.stopped, (cap, res.samples)


def test_one_culprit_at_most_names_the_first_step_and_takes_fewer_samples():
    shas, parents, probe, _ = _staircase()
    one = bisect(parents, shas[0], shas[-1], probe, BisectConfig(max_culprits=1))
    both = bisect(parents, shas[0], shas[-1], _staircase()[2])
    assert [c.sha for c in one.culprits] == ["c0020"] and one.stopped is None
    assert one.samples < both.samples


@pytest.mark.parametrize("seed", [9, 21, 24])
def test_an_undecided_check_for_another_step_measures_the_culprit_further_before_saying_no(seed):
    """A staircase 100 -> 90 -> 81: after the first culprit, "is the bad end still below it?" was
    asked of the 3 to 9 samples the culprit happened to have, and an undecided answer meant no. In
    these draws that lost the second step; grown to ``step_check_samples`` (12), it is found."""
    shas, parents = chain(32)

    def levels(s: str) -> float:
        return 100 * (0.9 if int(s[1:]) >= 9 else 1) * (0.9 if int(s[1:]) >= 22 else 1)

    named = {}
    for cap in (3, BisectConfig().step_check_samples):
        probe, _ = noisy(levels, 0.05, seed)
        res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(verify=False, step_check_samples=cap))
        named[cap] = [c.sha for c in res.culprits]
    assert named == {3: ["c0009"], 12: ["c0009", "c0022"]}


def test_a_step_of_one_percent_of_the_change_above_the_culprit_is_not_searched_for():
    """100 -> 20 at c0010, then 20 -> 19.2 at c0028: 1 % of the change, the size of a loaded
    machine's drift. It is not another step to search for (every probe between two ends at one
    level would be ambiguous and grow to dozens of samples), so one culprit, and nothing probed
    above it beyond its sandwich."""
    shas, parents = chain(32)
    probe, calls = noisy(lambda s: 100 * (0.2 if int(s[1:]) >= 10 else 1) * (0.96 if int(s[1:]) >= 28 else 1), 0.01, 4)
    res = bisect(parents, shas[0], shas[-1], probe)
    assert [c.sha for c in res.culprits] == ["c0010"]
    probed_above = {sha for sha, _ in calls if 16 < int(sha[1:]) < 32}  # the first search stops at c0016
    assert not probed_above, probed_above


def test_unlaunchable_commits_are_skipped_and_never_blamed_alone():
    shas, parents = chain(32)
    broken = frozenset({"c0010", "c0011"})
    probe, _ = noisy(lambda s: 100 * (0.8 if int(s[1:]) >= 12 else 1), 0.05, 2, broken)
    res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(verify=False))
    (c,) = res.culprits
    assert c.suspects == ["c0010", "c0011", "c0012"]  # the step may hide in the broken stretch
    assert set(res.skipped) == broken
    # A broken stretch away from the step does not disturb the answer.
    probe, _ = noisy(lambda s: 100 * (0.8 if int(s[1:]) >= 25 else 1), 0.05, 2, broken)
    res = bisect(parents, shas[0], shas[-1], probe)
    assert [c.sha for c in res.culprits] == ["c0025"] and res.culprits[0].suspects == ["c0025"]


def test_merged_side_branches_are_searched_too():
    # main: g - m1 - m2 - M(merge) - m3 ; side: g - s1 - s2(culprit) - s3 -> merged at M
    parents = {"m3": ["M"], "M": ["m2", "s3"], "s3": ["s2"], "s2": ["s1"], "s1": ["g"], "m2": ["m1"], "m1": ["g"]}
    has_culprit = {"s2", "s3", "M", "m3"}
    probe, _ = noisy(lambda s: 80.0 if s in has_culprit else 100.0, 0.03, 4)
    res = bisect(parents, "g", "m3", probe)
    assert [c.sha for c in res.culprits] == ["s2"]
    first_parent = {k: v[:1] for k, v in parents.items() if k in ("m3", "M", "m2", "m1")}
    res = bisect(first_parent, "g", "m3", probe)
    assert [c.sha for c in res.culprits] == ["M"]  # on the mainline, the merge brought it


def test_k_way_rounds_are_fewer():
    shas, parents = chain(128)
    level = lambda s: 100 * (0.8 if int(s[1:]) >= 77 else 1)  # noqa: E731
    one = bisect(parents, shas[0], shas[-1], noisy(level, 0.05, 5)[0], BisectConfig(k=1))
    three = bisect(parents, shas[0], shas[-1], noisy(level, 0.05, 5)[0], BisectConfig(k=3))
    assert [c.sha for c in one.culprits] == [c.sha for c in three.culprits] == ["c0077"]
    assert three.rounds < one.rounds


def test_lower_is_better_metrics_bisect_the_same_way():
    shas, parents = chain(16)
    probe, _ = noisy(lambda s: 20.0 * (1.3 if int(s[1:]) >= 6 else 1), 0.05, 6)  # latency up 30 %
    res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(higher_is_better=False))
    assert [c.sha for c in res.culprits] == ["c0006"] and res.culprits[0].verified


def test_a_reference_that_cannot_be_measured_stops_the_bisection():
    shas, parents = chain(8)
    probe, _ = noisy(lambda s: 100.0, 0.05, 7, frozenset({shas[-1]}))
    with pytest.raises(BisectError, match="bad reference c0008 cannot be measured"):
        bisect(parents, shas[0], shas[-1], probe)


def test_references_the_caller_holds_are_kept_at_their_size_when_they_separate_the_ends():
    """A hunt's history A/B already measured both ends: on a one-slot host each top-up to ten
    samples is a launch, so clearly separated references stay at the size the caller holds."""
    shas, parents = chain(8)
    probe, calls = noisy(lambda s: 100 * (0.7 if int(s[1:]) >= 5 else 1), 0.03, 2)
    res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(known_ref_samples=5, verify=False))
    assert [c.sha for c in res.culprits] == ["c0005"]
    ends = [n for sha, n in calls if sha in (shas[0], shas[-1])]
    assert sum(ends) == 10  # the five each the caller holds (read, not re-measured), no top-up


def test_references_that_do_not_separate_clearly_are_topped_up_to_the_usual_size():
    shas, parents = chain(8)
    probe, calls = noisy(lambda s: 100 * (0.9 if int(s[1:]) >= 5 else 1), 0.08, 2)
    bisect(parents, shas[0], shas[-1], probe, BisectConfig(known_ref_samples=5))
    assert sum(n for sha, n in calls if sha == shas[0]) >= BisectConfig().ref_samples


def test_no_op_commits_are_never_probed_nor_blamed():
    """Commits that touch no executed file (tools.codepath) cannot move the metric: the search
    splits only the others, and a step below a no-op lands on the commit that is not one."""
    shas, parents = chain(16)
    no_ops = [s for s in shas[1:] if int(s[1:]) % 4 != 0]  # 12 of 16 pruned; c0004, c0008, ... stay
    probe, calls = noisy(lambda s: 100 * (0.8 if int(s[1:]) >= 8 else 1), 0.03, 4)
    res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(no_ops=no_ops))
    assert [c.sha for c in res.culprits] == ["c0008"]
    assert not {sha for sha, _ in calls} & (set(no_ops) - {shas[-1]} - {"c0007"})  # c0007: the sandwich's parent
    assert res.probes <= 2  # 4 candidates instead of 16


def test_a_range_whose_only_code_commit_is_below_a_no_op_head_needs_no_probe():
    """good, one code commit, then a docs-only HEAD: the history A/B already proved the ends
    differ, so the code commit is the culprit without a probe of its own."""
    shas, parents = chain(2)
    probe, calls = noisy(lambda s: 100 * (0.8 if int(s[1:]) >= 1 else 1), 0.03, 5)
    res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(no_ops=[shas[2]], verify=False))
    assert [c.sha for c in res.culprits] == [shas[1]]
    assert res.probes == 0 and shas[1] not in {sha for sha, _ in calls}


def test_a_wrong_pruning_shows_in_the_culprits_sandwich():
    """The step is in a commit wrongly pruned as a no-op: elimination names the code commit
    below it, and its fresh sandwich (parent vs it) does not verify it: the hunt's confirmation
    then sends it back (see policy.confirm_failed), nothing is hidden."""
    shas, parents = chain(4)
    probe, _ = noisy(lambda s: 100 * (0.8 if int(s[1:]) >= 3 else 1), 0.03, 6)
    res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(no_ops=[shas[3], shas[4]]))
    assert [c.sha for c in res.culprits] == [shas[2]]
    assert not res.culprits[0].verified


def test_a_level_halfway_between_the_references_is_never_called_good_by_the_likelihood_ratio():
    """Two culprits, each about half the drop: the first one's level is closer to good than to bad
    but a step all the same. These are a real lab run's samples (one launch's first sample high),
    which the likelihood ratio alone once called good, so the second culprit was never looked for."""
    from tools.bisect import _classify

    good = [83.4, 88.3, 87.6, 90.7, 88.4]
    bad = [63.3, 59.7, 65.7, 63.9, 57.6]
    probe = [87.9, 77.2, 72.8, 76.7, 76.4]
    verdict, *_ = _classify(good, bad, probe, BisectConfig(), at_cap=False)
    assert verdict != "good"
    near_good = [88.1, 86.9, 89.5, 87.2, 88.8]
    assert _classify(good, bad, near_good, BisectConfig(), at_cap=False)[0] == "good"


def test_a_probe_between_two_steps_far_above_the_noise_is_decided_on_its_first_samples():
    """The lab's uneven steps: 25 % and 17 % steps under 0.7 % noise. A probe between them is the bad
    side of the first step's search as soon as it is clearly off good by the smallest step that
    counts; the rank test alone cannot say so at alpha 0.0015 before 6 or 7 samples, so every such
    probe took 3 + 2 + 2."""
    shas, parents = chain(42)

    def level(s: str) -> float:
        i = int(s[1:])
        return 91 * (0.85 if i >= 9 else 1) * (0.88 if i >= 30 else 1)

    probe, calls = noisy(level, 0.007, 5)
    res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(verify=False))
    assert [c.sha for c in res.culprits] == ["c0009", "c0030"]
    between = {r.sha for r in res.records if 9 <= int(r.sha[1:]) < 30} - {"c0009"}
    taken = {sha: sum(n for s, n in calls if s == sha) for sha in between}
    assert between and all(n == BisectConfig().initial_samples for n in taken.values()), taken


def test_where_the_ends_were_held_at_their_size_a_culprit_clearly_apart_from_bad_is_the_next_good_end_as_is():
    """A one-slot host's bisection keeps the history A/B's 8 samples as its ends when they tell
    good from bad beyond doubt; the first culprit, become the second search's good end, is kept
    at the samples its step check left it when those tell it from bad beyond doubt too (each
    top-up there is minutes of a GPU node), and topped up to ``ref_samples`` otherwise."""
    shas, parents = chain(42)

    def level(s: str) -> float:
        i = int(s[1:])
        return 91 * (0.85 if i >= 9 else 1) * (0.88 if i >= 30 else 1)

    for held, culprit_samples in ((8, lambda n: n < BisectConfig().ref_samples), (0, lambda n: n >= 10)):
        probe, calls = noisy(level, 0.007, 5)
        res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(verify=False, known_ref_samples=held))
        assert [c.sha for c in res.culprits] == ["c0009", "c0030"]
        taken = sum(n for s, n in calls if s == "c0009")
        assert culprit_samples(taken), (held, taken)


def test_the_commit_graph_says_which_commits_of_the_range_hold_an_ancestor_merges_included():
    from tools.bisect import CommitGraph

    # good - a - b - m (merge of b and s); s is a side-branch commit off a; rev-list order, newest first
    parents = {"m": ["b", "s"], "s": ["a"], "b": ["a"], "a": ["good"]}
    g = CommitGraph(parents)
    assert g.holds("m", "s") and g.holds("m", "a") and g.holds("s", "s")
    assert not g.holds("b", "s") and not g.holds("a", "b")
    assert not g.holds("good", "a") and not g.holds("m", "good")  # outside the range: never held


def _drifting(culprit: int, seed: int, drift: float = -0.0005):
    """A 5 % step under 1 % noise on a machine whose level falls 0.05 % with every sample taken
    (a long search ends several % below where it began: more than the step)."""
    rng = np.random.default_rng(seed)
    taken = [0]
    calls: list[tuple[str, int]] = []

    def probe(sha: str, n: int) -> list[float]:
        calls.append((sha, n))
        out = []
        for _ in range(n):
            mu = 100 * (0.95 if int(sha[1:]) >= culprit else 1) * (1 + drift * taken[0])
            taken[0] += 1
            out.append(float(rng.normal(mu, 0.01 * mu)))
        return out

    return probe, calls


def test_a_drift_larger_than_the_step_is_cancelled_by_fresh_ends_or_by_the_fitted_drift():
    """Three ways to meet a drift: the ends measured once and taken as they are (the old way:
    a late probe has drifted toward bad), re-measured beside each probe, or the drift fitted from
    the samples' times (the default: the references, grown with the probes, are measured early
    and late) and every sample moved to one moment."""
    shas, parents = chain(32)
    ways = {
        "as measured": BisectConfig(detrend=False),
        "fresh ends": BisectConfig(detrend=False, ref_refresh=1),
        "fitted drift": BisectConfig(),
    }
    exact = dict.fromkeys(ways, 0)
    for seed in range(8):
        culprit = 5 + 3 * seed
        for way, cfg in ways.items():
            probe, calls = _drifting(culprit, seed)
            res = bisect(parents, shas[0], shas[-1], probe, cfg)
            exact[way] += [c.sha for c in res.culprits] == [shas[culprit]]
            if cfg.ref_refresh:  # one fresh sample of each end beside every probe
                first_probe = next(i for i, (sha, _) in enumerate(calls) if sha not in (shas[0], shas[-1]))
                assert calls[first_probe - 2 : first_probe] == [(shas[0], 1), (shas[-1], 1)]
    # seeded, so the same every run: 3, 7 and 7 of 8 when written
    assert exact["as measured"] <= 4 and exact["fresh ends"] >= 6 and exact["fitted drift"] >= 6, exact


def test_the_fitted_drift_is_the_machines_slope_and_nothing_without_one():
    from tools.bisect import _Samples

    for drift, near in ((-0.0005, -0.0005), (0.0, 0.0)):
        probe, _ = _drifting(10**6, 3, drift=drift)  # no step: one level, drifting or not
        s = _Samples(probe, 5)
        s.ensure("c0000", 10), s.ensure("c0001", 10)
        s.ensure("c0000", 40), s.ensure("c0001", 40)  # the ends measured again, later
        assert s.drift() == pytest.approx(near, abs=0.0001), drift


def test_an_end_that_fails_a_later_fresh_sample_stops_the_bisection_with_its_reason():
    """With the ends re-measured beside every probe, an end can fail after the bisection began (a
    run that hangs on a busy host): that ends it with the reason, as at the start, never as a
    crash of the caller's hunt nor as a skip of the probe beside it."""
    shas, parents = chain(16)
    inner, _ = noisy(lambda s: 100.0 * (0.9 if int(s[1:]) >= 9 else 1), 0.01, 3)
    asked = {"good": 0}

    def probe(sha: str, n: int) -> list[float]:
        if sha == shas[0]:
            asked["good"] += 1
            if asked["good"] == 3:  # its first samples, one refresh, then a failure
                raise ProbeError("benchmark command timed out twice (10 s, then 20 s)")
        return inner(sha, n)

    with pytest.raises(BisectError, match="good reference c0000 cannot be measured: benchmark command timed out"):
        bisect(parents, shas[0], shas[-1], probe, BisectConfig(ref_refresh=1))


def test_a_probe_off_good_by_a_step_too_small_to_count_is_decided_good_without_the_cap():
    # astroid's real case: a 1.25x step (1054a35) sits below the 4x re-land, so every fast probe
    # after it differs from good and is nowhere near bad. It was undecided until the 48-sample cap
    # (284 samples, 395-627 s a hunt); below the smallest step that counts it is the good side.
    shas, parents = chain(64)
    probe, _ = noisy(lambda s: 100 / (1.25 if int(s[1:]) >= 10 else 1) / (4 if int(s[1:]) >= 50 else 1), 0.03, 7)
    res = bisect(parents, shas[0], shas[-1], probe)
    assert [c.sha for c in res.culprits] == ["c0050"]
    after_small = [r for r in res.records if 10 <= int(r.sha[1:]) < 50]
    assert after_small and all(r.verdict == "good" and r.confident for r in after_small), after_small
    assert max(r.samples for r in after_small) < BisectConfig().max_samples


def test_where_launches_are_dear_the_ends_grow_in_coarse_steps():
    """A 10 % step under 10 % noise: probes outgrow the ten samples of each end. Step for step
    with the probe (``ref_growth`` 1) the ends are topped up often, which the drift fit gains
    from; at 1.5 (what a hunt on a one-slot server host sets: each top-up is a launch there) they
    are topped up fewer times, and the culprit is the same."""
    shas, parents = chain(32)
    top_ups: dict[float, int] = {}
    for growth in (1.0, 1.5):
        probe, calls = noisy(lambda s: 100 * (0.9 if int(s[1:]) >= 13 else 1), 0.10, 4)
        res = bisect(parents, shas[0], shas[-1], probe, BisectConfig(verify=False, ref_growth=growth))
        assert [c.sha for c in res.culprits] == ["c0013"], growth
        top_ups[growth] = len([sha for sha, _n in calls if sha in (shas[0], shas[-1])])
    assert top_ups[1.5] < top_ups[1.0], top_ups


def _launched(levels, launch_cv: float, cv: float, seed: int):
    """A server host's probe: each commit's samples come from one launch, all scaled by that
    launch's offset (drawn once per commit, spread ``launch_cv``), each with noise ``cv``."""
    rng = np.random.default_rng(seed)
    offset: dict[str, float] = {}

    def probe(sha: str, n: int) -> list[float]:
        if sha not in offset:
            offset[sha] = float(rng.normal(1, launch_cv))
        mu = levels(sha) * offset[sha]
        return list(rng.normal(mu, cv * mu, n))

    return probe


def test_where_each_probe_is_one_launch_probes_at_an_ends_level_decide_without_the_rank_consistency_check():
    """The lab's uneven steps on a server host: one launch per commit, launches 1.5 % apart, samples
    within 0.2 %. The rank test tells a probe's launch from the reference's even at one level, so
    as a consistency check of the likelihood ratio it held probes at a reference's level to 7
    samples; where each probe is one launch (``launch_offsets``) the level gate stands in for it."""
    shas, parents = chain(42)

    def level(s: str) -> float:
        i = int(s[1:])
        return 88 * (0.85 if i >= 9 else 1) * (0.89 if i >= 30 else 1)

    exact = {False: 0, True: 0}
    samples = {False: 0, True: 0}
    for offsets in exact:
        for seed in range(20):
            cfg = BisectConfig(verify=False, launch_offsets=offsets)
            res = bisect(parents, shas[0], shas[-1], _launched(level, 0.015, 0.002, seed), cfg)
            exact[offsets] += [c.sha for c in res.culprits] == ["c0009", "c0030"]
            samples[offsets] += res.samples
    assert exact[True] == 20
    assert samples[True] < 0.95 * samples[False]


def test_above_a_culprit_the_smallest_step_that_counts_is_still_a_quarter_of_the_whole_change():
    """Three steps: 20 %, then 3.5 % and 8.5 % above it. The 3.5 % step is a ninth of the whole drop,
    under the quarter that counts in the first search, but 0.29 of what is left above the first
    culprit; measured against that rest it was a step (a third culprit, verified by its sandwich).
    The search above a culprit keeps the whole change's quarter (the lab's uneven_steps: one launch
    of a commit between its steps, 2.3 % low, was named that way and cost 5 launches to refute)."""
    shas, parents = chain(40)

    def level(s: str) -> float:
        i = int(s[1:])
        return 100 * (0.80 if i >= 8 else 1) * (0.965 if i >= 20 else 1) * (0.915 if i >= 30 else 1)

    for seed in range(5):
        probe, _ = noisy(level, 0.005, seed)
        res = bisect(parents, shas[0], shas[-1], probe)
        assert [c.sha for c in res.culprits] == ["c0008", "c0030"], seed


def test_what_one_probe_is_sets_how_the_ends_and_launches_are_judged():
    """A hunt and ``sleuth bisect`` build their config from one rule: a server probe is one launch
    (its samples share the launch's offset; the ends are measured once), a benchmark command's
    samples are separate processes (a fresh sample of each end beside every probe), except on a
    pool, where a fresh end would be measured on whichever host was free."""
    server = BisectConfig.for_probes(False, higher_is_better=False)
    assert (server.ref_refresh, server.launch_offsets, server.higher_is_better) == (0, True, False)
    command = BisectConfig.for_probes(True)
    assert (command.ref_refresh, command.launch_offsets) == (1, False)
    assert BisectConfig.for_probes(True, k=2).ref_refresh == 0

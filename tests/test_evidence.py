"""A verdict's evidence strength and the drop's shape (``agent.evidence``), read off a hunt."""

from __future__ import annotations

from agent.evidence import sentence, steps, strength
from agent.state import Hunt, Hypothesis, Measured, Target

SHAS = [f"{i:040x}" for i in range(8)]  # SHAS[0] the known-good commit, SHAS[7] HEAD


def _m(ref: str, level: float, n: int = 5) -> Measured:
    return Measured(
        id=f"m-{ref[-2:]}", label=f"bisect {ref[:8]}", ref=ref, launch="x", samples=[level] * n,
        median=level, ci_low=level, ci_high=level, cv=0.0,
    )  # fmt: skip


def _hunt(levels: dict[int, float], culprits: list[int], **kw) -> Hunt:
    h = Hunt(run_id="r", target=Target(repo="/r"), **kw)
    h.good_candidate, h.bisected = SHAS[0], SHAS[1:]
    h.measurements = [_m(SHAS[i], v) for i, v in levels.items()]
    h.culprits = [SHAS[i] for i in culprits]
    return h


def test_one_commit_carrying_the_drop_is_one_step():
    s = steps(_hunt({0: 100, 3: 99, 4: 80, 7: 80}, [4]))
    assert s["shape"] == "one step" and s["steps"] == [{"ref": SHAS[4], "delta_pct": -19.0, "share_pct": 95.0}]


def test_two_commits_sharing_the_drop_are_steps_and_many_small_ones_are_gradual():
    two = steps(_hunt({0: 100, 2: 100, 3: 90, 5: 90, 6: 80, 7: 80}, [3, 6]))
    assert two["shape"] == "steps" and [x["share_pct"] for x in two["steps"]] == [50.0, 50.0]
    many = steps(_hunt({0: 100, 1: 94, 2: 88, 3: 82, 7: 82}, [1, 2, 3]))
    assert many["shape"] == "gradual" and len(many["steps"]) == 3


def test_a_step_is_read_off_the_levels_beside_it_not_off_one_noisy_probe():
    """The probe beside the culprit had 3 samples under load (16.6 to 24.0, median 23.8 for a true
    16.5): read alone, a +29 % step was "+88.6 % (270 % of the drop)". Probes beyond it that its
    samples cannot tell apart from it are one level with it."""
    h = _hunt({0: 100, 3: 100, 5: 129, 7: 129}, [4])
    h.target.higher_is_better = False  # a time: 100 -> 129 is the drop
    h.measurements.append(_m(SHAS[4], 0))
    h.measurements[-1].samples = [116.0, 188.0, 190.0]
    for m in h.measurements[2:4]:  # the level after the step (commits 5 and 7), with its own noise
        m.samples = [127.0, 128.0, 129.0, 130.0, 131.0]
    (step,) = steps(h)["steps"]
    assert 25 < step["delta_pct"] < 35 and 85 < step["share_pct"] < 120, step


def test_ends_probed_the_wrong_way_round_give_no_shape():
    """Trial 20: the machine sped up during a noisy hunt, HEAD as probed measured better than the
    known-good commit, and the report said "+82.4 % (-522 % of the drop)". No drop between the
    ends as probed: no share of it."""
    h = _hunt({0: 100, 3: 99, 4: 104, 7: 101}, [4])  # higher is better: HEAD probed above good
    assert steps(h) is None and "Shape of the drop" not in sentence(h)


def test_a_single_culprit_with_intermediate_levels_says_the_drop_was_not_one_step():
    h = _hunt({0: 100, 2: 88, 5: 80, 7: 80}, [5])  # commit 2 sits 60 % of the way down: an earlier step
    s = steps(h)
    assert s["intermediate"] == [SHAS[2]] and s["shape"] == "gradual"
    assert s["steps"][0]["share_pct"] == 40.0  # the named commit carries 40 % of the drop, not all of it
    assert "Shape of the drop: **gradual**" in sentence(h)
    assert f"probed at a level between the two: `{SHAS[2][:10]}`" in sentence(h)


def test_a_probe_whose_median_falls_between_by_noise_is_no_level_of_its_own():
    """A noisy probe's median 60 % of the way down, its samples reaching both ends' levels: not a
    level between them (the report said "1 probed commits at intermediate levels" of one step)."""
    h = _hunt({0: 100, 5: 80, 7: 80}, [5])
    noisy = _m(SHAS[2], 88)
    noisy.samples = [100.5, 79.5, 88.0, 99.0, 81.0]
    h.measurements.insert(1, noisy)
    s = steps(h)
    assert s["intermediate"] == [] and s["shape"] == "one step"
    assert "between" not in sentence(h)


def test_a_confirmed_cause_is_proven_with_its_p_value_corrected_for_the_tests_made():
    h = _hunt({0: 100, 4: 80, 7: 80}, [4], root_kind="commit", root_ref=SHAS[4])
    h.hypotheses = [
        Hypothesis(id="h1", category="environment", statement="", test="", status="refuted", evidence=["m1", "m2"]),
        Hypothesis(id="h2", category="history", statement="", test="", status="supported", evidence=["m3", "m4"]),
    ]
    h.confirmation = {"ok": True, "p_value": 0.002}
    s = strength(h)
    assert s == {"evidence": "proven", "p_value": 0.002, "p_corrected": 0.006, "tests": 3}
    h.confirmation = {}  # named by the bisection, never confirmed (the budget ran out)
    assert strength(h)["evidence"] == "likely"
    h.root_kind, h.root_ref = "hardware", "clocks.sm"
    assert strength(h)["evidence"] == "observed"
    h.root_kind = "external"
    assert strength(h) is None  # nothing named: nothing to be strong about


def test_a_step_given_back_is_claimed_only_where_the_culprits_samples_differ_from_heads():
    """A 5-sample probe taken under load put the culprit's median at 228 against HEAD's 142 (its
    samples reached down to 129) and the report said later commits gave back 75 % of the step;
    the same medians on samples apart are a step given back."""
    from agent.categories.history import given_back

    def hunt(probe: list[float]) -> Hunt:
        h = Hunt(run_id="r", target=Target(repo="/r", higher_is_better=False))
        h.culprits = [SHAS[4]]
        h.measurements = [_m(SHAS[0], 114, 12), _m(SHAS[7], 142, 12), _m(SHAS[4], 228)]
        h.measurements[0].label, h.measurements[1].label = "good-candidate", "HEAD"
        h.measurements[1].samples = [138.0, 140.0, 141.0, 142.0, 142.0, 142.0, 143.0, 144.0, 145.0, 146.0, 139.0, 141.0]
        h.measurements[2].samples = probe
        return h

    assert given_back(hunt([129.0, 141.0, 228.0, 250.0, 280.0])) is None
    said = given_back(hunt([226.0, 227.0, 228.0, 229.0, 230.0]))
    assert said is not None and "gave back 75% of it" in said


def test_one_state_measured_apart_in_time_beyond_its_noise_is_a_machine_that_changed_speed():
    """A loaded machine's hunt showed now 98.5 and HEAD 167.3 for one clean tree, side by side, and
    said nothing: the report now cautions that numbers taken at different times do not compare."""
    from agent.evidence import drifted

    h = Hunt(run_id="r", target=Target(repo="/r", higher_is_better=False))
    now, head = _m(SHAS[7], 98.5, 6), _m(SHAS[7], 167.3, 6)
    now.label, head.label = "now", "HEAD"
    now.samples = [97.0, 98.0, 98.5, 99.0, 98.2, 99.5]
    head.samples = [160.0, 165.0, 167.3, 170.0, 168.0, 166.0]
    h.measurements = [now, _m(SHAS[0], 90.0), head]
    said = drifted(h)
    assert said and "measured 98.5 as now and 167.3 as HEAD (+69.8%" in said
    head.samples = [97.5, 98.1, 98.9, 99.2, 98.0, 98.6]  # the same state alike twice: nothing to say
    head.median = 98.55
    assert drifted(h) is None


def test_a_confirmation_against_the_parent_is_not_headed_as_a_revert_at_head():
    """Where the revert conflicts, the A/B is the culprit's parent against it: the report said
    "HEAD vs HEAD with the culprit reverted" over it."""
    from agent.report import confirmation_what

    h = _hunt({0: 100, 4: 80, 7: 80}, [4], root_kind="commit", root_ref=SHAS[4])
    h.confirmation = {"ok": True, "text": "the revert conflicts in lib.py; instead: ...", "conflict": True}
    assert confirmation_what(h) == " (the culprit's parent vs the culprit)"
    h.confirmation = {"ok": True, "text": "HEAD 80 vs HEAD+revert 100 ..."}
    assert confirmation_what(h) == " (HEAD vs HEAD with the culprit reverted)"


def test_a_revert_that_conflicts_in_many_files_names_four_and_counts_the_rest():
    """A 74-file cleanup's revert conflicted in ten files, all listed in the confirmation line."""
    from types import SimpleNamespace

    from agent.experiments import conflicts_said

    files = [f"mlx_lm/models/m{i}.py" for i in range(10)]
    plan = SimpleNamespace(error=None, result={"conflicting_files": files})
    assert conflicts_said(plan) == f"the revert conflicts in {', '.join(files[:4])} and 6 more"
    assert conflicts_said(SimpleNamespace(error="no such commit", result=None)) == "no such commit"


def test_an_action_for_a_person_is_not_shown_as_pending_approval():
    """A revert that conflicts leaves `investigate`, which approve and reject refuse: the report and
    the terminal said "- **pending**", and an action with no ref showed an empty code span."""
    from rich.console import Console

    from agent.report import markdown
    from agent.state import Action
    from agent.terminal import report_view

    h = _hunt({0: 100, 4: 80, 7: 80}, [4], root_kind="commit", root_ref=SHAS[4])
    h.action = Action(kind="investigate", ref=None, detail="revert it by hand and resolve")
    text = markdown(h)
    assert "investigate: revert it by hand and resolve - **for a person to do (nothing to approve)**" in text
    assert "``" not in text and "**pending**" not in text
    screen = Console(width=200, record=True)
    screen.print(report_view(h))
    assert "investigate: revert it by hand and resolve - for a person to do" in screen.export_text()
    from agent.serve.pages import _env  # the page: the verdict's action as a dict, one wording

    said = _env().from_string("{{ action | status_said }}").render(action=h.action.model_dump())
    assert said == "for a person to do (nothing to approve)"


def test_a_refutation_of_a_real_but_small_difference_says_it_is_under_what_a_cause_must_show():
    """An uncommitted README edit measured "+2.7%, p=0.0043, different" and was refuted: beside
    "refuted" that read as a contradiction, without the bound it fell under."""
    from types import SimpleNamespace

    from agent.experiments import under_said

    hunt = Hunt(run_id="r", target=Target(repo="/r", metric="render_ms", higher_is_better=False))
    head, now = _m(SHAS[7], 12.86), _m(SHAS[6], 13.21)
    small = SimpleNamespace(verdict="different", delta_pct=2.7)
    assert under_said(hunt, small, head, now) == "; under the 5% a cause must show"  # no drop's size known yet
    assert under_said(hunt, small, head, now, least=3.0) == "; under the 3% a cause must show"
    assert under_said(hunt, SimpleNamespace(verdict="unknown", delta_pct=2.7), head, now) == ""
    assert under_said(hunt, SimpleNamespace(verdict="different", delta_pct=-2.7), now, head) == ""  # the wrong way


def test_a_share_over_all_of_the_drop_is_said_as_all_of_it():
    """Trials 19 and 20: "+128.1 % (114 % of the drop)" and "115 % of the drop recovered": a step
    or a fix measured at another time than the drop, over 100 % by noise."""
    from agent.evidence import of_the_drop

    assert of_the_drop(94.2) == "94% of the drop"
    assert of_the_drop(114.4) == "all of the drop, 114% as measured"
    assert of_the_drop(115.0, "of the drop recovered") == "all of the drop recovered, 115% as measured"
    h = _hunt({0: 100, 3: 100, 4: 77, 7: 80}, [4])  # the step measured past HEAD's level
    assert "(all of the drop, 115% as measured)" in sentence(h)

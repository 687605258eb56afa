"""What a person sees: in a terminal the report renders (no raw Markdown), in a pipe it is valid
Markdown with every table row on one line; hypotheses one experiment decided are one row."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from agent.grouped import group_hypotheses
from agent.state import Hypothesis
from tests.conftest import one_slow_commit, sleuth_exe

# one worker runs the whole module: its module fixture (a real hunt) is made once, not once per worker
pytestmark = pytest.mark.xdist_group("terminal_report")

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, str, str]:
    """A benchmark-command project (a hunt of seconds; the report is the same whatever measured
    it): (repo, good, the commit that doubled the cost)."""
    return one_slow_commit(tmp_path_factory.mktemp("tiny") / "repo", commits=4, slow=2)


def _in_a_terminal(args: list[str], columns: int = 120, timeout: float = 300) -> str:
    """Run ``sleuth ARGS`` with a pseudo-terminal as its stdout; what it wrote, escapes removed."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sleuth_exe(), *args], stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the other end closed: the process is done writing
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    return ANSI.sub("", b"".join(chunks).decode(errors="replace"))


@pytest.fixture(scope="module")
def piped(tiny, tmp_path_factory):
    """One hunt of the tiny scenario with its stdout a pipe: (the Markdown it printed, its store)."""
    db = tmp_path_factory.mktemp("piped") / "r.db"
    repo, good, _slow = tiny
    proc = subprocess.run(
        [
            sleuth_exe(),
            "hunt",
            "--repo",
            str(repo),
            "--good",
            good,
            "--bench",
            "python3 bench.py",
            "--lower-is-better",
            "--db",
            str(db),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, db


def test_in_a_pipe_the_report_is_markdown_with_every_row_on_one_line(piped):
    md, _db = piped
    assert md.startswith("# perf-sleuth run ") and "## Hypotheses" in md
    tables = _tables(md)
    assert len(tables) >= 2
    for header, rows in tables:
        width = header.count("|")
        for row in rows:  # a wrapped row would start without a pipe or have another cell count
            assert row.startswith("| ") and row.endswith(" |") and row.replace("\\|", "").count("|") == width, row
    import markdown_it

    tokens = markdown_it.MarkdownIt().enable("table").parse(md)
    assert sum(t.type == "table_open" for t in tokens) == len(tables)  # every table parses as one


def test_in_a_terminal_the_report_renders_with_no_raw_markdown(tiny, piped):
    """The same run's report once more, in a pseudo-terminal: rejecting it prints it (no probe)."""
    _md, db = piped
    run_id = json.loads(subprocess.run([sleuth_exe(), "runs", "--db", str(db), "--json"], capture_output=True,
                                       text=True, timeout=60).stdout)[0]["id"]  # fmt: skip
    text = _in_a_terminal(["reject", run_id, "--reason", "looking by hand", "--db", str(db)])
    assert "perf-sleuth run" in text and "Hypotheses" in text and "Root cause" in text
    assert "**" not in text and "| --- |" not in text and "```" not in text
    assert "rejected" in text and tiny[2] in text
    assert '"looking by hand"' in text  # the person's words, beside the decision (only the timeline had them)


def _tables(md: str) -> list[tuple[str, list[str]]]:
    lines, out, i = md.splitlines(), [], 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and re.match(r"^\| (--- \| )*--- \|$", lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].strip():
                j += 1
            out.append((lines[i], lines[i + 2 : j]))
            i = j
        else:
            i += 1
    return out


def test_runs_in_a_pipe_prints_every_value_in_full(tiny, piped):
    _md, db = piped
    proc = subprocess.run([sleuth_exe(), "runs", "--db", str(db)], capture_output=True, text=True, timeout=60)
    header, row = proc.stdout.splitlines()[:2]
    assert header.split("\t")[:2] == ["id", "started"]
    cells = row.split("\t")
    run_id = json.loads(subprocess.run([sleuth_exe(), "runs", "--db", str(db), "--json"], capture_output=True,
                                       text=True, timeout=60).stdout)[0]["id"]  # fmt: skip
    assert cells[0] == run_id and cells[2].endswith("/repo") and "…" not in row
    assert cells[5].startswith(tiny[2][:10])


def _h(i: int, category: str, subject: str, status: str, reason: str, evidence: list[str]) -> Hypothesis:
    return Hypothesis(
        id=f"h{i}", category=category, statement=f"{subject} slows it", test="A/B", subject=subject,
        status=status, reason=reason, evidence=evidence,
    )  # fmt: skip


def test_hypotheses_one_ab_decided_are_one_row_listing_what_it_covers():
    same = "HEAD 58.38 vs now 57.21 tok_per_s (-2.0%, p=0.15, same)"
    hs = [
        _h(1, "hardware", "clocks", "refuted", "8 GPUs at max", []),
        _h(2, "environment", "NCCL_ALGO", "refuted", same, ["m1", "m2"]),
        _h(3, "environment", "NCCL_PROTO", "refuted", same, ["m1", "m2"]),
        _h(4, "uncommitted", "a.py", "refuted", same, ["m1", "m2"]),
        _h(5, "uncommitted", "b.py", "demoted", same + "; not on the executed path", ["m1", "m2"]),
        _h(6, "history", "abc", "supported", "good 91 vs HEAD 62", ["m3", "m4"]),
        _h(7, "hardware", "pcie", "refuted", "8 GPUs at max", []),  # no shared experiment: its own row
    ]
    groups = group_hypotheses(hs)
    assert [g.id for g in groups] == ["h1", "h2-h4", "h5", "h6", "h7"]
    shared = groups[1]
    assert shared.statement == "2 variables and 1 changed file"
    assert shared.category == "environment, uncommitted changes"
    assert shared.covers == ["NCCL_ALGO", "NCCL_PROTO", "a.py"] and shared.reason == same
    # store rows (the page's) group the same way
    rows = [{"hid": h.id, "category": h.category, "statement": h.statement, "status": h.status, "reason": h.reason,
             "evidence": json.dumps(h.evidence)} for h in hs]  # fmt: skip
    assert [g.id for g in group_hypotheses(rows)] == ["h1", "h2-h4", "h5", "h6", "h7"]


def test_a_grouped_row_names_its_ids_as_runs_never_spanning_a_row_of_its_own():
    """The seed's report showed "h2-h12" (refuted) above "h6" (demoted): the range spanned h6. A
    group whose ids skip one names its runs."""
    same = "HEAD 58.38 vs now 57.21 tok_per_s (-2.0%, p=0.15, same)"
    hs = [_h(i, "environment", f"V{i}", "refuted", same, ["m1", "m2"]) for i in (2, 3, 4, 6, 7)]
    hs.insert(3, _h(5, "uncommitted", "b.py", "demoted", same + "; not on the executed path", ["m1", "m2"]))
    hs.append(_h(9, "environment", "V9", "refuted", same, ["m1", "m2"]))
    assert [g.id for g in group_hypotheses(hs)] == ["h2-h4, h6-h7, h9", "h5"]


def test_untested_packages_for_one_reason_are_one_row_not_a_page():
    """An old known-good ref on a host upgraded since: every package is a suspect, none testable
    by a benchmark command. One row names them all; a differently untested one keeps its own."""
    why = "a benchmark command has no launch to put old versions in"
    hs = [_h(i, "dependencies", f"pkg{i}", "inconclusive", why, []) for i in range(1, 98)]
    hs.append(_h(98, "dependencies", "torch", "inconclusive", "the old versions cannot be tried: no wheel", []))
    hs.append(_h(99, "environment", "NCCL_ALGO", "inconclusive", why, []))  # another category
    groups = group_hypotheses(hs)
    assert [g.id for g in groups] == ["h1-h97", "h98", "h99"]
    assert groups[0].statement == "97 packages" and groups[0].covers[:2] == ["pkg1", "pkg2"]
    # the row names the first twelve and counts the rest
    assert groups[0].covers_text() == ", ".join(f"pkg{i}" for i in range(1, 13)) + " and 85 more"
    assert groups[1].covers_text() == ""  # one member: the statement says it all


def test_a_stored_runs_grouped_row_names_packages_not_whole_statements(tmp_path):
    """``sleuth show`` groups the store's rows: each member is named by its subject (the package),
    as the live report does, not by its whole statement."""
    from transcripts.store import Store

    why = "a benchmark command has no launch to put old versions in"
    hs = [_h(i, "dependencies", f"pkg{i}", "inconclusive", why, []) for i in range(1, 4)]
    store = Store(tmp_path / "runs.db")
    store.start_run("r1")
    store.put_hypotheses("r1", [h.model_dump() for h in hs])
    (group,) = group_hypotheses(store.hypotheses("r1"))
    assert group.statement == "3 packages" and group.covers == ["pkg1", "pkg2", "pkg3"]


def test_a_report_shows_at_most_twelve_rows_the_deciding_ones_first_and_counts_the_rest():
    """Twenty hardware readings, each refuted on its own evidence, and one supported commit at
    the end: eleven rows shown with the supported one among them, the other ten folded into one
    last row that counts them."""
    from agent.grouped import SCREEN_ROWS, for_screen

    hs = [_h(i, "hardware", f"gpu{i}", "refuted", f"GPU {i} at max", []) for i in range(1, 21)]
    hs.append(_h(21, "history", "abc", "supported", "good 91 vs HEAD 62", ["m3", "m4"]))
    rows = for_screen(group_hypotheses(hs))
    assert len(rows) == SCREEN_ROWS == 12
    assert [r.id for r in rows[:-1]] == ["h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "h9", "h10", "h21"]
    folded = rows[-1]
    assert folded.statement == "10 more hypotheses in 10 rows" and folded.status == "10 refuted"
    assert folded.ids == [f"h{i}" for i in range(11, 21)]
    few = group_hypotheses(hs[:5])
    assert for_screen(few) == few  # a short ledger is shown whole


def test_the_markdown_report_of_a_long_ledger_fits_a_screen(tmp_path):
    from agent.report import markdown
    from agent.state import Hunt, Target

    hunt = Hunt(run_id="r1", target=Target(repo="/r", metric="value", command="true"))
    hunt.hypotheses = [_h(i, "hardware", f"gpu{i}", "refuted", f"GPU {i} at max", []) for i in range(1, 40)]
    text = markdown(hunt)
    table = text.split("## Hypotheses")[1].split("##")[0]
    rows = [line for line in table.splitlines() if line.startswith("| h")]
    assert len(rows) == 12 and "28 more hypotheses" in rows[-1], rows


def test_long_tables_of_the_report_keep_their_ends_and_count_the_rest():
    """A 78-commit range with 35 commits pruned and 20 measured states still fits a screen: the
    pruned commits are one line; the numbers keep the first and last states (``number_rows``, what
    a hunt of two probes or fewer shows) or fold the probes into one row."""
    from agent.report import NUMBER_ROWS, markdown, number_rows
    from agent.state import Hunt, Measured, Target

    hunt = Hunt(run_id="r1", target=Target(repo="/r", metric="value", command="true"))
    hunt.pruned = [{"sha": f"{i:040x}", "files": ["docs/a.rst"], "reason": "touches only documentation"}
                   for i in range(35)]  # fmt: skip
    hunt.measurements = [
        Measured(id=f"m{i}", label=f"bisect {i}", ref=f"{i:040x}", launch="", samples=[1.0], median=1.0,
                 ci_low=1.0, ci_high=1.0, cv=0.0)
        for i in range(20)
    ]  # fmt: skip
    numbers = number_rows(hunt)
    assert len(numbers) == NUMBER_ROWS and numbers[0][0] == "bisect 0" and numbers[-1][0] == "bisect 19"
    assert any(r[0] == "... 7 more states" for r in numbers)
    text = markdown(hunt)  # the report itself: the pruned commits one line by reason, the probes one row
    assert "Commits not bisected: 35 (35 touches only documentation)" in text and "`0000000000`" not in text
    assert "| bisection | 1 to 1 |  | 20 in 20 states |" in text


def test_a_root_cause_with_no_ref_has_no_empty_code_span():
    """'no regression' names no state: the line is '**none**: why', never '**none** ``: why'."""
    from agent.report import markdown
    from agent.state import Hunt, Target

    hunt = Hunt(run_id="r1", target=Target(repo="/x", command="true"), status="concluded")
    hunt.root_kind, hunt.root_summary = "none", "no regression between the known-good ref and now"
    text = markdown(hunt)
    assert "**none**: no regression between the known-good ref and now" in text and "``" not in text


def test_a_concluded_run_whose_action_is_for_a_person_offers_no_approve_command():
    """A revert that conflicts ends the hunt 'concluded' with an 'investigate' action: `sleuth
    approve` would refuse it (not awaiting approval), so neither report offers the command."""
    from rich.console import Console

    from agent.report import markdown
    from agent.state import Action, Hunt, Target
    from agent.terminal import report_view

    hunt = Hunt(run_id="r1", target=Target(repo="/x", command="true"), status="concluded")
    hunt.root_kind, hunt.root_ref, hunt.root_summary = "commit", "f" * 40, "ffffffffff 'slower'"
    hunt.action = Action(kind="investigate", ref="f" * 40, detail="the revert conflicts: revert by hand")
    hint = "sleuth approve r1"
    console = Console(record=True, width=120)
    console.print(report_view(hunt, hint))
    for text in (markdown(hunt, hint), console.export_text()):
        assert "investigate" in text and "sleuth approve" not in text and "sleuth reject" not in text
    hunt.status = "awaiting_approval"  # the same action awaiting a person: both say how to decide
    console.print(report_view(hunt, hint))
    assert "sleuth approve r1" in markdown(hunt, hint) and "sleuth reject r1" in console.export_text()


def test_a_real_cases_report_fits_one_screen_with_the_bisection_as_one_row():
    """attrs' real case (7 probes, 22 commits pruned) filled 60 lines of a 100-column terminal:
    now the probes are one row (culprit^ and culprit, measured afresh, show the step) and the
    pruned commits one line by reason, in the terminal and in the Markdown report alike (trial 19:
    report.md ran to 55-64 lines; `sleuth show RUN` and the verdict keep every probe and commit)."""
    from rich.console import Console

    from agent.report import markdown
    from agent.state import Action, Hunt, Hypothesis, Measured, Target
    from agent.terminal import report_view

    def m(i: int, label: str, med: float, n: int) -> Measured:
        return Measured(id=f"m{i}", label=label, ref=f"{i:040x}", launch="", samples=[med] * n, median=med,
                        ci_low=med * 0.99, ci_high=med * 1.01, cv=0.01)  # fmt: skip

    hunt = Hunt(run_id="r1", target=Target(repo="/src/attrs", metric="value", command="python3 bench.py"))
    hunt.status, hunt.root_kind, hunt.root_ref = "concluded", "commit", "e" * 40
    hunt.root_summary = 'eda9f2de6f "Make unique_filename not depend on repr. (#560)"'
    hunt.measurements = [m(0, "now", 0.0796, 5), m(1, "good-candidate", 0.0368, 6), m(2, "HEAD", 0.0686, 6)]
    hunt.measurements += [m(3 + i, f"bisect {i:08x}", 0.037 if i % 2 else 0.068, 3) for i in range(7)]
    hunt.measurements += [m(20, "culprit^", 0.0374, 6), m(21, "culprit", 0.0685, 6)]
    hunt.pruned = [
        {"sha": f"{i:040x}", "files": ["docs/api.rst"], "reason": f"touches only documentation ({1} file(s))"}
        for i in range(22)
    ]
    h1 = {"id": "h1", "category": "history", "statement": "a commit since 0356f0603e slows it"}
    hunt.hypotheses = [Hypothesis(**h1, test="A/B, then bisection", status="supported", reason="bisection: 94 commits")]
    hunt.action = Action(kind="investigate", ref="e" * 40, detail="the revert conflicts: revert by hand")
    console = Console(record=True, width=100)
    console.print(report_view(hunt))
    screen = console.export_text().rstrip().splitlines()
    assert len(screen) <= 40, "\n".join(screen)
    row = next(line for line in screen if line.lstrip().startswith("bisection"))
    assert "0.037 to 0.068" in row and "21 in 7 states" in row
    assert any("Commits not bisected: 22 (22 touches only documentation)" in line for line in screen)
    text = markdown(hunt)
    assert "| bisection | 0.037 to 0.068 |  | 21 in 7 states |" in text and "| bisect 00000006" not in text
    assert "Commits not bisected: 22 (22 touches only documentation)" in text and len(text.splitlines()) <= 45


def test_two_culprits_reverts_are_two_rows_and_a_small_further_step_is_said_with_its_numbers():
    """Both confirmations measure a state labelled HEAD+revert (each a different revert commit):
    keyed by label, the table showed one row, the second's number beside the first's summary. A
    further step whose revert recovers 6.5 % at p = 0.0006, under what a cause must, was "dropped:
    its revert recovers nothing"."""
    from agent.categories.history import _dropped_said
    from agent.report import number_rows
    from agent.state import Hunt, Measured, Target

    hunt = Hunt(run_id="r1", target=Target(repo="/r", metric="render_ms", command="true", higher_is_better=False))
    for i, (ref, median) in enumerate((("a" * 40, 13.66), ("b" * 40, 16.74))):
        hunt.measurements.append(Measured(id=f"m{i}", label="HEAD+revert", ref=ref, launch="", samples=[median],
                                          median=median, ci_low=median, ci_high=median, cv=0.0))  # fmt: skip
    rows = number_rows(hunt)
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("HEAD+revert", "aaaaaaaaaa", "13.66"),
        ("HEAD+revert", "bbbbbbbbbb", "16.74"),
    ]
    hunt.target.good_value, hunt.target.bad_value = 12.75, 17.9  # a cause must recover a quarter: 7.2 %
    hunt.confirmation = {"ok": False, "delta_pct": -6.5, "p_value": 0.00059}
    assert _dropped_said(hunt, "b" * 40) == "its revert recovers 6.5% (p=0.00059), less than the 7.2% a cause must"
    hunt.confirmation = {"ok": False, "delta_pct": -1.0, "p_value": 0.4}
    assert _dropped_said(hunt, "b" * 40) == "its revert recovers nothing (-1.0% with it reverted, p=0.4)"


def test_a_hunt_that_stated_no_hypothesis_says_so_instead_of_an_empty_table():
    """An LLM run whose model never stated one showed the table's headers and nothing under them."""
    from rich.console import Console

    from agent.report import markdown
    from agent.state import Hunt, Target
    from agent.terminal import report_view

    hunt = Hunt(run_id="r1", target=Target(repo="/x", command="true"), status="inconclusive")
    text = markdown(hunt)
    assert "## Hypotheses\n\nNone stated." in text and "| id | category |" not in text
    console = Console(record=True, width=120)
    console.print(report_view(hunt))
    assert "Hypotheses: none stated" in console.export_text()


def test_a_rows_evidence_is_cut_to_its_start_and_end_where_it_grew_long():
    """A history row's reason grows with each step (the A/B, "not confirmed ...", "undone by ...",
    the budget): a toolz trial's wrapped to 40 lines of a 100-column terminal. On screen it keeps
    its start (the A/B that decided) and its end (the latest step); the JSON keeps it whole."""
    from agent.grouped import SCREEN_REASON, for_screen

    decided = "good-candidate 1.837 vs HEAD 3.438 value (+87.2%, p=0.0014, different)"
    latest = "stopped: probe budget of 20 exhausted"
    long = decided + "; " + "; ".join(f"step {i} measured and dropped" for i in range(40)) + "; " + latest
    (row,) = for_screen(group_hypotheses([_h(1, "history", "abc", "supported", long, ["m1"])]))
    assert len(row.reason) <= SCREEN_REASON and row.reason.startswith(decided) and row.reason.endswith(latest)
    assert "`sleuth show RUN --json` has it whole" in row.reason
    (short,) = for_screen(group_hypotheses([_h(1, "history", "abc", "supported", decided, ["m1"])]))
    assert short.reason == decided
    # Cut between words, never inside one (trial 19: "the revert conflicts i [...] mmits (7 pruned").
    for pad in range(7):  # wherever the cut falls among seven-letter words
        text = decided + " " + "x" * pad + " conflict" * 60 + "; " + latest
        (row,) = for_screen(group_hypotheses([_h(1, "history", "abc", "supported", text, ["m1"])]))
        start, _gap, end = row.reason.partition(" [...; `sleuth show RUN --json` has it whole] ")
        assert start.split()[-1] in text.split() and end.split()[0] in text.split(), row.reason


def test_in_a_100_column_terminal_a_grouped_row_and_a_long_evidence_stay_short():
    """The seed's report in a 100-column terminal was about 80 lines: the grouped row listed ten
    paths a line each and the history row's evidence took 17 lines. A terminal names three members
    and counts the rest, and cuts a row's evidence to its start and end (report.md keeps 360
    characters, `sleuth show RUN --json` all of it)."""
    from rich.console import Console

    from agent.state import Hunt, Target
    from agent.terminal import TERMINAL_REASON, report_view

    same = "one A/B for 3 variable(s) and 8 changed file(s), HEAD with the variables blanked: now 61.85 vs clean 61.96"
    paths = [f"python/minisglang/layers/module_{i}.py" for i in range(8)]
    names = ["NCCL_ALGO", "NCCL_P2P_LEVEL", "NCCL_PROTO", *paths]
    hs = [
        _h(i + 2, "uncommitted" if "/" in n else "environment", n, "refuted", same, ["m1", "m2"])
        for i, n in enumerate(names)
    ]
    long_reason = (
        "good-candidate 88.8 vs clean 61.96 tok_per_s (-30.2%, p=0.007, different); " + "measured with care; " * 30
    )
    hs.append(_h(20, "history", "a commit since 5049c0bfad", "supported", long_reason, ["m3", "m4"]))
    hunt = Hunt(run_id="r1", target=Target(repo="/src/minisglang"), hypotheses=hs)
    console = Console(record=True, width=100)
    console.print(report_view(hunt))
    screen = console.export_text()
    table = screen[screen.index("Hypotheses") : screen.index("Proposed action")].splitlines()[3:-2]

    def column(i: int) -> str:  # one column's cells, read down the table
        return " ".join(" ".join(line.split("│")[i].split()) for line in table if line.count("│") == 4)

    assert "NCCL_ALGO, NCCL_P2P_LEVEL, NCCL_PROTO and 8 more" in column(2) and "module_0.py" not in screen
    assert "[...; `sleuth show RUN --json` has it whole]" in column(4)
    assert len(table) <= 6 + TERMINAL_REASON // 20, "\n".join(table)  # ten lines the two rows, at 100 columns


def test_in_a_100_column_terminal_sleuth_runs_keeps_one_line_a_run_and_every_id_whole(tmp_path):
    """At 120 columns `sleuth runs` cut every id to "20261207-183…" (what a person copies into
    `sleuth show`) and wrapped the root cause over five lines a run: ids whole, one line a run, the
    policy every run shares said once below the table, the root cause cut to what is left."""
    from tests.worlds import load

    db = tmp_path / "r.db"
    ids = [load(name, db)["run"]["id"] for name in ("approved", "external", "reland")]
    text = _in_a_terminal(["runs", "--db", str(db)], columns=100)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100, text
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == 3 and all(any(i in row for i in ids) for row in rows), text
    assert "revert applied" in text and "investigate" in text and "policy methodical" in text, text
    assert "policy" not in lines[lines.index(next(line for line in lines if "┃" in line))], text


def test_a_culprit_whose_confirmation_failed_is_said_so_in_the_numbers():
    """Trial 19's table had a row "culprit" for the refuted first guess (160 samples) beside the
    row "culprit" of the commit that was confirmed."""
    from agent.report import number_rows
    from agent.state import Hunt, Measured, Target

    hunt = Hunt(run_id="r1", target=Target(repo="/r", metric="value", command="true"))
    for i, ref in enumerate(("7" * 40, "8" * 40)):
        hunt.measurements.append(Measured(id=f"m{i}", label="culprit", ref=ref, launch="", samples=[1.0],
                                          median=1.0, ci_low=1.0, ci_high=1.0, cv=0.0))  # fmt: skip
    hunt.rejected_culprits, hunt.culprits = ["7" * 40], ["8" * 40]  # the first guess refuted, the second named
    assert [r[:2] for r in number_rows(hunt)] == [("culprit, not confirmed", "7" * 10), ("culprit", "8" * 10)]
    # Trial 20: a further step the confirmations dropped (not a rejected first guess) is not named either.
    hunt.rejected_culprits, hunt.culprits, hunt.root_ref = [], ["7" * 40], "7" * 40
    assert [r[0] for r in number_rows(hunt)] == ["culprit", "culprit, not confirmed"]


def test_the_working_trees_snapshot_commit_is_said_to_be_one():
    """Trial 19's first row read "now (6477d1d3c5)", a SHA the user never made: the snapshot of
    the uncommitted work the hunt measured."""
    from agent.report import number_rows
    from agent.state import Hunt, Measured, Target

    hunt = Hunt(run_id="r1", target=Target(repo="/r", metric="value", command="true"), head_sha="a" * 40)
    for i, (label, ref) in enumerate((("now", "6" * 40), ("HEAD", "a" * 40))):
        hunt.measurements.append(Measured(id=f"m{i}", label=label, ref=ref, launch="", samples=[1.0],
                                          median=1.0, ci_low=1.0, ci_high=1.0, cv=0.0))  # fmt: skip
    assert [r[0] for r in number_rows(hunt)] == ["now: HEAD + uncommitted work as snapshot", "HEAD"]
    hunt.measurements[0].ref = "a" * 40  # a clean tree: now is HEAD itself
    assert [r[0] for r in number_rows(hunt)] == ["now", "HEAD"]

"""A scenario spec is validated before anything is built; errors name the file and the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evals.lab.demo import SEED_SPEC
from evals.lab.spec import SpecError, load_spec
from tests.conftest import MINIMAL_SPEC


def test_the_seed_spec_and_the_minimal_spec_are_valid(write_spec):
    seed = load_spec(SEED_SPEC)
    assert seed.truth.culprits == ["pcg_fix"]
    assert len(seed.pulled) == 7
    assert load_spec(write_spec(MINIMAL_SPEC)).name == "tiny"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda s: s.replace('cost = "allreduce_eager"', 'cost = "allreduc"'),
            "seed.toml: pulled[0].edits[0].effect.cost: unknown cost 'allreduc'",
        ),
        (
            lambda s: s.replace("[alert]\ngood = 94\nbad = 70", "[alert]\nbad = 70"),
            "seed.toml: alert.good: required field missing",
        ),
        (lambda s: "bogus = 1\n" + s, "seed.toml: bogus: unknown field"),
        (lambda s: s + "\nbogus = 1\n", "seed.toml: truth.bogus: unknown field"),
        (
            lambda s: s.replace('culprits = ["slow"]', 'culprits = ["nope"]'),
            "seed.toml: truth.culprits: no change has id 'nope'",
        ),
        (
            lambda s: s.replace("distributed/pynccl.py", "distributed/parallel_state.py"),
            "seed.toml: pulled[0].edits[0]: cost 'allreduce_eager' is paid in python/minisglang/distributed/pynccl.py",
        ),
        (
            lambda s: s.replace("add_us = 50", "add_us = -5"),
            "seed.toml: pulled[0].edits[0].effect.add_us: Input should be greater than 0",
        ),
        (
            lambda s: s.replace('path = "docs/notes.py"', 'path = "../escape.py"'),
            "seed.toml: pulled[1].edits[0].path: '../escape.py' must be a relative file path inside the repo",
        ),
        (lambda s: s.replace('name = "tiny"', 'name = "Tiny Name"'), "seed.toml: name: String should match"),
        (
            lambda s: s + '\n[[committed]]\nsubject = "x"\nedits = [{ path = "a.py" }]\n',
            "seed.toml: pulled: give either 'pulled'",
        ),
        (
            lambda s: s.replace("add_us = 50", "add_us = 50, scale = 1.2"),
            "seed.toml: pulled[0].edits[0].effect: give exactly one of add_us or scale",
        ),
        (
            lambda s: s.replace("[alert]\n", '[alert]\nmetric = "p42_ttft_ms"\n'),
            "seed.toml: alert.metric: 'p42_ttft_ms' is not a metric sleuth bench measures",
        ),
        (
            lambda s: s.replace("[alert]\n", "[alert]\nconcurrency = 0\n"),
            "seed.toml: alert.concurrency: Input should be greater than or equal to 1",
        ),
    ],
)
def test_a_bad_spec_names_the_file_and_the_field(write_spec, mutate, expected):
    path = write_spec(mutate(MINIMAL_SPEC), name="seed.toml")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    message = str(err.value)
    assert message.startswith(expected), message
    assert "\n" not in message


def test_invalid_toml_and_missing_files_are_one_line_errors(write_spec, tmp_path):
    # the full path: every real case of a suite is a case.toml, its folder tells which
    with pytest.raises(SpecError, match="^" + re.escape(f"{tmp_path / 'broken.toml'}: invalid TOML")):
        load_spec(write_spec("name = [\n", name="broken.toml"))
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "absent.toml")


def test_every_suite_spec_is_valid_and_latency_alerts_know_their_direction():
    suites = Path(SEED_SPEC).parents[1]
    specs = {p.stem: load_spec(p) for p in sorted(suites.glob("*/*.toml"))}
    assert len(specs) >= 19
    latency = {name: s.alert for name, s in specs.items() if not s.alert.higher_is_better}
    assert {"prefill_ttft", "verify_itl"} <= set(latency)
    assert specs["prefill_ttft"].alert.metric == "p99_ttft_ms" and specs["prefill_ttft"].alert.input_len == 128
    assert specs["batch_cap_under_load"].alert.concurrency == 8


def test_an_external_truth_names_no_culprit_and_a_host_slowdown_scales_every_kernel(tmp_path, write_spec):
    import json

    from evals.lab.builder import build
    from tests.conftest import MINIMAL_SPEC

    with pytest.raises(SpecError, match="an external truth names no culprits"):
        load_spec(write_spec(MINIMAL_SPEC.replace('culprits = ["slow"]', 'culprits = ["slow"]\nkind = "external"')))
    text = MINIMAL_SPEC.replace('culprits = ["slow"]', 'kind = "external"') + "\n[system]\nslowdown = 1.5\n"
    res = build(load_spec(write_spec(text, "slow.toml")), tmp_path / "slow")
    base = build(load_spec(write_spec(MINIMAL_SPEC, "base.toml")), tmp_path / "base")
    assert res.truth["kind"] == "external" and res.truth["root_causes"] == []

    def kernels(r) -> dict:
        return json.loads(next(r.root.rglob("minitorch/_profile.json")).read_text())["kernels"]

    slow, fast = kernels(res), kernels(base)
    assert {k: round(v["us"] / fast[k]["us"], 6) for k, v in slow.items() if fast[k]["us"]} == {
        k: 1.5 for k in slow if fast[k]["us"]
    }

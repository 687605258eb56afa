"""The scenario reference documents every site, kernel and template the lab knows."""

from __future__ import annotations

from pathlib import Path

from evals.lab.recipes import KERNELS, SITES, TEMPLATES

DOC = (Path(__file__).parents[1] / "docs" / "scenarios.md").read_text()


def test_every_site_kernel_and_template_is_documented():
    missing = [n for n in [*SITES, *KERNELS, *TEMPLATES] if f"`{n}`" not in DOC]
    assert missing == []


def test_documented_kernel_defaults_match_the_code():
    for name, k in KERNELS.items():
        assert f"| `{name}` | {k.us:g} | {k.klass} |" in DOC, name

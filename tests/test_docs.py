"""The scenario reference documents every site, kernel and template the lab knows."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from evals.lab.recipes import KERNELS, SITES, TEMPLATES

DOC = (Path(__file__).parents[1] / "docs" / "reference" / "lab-recipes.md").read_text()


def test_every_site_kernel_and_template_is_documented():
    missing = [n for n in [*SITES, *KERNELS, *TEMPLATES] if f"`{n}`" not in DOC]
    assert missing == []


def test_documented_kernel_defaults_match_the_code():
    for name, k in KERNELS.items():
        assert f"| `{name}` | {k.us:g} | {k.klass} |" in DOC, name


ROOT = Path(__file__).parents[1]


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_generated_reference_page_renders_from_the_code():
    hooks = _hooks()
    pages = sorted((ROOT / "docs").rglob("*.md"))
    rendered = {p.name: hooks.on_page_markdown(p.read_text(), None, None, None) for p in pages}
    assert not [n for n, text in rendered.items() if hooks.MARKER.search(text)]  # every marker expanded
    assert "| `root_cause` |" in rendered["verdict.md"] and "| `share_pct` |" in rendered["verdict.md"]
    assert "| `launch_timeout` |" in rendered["targets.md"] and "| `max_wall_s` |" in rendered["targets.md"]
    assert "--max-wall" in rendered["cli.md"] and "## `sleuth lab build`" in rendered["cli.md"]


@pytest.mark.parametrize(
    "model", ["agent.verdict:Verdict", "agent.serve.config:ServeConfig", "evals.realworld:RealCase"]
)
def test_every_field_of_a_documented_contract_says_what_it_holds(model):
    module, name = model.split(":")
    schema = getattr(importlib.import_module(module), name).model_json_schema()
    undescribed = [
        f"{where}.{field}"
        for where, sub in [(name, schema), *schema.get("$defs", {}).items()]
        for field, prop in sub.get("properties", {}).items()
        if not prop.get("description")
    ]
    assert undescribed == []


def test_the_readme_links_only_to_pages_that_exist_and_stays_short():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(((?:docs/)[^)#]+)", readme)
    assert links and [link for link in links if not (ROOT / link).exists()] == []
    assert len(readme.splitlines()) <= 200

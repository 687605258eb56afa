"""MkDocs hooks: reference pages generated from the code, never copied from it by hand.

A page writes a marker and the build puts the code's own words there:

- ``<!-- model: package.module:Class -->``: the pydantic model's JSON Schema as tables (one per
  model it uses), field, type, default and the field's description;
- ``<!-- docstring: package.module -->``: a module's docstring, as written;
- ``<!-- markdown: package.module:function -->``: what the function returns (the CLI reference).

A marker naming something that does not import fails the build (``mkdocs build --strict``).
"""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

MARKER = re.compile(r"<!--\s*(model|docstring|markdown):\s*([\w.]+)(?::(\w+))?\s*-->")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def expand(match: re.Match) -> str:
        what, module, name = match.groups()
        mod = importlib.import_module(module)
        if what == "docstring":
            return (mod.__doc__ or "").strip()
        if what == "markdown":
            return getattr(mod, name)()
        return model_tables(getattr(mod, name).model_json_schema())

    return MARKER.sub(expand, markdown)


def model_tables(schema: dict) -> str:
    """The root model's table, then one per model it refers to (``$defs``), in the schema's order."""
    defs = schema.get("$defs", {})
    parts = [_table(schema)]
    for name, sub in defs.items():
        if sub.get("type") == "object" or "properties" in sub:
            parts.append(f"### {name}\n\n{_table(sub)}")
        elif "enum" in sub:
            parts.append(f"### {name}\n\none of {', '.join(f'`{v}`' for v in sub['enum'])}")
    return "\n\n".join(parts)


def _table(schema: dict) -> str:
    lines = []
    if schema.get("description"):
        lines += [" ".join(schema["description"].split()), ""]
    required = set(schema.get("required", []))
    lines += ["| field | type | default | what it holds |", "| --- | --- | --- | --- |"]
    for field, prop in schema.get("properties", {}).items():
        default = "required" if field in required else f"`{json.dumps(prop.get('default'))}`"
        desc = " ".join(str(prop.get("description", "")).split()).replace("|", "\\|")
        lines.append(f"| `{field}` | {_type(prop)} | {default} | {desc} |")
    if schema.get("additionalProperties") is False:
        lines += ["", "No other field is accepted."]
    return "\n".join(lines)


def _type(prop: dict) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map of {_type(prop['additionalProperties'])}"
    return {"null": "null", "object": "object"}.get(kind, kind)

"""Every setting by its dotted name (`framefleet.toml`'s: `autoscaler.budget_per_day`) with the
kind of text its environment variable holds, derived from the settings' pydantic models and
their JSON Schema: what the Terraform module checks its `settings` input against at plan time
(`framefleet schema --of settings` writes infra/modules/framefleet/settings.json; a test keeps
it fresh)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter

from framefleet.settings import Settings

# The JSON Schema type of a setting's value -> how its text is checked: "json" for lists and
# tables (the environment holds them as JSON).
_KINDS = {
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "string": "string",
    "array": "json",
    "object": "json",
}


def _kind(schema: dict[str, Any]) -> dict[str, Any]:
    branches = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    if "enum" in branches[0]:
        return {"kind": "enum", "values": [str(v) for v in branches[0]["enum"]]}
    types = {_KINDS.get(str(b.get("type")), "string") for b in branches}
    # A Decimal is a number or a numeric string: the number check covers both.
    for kind in ("number", "integer", "boolean", "json"):
        if kind in types:
            return {"kind": kind}
    return {"kind": "string"}


def _walk(model: type[BaseModel], prefix: str) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for name, field in model.model_fields.items():
        kind = field.annotation
        assert kind is not None  # every setting is annotated
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            table |= _walk(kind, f"{prefix}{name}.")
            continue
        schema = TypeAdapter(kind).json_schema(mode="validation")
        table[f"{prefix}{name}"] = _kind(schema)
    return table


def settings_table() -> dict[str, Any]:
    return {
        "description": "FrameFleet's settings by dotted name, the kind of text each takes",
        "settings": _walk(Settings, ""),
    }

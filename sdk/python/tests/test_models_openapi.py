"""The pydantic models against the committed apps/gateway/openapi.json: for every component a model
stands for, the same fields, the same required ones, the same types, enums and nullability, all the
way down. A field added, removed, renamed or retyped on either side fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from cairn_sdk import models
from cairn_sdk.models import OPENAPI_COMPONENTS

IGNORED = {"pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems", "description", "title", "default", "format", "propertyNames"}


class Shapes:
    """Reduces a JSON Schema to what a client depends on; `$ref`s resolved, `Receipt` kept as a name."""

    def __init__(self, definitions: dict[str, Any], prefix: str) -> None:
        self.definitions = definitions
        self.prefix = prefix
        self.resolving: list[str] = []

    def of(self, schema: Any) -> Any:
        if schema is True or schema == {}:
            return "any"
        if "$ref" in schema:
            name = schema["$ref"].removeprefix(self.prefix)
            if name == "Receipt" or name in self.resolving:  # a recursive type (any JSON value) by its name
                return name
            self.resolving.append(name)
            try:
                return self.of(self.definitions[name])
            finally:
                self.resolving.pop()
        branches = schema.get("anyOf") or schema.get("oneOf")
        if branches is not None:
            shapes = [self.of(b) for b in branches]
            nullable = "null" in shapes
            rest = sorted((s for s in shapes if s != "null"), key=json.dumps)
            inner = rest[0] if len(rest) == 1 else {"union": rest}
            return {"nullable": inner} if nullable else inner
        kind = schema.get("type")
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            inner = self.of({**schema, "type": others[0]} if len(others) == 1 else {**schema, "type": others})
            return {"nullable": inner} if "null" in kind else inner
        if kind == "null":
            return "null"
        # An enum's values say their type (1 is a number whether a schema says integer or number).
        if "const" in schema:
            return {"enum": [schema["const"]]}
        if "enum" in schema:
            return {"enum": sorted(schema["enum"], key=json.dumps)}
        if kind == "array":
            return {"array": self.of(schema.get("items", {}))}
        if kind == "object" or "properties" in schema:
            properties = schema.get("properties", {})
            shape: dict[str, Any] = {"object": {name: self.of(sub) for name, sub in sorted(properties.items())}}
            if properties:
                shape["required"] = sorted(schema.get("required", []))
            extra = schema.get("additionalProperties")
            if extra not in (None, False):
                shape["map"] = self.of(extra)
            return shape
        unknown = set(schema) - IGNORED - {"type"}
        assert not unknown, f"a schema keyword this check does not understand: {unknown}"
        return kind


def model_shape(model: type[BaseModel]) -> Any:
    schema = model.model_json_schema(by_alias=True, mode="validation", ref_template="#/$defs/{model}")
    return Shapes(schema.get("$defs", {}), "#/$defs/").of(schema)


def component_shape(openapi: dict, name: str) -> Any:
    schemas = openapi["components"]["schemas"]
    return Shapes(schemas, "#/components/schemas/").of(schemas[name])


def differences(a: Any, b: Any, at: str = "$") -> list[str]:
    """Where two shapes disagree, as readable paths."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append(f"{at}.{key}: only in the {'model' if key in a else 'API'}")
            else:
                out += differences(a[key], b[key], f"{at}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{at}[{i}]")]
    return [] if a == b else [f"{at}: model {json.dumps(a)} ≠ API {json.dumps(b)}"]


@pytest.mark.parametrize("component", sorted(OPENAPI_COMPONENTS))
def test_model_matches_the_rest_contract(openapi: dict, component: str) -> None:
    drift = differences(model_shape(OPENAPI_COMPONENTS[component]), component_shape(openapi, component))
    assert drift == [], f"{component} disagrees with openapi.json:\n" + "\n".join(drift)


def test_the_exec_stream_lines_match(openapi: dict) -> None:
    api = component_shape(openapi, "ExecStreamLine")["union"]
    ours = sorted((model_shape(m) for m in (models.ExecOutput, models.ExecStreamResult, models.ExecStreamError)), key=json.dumps)
    assert differences(ours, api) == []


def test_the_receipt_envelope_is_in_every_receipt_type(openapi: dict) -> None:
    # Receipt is one model for 31 event types: its declared fields must be required, with the same
    # shape, in every one of them (the rest of each is kept as it came: it is what the hash covers).
    schemas = openapi["components"]["schemas"]
    branches = schemas["Receipt"]["oneOf"]
    ours = model_shape(models.Receipt)
    for branch in branches:
        api = Shapes(schemas, "#/components/schemas/").of(branch)
        for field in ours["required"]:
            assert field in api["required"], f"{field} is not required in {api['object']['type']}"
            theirs = api["object"][field]
            if field == "type":  # one event type per branch; the model takes any of them as text
                assert len(theirs["enum"]) == 1 and isinstance(theirs["enum"][0], str)
                theirs = "string"
            assert differences(ours["object"][field], theirs) == [], field


def test_the_check_catches_drift(openapi: dict) -> None:
    # The check itself can fail: a model with a field renamed, one missing, one retyped.
    class Renamed(models.Run):
        runid: str

    class Retyped(models.Model):
        items: list[models.Run]
        next_cursor: int | None

    api = component_shape(openapi, "Run")
    assert any("runid" in d for d in differences(model_shape(Renamed), api))
    assert any("nextCursor" in d for d in differences(model_shape(Retyped), component_shape(openapi, "RunList")))
    assert differences(model_shape(models.SandboxList), component_shape(openapi, "RunList")) != []

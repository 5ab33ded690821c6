"""The pydantic -> structural schema emitter on small models: each translation, and a loud error for the rest."""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from webserver_operator.api.models import Quantity
from webserver_operator.api.schema import SchemaError, structural_schema


class Color(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


class Inner(BaseModel):
    """An inner object."""

    key: str = Field(description="The key.")
    weight: int = 1


class Outer(BaseModel):
    """The outer object."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=10, pattern=r"^[a-z]+$", description="A name.")
    count: int | None = Field(default=None, ge=0, le=5, description="Optional count.")
    ratio: float = Field(default=0.5, gt=0, lt=1)
    mode: Literal["a", "b"] = "a"
    fixed: Literal["only"] = "only"
    color: Color = Color.RED
    inner: Inner | None = Field(default=None, description="Field description wins.")
    inners: list[Inner] = Field(
        default_factory=list,
        max_length=3,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"]},
    )
    tags: set[str] | None = None
    labels: dict[str, str] | None = Field(default=None, max_length=4)
    port: int | str | None = None
    quantity: Quantity | None = None
    enabled: bool = False


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return structural_schema(Outer)


def test_object_shape(schema: dict[str, Any]) -> None:
    assert schema["type"] == "object"
    assert schema["description"] == "The outer object."
    assert schema["required"] == ["name"]
    assert list(schema["properties"]) == sorted(schema["properties"])
    assert "title" not in schema
    assert "$defs" not in schema


def test_string_constraints_carry_over(schema: dict[str, Any]) -> None:
    assert schema["properties"]["name"] == {
        "description": "A name.",
        "maxLength": 10,
        "minLength": 1,
        "pattern": "^[a-z]+$",
        "type": "string",
    }


def test_optional_unwraps_and_drops_null_default(schema: dict[str, Any]) -> None:
    assert schema["properties"]["count"] == {
        "description": "Optional count.",
        "maximum": 5,
        "minimum": 0,
        "type": "integer",
    }


def test_exclusive_bounds_become_openapi_v3_booleans(schema: dict[str, Any]) -> None:
    assert schema["properties"]["ratio"] == {
        "default": 0.5,
        "exclusiveMaximum": True,
        "exclusiveMinimum": True,
        "maximum": 1,
        "minimum": 0,
        "type": "number",
    }


def test_literals_and_enums(schema: dict[str, Any]) -> None:
    assert schema["properties"]["mode"] == {"default": "a", "enum": ["a", "b"], "type": "string"}
    assert schema["properties"]["fixed"] == {"default": "only", "enum": ["only"], "type": "string"}
    assert schema["properties"]["color"] == {"default": "red", "enum": ["red", "blue"], "type": "string"}


def test_ref_is_inlined_with_field_description(schema: dict[str, Any]) -> None:
    inner = schema["properties"]["inner"]
    assert inner["description"] == "Field description wins."
    assert inner["required"] == ["key"]
    assert inner["properties"]["weight"] == {"default": 1, "type": "integer"}


def test_list_map(schema: dict[str, Any]) -> None:
    inners = schema["properties"]["inners"]
    assert inners["type"] == "array"
    assert inners["maxItems"] == 3
    assert "default" not in inners  # default_factory: pydantic gives no default, so neither does the CRD
    assert inners["x-kubernetes-list-type"] == "map"
    assert inners["x-kubernetes-list-map-keys"] == ["key"]
    assert inners["items"]["description"] == "An inner object."


def test_set_becomes_list_type_set(schema: dict[str, Any]) -> None:
    assert schema["properties"]["tags"] == {
        "items": {"type": "string"},
        "type": "array",
        "x-kubernetes-list-type": "set",
    }


def test_dict_becomes_additional_properties(schema: dict[str, Any]) -> None:
    assert schema["properties"]["labels"] == {
        "additionalProperties": {"type": "string"},
        "maxProperties": 4,
        "type": "object",
    }


def test_int_or_string(schema: dict[str, Any]) -> None:
    int_or_string = [{"type": "integer"}, {"type": "string"}]
    assert schema["properties"]["port"] == {"anyOf": int_or_string, "x-kubernetes-int-or-string": True}
    quantity = schema["properties"]["quantity"]
    assert quantity["anyOf"] == int_or_string
    assert quantity["x-kubernetes-int-or-string"] is True
    assert "pattern" in quantity
    assert "type" not in quantity


def test_output_is_deterministic() -> None:
    assert structural_schema(Outer) == structural_schema(Outer)
    assert repr(structural_schema(Outer)) == repr(structural_schema(Outer))


# ---- constructs without a faithful translation fail loudly, naming the path ----


class FloatOrString(BaseModel):
    value: float | str


class Recursive(BaseModel):
    children: list[Recursive] = []


class MutualA(BaseModel):
    b: MutualB | None = None


class MutualB(BaseModel):
    a: MutualA | None = None


class FreeForm(BaseModel):
    data: dict[str, Any]


class Forbidding(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: int


class Nested(BaseModel):
    forbidding: Forbidding


class WithTuple(BaseModel):
    pair: tuple[int, str]


class WithDuration(BaseModel):
    timeout: timedelta


class WithAny(BaseModel):
    anything: Any


class OptionalKey(BaseModel):
    key: str | None = None


class WithBadListMapKey(BaseModel):
    items: list[OptionalKey] = Field(
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"]}
    )


class WithDefaultedListMapKey(BaseModel):
    items: list[Inner] = Field(
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key", "weight"]}
    )


class WithMissingListMapKey(BaseModel):
    items: list[Inner] = Field(
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["nope"]}
    )


class WithLookahead(BaseModel):
    model_config = ConfigDict(regex_engine="python-re")
    name: str = Field(pattern=r"^(?!kube-)[a-z]+$")


class WithMixedLiteral(BaseModel):
    value: Literal[1, "one"]


class WithTypoExtension(BaseModel):
    values: list[str] = Field(json_schema_extra={"x-kubernetes-list-typ": "set"})


class WithUnionOfModels(BaseModel):
    value: Inner | Color


class WithSetOfModels(BaseModel):
    values: frozenset[Annotated[tuple[int, int], Field()]]


@pytest.mark.parametrize(
    ("model", "path", "message"),
    [
        (FloatOrString, "FloatOrString.value", "union of number, string is not supported"),
        (Recursive, "Recursive.children[*]", "recursive model (Recursive -> Recursive)"),
        (MutualA, "MutualA.b.a", "recursive model (MutualA -> MutualB -> MutualA)"),
        (FreeForm, "FreeForm.data", "free-form object"),
        (Nested, "Nested.forbidding", "extra='forbid'"),
        (WithTuple, "WithTuple.pair", "unsupported schema keyword(s) prefixItems"),
        (WithDuration, "WithDuration.timeout", "format 'duration'"),
        (WithAny, "WithAny.anything", "no type"),
        (WithBadListMapKey, "WithBadListMapKey.items", "list map key 'key' must be required or have a default"),
        (WithMissingListMapKey, "WithMissingListMapKey.items", "list map key 'nope' is not a property"),
        (WithLookahead, "WithLookahead.name", "look-around"),
        (WithMixedLiteral, "WithMixedLiteral.value", "enum mixes value types"),
        (WithTypoExtension, "WithTypoExtension.values", "x-kubernetes-list-typ"),
        (WithUnionOfModels, "WithUnionOfModels.value", "is not supported"),
        (WithSetOfModels, "WithSetOfModels.values[*]", "prefixItems"),
    ],
)
def test_unsupported_constructs_raise_with_the_path(model: type[BaseModel], path: str, message: str) -> None:
    with pytest.raises(SchemaError) as info:
        structural_schema(model)
    assert info.value.path == path
    assert message in str(info.value)
    assert str(info.value).startswith(f"{path}: ")


def test_defaulted_list_map_key_is_accepted() -> None:
    items = structural_schema(WithDefaultedListMapKey)["properties"]["items"]
    assert items["x-kubernetes-list-map-keys"] == ["key", "weight"]
    assert items["items"]["properties"]["weight"]["default"] == 1


def test_preserve_unknown_fields_opt_in_allows_free_form() -> None:
    class Opaque(BaseModel):
        data: dict[str, Any] = Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})

    assert structural_schema(Opaque)["properties"]["data"] == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }

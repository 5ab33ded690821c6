"""Turn a pydantic model's JSON schema into a Kubernetes *structural* OpenAPI v3 schema.

Why an emitter and not ``model_json_schema()`` verbatim: the CRD schema is generated from the same pydantic models
the operator parses objects with (one source of truth), but pydantic speaks JSON Schema 2020-12 and the API server
accepts only a structural subset of OpenAPI v3. pydantic emits ``$defs``/``$ref``, ``anyOf [X, {type: null}]`` for
optional fields, ``title`` keys, ``default: null``, ``const``, numeric ``exclusiveMinimum``, ``uniqueItems`` for sets...
The API server rejects ``$ref`` and ``uniqueItems``, rejects any ``anyOf`` other than the int-or-string shape, and --
worse -- silently ignores what it does not understand (unknown formats) or prunes fields whose schema it cannot type.

So the emitter translates the constructs whose meaning is unambiguous and raises :class:`SchemaError`, naming the
field path, for everything else: a construct that would be rejected at ``kubectl apply`` time, or worse accepted and
enforced differently from pydantic, must be noticed when the manifests are generated, not in a cluster.

The rules followed are those of the API server's own checks (``apiextensions-apiserver``:
``pkg/apiserver/schema/validation.go`` for structurality, ``pkg/apis/apiextensions/validation`` for list types,
formats and defaults): every node typed except int-or-string / preserve-unknown-fields nodes, ``properties`` and
``additionalProperties`` mutually exclusive, ``x-kubernetes-list-map-keys`` scalar and required or defaulted.

Output is deterministic: schema keywords and properties are sorted, as the API server itself returns them, so the
generated YAML diffs cleanly and compares equal to what a server reads back.

Called by ``api.crd``; hands on the ``openAPIV3Schema`` the CRD carries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel

__all__ = ["SchemaError", "structural_schema"]


class SchemaError(ValueError):
    """A pydantic schema construct that has no faithful structural-schema translation."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


_SCALAR_TYPES: Final = frozenset({"string", "integer", "number", "boolean"})
_TYPES: Final = _SCALAR_TYPES | {"object", "array"}

# Formats the API server validates (apiextensions-apiserver pkg/apiserver/validation/formats.go) AND that mean the
# same thing to pydantic. Others are left out on purpose: pydantic's "duration" is ISO 8601 (P1D) where the API
# server's is Go's time.ParseDuration (24h); "time", "binary", "json-string"... are unknown to the API server, which
# would silently ignore them.
_FORMATS: Final = frozenset({"date-time", "date", "email", "hostname", "ipv4", "ipv6", "uri", "uuid"})

# Keywords that carry over unchanged, by the node types they apply to ("*" = any type).
_PASSTHROUGH: Final[dict[str, frozenset[str]]] = {
    "description": frozenset({"*"}),
    "default": frozenset({"*"}),
    "minimum": frozenset({"integer", "number", "int-or-string"}),
    "maximum": frozenset({"integer", "number", "int-or-string"}),
    "multipleOf": frozenset({"integer", "number"}),
    "minLength": frozenset({"string", "int-or-string"}),
    "maxLength": frozenset({"string", "int-or-string"}),
    "pattern": frozenset({"string", "int-or-string"}),
    "minItems": frozenset({"array"}),
    "maxItems": frozenset({"array"}),
    "minProperties": frozenset({"object"}),
    "maxProperties": frozenset({"object"}),
}

_K8S_EXTENSIONS: Final = frozenset(
    {
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-list-type",
        "x-kubernetes-map-type",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-validations",
    }
)

# Keywords consumed while flattening ($ref, anyOf) or translated by _emit itself.
_HANDLED: Final = frozenset(
    {
        "type",
        "enum",
        "const",
        "format",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "uniqueItems",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "anyOf",
        "title",
    }
)

# Keys a field's schema may add next to a $ref (or to the non-null branch of an optional) without changing its shape.
_ANNOTATIONS: Final = frozenset({"description", "default", "title"})

_INT_OR_STRING_ANYOF: Final = ({"type": "integer"}, {"type": "string"})

_JSON_TYPE_OF: Final[dict[type, str]] = {str: "string", int: "integer", float: "number", bool: "boolean"}

# Regex syntax Python's re accepts and Go's RE2 (which the API server uses for `pattern`) rejects.
_RE2_INCOMPATIBLE: Final = (
    (re.compile(r"\(\?<?[=!]"), "look-around assertions"),
    (re.compile(r"\(\?>"), "atomic groups"),
    (re.compile(r"(?<!\\)(?:\\\\)*\\[1-9]"), "backreferences"),
    (re.compile(r"(?<!\\)(?:\\\\)*\\Z"), r"\Z (use $ or \z)"),
)


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Return the structural OpenAPI v3 schema of ``model`` (wire names, validation mode), ready for a CRD.

    Raises :class:`SchemaError` naming the field path for any construct without a faithful translation.
    """
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    top = {key: value for key, value in raw.items() if key != "$defs"}
    schema = _Emitter(defs).emit(top, path=model.__name__, refs=())
    if schema.get("type") != "object":
        raise SchemaError(model.__name__, f"the top level must be an object, not {schema.get('type')!r}")
    return schema


class _Emitter:
    def __init__(self, defs: Mapping[str, Any]) -> None:
        self._defs = defs

    # ---- step 1: flatten $ref / allOf / anyOf-with-null into one plain node ----

    def _flatten(
        self, node: Mapping[str, Any], *, path: str, refs: tuple[str, ...]
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """Resolve ``$ref``, single-element ``allOf`` and ``anyOf [X, null]`` into a single node.

        ``refs`` is the chain of definitions being expanded, returned extended with the ones this node expanded:
        it catches recursive models (a structural schema is a finite tree, it cannot express recursion).
        """
        if not isinstance(node, Mapping):
            raise SchemaError(path, f"expected a schema object, got {node!r}")
        node = dict(node)
        if "$ref" in node:
            ref = node.pop("$ref")
            name = _def_name(ref, path=path)
            if name in refs:
                cycle = " -> ".join([*refs[refs.index(name) :], name])
                raise SchemaError(path, f"recursive model ({cycle}): a structural schema cannot express recursion")
            if name not in self._defs:
                raise SchemaError(path, f"unresolvable $ref {ref!r}")
            base, chain = self._flatten(self._defs[name], path=path, refs=(*refs, name))
            return _overlay(base, node, path=path), chain
        if "allOf" in node:
            parts = node.pop("allOf")
            if not isinstance(parts, list) or len(parts) != 1:
                raise SchemaError(path, "allOf with more than one schema is not supported")
            base, chain = self._flatten(parts[0], path=path, refs=refs)
            return _overlay(base, node, path=path), chain
        if "anyOf" in node:
            return self._flatten_any_of(node, path=path, refs=refs)
        return node, refs

    def _flatten_any_of(
        self, node: dict[str, Any], *, path: str, refs: tuple[str, ...]
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        branches = node.pop("anyOf")
        if not isinstance(branches, list):
            raise SchemaError(path, "anyOf must be a list")
        # Optional[X]: the API server prunes nulls and a field is optional by not being required, so drop null.
        # A default of None means "absent": nothing to default.
        non_null = [branch for branch in branches if branch != {"type": "null"}]
        if len(non_null) != len(branches) and node.get("default", 0) is None:
            del node["default"]
        if not non_null:
            raise SchemaError(path, "a field that can only be null has no structural type")
        flat = [self._flatten(branch, path=path, refs=refs) for branch in non_null]
        if len(flat) == 1:
            base, chain = flat[0]
            return _overlay(base, node, path=path), chain
        stripped = [{key: value for key, value in branch.items() if key != "title"} for branch, _ in flat]
        if sorted(stripped, key=lambda branch: str(branch.get("type"))) == list(_INT_OR_STRING_ANYOF):
            # int | str: the one union Kubernetes has (IntOrString); mark it so the API server accepts the anyOf.
            if node.get("x-kubernetes-int-or-string", True) is not True:
                raise SchemaError(path, "an int | str union must not set x-kubernetes-int-or-string to false")
            int_or_string = {
                **node,
                "anyOf": [dict(shape) for shape in _INT_OR_STRING_ANYOF],
                "x-kubernetes-int-or-string": True,
            }
            return int_or_string, refs
        kinds = ", ".join(str(branch.get("type", branch.get("enum", "?"))) for branch, _ in flat)
        raise SchemaError(
            path,
            f"union of {kinds} is not supported: a structural schema allows only int | str "
            "(x-kubernetes-int-or-string) and X | None",
        )

    # ---- step 2: emit a structural node ----

    def emit(self, node: Mapping[str, Any], *, path: str, refs: tuple[str, ...]) -> dict[str, Any]:
        flat, refs = self._flatten(node, path=path, refs=refs)
        unknown = sorted(
            key for key in flat if key not in _HANDLED and key not in _PASSTHROUGH and key not in _K8S_EXTENSIONS
        )
        if unknown:
            raise SchemaError(path, f"unsupported schema keyword(s) {', '.join(unknown)}")
        kind = _node_kind(flat, path=path)
        out: dict[str, Any] = {}
        if kind not in {"int-or-string", "untyped"}:
            out["type"] = kind
        for key, kinds in _PASSTHROUGH.items():
            if key in flat and not (key == "default" and flat[key] is None):
                if "*" not in kinds and kind not in kinds:
                    raise SchemaError(path, f"{key} does not apply to a node of type {kind}")
                out[key] = flat[key]
        for key in sorted(_K8S_EXTENSIONS & flat.keys()):
            out[key] = flat[key]
        if kind == "int-or-string":
            out["anyOf"] = [dict(shape) for shape in _INT_OR_STRING_ANYOF]
        self._emit_enum(flat, out, kind=kind, path=path)
        self._emit_bounds(flat, out, path=path)
        if "format" in flat:
            if kind != "string" or flat["format"] not in _FORMATS:
                raise SchemaError(
                    path,
                    f"format {flat['format']!r} on a {kind} is not validated the same way by pydantic and the API "
                    f"server (supported: {', '.join(sorted(_FORMATS))})",
                )
            out["format"] = flat["format"]
        if "pattern" in out:
            _check_re2(out["pattern"], path=path)
        if kind == "object":
            self._emit_object(flat, out, path=path, refs=refs)
        elif kind == "array":
            self._emit_array(flat, out, path=path, refs=refs)
        else:
            for key in ("properties", "required", "additionalProperties", "items", "uniqueItems"):
                if key in flat:
                    raise SchemaError(path, f"{key} does not apply to a node of type {kind}")
        _check_extensions(out, path=path)
        return dict(sorted(out.items()))

    def _emit_object(self, flat: dict[str, Any], out: dict[str, Any], *, path: str, refs: tuple[str, ...]) -> None:
        properties = flat.get("properties", {})
        if properties:
            out["properties"] = {
                name: self.emit(child, path=f"{path}.{name}", refs=refs) for name, child in sorted(properties.items())
            }
        required = flat.get("required", [])
        missing = [name for name in required if name not in properties]
        if missing:
            raise SchemaError(path, f"required lists unknown properties {missing}")
        if required:
            out["required"] = sorted(required)
        additional = flat.get("additionalProperties")
        if additional is None:
            return
        if additional is False:
            raise SchemaError(
                path,
                "additionalProperties: false (extra='forbid') is not allowed in a CRD; the API server prunes unknown "
                "fields instead -- use extra='ignore'",
            )
        if additional is True:
            if out.get("x-kubernetes-preserve-unknown-fields") is not True:
                raise SchemaError(
                    path,
                    "a free-form object (dict[str, Any]) would be pruned to {}: type its values, or set "
                    "json_schema_extra={'x-kubernetes-preserve-unknown-fields': True} to keep unknown fields",
                )
            return
        if properties:
            raise SchemaError(path, "properties and additionalProperties are mutually exclusive in a CRD")
        out["additionalProperties"] = self.emit(additional, path=f"{path}.*", refs=refs)

    def _emit_array(self, flat: dict[str, Any], out: dict[str, Any], *, path: str, refs: tuple[str, ...]) -> None:
        items = flat.get("items")
        if not isinstance(items, Mapping):
            raise SchemaError(path, "an array needs a single items schema (tuples are not supported)")
        out["items"] = item = self.emit(items, path=f"{path}[*]", refs=refs)
        if flat.get("uniqueItems"):
            # The API server forbids uniqueItems (quadratic); x-kubernetes-list-type=set is its linear equivalent.
            if item.get("type") not in _SCALAR_TYPES:
                raise SchemaError(path, "a set of non-scalar items has no CRD equivalent")
            if out.setdefault("x-kubernetes-list-type", "set") != "set":
                raise SchemaError(path, f"a set cannot be x-kubernetes-list-type {out['x-kubernetes-list-type']!r}")

    @staticmethod
    def _emit_enum(flat: dict[str, Any], out: dict[str, Any], *, kind: str, path: str) -> None:
        if "const" in flat and "enum" in flat:
            raise SchemaError(path, "const and enum together are not supported")
        if "const" in flat:
            values = [flat["const"]]
        elif "enum" in flat:
            values = [value for value in flat["enum"] if value is not None]
        else:
            return
        if not values:
            raise SchemaError(path, "an enum of only null has no structural type")
        wrong = [value for value in values if _json_type(value) != kind]
        if wrong:
            raise SchemaError(path, f"enum values {wrong} are not of type {kind}")
        out["enum"] = values

    @staticmethod
    def _emit_bounds(flat: dict[str, Any], out: dict[str, Any], *, path: str) -> None:
        # JSON Schema 2020-12 (pydantic gt/lt): exclusiveMinimum: 3. OpenAPI v3.0 (Kubernetes): minimum: 3 +
        # exclusiveMinimum: true.
        for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if exclusive not in flat:
                continue
            value = flat[exclusive]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SchemaError(path, f"{exclusive} must be a number, got {value!r}")
            if bound in flat:
                raise SchemaError(path, f"{exclusive} together with {bound} is not supported")
            if "type" not in out or out["type"] not in {"integer", "number"}:
                raise SchemaError(path, f"{exclusive} does not apply to a node of type {out.get('type')}")
            out[bound] = value
            out[exclusive] = True


def _def_name(ref: object, *, path: str) -> str:
    prefix = "#/$defs/"
    if not isinstance(ref, str) or not ref.startswith(prefix):
        raise SchemaError(path, f"unsupported $ref {ref!r}")
    return ref[len(prefix) :]


def _overlay(base: dict[str, Any], extra: Mapping[str, Any], *, path: str) -> dict[str, Any]:
    """Merge a field's own keys over the schema of its type: the field's description/default win over the type's."""
    merged = dict(base)
    for key, value in extra.items():
        if key in merged and merged[key] != value and key not in _ANNOTATIONS:
            raise SchemaError(path, f"conflicting {key!r}: {merged[key]!r} (type) vs {value!r} (field)")
        merged[key] = value
    return merged


def _node_kind(flat: Mapping[str, Any], *, path: str) -> str:
    """The node's structural type, or ``int-or-string`` / ``untyped`` for the two untyped shapes Kubernetes allows."""
    if flat.get("x-kubernetes-int-or-string") is True:
        if "type" in flat:
            raise SchemaError(path, "an x-kubernetes-int-or-string node must not have a type")
        if "anyOf" in flat and list(flat["anyOf"]) != list(_INT_OR_STRING_ANYOF):
            raise SchemaError(path, "an x-kubernetes-int-or-string node's anyOf must be [integer, string]")
        return "int-or-string"
    if "anyOf" in flat:
        raise SchemaError(path, "anyOf is only allowed in the int-or-string shape")
    kind = flat.get("type")
    if kind is None:
        values = [flat["const"]] if "const" in flat else [v for v in flat.get("enum", []) if v is not None]
        kinds = {_json_type(value) for value in values}
        if len(kinds) == 1:
            return kinds.pop()
        if values:
            raise SchemaError(path, f"enum mixes value types {sorted(kinds)}")
        if flat.get("x-kubernetes-preserve-unknown-fields") is True:
            return "untyped"
        raise SchemaError(path, "no type (Any?): type the field, or mark it x-kubernetes-preserve-unknown-fields")
    if not isinstance(kind, str) or kind not in _TYPES:
        raise SchemaError(path, f"unsupported type {kind!r}")
    return kind


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    for python_type, json_type in _JSON_TYPE_OF.items():
        if isinstance(value, python_type):
            return json_type
    return type(value).__name__


def _check_re2(pattern: object, *, path: str) -> None:
    if not isinstance(pattern, str):
        raise SchemaError(path, f"pattern must be a string, got {pattern!r}")
    for regex, what in _RE2_INCOMPATIBLE:
        if regex.search(pattern):
            raise SchemaError(path, f"pattern uses {what}, which the API server's RE2 engine does not support")


def _check_extensions(out: Mapping[str, Any], *, path: str) -> None:
    """The API server's rules for the x-kubernetes-* keys, checked here so a bad combination fails at generation."""
    list_type = out.get("x-kubernetes-list-type")
    map_keys = out.get("x-kubernetes-list-map-keys")
    if out.get("x-kubernetes-preserve-unknown-fields", True) is not True:
        raise SchemaError(path, "x-kubernetes-preserve-unknown-fields must be true or absent")
    if "x-kubernetes-map-type" in out and (
        out.get("type") != "object" or out["x-kubernetes-map-type"] not in {"atomic", "granular"}
    ):
        raise SchemaError(path, "x-kubernetes-map-type must be atomic or granular, on an object")
    if list_type is not None and (out.get("type") != "array" or list_type not in {"atomic", "set", "map"}):
        raise SchemaError(path, "x-kubernetes-list-type must be atomic, set or map, on an array")
    if list_type == "set" and out["items"].get("type") not in _SCALAR_TYPES:
        raise SchemaError(path, "x-kubernetes-list-type=set needs scalar items")
    if (list_type == "map") != (map_keys is not None):
        raise SchemaError(path, "x-kubernetes-list-type=map and x-kubernetes-list-map-keys go together")
    if map_keys is not None:
        _check_list_map_keys(out["items"], map_keys, path=path)
    if "x-kubernetes-validations" in out:
        rules = out["x-kubernetes-validations"]
        if not isinstance(rules, Sequence) or not all(isinstance(r, Mapping) and "rule" in r for r in rules):
            raise SchemaError(path, "x-kubernetes-validations must be a list of {rule: ..., message: ...}")


def _check_list_map_keys(item: Mapping[str, Any], keys: object, *, path: str) -> None:
    if not isinstance(keys, list) or not keys or len(set(keys)) != len(keys):
        raise SchemaError(path, "x-kubernetes-list-map-keys must be a non-empty list of distinct property names")
    if item.get("type") != "object":
        raise SchemaError(path, "x-kubernetes-list-type=map needs object items")
    properties = item.get("properties", {})
    required = set(item.get("required", []))
    for key in keys:
        if key not in properties:
            raise SchemaError(path, f"list map key {key!r} is not a property of the items")
        if properties[key].get("type") not in _SCALAR_TYPES:
            raise SchemaError(path, f"list map key {key!r} must be a scalar")
        if key not in required and "default" not in properties[key]:
            raise SchemaError(path, f"list map key {key!r} must be required or have a default (API server rule)")

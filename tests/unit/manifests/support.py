"""Helpers for the manifest tests: loading, a CRD structural-schema checker and a validator.

The checker follows the rules the API server applies to `apiextensions.k8s.io/v1` CRDs
(structural schemas, the v1 restrictions on keywords, list types, int-or-string, defaults).
The validator covers the OpenAPI subset that tools/crdgen.py emits, with Kubernetes'
semantics: nulls are pruned, unknown fields are errors (kubectl's strict field validation)
unless `x-kubernetes-preserve-unknown-fields` keeps them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
MANIFESTS = REPO / "manifests"
CRD_DIR = MANIFESTS / "crds"
SAMPLES = MANIFESTS / "samples"
CONFORMANCE = REPO / "tests" / "conformance"
# Written by `queuescope certs generate`, never committed.
GENERATED_DIRS = ("certs",)

NAMESPACE = "queuescope-system"
SERVICE_ACCOUNT = "queuescope-controller"
POD_LABELS = {"app.kubernetes.io/name": "queuescope", "app.kubernetes.io/component": "controller"}

Schema = dict[str, Any]


def yaml_files(root: Path = MANIFESTS) -> list[Path]:
    files = [*root.rglob("*.yaml"), *root.rglob("*.yml")]
    return sorted(p for p in files if not set(p.relative_to(root).parts) & set(GENERATED_DIRS))


def documents(path: Path) -> list[dict[str, Any]]:
    """The non-empty documents of one YAML file."""
    with path.open() as stream:
        return [d for d in yaml.safe_load_all(stream) if d is not None]


def folder_objects(folder: Path) -> list[dict[str, Any]]:
    """Every Kubernetes object in a kustomize folder (its kustomization file excluded)."""
    out: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out.extend(documents(path))
    return out


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


@functools.cache
def crds() -> dict[str, dict[str, Any]]:
    """Kind -> CRD, from the committed files (read once: callers must not modify them)."""
    out: dict[str, dict[str, Any]] = {}
    for obj in folder_objects(CRD_DIR):
        assert obj["kind"] == "CustomResourceDefinition"
        out[obj["spec"]["names"]["kind"]] = obj
    return out


def served_schema(crd: Mapping[str, Any], version: str) -> Schema | None:
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version and entry["served"]:
            schema: Schema = entry["schema"]["openAPIV3Schema"]
            return schema
    return None


# ---------------------------------------------------------------------------------------
# Structural schema checker

# JSONSchemaProps fields that v1 CRDs accept (id, $schema, $ref, definitions, dependencies,
# patternProperties and additionalItems exist in the Go type but v1 validation forbids them).
ALLOWED_KEYWORDS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "default",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "multipleOf",
        "enum",
        "maxProperties",
        "minProperties",
        "required",
        "items",
        "allOf",
        "oneOf",
        "anyOf",
        "not",
        "properties",
        "additionalProperties",
        "nullable",
        "example",
        "externalDocs",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-list-type",
        "x-kubernetes-map-type",
        "x-kubernetes-validations",
    }
)
TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean"})
FORMATS = frozenset(
    {
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
        "date-time",
        "int32",
        "int64",
        "float",
        "double",
    }
)
JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
# Not allowed inside a junctor (structural rule 3, and the extensions' own rules).
NOT_IN_JUNCTORS = frozenset(
    {
        "description",
        "type",
        "default",
        "additionalProperties",
        "nullable",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
    }
)
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
# What a root schema may say about metadata.name and metadata.generateName.
METADATA_NAME_KEYWORDS = frozenset({"type", "pattern", "maxLength", "minLength", "description"})


def _junctor_members(schema: Schema) -> Iterator[tuple[str, Schema]]:
    for junctor in JUNCTORS:
        value = schema.get(junctor)
        if value is None:
            continue
        members = [value] if junctor == "not" else value
        for index, member in enumerate(members):
            yield f"{junctor}[{index}]", member


def _is_int_or_string_anyof(schema: Schema) -> bool:
    if schema.get("anyOf") == INT_OR_STRING:
        return True
    all_of = schema.get("allOf")
    return (
        isinstance(all_of, list)
        and bool(all_of)
        and isinstance(all_of[0], dict)
        and all_of[0].get("anyOf") == INT_OR_STRING
    )


def _check_junctor_member(member: Schema, outer: Schema, path: str, errors: list[str]) -> None:
    """Rules 2 and 3: no types, defaults or extensions in junctors; fields projected outside."""
    if not isinstance(member, dict):
        errors.append(f"{path}: must be a schema object")
        return
    unknown = set(member) - ALLOWED_KEYWORDS
    if unknown:
        errors.append(f"{path}: forbidden keywords {sorted(unknown)}")
    allowed_int_or_string = outer.get("x-kubernetes-int-or-string") is True and member in (
        {"type": "integer"},
        {"type": "string"},
    )
    if not allowed_int_or_string:
        for keyword in sorted(set(member) & NOT_IN_JUNCTORS):
            errors.append(f"{path}.{keyword}: must not be set inside {JUNCTORS}")
    for name, sub in (member.get("properties") or {}).items():
        if name not in (outer.get("properties") or {}):
            errors.append(f"{path}.properties.{name}: must also be specified outside the junctor")
        _check_junctor_member(
            sub, (outer.get("properties") or {}).get(name, {}), f"{path}.{name}", errors
        )
    if "items" in member:
        if "items" not in outer:
            errors.append(f"{path}.items: must also be specified outside the junctor")
        else:
            _check_junctor_member(member["items"], outer["items"], f"{path}.items", errors)
    for sub_path, sub in _junctor_members(member):
        _check_junctor_member(sub, outer, f"{path}.{sub_path}", errors)


def _check_list_type(schema: Schema, path: str, errors: list[str]) -> None:
    list_type = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys")
    if list_type is None:
        if keys is not None:
            errors.append(f"{path}: x-kubernetes-list-map-keys needs x-kubernetes-list-type: map")
        return
    if schema.get("type") != "array":
        errors.append(f"{path}: x-kubernetes-list-type on a non-array")
        return
    items = schema.get("items") or {}
    if list_type == "atomic":
        if keys is not None:
            errors.append(f"{path}: list-map-keys with list-type atomic")
    elif list_type == "set":
        if items.get("type") not in SCALAR_TYPES and items.get("x-kubernetes-map-type") != "atomic":
            errors.append(f"{path}: list-type set needs scalar (or atomic) items")
    elif list_type == "map":
        if items.get("type") != "object":
            errors.append(f"{path}: list-type map needs object items")
        if not keys or len(set(keys)) != len(keys):
            errors.append(f"{path}: list-type map needs unique x-kubernetes-list-map-keys")
        for key in keys or []:
            key_schema = (items.get("properties") or {}).get(key)
            if key_schema is None:
                errors.append(f"{path}: map key {key!r} is not a property of the items")
                continue
            if key_schema.get("type") not in SCALAR_TYPES:
                errors.append(f"{path}: map key {key!r} must be a scalar")
            if key not in (items.get("required") or []) and "default" not in key_schema:
                errors.append(f"{path}: map key {key!r} must be required or have a default")
    else:
        errors.append(f"{path}: unknown x-kubernetes-list-type {list_type!r}")


def _check_node(schema: Any, path: str, errors: list[str], *, needs_type: bool) -> None:
    if not isinstance(schema, dict):
        errors.append(f"{path}: must be a schema object, got {type(schema).__name__}")
        return
    unknown = set(schema) - ALLOWED_KEYWORDS
    if unknown:
        errors.append(f"{path}: forbidden keywords {sorted(unknown)}")
    kind = schema.get("type")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    int_or_string = schema.get("x-kubernetes-int-or-string")
    if preserve is not None and preserve is not True:
        errors.append(f"{path}: x-kubernetes-preserve-unknown-fields must be true or absent")
    if int_or_string is not None and int_or_string is not True:
        errors.append(f"{path}: x-kubernetes-int-or-string must be true or absent")
    if kind is not None and kind not in TYPES:
        errors.append(f"{path}: unknown type {kind!r}")
    if needs_type and not kind and preserve is not True and int_or_string is not True:
        errors.append(f"{path}: a type is required (structural rule 1)")
    if int_or_string:
        if kind:
            errors.append(f"{path}: x-kubernetes-int-or-string must not set a type")
        if any(j in schema for j in JUNCTORS) and not _is_int_or_string_anyof(schema):
            errors.append(f"{path}: int-or-string junctors must be anyOf [integer, string]")
    if schema.get("x-kubernetes-embedded-resource") is True and (
        kind != "object" or not (preserve or schema.get("properties"))
    ):
        errors.append(f"{path}: embedded resources must be objects with properties or preserved")
    if "properties" in schema and "additionalProperties" in schema:
        errors.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if schema.get("additionalProperties") is False:
        errors.append(f"{path}: additionalProperties must not be false")
    if schema.get("uniqueItems") is True:
        errors.append(f"{path}: uniqueItems must not be true")
    fmt = schema.get("format")
    if fmt is not None and fmt not in FORMATS:
        errors.append(f"{path}: unknown format {fmt!r}")
    if "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except re.error as err:
            errors.append(f"{path}: pattern does not compile: {err}")
    if "enum" in schema:
        for value in schema["enum"]:
            problems = validate(value, _without(schema, "enum", "default"), f"{path}.enum")
            errors.extend(problems)
    required = schema.get("required")
    if required is not None:
        properties = schema.get("properties") or {}
        for name in required:
            if name not in properties:
                errors.append(f"{path}: required field {name!r} is not a property")
    for name, sub in (schema.get("properties") or {}).items():
        _check_node(sub, f"{path}.{name}", errors, needs_type=True)
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        if kind != "object":
            errors.append(f"{path}: additionalProperties on a non-object")
        _check_node(additional, f"{path}.additionalProperties", errors, needs_type=True)
    if kind == "array" and "items" not in schema:
        errors.append(f"{path}: arrays must specify items")
    if "items" in schema:
        if not isinstance(schema["items"], dict):
            errors.append(f"{path}.items: must be one schema, not a list")
        else:
            _check_node(schema["items"], f"{path}.items", errors, needs_type=True)
    for sub_path, member in _junctor_members(schema):
        _check_junctor_member(member, schema, f"{path}.{sub_path}", errors)
    _check_list_type(schema, path, errors)
    if "default" in schema:
        if schema.get("nullable") is not True and schema["default"] is None:
            errors.append(f"{path}: null default on a non-nullable field")
        errors.extend(validate(schema["default"], schema, f"{path}.default"))


def _without(schema: Schema, *keys: str) -> Schema:
    return {k: v for k, v in schema.items() if k not in keys}


def structural_errors(root: Schema) -> list[str]:
    """Everything that stops kube-apiserver from accepting `root` as a v1 CRD schema."""
    errors: list[str] = []
    if not isinstance(root, dict) or root.get("type") != "object":
        return ["root: must be of type object"]
    _check_node(root, "root", errors, needs_type=True)
    metadata = (root.get("properties") or {}).get("metadata")
    if metadata is not None:
        if (
            # kube-apiserver refuses even a description here ("metadata is implicitly
            # specified"); only name and generateName may be restricted.
            set(metadata) - {"type", "properties"} or metadata.get("type") != "object"
        ):
            errors.append("root.metadata: only `type: object` and name restrictions are allowed")
        for name, sub in (metadata.get("properties") or {}).items():
            if name not in ("name", "generateName"):
                errors.append(f"root.metadata.{name}: only name and generateName may be restricted")
            elif set(sub) - METADATA_NAME_KEYWORDS or sub.get("type") != "string":
                errors.append(f"root.metadata.{name}: only string restrictions are allowed")
    for forbidden in ("default", "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource"):
        if forbidden in root:
            errors.append(f"root: {forbidden} is not allowed at the root")
    return errors


# ---------------------------------------------------------------------------------------
# Validator for the emitted subset

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _type_ok(value: Any, kind: str) -> bool:
    return {
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "integer": _is_int(value),
        "number": (_is_int(value) or isinstance(value, float)),
        "boolean": isinstance(value, bool),
    }[kind]


def _list_key(item: Any, keys: list[str], item_schema: Schema) -> tuple[Any, ...]:
    properties = item_schema.get("properties") or {}
    return tuple(
        item.get(k, properties.get(k, {}).get("default")) if isinstance(item, dict) else None
        for k in keys
    )


def validate(value: Any, schema: Schema, path: str = "") -> list[str]:
    """Errors for `value` against `schema` (empty when valid), with Kubernetes' semantics."""
    if value is None:
        return []  # explicit nulls are pruned before validation
    errors: list[str] = []
    if schema.get("x-kubernetes-int-or-string"):
        if not (_is_int(value) or isinstance(value, str)):
            return [f"{path}: must be an integer or a string, got {value!r}"]
        if (
            isinstance(value, str)
            and "pattern" in schema
            and not re.search(schema["pattern"], value)
        ):
            errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
        return errors
    kind = schema.get("type")
    if kind is not None and not _type_ok(value, kind):
        return [f"{path}: must be of type {kind}, got {type(value).__name__} {value!r}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: unsupported value {value!r}, supported: {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
        if schema.get("format") == "date-time" and not _RFC3339.fullmatch(value):
            errors.append(f"{path}: {value!r} is not an RFC 3339 date-time")
    elif isinstance(value, datetime) and schema.get("format") != "date-time":  # YAML timestamps
        errors.append(f"{path}: a timestamp where {kind} was expected")
    if _is_int(value) and schema.get("format") in _INT_RANGES:
        low, high = _INT_RANGES[schema["format"]]
        if not low <= value <= high:
            errors.append(f"{path}: {value} does not fit {schema['format']}")
    if isinstance(value, dict):
        properties: Schema = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        for name in schema.get("required") or []:
            if value.get(name) is None:
                errors.append(f"{path}.{name}: required value")
        for name, item in value.items():
            if name in properties:
                errors.extend(validate(item, properties[name], f"{path}.{name}"))
            elif isinstance(additional, dict):
                errors.extend(validate(item, additional, f"{path}.{name}"))
            elif not (preserve or additional is True):
                errors.append(f"{path}: unknown field {name!r}")
    if isinstance(value, list):
        item_schema: Schema = schema.get("items") or {}
        for index, item in enumerate(value):
            errors.extend(validate(item, item_schema, f"{path}[{index}]"))
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "map":
            keys = [_list_key(i, schema["x-kubernetes-list-map-keys"], item_schema) for i in value]
            if len(set(keys)) != len(keys):
                errors.append(f"{path}: duplicate entries for map keys {keys}")
        elif list_type == "set" and len({repr(v) for v in value}) != len(value):
            errors.append(f"{path}: duplicate entries in a set")
    return errors


def validate_object(obj: Mapping[str, Any], crd: Mapping[str, Any]) -> list[str]:
    """Validate a whole object against the CRD version its apiVersion names."""
    group = crd["spec"]["group"]
    api_version = obj.get("apiVersion", "")
    prefix = f"{group}/"
    if not api_version.startswith(prefix):
        return [f"apiVersion {api_version!r} is not in group {group}"]
    schema = served_schema(crd, api_version.removeprefix(prefix))
    if schema is None:
        return [f"{api_version} is not served by {crd['metadata']['name']}"]
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not metadata.get("name"):
        return ["metadata.name: required value"]
    # The API server validates the root metadata as ObjectMeta, whatever the schema says.
    body = {k: v for k, v in obj.items() if k != "metadata"}
    return validate(body, schema, obj["kind"])

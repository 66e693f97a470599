"""From YAML/JSON documents to validated API objects, with errors that say where.

`decode_object` turns one mapping into a model: it picks the model by (apiVersion,
kind), applies what the API server would do before validation (explicit nulls are
"unset"; namespaced objects without a namespace land in "default", as with
`kubectl apply`; cluster-scoped ones lose a stray namespace), decodes strictly
(JSON names only, unknown fields rejected) and then runs the semantic rules of
docs/scheduling.md#api-objects. Every failure is an ApiError naming file, document, object and
field path.

A `kueue.x-k8s.io/v1beta2` document is checked with the v1beta2 wire models and
rules, converted to the internal (v1beta1) form and decoded as that
(docs/api-versions.md); errors name v1beta2's fields either way. A
`config.kueue.x-k8s.io/v1beta2` Configuration goes the same way, with v1beta2's
defaults (docs/scheduling.md#configuration).

`load_documents` reads files, directories and stdin and returns `Decoded` records
(object + file + document index + List item). The object also remembers where it
came from by itself (`scheduler.api.source.source_of`), so code that only keeps the
object can still report errors against the right file.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml
from pydantic import ValidationError

from scheduler.api.base import TypedObject
from scheduler.api.config_v1beta2 import (
    CONFIG_V1BETA2,
    V1BETA1_ONLY_FIELDS,
    ConfigurationV1Beta2,
    internal_configuration,
)
from scheduler.api.conversion import convert_document, v1beta2_path
from scheduler.api.errors import (
    ApiError,
    FieldError,
    SourceRef,
    join_path,
    quote,
    unsupported_detail,
)
from scheduler.api.generated_names import assign_generated_name
from scheduler.api.kinds import KINDS, ApiObject, supported_versions
from scheduler.api.pydantic_errors import field_errors, json_type
from scheduler.api.scenario import Scenario
from scheduler.api.source import set_source, set_wire_version
from scheduler.api.validation import validate_object
from scheduler.api.validation.config import validate_configuration_v1beta2
from scheduler.api.validation.v1beta2 import validate_v1beta2
from scheduler.api.versions import KUEUE_V1BETA1, KUEUE_V1BETA2, UNSUPPORTED_KINDS

__all__ = [
    "ApiError",
    "Decoded",
    "decode_object",
    "load_documents",
    "load_yaml",
]

STDIN = "-"
STDIN_SOURCE = "<stdin>"
YAML_SUFFIXES = (".yaml", ".yml")

T = TypeVar("T", bound=TypedObject)


@dataclass(frozen=True, slots=True)
class Decoded:
    """One decoded object and where it came from (0-based document index in `source`)."""

    obj: ApiObject
    source: str = ""
    index: int | None = None
    item: int | None = None  # position inside a `v1` `List` document

    @property
    def ref(self) -> SourceRef:
        return SourceRef(self.source, self.index, self.item)


# ---------------------------------------------------------------------------
# Decoding one object


def _prune_nulls(value: Any) -> Any:
    """Drop `key: null` everywhere: the API server treats an explicit null as unset."""
    if isinstance(value, Mapping):
        return {k: _prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune_nulls(v) for v in value]
    return value


def _place_namespace(model: type[TypedObject], data: dict[str, Any]) -> dict[str, Any]:
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        return data
    if model.namespaced:
        if not metadata.get("namespace"):
            return {**data, "metadata": {**metadata, "namespace": "default"}}
    elif "namespace" in metadata:
        return {**data, "metadata": {k: v for k, v in metadata.items() if k != "namespace"}}
    return data


def _identity(data: Mapping[str, Any]) -> tuple[str | None, str | None]:
    metadata = data.get("metadata")
    if not isinstance(metadata, Mapping):
        return None, None
    name, namespace = metadata.get("name"), metadata.get("namespace")
    return (
        name if isinstance(name, str) else None,
        namespace if isinstance(namespace, str) else None,
    )


def decode_object(
    data: Mapping[str, Any],
    *,
    source: str = "",
    index: int | None = None,
    item: int | None = None,
) -> ApiObject:
    """One validated object from one decoded YAML/JSON document; ApiError otherwise."""
    where: dict[str, Any] = {"source": source, "index": index, "item": item}
    if not isinstance(data, Mapping):
        raise ApiError(f"a document must be an object (a mapping), got {json_type(data)}", **where)
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ApiError("Required value: every document needs a kind", path="kind", **where)
    if not isinstance(api_version, str) or not api_version:
        raise ApiError(
            "Required value: every document needs an apiVersion",
            path="apiVersion",
            kind=kind,
            **where,
        )
    name, namespace = _identity(data)
    who: dict[str, Any] = {"kind": kind, "name": name, "namespace": namespace, **where}
    model = KINDS.get((api_version, kind))
    if model is None:
        versions = supported_versions(kind)
        if versions:
            raise ApiError(
                unsupported_detail(api_version, versions) + f" (apiVersion of {kind})",
                path="apiVersion",
                **who,
            )
        known = sorted({k for _, k in KINDS})
        if kind in UNSUPPORTED_KINDS and api_version.startswith("kueue.x-k8s.io/"):
            raise ApiError(
                f"kind {kind} ({api_version}) is not supported by queuescope; "
                f"supported kinds: {', '.join(known)}",
                path="kind",
                **who,
            )
        raise ApiError(
            f"unknown kind {quote(kind)} (apiVersion {api_version}); "
            f"supported kinds: {', '.join(known)}",
            path="kind",
            **who,
        )
    prepared = _place_namespace(model, _prune_nulls(dict(data)))
    if api_version == KUEUE_V1BETA2:
        return _decode_v1beta2(model, prepared, who)
    if model is ConfigurationV1Beta2:
        return _decode_configuration_v1beta2(prepared, who)
    if model is Scenario:
        prepared = _decode_applied_objects(prepared, who)
    obj = _validated(model, prepared, who, validate_object)
    set_source(obj, SourceRef(source, index, item) if source else None)
    return cast(ApiObject, obj)


def decode_as(model: type[T], data: Mapping[str, Any], *, source: str = "") -> T:
    """`data` validated as `model`: a kind outside the API layer's table, read only by an
    integration (a Pod); ApiError otherwise."""
    name, namespace = _identity(data)
    who: dict[str, Any] = {
        "kind": str(data.get("kind", "")),
        "name": name,
        "namespace": namespace,
        "source": source,
        "index": None,
        "item": None,
    }
    prepared = _place_namespace(model, _prune_nulls(dict(data)))
    obj = _validated(model, prepared, who, validate_object)
    set_source(obj, SourceRef(source, None, None) if source else None)
    return cast(T, obj)


def _validated(
    model: type[TypedObject],
    prepared: dict[str, Any],
    who: dict[str, Any],
    rules: Callable[[TypedObject], list[FieldError]],
) -> TypedObject:
    """`prepared` decoded as `model` and checked by `rules`; every problem raised at once."""
    try:
        obj = model.model_validate(prepared, by_alias=True, by_name=False)
    except ValidationError as err:
        raise ApiError.from_field_errors(field_errors(model, err), **who) from None
    errors = rules(obj)
    if errors:
        raise ApiError.from_field_errors(errors, **who)
    return obj


def _decode_v1beta2(
    model: type[TypedObject], prepared: dict[str, Any], who: dict[str, Any]
) -> ApiObject:
    """Check a v1beta2 document as v1beta2, then decode its internal (v1beta1) form."""
    _validated(model, prepared, who, validate_v1beta2)
    return _decode_internal(
        lambda: convert_document(prepared, KUEUE_V1BETA1), v1beta2_path, KUEUE_V1BETA2, who
    )


def _decode_configuration_v1beta2(prepared: dict[str, Any], who: dict[str, Any]) -> ApiObject:
    """A v1beta2 Configuration, checked as v1beta2, then read with v1beta2's defaults into
    the internal (v1beta1) form; the fields the rules name are the same in both."""
    try:
        wire = _validated(ConfigurationV1Beta2, prepared, who, validate_configuration_v1beta2)
    except ApiError as err:
        hinted = [_v1beta1_habit(e) for e in err.errors]
        raise ApiError.from_field_errors(hinted, **who) from None
    assert isinstance(wire, ConfigurationV1Beta2)
    return _decode_internal(lambda: internal_configuration(wire), str, CONFIG_V1BETA2, who)


def _v1beta1_habit(error: FieldError) -> FieldError:
    hint = V1BETA1_ONLY_FIELDS.get(error.path)
    if hint is None or not error.detail.startswith("unknown field"):
        return error
    return FieldError(error.path, f"{error.detail} ({hint})")


def _decode_internal(
    internal: Callable[[], dict[str, Any]],
    wire_path: Callable[[str], str],
    wire_version: str,
    who: dict[str, Any],
) -> ApiObject:
    """Decode the internal form of a document written in `wire_version`, reporting
    errors with the wire version's field names."""
    try:
        obj = decode_object(internal(), source=who["source"], index=who["index"], item=who["item"])
    except ApiError as err:
        renamed = [FieldError(wire_path(e.path), e.detail) for e in err.errors]
        raise ApiError.from_field_errors(renamed, **who) from None
    return set_wire_version(obj, wire_version)


def _decode_applied_objects(data: dict[str, Any], who: dict[str, Any]) -> dict[str, Any]:
    """Decode `spec.events[i].apply` documents first, reporting errors under that path."""
    spec = data.get("spec")
    events = spec.get("events") if isinstance(spec, dict) else None
    if not isinstance(events, list):
        return data  # the model reports the shape error
    decoded_events: list[Any] = []
    for i, event in enumerate(events):
        raw = event.get("apply") if isinstance(event, dict) else None
        if raw is None:
            decoded_events.append(event)
            continue
        prefix = f"spec.events[{i}].apply"
        try:
            obj = decode_object(raw, source=who["source"], index=who["index"], item=who["item"])
        except ApiError as err:
            errors = [FieldError(join_path(prefix, e.path), e.detail) for e in err.errors]
            raise ApiError.from_field_errors(errors, **who) from None
        if isinstance(obj, Scenario):
            raise ApiError("a Scenario cannot be applied by an event", path=prefix, **who)
        decoded_events.append({**event, "apply": obj})
    return {**data, "spec": {**cast(dict[str, Any], spec), "events": decoded_events}}


# ---------------------------------------------------------------------------
# YAML files


class _RejectDuplicateKeys(yaml.constructor.SafeConstructor):
    """Rejects duplicate keys, as Kubernetes' strict decoding does."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, typing.Hashable):
                continue  # PyYAML refuses it below ("found unhashable key")
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"duplicate key {quote(key)}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _StrictLoader(_RejectDuplicateKeys, yaml.SafeLoader):
    """PyYAML's pure-Python loader: the reference for what is accepted and how an error
    reads."""


# libyaml's parser (when PyYAML was built with it) reads a large scenario about twice as
# fast; the constructor above stays the same Python code. Its error messages are worded
# differently, so a text it rejects is read again by _StrictLoader, whose error is the
# one reported: the same text is accepted or refused, with the same words, either way.
# libyaml also accepts some texts PyYAML refuses: tabs inside plain scalars, `?` inside a
# plain scalar of a flow mapping. A text with one of these characters is left to
# _StrictLoader (the divergences were found by tests/unit/api/test_decode_yaml_loaders.py).
_DIVERGENT = ("\t", "?", "\ufeff")
_FastLoader: type[Any] | None = None
if getattr(yaml, "__with_libyaml__", False):

    class _CStrictLoader(_RejectDuplicateKeys, yaml.CSafeLoader):
        """libyaml's parser with the same constructor as _StrictLoader."""

    _FastLoader = _CStrictLoader


def _fast_documents(text: str, progress: list[int]) -> Iterator[tuple[int, Any]]:
    """(index, data) of every non-empty document by the fast loader; `progress[0]`
    counts the documents handed out. yaml.YAMLError when it rejects the text."""
    assert _FastLoader is not None
    loader = _FastLoader(text)
    try:
        index = 0
        while loader.check_node():
            data = loader.construct_document(loader.get_node())
            index += 1
            if data is not None:
                yield index - 1, data
            progress[0] = index
    finally:
        loader.dispose()


def _yaml_documents(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """(index, data) of every document; empty documents are skipped but counted."""
    done = [0]  # documents the fast loader already handed out
    if _FastLoader is not None and not any(c in text for c in _DIVERGENT):
        try:
            yield from _fast_documents(text, done)
            return
        except yaml.YAMLError:
            pass  # read again below, for the reference error (and its line)
    loader: _StrictLoader | None = None
    index = 0
    try:
        # Inside the try: the reader refuses unprintable characters as it is built.
        loader = _StrictLoader(text)
        while loader.check_node():
            node = loader.get_node()
            if index >= done[0]:  # the ones before were handed out already
                data = loader.construct_document(node)
                if data is not None:
                    yield index, data
            index += 1
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        where = f" at line {line}, column {mark.column + 1}" if mark is not None else ""
        problem = err.problem or err.context or "syntax error"
        raise ApiError(
            f"invalid YAML{where}: {problem}", source=source, index=index, line=line
        ) from None
    except yaml.YAMLError as err:
        raise ApiError(f"invalid YAML: {err}", source=source, index=index) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml(text: str, source: str, *, generate_names: bool = False) -> list[Decoded]:
    """Every object of a multi-document YAML text (a `v1` `List` expands to its items).

    With `generate_names`, an object with `metadata.generateName` and no name gets a
    name derived from where it is written (`scheduler.api.generated_names`).
    """
    objects: list[Decoded] = []
    for index, data in _yaml_documents(text, source):
        if (
            isinstance(data, Mapping)
            and data.get("apiVersion") == "v1"
            and data.get("kind") == "List"
        ):
            items = data.get("items")
            if not isinstance(items, list):
                raise ApiError(
                    f"expected a list, got {json_type(items)}",
                    path="items",
                    source=source,
                    index=index,
                    kind="List",
                )
            for item, entry in enumerate(items):
                named = (
                    assign_generated_name(entry, source, index, item) if generate_names else entry
                )
                obj = decode_object(named, source=source, index=index, item=item)
                objects.append(Decoded(obj, source, index, item))
            continue
        named = assign_generated_name(data, source, index, None) if generate_names else data
        objects.append(Decoded(decode_object(named, source=source, index=index), source, index))
    return objects


def _files(path: str) -> list[Path]:
    """A file, or the YAML files directly inside a directory (not recursive), by name."""
    target = Path(path)
    if target.is_dir():
        # Not recursive: a manifests folder with subfolders (kustomize overlays,
        # samples) must not silently pull in everything below it.
        return sorted(
            (p for p in target.iterdir() if p.is_file() and p.suffix in YAML_SUFFIXES),
            key=lambda p: p.name,
        )
    if not target.exists():
        raise ApiError("no such file or directory", source=path)
    return [target]


def load_documents(paths: Sequence[str], *, generate_names: bool = False) -> list[Decoded]:
    """All objects of the given files, directories and "-" (stdin), in order."""
    objects: list[Decoded] = []
    for path in paths:
        if path == STDIN:
            objects += load_yaml(sys.stdin.read(), STDIN_SOURCE, generate_names=generate_names)
            continue
        for file in _files(path):
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise ApiError(f"cannot read: {err}", source=str(file)) from None
            objects += load_yaml(text, str(file), generate_names=generate_names)
    return objects

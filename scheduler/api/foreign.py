"""The Kueue kinds queuescope stores and validates but does not act on
(docs/scheduling.md#kinds-stored-but-not-acted-on).

`Topology`, `ProvisioningRequestConfig`, `MultiKueueConfig` and `MultiKueueCluster`
belong to features queuescope does not implement (topology-aware scheduling, the
ProvisioningRequest and MultiKueue admission checks). queuescope installs their CRDs so
that manifests written for Kueue apply whole, and its validating webhook checks them,
but nothing in queuescope reads them: they are not in `scheduler.api.kinds.KINDS` (the
objects the scheduler, `simulate` and `serve --embedded` take in, which refuse these
kinds by name).

Each object is checked in the form it is stored in (`v1beta2`): a `v1beta1` document is
first decoded with its own model (its types, its field names), then converted and
checked with the stored version's rules; a denial names the field as the document
spells it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from scheduler.api.conversion import convert_document
from scheduler.api.errors import ApiError, FieldError
from scheduler.api.live import prune
from scheduler.api.meta import KubeObject
from scheduler.api.multikueue import (
    MultiKueueCluster,
    MultiKueueClusterV1Beta1,
    MultiKueueConfig,
    MultiKueueConfigV1Beta1,
)
from scheduler.api.names import dns1123_subdomain
from scheduler.api.provisioning import ProvisioningRequestConfig, ProvisioningRequestConfigV1Beta1
from scheduler.api.pydantic_errors import field_errors
from scheduler.api.topology import Topology, TopologyV1Beta1
from scheduler.api.validation.foreign import (
    validate_multikueue_cluster,
    validate_multikueue_config,
    validate_provisioning_request_config,
    validate_topology,
    validate_topology_update,
)
from scheduler.api.validation.meta import validate_metadata
from scheduler.api.versions import KUEUE_V1BETA1, KUEUE_V1BETA2

Rules = Callable[[Any], list[FieldError]]
UpdateRules = Callable[[Any, Any], list[FieldError]]


@dataclass(frozen=True)
class ForeignKind:
    """One kind: its model in each version, and the rules of its stored form."""

    stored: type[KubeObject]
    v1beta1: type[KubeObject]
    rules: Rules
    update_rules: UpdateRules | None = None


FOREIGN_KINDS: Final[dict[str, ForeignKind]] = {
    "Topology": ForeignKind(Topology, TopologyV1Beta1, validate_topology, validate_topology_update),
    "ProvisioningRequestConfig": ForeignKind(
        ProvisioningRequestConfig,
        ProvisioningRequestConfigV1Beta1,
        validate_provisioning_request_config,
    ),
    "MultiKueueConfig": ForeignKind(
        MultiKueueConfig, MultiKueueConfigV1Beta1, validate_multikueue_config
    ),
    "MultiKueueCluster": ForeignKind(
        MultiKueueCluster, MultiKueueClusterV1Beta1, validate_multikueue_cluster
    ),
}

# Stored-form paths as a v1beta1 MultiKueueCluster spells them (most specific first).
_V1BETA1_NAMES: Final = (
    ("spec.clusterSource.kubeConfig", "spec.kubeConfig"),
    ("spec.clusterSource.clusterProfileRef", "spec.clusterProfileRef"),
    ("spec.clusterSource", "spec"),
)


def is_foreign(api_version: str, kind: str) -> bool:
    return kind in FOREIGN_KINDS and api_version in (KUEUE_V1BETA1, KUEUE_V1BETA2)


def _v1beta1_path(path: str) -> str:
    for new, old in _V1BETA1_NAMES:
        if path == new or path.startswith((new + ".", new + "[")):
            return old + path[len(new) :]
    return path


@functools.cache
def _schema(model: type[KubeObject]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True, mode="validation")


def _check(
    model: type[KubeObject], data: Mapping[str, Any], rules: Rules | None = None
) -> tuple[KubeObject | None, list[FieldError]]:
    """`data` read as `model` (fields it has no place for pruned, as the store reads), and
    every broken rule: types, enums and required fields, metadata, then `rules`."""
    schema = _schema(model)
    pruned = prune(dict(data), schema, schema.get("$defs", {}))
    try:
        obj = model.model_validate(pruned, by_alias=True, by_name=False)
    except ValidationError as err:
        return None, field_errors(model, err)
    errors = validate_metadata(obj, dns1123_subdomain)
    if rules is not None:
        errors += rules(obj)
    return obj, errors


def decode_foreign(data: Mapping[str, Any], *, source: str) -> KubeObject:
    """The stored form of one object of a foreign kind; ApiError naming every broken rule."""
    api_version, kind = str(data.get("apiVersion", "")), str(data.get("kind", ""))
    entry = FOREIGN_KINDS[kind]
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    who: dict[str, Any] = {"source": source, "kind": kind, "name": name}
    if api_version == KUEUE_V1BETA1:
        _, errors = _check(entry.v1beta1, data)
        if errors:
            raise ApiError.from_field_errors(errors, **who)
        data = convert_document(data, KUEUE_V1BETA2, keep=False)
    obj, errors = _check(entry.stored, data, entry.rules)
    if errors:
        if api_version == KUEUE_V1BETA1:
            errors = [FieldError(_v1beta1_path(e.path), e.detail) for e in errors]
        raise ApiError.from_field_errors(errors, **who)
    assert obj is not None  # no errors: decoded
    return obj


def foreign_update_errors(old: KubeObject, new: KubeObject) -> list[FieldError]:
    """The kind's rules about what an update may change (both objects in stored form)."""
    entry = FOREIGN_KINDS[new.kind]
    if entry.update_rules is None or type(old) is not type(new):
        return []
    return entry.update_rules(old, new)

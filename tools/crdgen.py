"""Generate the `kueue.x-k8s.io` CustomResourceDefinitions in `manifests/crds/` from the API model.

The pydantic models in `scheduler/api/` are the single source of truth for what the
scheduler accepts; the CRDs are derived from them so that the two never drift:

    python tools/crdgen.py           # rewrite manifests/crds/
    python tools/crdgen.py --check   # exit 1 (with a diff) if the committed files are stale

Mapping from the model to OpenAPI v3 (every schema is structural, docs/cluster.md#manifests):

* `str`, `bool`, `int`, `float` -> `string`, `boolean`, `integer`, `number`; `Int32`/`Int64`
  add `format: int32`/`int64`; `Timestamp` is a `date-time` string.
* `Literal[...]` -> `enum`.
* `QuantityField` -> `x-kubernetes-int-or-string: true` with Kubernetes' quantity pattern,
  as apimachinery's `resource.Quantity` is published.
* `dict[str, X]` -> `additionalProperties: X`; `dict[str, Any]` (raw label selectors,
  unmodelled status blocks) -> an object with `x-kubernetes-preserve-unknown-fields`.
* Nested models -> objects with `properties` and `required`; the model's `extra="forbid"`
  is what Kubernetes' pruning plus strict field validation does, so no
  `additionalProperties: false` (which v1 CRDs forbid anyway).
* The embedded `PodTemplateSpec` is an object that keeps unknown fields, as Kueue publishes
  pod templates it does not own: the pod schema belongs to the cluster's version.
* Defaults: a non-zero scalar default of the model (`BestEffortFIFO`, `count: 1`,
  `active: true`) becomes `default`; a nested object that the model fills in when omitted
  becomes `default: {}` so that its own defaults apply. Go zero values (`""`, `false`, `0`,
  empty lists and maps) are not written, as Kueue leaves them unset. Nothing under `status`
  is defaulted.
* List semantics for server-side apply come from `LIST_TYPES` below (Kueue's list markers).

* Every field has a description, from `tools/crddescriptions.py` (our words); a field
  without one is an error, so `--check` fails until it is described.

Versions (docs/operations.md, "API versions"): `v1beta2` is served and stored; `v1beta1` is
served and deprecated, with Kueue's deprecation warning. The v1beta1 schema is the model's;
the v1beta2 schema is the same with the renames and additions of `V1BETA2_EDITS` (what
`scheduler.api.conversion` converts). The CRDs of `CONVERTED_CRDS` convert through our
webhook (`spec.conversion.strategy: Webhook`, POST /convert on the visibility Service, the
`caBundle` set by `queuescope certs` / `make deploy`); the others use `None`, which only
rewrites apiVersion. Printer columns and short names are Kueue's.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Union

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from any checkout, installed or not
    sys.path.insert(0, str(REPO))

from scheduler.api.admissioncheck import AdmissionCheck, AdmissionCheckStatus  # noqa: E402
from scheduler.api.base import Int32, Int64, Timestamp  # noqa: E402
from scheduler.api.clusterqueue import ClusterQueue, ClusterQueueSpec  # noqa: E402
from scheduler.api.cohort import Cohort, CohortSpec  # noqa: E402
from scheduler.api.flavor import ResourceFlavor  # noqa: E402
from scheduler.api.localqueue import LocalQueue  # noqa: E402
from scheduler.api.meta import KubeObject  # noqa: E402
from scheduler.api.multikueue import (  # noqa: E402
    MultiKueueCluster,
    MultiKueueClusterStatus,
    MultiKueueClusterV1Beta1,
    MultiKueueConfig,
    MultiKueueConfigSpec,
    MultiKueueConfigSpecV1Beta1,
    MultiKueueConfigV1Beta1,
)
from scheduler.api.pod import PodTemplateSpec  # noqa: E402
from scheduler.api.priority import WorkloadPriorityClass  # noqa: E402
from scheduler.api.provisioning import (  # noqa: E402
    ProvisioningRequestConfig,
    ProvisioningRequestConfigSpec,
    ProvisioningRequestConfigV1Beta1,
    ProvisioningRequestPodSetUpdates,
)
from scheduler.api.quantity import Quantity  # noqa: E402
from scheduler.api.quota import FlavorQuotas, ResourceGroup  # noqa: E402
from scheduler.api.topology import Topology, TopologySpec, TopologyV1Beta1  # noqa: E402
from scheduler.api.workload import (  # noqa: E402
    Admission,
    AdmissionCheckState,
    Workload,
    WorkloadSpec,
    WorkloadStatus,
)
from tools.crddescriptions import (  # noqa: E402
    API_VERSION_NOT_DEPRECATED,
    FIELDS,
    POD_TEMPLATE,
    ROOT,
)
from visibility_server.certs import DEFAULT_NAMESPACE, DEFAULT_SERVICE  # noqa: E402
from visibility_server.webhooks.conversion import CONVERSION_PATH, CONVERTED_CRDS  # noqa: E402

GROUP = "kueue.x-k8s.io"
V1BETA1 = "v1beta1"
V1BETA2 = "v1beta2"
STORAGE_VERSION = V1BETA2
# Kueue's own wording: clients print it on every v1beta1 request.
DEPRECATION_WARNING = "This version is deprecated. Use v1beta2 instead."
CRD_DIR = REPO / "manifests" / "crds"

# apimachinery's published pattern for resource.Quantity strings.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

HEADER = (
    "# Generated by tools/crdgen.py from the API model in scheduler/api/. Do not edit:\n"
    "# change the model, then run `python tools/crdgen.py` (`--check` verifies).\n"
)

Schema = dict[str, Any]


@dataclass(frozen=True)
class ListType:
    """`x-kubernetes-list-type` (and map keys) of one list field."""

    kind: Literal["atomic", "set", "map"]
    keys: tuple[str, ...] = ()


# (model, Python field name) -> list semantics. Kueue's markers: quota declarations are
# replaced whole (atomic resource groups) but flavors and resources merge by name; pod
# sets, assignments and reclaimable counts are keyed by pod-set name; conditions by type.
LIST_TYPES: dict[tuple[type[BaseModel], str], ListType] = {
    (ClusterQueueSpec, "resource_groups"): ListType("atomic"),
    (CohortSpec, "resource_groups"): ListType("atomic"),
    (ResourceGroup, "flavors"): ListType("map", ("name",)),
    (FlavorQuotas, "resources"): ListType("map", ("name",)),
    (WorkloadSpec, "pod_sets"): ListType("map", ("name",)),
    (Admission, "pod_set_assignments"): ListType("map", ("name",)),
    (WorkloadStatus, "conditions"): ListType("map", ("type",)),
    (WorkloadStatus, "reclaimable_pods"): ListType("map", ("name",)),
    (WorkloadStatus, "admission_checks"): ListType("map", ("name",)),
    (AdmissionCheckState, "pod_set_updates"): ListType("atomic"),
    (AdmissionCheckStatus, "conditions"): ListType("map", ("type",)),
    # The kinds queuescope stores but does not act on (docs/scheduling.md).
    (TopologySpec, "levels"): ListType("atomic"),
    (ProvisioningRequestConfigSpec, "managed_resources"): ListType("set"),
    (ProvisioningRequestPodSetUpdates, "node_selector"): ListType("map", ("key",)),
    (MultiKueueConfigSpec, "clusters"): ListType("atomic"),
    (MultiKueueConfigSpecV1Beta1, "clusters"): ListType("set"),
    (MultiKueueClusterStatus, "conditions"): ListType("map", ("type",)),
}


def _opaque_pod_template() -> Schema:
    def preserved(name: str) -> Schema:
        return {
            "description": POD_TEMPLATE[name],
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        }

    return {
        "type": "object",
        "properties": {"metadata": preserved("metadata"), "spec": preserved("spec")},
        "required": ["spec"],
        "x-kubernetes-preserve-unknown-fields": True,
    }


# Models published as opaque objects instead of being expanded.
OPAQUE_MODELS: dict[type[BaseModel], Callable[[], Schema]] = {
    PodTemplateSpec: _opaque_pod_template,
}


@dataclass(frozen=True)
class Column:
    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0

    def render(self) -> Schema:
        out: Schema = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            out["description"] = self.description
        if self.priority:
            out["priority"] = self.priority
        return out


AGE = Column("Age", ".metadata.creationTimestamp", "date", "When the object was created")


@dataclass(frozen=True)
class Resource:
    model: type[KubeObject]
    plural: str
    short_names: tuple[str, ...]
    status_subresource: bool
    columns: tuple[Column, ...]
    description: str
    # v1beta2 columns where they differ (a renamed field).
    v1beta2_columns: tuple[Column, ...] | None = None
    # The v1beta2 model, for kinds modelled in both versions (`model` is then the v1beta1
    # one); without it, the v1beta2 schema is the v1beta1 one with V1BETA2_EDITS.
    v1beta2_model: type[KubeObject] | None = None
    # Kueue marks v1beta1 deprecated on every kind but MultiKueueConfig.
    v1beta1_deprecated: bool = True

    def columns_of(self, version: str) -> tuple[Column, ...]:
        if version == V1BETA2 and self.v1beta2_columns is not None:
            return self.v1beta2_columns
        return self.columns

    @property
    def kind(self) -> str:
        return _literal_default(self.model, "kind")

    @property
    def namespaced(self) -> bool:
        return self.model.namespaced

    @property
    def file_name(self) -> str:
        return f"{GROUP}_{self.plural}.yaml"


PENDING = Column(
    "Pending Workloads", ".status.pendingWorkloads", "integer", "Workloads waiting for admission"
)
STRATEGY = Column("Strategy", ".spec.queueingStrategy", description="Queueing strategy", priority=1)
CQ_ADMITTED = Column(
    "Admitted Workloads",
    ".status.admittedWorkloads",
    "integer",
    "Workloads admitted and not finished",
    priority=1,
)


def _inert(feature: str) -> str:
    """What a kind of a feature queuescope does not implement says about itself."""
    return (
        "queuescope stores and validates it, but no queuescope controller acts on it: "
        f"{feature} is not implemented."
    )


RESOURCES: tuple[Resource, ...] = (
    Resource(
        ClusterQueue,
        "clusterqueues",
        ("cq",),
        True,
        (
            Column("Cohort", ".spec.cohort", description="The cohort the queue borrows in"),
            STRATEGY,
            PENDING,
            CQ_ADMITTED,
        ),
        "ClusterQueue: quota for flavors of resources, and the policies that share it.",
        v1beta2_columns=(
            Column("Cohort", ".spec.cohortName", description="The cohort the queue borrows in"),
            STRATEGY,
            PENDING,
            CQ_ADMITTED,
        ),
    ),
    Resource(
        LocalQueue,
        "localqueues",
        ("queue", "queues", "lq"),
        True,
        (
            Column("ClusterQueue", ".spec.clusterQueue", description="The ClusterQueue it feeds"),
            PENDING,
            Column(
                "Admitted Workloads",
                ".status.admittedWorkloads",
                "integer",
                "Workloads admitted and not finished",
            ),
        ),
        "LocalQueue: the namespaced entry point that sends Workloads to a ClusterQueue.",
    ),
    Resource(
        Workload,
        "workloads",
        ("kwl", "kueueworkload", "kueueworkloads"),
        True,
        (
            Column("Queue", ".spec.queueName", description="LocalQueue name"),
            Column(
                "Reserved in",
                ".status.admission.clusterQueue",
                description="ClusterQueue holding the quota reservation",
            ),
            Column(
                "Admitted",
                ".status.conditions[?(@.type=='Admitted')].status",
                description="Admitted condition",
            ),
            Column(
                "Finished",
                ".status.conditions[?(@.type=='Finished')].status",
                description="Finished condition",
            ),
            AGE,
        ),
        "Workload: a unit of admission, one or more pod sets and their resource requests.",
    ),
    Resource(
        ResourceFlavor,
        "resourceflavors",
        ("flavor", "flavors", "rf"),
        False,
        (),
        "ResourceFlavor: a kind of node (labels, taints) that quota is declared for.",
    ),
    Resource(
        WorkloadPriorityClass,
        "workloadpriorityclasses",
        ("wpc",),
        False,
        (Column("Value", ".value", "integer", "Priority value"),),
        "WorkloadPriorityClass: a named priority for Workloads, independent of pod priority.",
    ),
    Resource(
        Cohort,
        "cohorts",
        ("co",),
        True,
        (),
        "Cohort: a node of the quota-sharing tree, with optional quota of its own.",
    ),
    Resource(
        AdmissionCheck,
        "admissionchecks",
        ("ac",),
        True,
        (),
        "AdmissionCheck: a condition, evaluated by an external controller, that a Workload "
        "holding quota must pass before it is admitted.",
    ),
    # Kinds of features queuescope does not implement: stored and validated, never read.
    Resource(
        ProvisioningRequestConfigV1Beta1,
        "provisioningrequestconfigs",
        ("prc",),
        False,
        (),
        "ProvisioningRequestConfig: the parameters of a ProvisioningRequest admission check. "
        + _inert("ProvisioningRequest"),
        v1beta2_model=ProvisioningRequestConfig,
    ),
    Resource(
        MultiKueueConfigV1Beta1,
        "multikueueconfigs",
        ("mkconf",),
        False,
        (),
        "MultiKueueConfig: the worker clusters of a MultiKueue admission check. "
        + _inert("MultiKueue"),
        v1beta2_model=MultiKueueConfig,
        v1beta1_deprecated=False,
    ),
    Resource(
        MultiKueueClusterV1Beta1,
        "multikueueclusters",
        ("mkc",),
        True,
        (
            Column(
                "Connected",
                ".status.conditions[?(@.type=='Active')].status",
                description="Whether the MultiKueue controller reached the cluster",
            ),
            AGE,
        ),
        "MultiKueueCluster: how to reach one worker cluster of MultiKueue. " + _inert("MultiKueue"),
        v1beta2_model=MultiKueueCluster,
    ),
    Resource(
        TopologyV1Beta1,
        "topologies",
        ("topo",),
        False,
        (),
        "Topology: the node labels of a topology, from the widest domain to the narrowest, "
        "for topology-aware scheduling. " + _inert("Topology-aware scheduling"),
        v1beta2_model=Topology,
    ),
)


class SchemaError(Exception):
    """The model uses a type the generator does not know how to publish."""


def _literal_default(model: type[BaseModel], field: str) -> str:
    default = model.model_fields[field].default
    if not isinstance(default, str):
        raise SchemaError(f"{model.__name__}.{field} has no string default")
    return default


def _json_name(name: str, info: FieldInfo) -> str:
    return info.alias or name


def _strip_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise SchemaError(f"unions other than X | None are not publishable: {annotation}")
        return args[0]
    return annotation


def _quantity_schema() -> Schema:
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }


def _preserved_object() -> Schema:
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _annotated_schema(annotation: Any, where: str) -> Schema:
    if annotation == Int32:
        return {"type": "integer", "format": "int32"}
    if annotation == Int64:
        return {"type": "integer", "format": "int64"}
    if annotation == Timestamp:
        return {"type": "string", "format": "date-time"}
    base = typing.get_args(annotation)[0]
    if base is Quantity:
        return _quantity_schema()
    raise SchemaError(f"{where}: unknown annotated type {annotation}")


def _type_schema(annotation: Any, where: str, *, in_status: bool) -> Schema:
    annotation = _strip_optional(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _annotated_schema(annotation, where)
    if annotation is Any:
        return {"x-kubernetes-preserve-unknown-fields": True}
    if origin is Literal:
        values = list(typing.get_args(annotation))
        if not all(isinstance(v, str) for v in values):
            raise SchemaError(f"{where}: only string enums are publishable")
        return {"type": "string", "enum": values}
    if origin is list:
        (item,) = typing.get_args(annotation)
        return {"type": "array", "items": _type_schema(item, f"{where}[]", in_status=in_status)}
    if origin is dict:
        key, value = typing.get_args(annotation)
        if key is not str:
            raise SchemaError(f"{where}: map keys must be strings")
        if value is Any:
            return _preserved_object()
        return {
            "type": "object",
            "additionalProperties": _type_schema(value, f"{where}{{}}", in_status=in_status),
        }
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return _model_schema(annotation, where, in_status=in_status)
        if annotation is Quantity:
            return _quantity_schema()
        if annotation is bool:  # before int: bool is an int subclass
            return {"type": "boolean"}
        if annotation is int:
            return {"type": "integer", "format": "int64"}
        if annotation is float:
            return {"type": "number"}
        if annotation is str:
            return {"type": "string"}
        if annotation is datetime:
            return {"type": "string", "format": "date-time"}
    raise SchemaError(f"{where}: unsupported type {annotation}")


def _scalar_default(value: Any) -> Any:
    """The CRD default for a model default, or None when Kubernetes should leave it unset."""
    if isinstance(value, bool):
        return True if value else None
    if isinstance(value, int | float | str):
        return value or None
    if isinstance(value, Quantity):
        text = str(value)
        return int(text) if text.lstrip("-").isdigit() else text
    return None


def _field_default(info: FieldInfo) -> Any:
    if info.default_factory is not None:
        factory = typing.cast(Callable[[], Any], info.default_factory)
        value = factory()
        if isinstance(value, BaseModel):
            return {}
        return _scalar_default(value)
    if info.default is PydanticUndefined:
        return None
    return _scalar_default(info.default)


def _description(model: type[BaseModel], json_name: str, path: str) -> str:
    """The field's description, from the model or the nearest base model that has one (a
    v1beta1 model that only changes apiVersion shares its fields' descriptions)."""
    for owner in model.__mro__:
        found = FIELDS.get((owner.__name__, json_name))
        if found is not None:
            return found
    raise SchemaError(
        f"{path}: no description for ({model.__name__!r}, {json_name!r}) "
        "in tools/crddescriptions.py"
    )


def _model_schema(model: type[BaseModel], where: str, *, in_status: bool) -> Schema:
    opaque = OPAQUE_MODELS.get(model)
    if opaque is not None:
        return opaque()
    properties: Schema = {}
    required: list[str] = []
    for name, info in model.model_fields.items():
        json_name = _json_name(name, info)
        path = f"{where}.{json_name}"
        prop = {
            "description": _description(model, json_name, path),
            **_type_schema(info.rebuild_annotation(), path, in_status=in_status),
        }
        list_type = LIST_TYPES.get((model, name))
        if list_type is not None:
            if prop.get("type") != "array":
                raise SchemaError(f"{path}: list type given for a non-list field")
            prop["x-kubernetes-list-type"] = list_type.kind
            if list_type.keys:
                prop["x-kubernetes-list-map-keys"] = list(list_type.keys)
        if info.is_required():
            required.append(json_name)
        elif not in_status:
            default = _field_default(info)
            if default is not None:
                prop["default"] = default
        properties[json_name] = prop
    schema: Schema = {"type": "object", "properties": dict(sorted(properties.items()))}
    if model.model_config.get("extra") == "allow":
        schema["x-kubernetes-preserve-unknown-fields"] = True
    if required:
        schema["required"] = sorted(required)
    return schema


def root_schema(resource: Resource, model: type[KubeObject] | None = None) -> Schema:
    """The openAPIV3Schema of one CRD version: apiVersion, kind, metadata, and the fields of
    `model` (default: the resource's model)."""
    model = model or resource.model
    api_version = ROOT["apiVersion"] if resource.v1beta1_deprecated else API_VERSION_NOT_DEPRECATED
    properties: Schema = {
        "apiVersion": {"description": api_version, "type": "string"},
        "kind": {"description": ROOT["kind"], "type": "string"},
        # Nothing else: kube-apiserver refuses even a description of metadata.
        "metadata": {"type": "object"},
    }
    required: list[str] = []
    inherited = set(KubeObject.model_fields)
    for name, info in model.model_fields.items():
        if name in inherited:
            continue
        json_name = _json_name(name, info)
        in_status = json_name == "status"
        prop = {
            "description": _description(model, json_name, json_name),
            **_type_schema(info.rebuild_annotation(), json_name, in_status=in_status),
        }
        if info.is_required():
            required.append(json_name)
        elif not in_status:
            default = _field_default(info)
            if default is not None:
                prop["default"] = default
        properties[json_name] = prop
    schema: Schema = {
        "type": "object",
        "description": resource.description,
        "properties": dict(sorted(properties.items())),
    }
    if required:
        schema["required"] = sorted(required)
    return schema


def crd(resource: Resource) -> Schema:
    kind = resource.kind
    names: Schema = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": resource.plural,
        "singular": kind.lower(),
    }
    if resource.short_names:
        names["shortNames"] = list(resource.short_names)
    schemas = {V1BETA1: root_schema(resource)}
    if resource.v1beta2_model is not None:
        schemas[V1BETA2] = root_schema(resource, resource.v1beta2_model)
    else:
        schemas[V1BETA2] = v1beta2_schema(kind, schemas[V1BETA1])
    versions: list[Schema] = []
    for name in (V1BETA1, V1BETA2):
        version: Schema = {"name": name, "served": True, "storage": name == STORAGE_VERSION}
        if name != STORAGE_VERSION and resource.v1beta1_deprecated:
            version["deprecated"] = True
            version["deprecationWarning"] = DEPRECATION_WARNING
        version["schema"] = {"openAPIV3Schema": schemas[name]}
        if resource.status_subresource:
            version["subresources"] = {"status": {}}
        columns = resource.columns_of(name)
        if columns:
            version["additionalPrinterColumns"] = [c.render() for c in columns]
        versions.append(version)
    crd_name = f"{resource.plural}.{GROUP}"
    converted = crd_name in CONVERTED_CRDS
    if schemas[V1BETA1] != schemas[V1BETA2] and not converted:
        raise SchemaError(
            f"{crd_name}: the two versions' schemas differ, but it is not in "
            "visibility_server.webhooks.conversion.CONVERTED_CRDS"
        )
    spec: Schema = {
        "group": GROUP,
        "names": names,
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "versions": versions,
    }
    spec["conversion"] = _webhook_conversion() if converted else {"strategy": "None"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name, "labels": {"app.kubernetes.io/name": "queuescope"}},
        "spec": spec,
    }


def _webhook_conversion() -> Schema:
    """Our server's POST /convert, through the visibility Service; the caBundle is set by
    the certificate tooling (`queuescope certs`, patched in by overlays/default)."""
    return {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "service": {
                    "namespace": DEFAULT_NAMESPACE,
                    "name": DEFAULT_SERVICE,
                    "path": CONVERSION_PATH,
                    "port": 443,
                },
            },
            "conversionReviewVersions": ["v1"],
        },
    }


# -- v1beta2 -----------------------------------------------------------------------------
# The v1beta2 schema is the v1beta1 one with these edits, each (kind, edit). They follow
# what scheduler.api.conversion converts; the descriptions are ours.


def _node(root: Schema, path: str) -> Schema:
    """The schema at a dotted JSON path; `[]` steps into list items."""
    node = root
    for step in path.split("."):
        if step.endswith("[]"):
            node = node["properties"][step[:-2]]["items"]
        else:
            node = node["properties"][step]
    return node


def _rename(path: str, new: str, description: str) -> Callable[[Schema], None]:
    parent_path, _, old = path.rpartition(".")

    def edit(root: Schema) -> None:
        parent = _node(root, parent_path)
        props = parent["properties"]
        prop = {**props.pop(old), "description": description}
        props[new] = prop
        parent["properties"] = dict(sorted(props.items()))
        if old in parent.get("required", ()):
            parent["required"] = sorted({*parent["required"], new} - {old})

    return edit


def _drop(path: str) -> Callable[[Schema], None]:
    parent_path, _, name = path.rpartition(".")

    def edit(root: Schema) -> None:
        del _node(root, parent_path)["properties"][name]

    return edit


def _add(path: str, schema: Schema) -> Callable[[Schema], None]:
    parent_path, _, name = path.rpartition(".")

    def edit(root: Schema) -> None:
        parent = _node(root, parent_path)
        parent["properties"] = dict(sorted({**parent["properties"], name: schema}.items()))

    return edit


def _enum(path: str, values: list[str], default: str | None) -> Callable[[Schema], None]:
    def edit(root: Schema) -> None:
        node = _node(root, path)
        node["enum"] = values
        if default is None:
            node.pop("default", None)
        else:
            node["default"] = default

    return edit


def _object(description: str, properties: Schema, **extra: Any) -> Schema:
    return {"description": description, "type": "object", "properties": properties, **extra}


def _string(description: str, enum: list[str] | None = None, **extra: Any) -> Schema:
    out: Schema = {"description": description, "type": "string"}
    if enum:
        out["enum"] = enum
    return {**out, **extra}


_GATE_NAME = _string("Name of the gate, unique in the Workload.")
V1BETA2_EDITS: dict[str, tuple[Callable[[Schema], None], ...]] = {
    "ClusterQueue": (
        _rename(
            "spec.cohort",
            "cohortName",
            "The Cohort this queue belongs to; queues of one Cohort may borrow each other's "
            "unused quota. Empty: the queue stands alone.",
        ),
        # v1beta2 has only the strategy form (v1beta1's list becomes rules for every flavor).
        _drop("spec.admissionChecks"),
        _enum(
            "spec.flavorFungibility.whenCanBorrow",
            ["MayStopSearch", "TryNextFlavor"],
            "MayStopSearch",
        ),
        _enum(
            "spec.flavorFungibility.whenCanPreempt",
            ["MayStopSearch", "TryNextFlavor"],
            "TryNextFlavor",
        ),
        _add(
            "spec.concurrentAdmissionPolicy",
            _object(
                "How a Workload admitted in one flavor may move to a preferred one.",
                {
                    "migration": _object(
                        "Moving admitted Workloads between flavors.",
                        {
                            "mode": _string(
                                "TryPreferredFlavors keeps looking for a better flavor; "
                                "RetainFirstAdmission keeps the first one.",
                                ["TryPreferredFlavors", "RetainFirstAdmission"],
                            ),
                            "constraints": _object(
                                "Limits of the search for a better flavor.",
                                {
                                    "lastAcceptableFlavorName": _string(
                                        "Flavors after this one are not worth moving to."
                                    )
                                },
                            ),
                        },
                    )
                },
            ),
        ),
    ),
    # v1beta2 drops the deprecated retry delay (the controller sets requeueAfterSeconds).
    "AdmissionCheck": (_drop("spec.retryDelayMinutes"),),
    "Workload": (
        _drop("spec.priorityClassSource"),
        _drop("spec.priorityClassName"),
        _add(
            "spec.priorityClassRef",
            _object(
                "The priority class that gave the priority: a WorkloadPriorityClass "
                "(kueue.x-k8s.io) or a pod PriorityClass (scheduling.k8s.io).",
                {
                    "group": _string(
                        "API group of the class.", ["kueue.x-k8s.io", "scheduling.k8s.io"]
                    ),
                    "kind": _string(
                        "Kind of the class.", ["WorkloadPriorityClass", "PriorityClass"]
                    ),
                    "name": _string("Name of the class."),
                },
                required=["group", "kind", "name"],
                # Kueue's rules (and wording): with them every stored v1beta2 reference
                # converts to v1beta1, so no object can break a v1beta1 list.
                **{
                    "x-kubernetes-validations": [
                        {
                            "message": "only the PriorityClass kind is allowed for the "
                            "scheduling.k8s.io group",
                            "rule": "(self.group == 'scheduling.k8s.io') ? "
                            "self.kind == 'PriorityClass' : true",
                        },
                        {
                            "message": "only the WorkloadPriorityClass kind is allowed for the "
                            "kueue.x-k8s.io group",
                            "rule": "(self.group == 'kueue.x-k8s.io') ? "
                            "self.kind == 'WorkloadPriorityClass' : true",
                        },
                    ]
                },
            ),
        ),
        _add(
            "spec.preemptionGates",
            {
                "description": "Gates that must all open before the Workload may preempt.",
                "type": "array",
                "items": _object("One gate.", {"name": _GATE_NAME}, required=["name"]),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
        ),
        _rename(
            "status.accumulatedPastExexcutionTimeSeconds",
            "accumulatedPastExecutionTimeSeconds",
            "Seconds the Workload was admitted before its last eviction.",
        ),
        _enum(
            "status.admission.podSetAssignments[].delayedTopologyRequest",
            ["Pending", "Ready"],
            None,
        ),
        _add(
            "status.preemptionGates",
            {
                "description": "State of each preemption gate of the spec.",
                "type": "array",
                "items": _object(
                    "One gate's state.",
                    {
                        "name": _GATE_NAME,
                        "position": _string("Open or Closed.", ["Open", "Closed"]),
                        "lastTransitionTime": _string(
                            "When the position last changed.", format="date-time"
                        ),
                    },
                    required=["name", "position"],
                ),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
        ),
    ),
}


def v1beta2_schema(kind: str, v1beta1: Schema) -> Schema:
    schema = copy.deepcopy(v1beta1)
    for edit in V1BETA2_EDITS.get(kind, ()):
        edit(schema)
    return schema


class _Dumper(yaml.SafeDumper):
    """Block style, no aliases, long strings kept on one line."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump(document: Mapping[str, Any]) -> str:
    return yaml.dump(
        document, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096
    )


def render() -> dict[str, str]:
    """File name (relative to manifests/crds/) -> exact content."""
    files = {r.file_name: HEADER + "---\n" + dump(crd(r)) for r in RESOURCES}
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": sorted(files),
    }
    files["kustomization.yaml"] = HEADER + dump(kustomization)
    return files


def _stale(directory: Path, files: Mapping[str, str]) -> list[str]:
    """Unified diffs of every file that differs, plus generated-looking files that should go."""
    problems: list[str] = []
    for name, wanted in files.items():
        path = directory / name
        current = path.read_text() if path.exists() else ""
        if current != wanted:
            diff = difflib.unified_diff(
                current.splitlines(keepends=True),
                wanted.splitlines(keepends=True),
                fromfile=f"{path} (committed)",
                tofile=f"{path} (generated)",
            )
            problems.append("".join(diff) or f"{path}: differs\n")
    for path in sorted(directory.glob(f"{GROUP}_*.yaml")):
        if path.name not in files:
            problems.append(f"{path}: not generated any more; delete it\n")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--check", action="store_true", help="verify the committed CRDs instead of writing them"
    )
    parser.add_argument("--out", type=Path, default=CRD_DIR, help="output directory")
    args = parser.parse_args(argv)
    try:
        files = render()
    except SchemaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    directory: Path = args.out
    if args.check:
        problems = _stale(directory, files)
        if problems:
            sys.stdout.write("".join(problems))
            print(f"CRDs in {directory} are stale: run `python tools/crdgen.py`", file=sys.stderr)
            return 1
        print(f"CRDs in {directory} are up to date ({len(files) - 1} CRDs)")
        return 0
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (directory / name).write_text(content)
    for path in directory.glob(f"{GROUP}_*.yaml"):
        if path.name not in files:
            path.unlink()
    print(f"wrote {len(files)} files to {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

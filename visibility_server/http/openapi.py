"""OpenAPI documents (docs/visibility-api.md#openapi-documents), built once per process as bytes.

kube-apiserver downloads `/openapi/v2` and `/openapi/v3` and merges them into its own;
every `$ref` must resolve inside our document, so each holds the full closure of the
apimachinery meta types it references. Model names are upstream's stable ones
(`io.k8s.kueue.visibility.<v>.*`); extension types use our own prefix so they can
never collide with a future upstream type.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

from visibility_server.http import openapi_whatif
from visibility_server.http.status import VISIBILITY_GROUP

TITLE: Final = "queuescope visibility API"
META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1"
CONTENT_TYPES: Final = ["application/json", "application/yaml"]

Schema = dict[str, Any]


def summary_model(version: str) -> str:
    return f"io.k8s.kueue.visibility.{version}.PendingWorkloadsSummary"


def item_model(version: str) -> str:
    return f"io.k8s.kueue.visibility.{version}.PendingWorkload"


def position_model(version: str) -> str:
    return f"io.queuescope.visibility.{version}.PendingWorkloadPosition"


def _string(description: str) -> Schema:
    return {"description": description, "type": "string"}


def _integer(description: str, fmt: str = "int32") -> Schema:
    return {"description": description, "type": "integer", "format": fmt}


def _gvk(version: str, kind: str) -> list[dict[str, str]]:
    return [{"group": VISIBILITY_GROUP, "kind": kind, "version": version}]


def _meta_schemas(ref: str) -> dict[str, Schema]:
    """ObjectMeta and everything it references, trimmed to the fields' types."""
    time_ref = {"$ref": f"{ref}{META}.Time"}
    string_map = {"type": "object", "additionalProperties": {"type": "string", "default": ""}}
    return {
        f"{META}.FieldsV1": {
            "description": "FieldsV1 stores a set of fields in a data structure like a Trie.",
            "type": "object",
        },
        f"{META}.ManagedFieldsEntry": {
            "description": "ManagedFieldsEntry is a workflow-id, a FieldSet and the group "
            "version of the resource that the fieldset applies to.",
            "type": "object",
            "properties": {
                "apiVersion": _string("APIVersion of the resource the fields apply to."),
                "fieldsType": _string("Format of the fields: FieldsV1."),
                "fieldsV1": {"$ref": f"{ref}{META}.FieldsV1"},
                "manager": _string("Identifier of the workflow managing these fields."),
                "operation": _string("Type of operation that led to this entry."),
                "subresource": _string("Subresource used to update the object."),
                "time": time_ref,
            },
        },
        f"{META}.ObjectMeta": {
            "description": "ObjectMeta is metadata that all persisted resources must have.",
            "type": "object",
            "properties": {
                "annotations": {**string_map, "description": "Unstructured key value map."},
                "creationTimestamp": time_ref,
                "deletionGracePeriodSeconds": _integer("Grace period in seconds.", "int64"),
                "deletionTimestamp": time_ref,
                "finalizers": {"type": "array", "items": {"type": "string", "default": ""}},
                "generateName": _string("Prefix for a generated name."),
                "generation": _integer("Sequence number of the desired state.", "int64"),
                "labels": {**string_map, "description": "Map of string keys and values."},
                "managedFields": {
                    "type": "array",
                    "items": {"$ref": f"{ref}{META}.ManagedFieldsEntry"},
                },
                "name": _string("Name of the object."),
                "namespace": _string("Namespace of the object."),
                "ownerReferences": {
                    "type": "array",
                    "items": {"$ref": f"{ref}{META}.OwnerReference"},
                    "x-kubernetes-patch-merge-key": "uid",
                    "x-kubernetes-patch-strategy": "merge",
                },
                "resourceVersion": _string("Opaque version of the object's contents."),
                "selfLink": _string("Deprecated."),
                "uid": _string("Unique identifier of the object."),
            },
        },
        f"{META}.OwnerReference": {
            "description": "OwnerReference identifies an owning object.",
            "type": "object",
            "required": ["apiVersion", "kind", "name", "uid"],
            "properties": {
                "apiVersion": _string("API version of the referent."),
                "blockOwnerDeletion": {"type": "boolean"},
                "controller": {"type": "boolean"},
                "kind": _string("Kind of the referent."),
                "name": _string("Name of the referent."),
                "uid": _string("UID of the referent."),
            },
            "x-kubernetes-map-type": "atomic",
        },
        f"{META}.Time": {
            "description": "Time is an RFC 3339 date and time, second precision.",
            "type": "string",
            "format": "date-time",
        },
    }


def _visibility_schemas(version: str, pendingposition: bool, ref: str) -> dict[str, Schema]:
    meta = {"$ref": f"{ref}{META}.ObjectMeta"}
    type_fields = {
        "apiVersion": _string("APIVersion of this representation of the object."),
        "kind": _string("Kind of the object."),
    }
    schemas: dict[str, Schema] = {
        item_model(version): {
            "description": "PendingWorkload is a pending Workload with its positions.",
            "type": "object",
            "required": [
                "priority",
                "localQueueName",
                "positionInClusterQueue",
                "positionInLocalQueue",
            ],
            "properties": {
                "metadata": meta,
                "priority": _integer("Priority of the Workload."),
                "localQueueName": _string("LocalQueue the Workload was submitted to."),
                "positionInClusterQueue": _integer("0-based position in the ClusterQueue."),
                "positionInLocalQueue": _integer("0-based position in the LocalQueue."),
            },
        },
        summary_model(version): {
            "description": "PendingWorkloadsSummary lists pending Workloads in queue order.",
            "type": "object",
            "required": ["items"],
            "properties": {
                **type_fields,
                "metadata": meta,
                "items": {"type": "array", "items": {"$ref": f"{ref}{item_model(version)}"}},
            },
            "x-kubernetes-group-version-kind": _gvk(version, "PendingWorkloadsSummary"),
        },
    }
    if pendingposition:
        schemas[position_model(version)] = {
            "description": "PendingWorkloadPosition says where one Workload waits.",
            "type": "object",
            "required": ["pending"],
            "properties": {
                **type_fields,
                "metadata": meta,
                "pending": {"type": "boolean"},
                "reason": _string("Why the Workload is not pending."),
                "clusterQueueName": _string("ClusterQueue the Workload is queued in."),
                "localQueueName": _string("LocalQueue the Workload was submitted to."),
                "priority": _integer("Priority of the Workload."),
                "positionInClusterQueue": _integer("0-based position in the ClusterQueue."),
                "positionInLocalQueue": _integer("0-based position in the LocalQueue."),
                "pendingWorkloadsInClusterQueue": _integer(
                    "Workloads pending in the ClusterQueue."
                ),
                "pendingWorkloadsInLocalQueue": _integer("Workloads pending in the LocalQueue."),
                "message": _string("Why the Workload is still waiting."),
                "whyPending": _WHY_PENDING,
                "estimatedWait": _ESTIMATED_WAIT,
                "estimatedStart": _ESTIMATED_START,
            },
            "x-kubernetes-group-version-kind": _gvk(version, "PendingWorkloadPosition"),
        }
    return schemas


_WHY_PENDING: Final[Schema] = {
    "description": "The last QuotaReserved=False condition and the blockers it names.",
    "type": "object",
    "properties": {
        "reason": _string("Reason of the condition (Pending, Inadmissible, Waiting, ...)."),
        "message": _string("Message of the condition."),
        "lastTransitionTime": {
            **_string("When the condition last changed."),
            "format": "date-time",
        },
        "blockers": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "kind": _string(
                        "Quota, Capacity, Taint, NodeAffinity, FlavorNotFound, Policy, "
                        "Preemption, AdmissionCheck or Other."
                    ),
                    "check": _string("AdmissionCheck concerned."),
                    "state": _string("Its state on the Workload (Pending, Retry, ...)."),
                    "flavor": _string("ResourceFlavor concerned."),
                    "resource": _string("Resource concerned."),
                    "amount": _string("Quantity missing (Quota) or the maximum (Capacity)."),
                    "message": _string("The part of the message naming this blocker."),
                },
            },
        },
    },
}


def _instant(description: str) -> Schema:
    return {**_string(description), "format": "date-time"}


_ESTIMATED_START: Final[Schema] = {
    "description": "When the Workload may start, from the forecast worker, with its origin.",
    "type": "object",
    "properties": {
        "p50": _instant("Median start."),
        "low": _instant("Start before which 5% of the forecast's mass lies."),
        "high": _instant("Start after which 5% of the forecast's mass lies."),
        "method": _string("How the forecast was made (rate, ...)."),
        "madeAt": _instant("When the forecast was made."),
        "snapshot": _integer("Generation of the snapshot it was made from.", "int64"),
    },
}

_ESTIMATED_WAIT: Final[Schema] = {
    "description": "When the Workload may be admitted, from its ClusterQueue's admission rate.",
    "type": "object",
    "properties": {
        "seconds": _integer("Estimated seconds until admission.", "int64"),
        "lowSeconds": _integer("Lower bound of the 90% interval.", "int64"),
        "highSeconds": _integer("Upper bound of the 90% interval.", "int64"),
        "admissionsPerHour": {"type": "number", "format": "double"},
        "effectiveAdmissions": {"type": "number", "format": "double"},
        "method": _string("How the estimate was made: DecayedAdmissionRate."),
    },
}


class _Operation:
    """One `get` path: its parameters and response type, for either OpenAPI flavour."""

    def __init__(self, path: str, op_id: str, path_params: Sequence[str], model: str, kind: str):
        self.path = path
        self.op_id = op_id
        self.path_params = path_params
        self.model = model
        self.kind = kind


def _operations(version: str, pendingposition: bool) -> list[_Operation]:
    base = f"/apis/{VISIBILITY_GROUP}/{version}"
    cap = version[:1].upper() + version[1:]
    ops = [
        _Operation(
            f"{base}/clusterqueues/{{name}}/pendingworkloads",
            f"readVisibility{cap}ClusterQueuePendingWorkloads",
            ("name",),
            summary_model(version),
            "PendingWorkloadsSummary",
        ),
        _Operation(
            f"{base}/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads",
            f"readVisibility{cap}NamespacedLocalQueuePendingWorkloads",
            ("name", "namespace"),
            summary_model(version),
            "PendingWorkloadsSummary",
        ),
    ]
    if pendingposition:
        ops.append(
            _Operation(
                f"{base}/namespaces/{{namespace}}/workloads/{{name}}/pendingposition",
                f"readVisibility{cap}NamespacedWorkloadPendingPosition",
                ("name", "namespace"),
                position_model(version),
                "PendingWorkloadPosition",
            )
        )
    return ops


_PARAM_DESCRIPTIONS: Final = {
    "name": "name of the object",
    "namespace": "object name and auth scope, such as for teams and projects",
    "offset": "index of the first item to return",
    "limit": "maximum number of items to return (0 means 1000; at most 100000)",
    "pretty": "If 'true', then the output is pretty printed.",
    "waitSeconds": "with If-None-Match: wait up to this many seconds (1..50) for a change",
}


def _query_params(op: _Operation, longpoll: bool) -> list[tuple[str, str, str]]:
    """(name, type, format) of the query parameters of `op`."""
    params = []
    if op.kind == "PendingWorkloadsSummary":
        params += [("offset", "integer", "int64"), ("limit", "integer", "int64")]
    params.append(("pretty", "string", ""))
    if longpoll:
        params.append(("waitSeconds", "integer", "int64"))
    return params


def _param(name: str, where: str, **rest: Any) -> dict[str, Any]:
    """One parameter object; both OpenAPI versions start with the same three keys (the
    documents are served byte for byte, so the key order is part of the output)."""
    return {"name": name, "in": where, "description": _PARAM_DESCRIPTIONS[name], **rest}


def _v2_operation(op: _Operation, version: str, longpoll: bool) -> dict[str, Any]:
    params = [
        _param(p, "path", required=True, type="string", uniqueItems=True) for p in op.path_params
    ]
    for name, type_, fmt in _query_params(op, longpoll):
        with_format = {"format": fmt} if fmt else {}
        params.append(_param(name, "query", type=type_, uniqueItems=True, **with_format))
    return {
        "get": {
            "description": f"read {op.kind} of the specified object",
            "consumes": ["*/*"],
            "produces": CONTENT_TYPES,
            "schemes": ["https"],
            "tags": [f"visibility_{version}"],
            "operationId": op.op_id,
            "parameters": params,
            "responses": {
                "200": {"description": "OK", "schema": {"$ref": f"#/definitions/{op.model}"}},
                "401": {"description": "Unauthorized"},
            },
            "x-kubernetes-action": "get",
            "x-kubernetes-group-version-kind": _gvk(version, op.kind)[0],
        }
    }


def _v3_operation(op: _Operation, version: str, longpoll: bool) -> dict[str, Any]:
    params = [_param(p, "path", required=True, schema={"type": "string"}) for p in op.path_params]
    for name, type_, fmt in _query_params(op, longpoll):
        schema: dict[str, Any] = {"type": type_}
        if fmt:
            schema["format"] = fmt
        params.append(_param(name, "query", schema=schema))
    ref = {"$ref": f"#/components/schemas/{op.model}"}
    return {
        "get": {
            "description": f"read {op.kind} of the specified object",
            "tags": [f"visibility_{version}"],
            "operationId": op.op_id,
            "parameters": params,
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {media: {"schema": ref} for media in CONTENT_TYPES},
                },
                "401": {"description": "Unauthorized"},
            },
            "x-kubernetes-action": "get",
            "x-kubernetes-group-version-kind": _gvk(version, op.kind)[0],
        }
    }


def swagger_v2(
    versions: Sequence[str],
    release: str,
    *,
    pendingposition: bool,
    longpoll: bool,
    whatif: bool = False,
) -> dict[str, Any]:
    ref = "#/definitions/"
    paths: dict[str, Any] = {}
    definitions: dict[str, Schema] = _meta_schemas(ref)
    for version in versions:
        for op in _operations(version, pendingposition):
            paths[op.path] = _v2_operation(op, version, longpoll)
        definitions.update(_visibility_schemas(version, pendingposition, ref))
        if whatif:
            paths[openapi_whatif.whatif_path(version)] = openapi_whatif.v2_operation(version)
            definitions[openapi_whatif.whatif_model(version)] = openapi_whatif.whatif_schema(
                version
            )
    return {
        "swagger": "2.0",
        "info": {"title": TITLE, "version": release},
        "paths": paths,
        "definitions": dict(sorted(definitions.items())),
    }


def openapi_v3(
    version: str, release: str, *, pendingposition: bool, longpoll: bool, whatif: bool = False
) -> dict[str, Any]:
    ref = "#/components/schemas/"
    schemas = {**_meta_schemas(ref), **_visibility_schemas(version, pendingposition, ref)}
    paths = {
        op.path: _v3_operation(op, version, longpoll)
        for op in _operations(version, pendingposition)
    }
    if whatif:
        paths[openapi_whatif.whatif_path(version)] = openapi_whatif.v3_operation(version)
        schemas[openapi_whatif.whatif_model(version)] = openapi_whatif.whatif_schema(version)
    return {
        "openapi": "3.0.0",
        "info": {"title": TITLE, "version": release},
        "paths": paths,
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def v3_hash(document: bytes) -> str:
    """kube-openapi's `hash`: upper-case hex SHA-512 of the document's bytes."""
    return hashlib.sha512(document).hexdigest().upper()


def openapi_v3_root(documents: dict[str, bytes]) -> dict[str, Any]:
    """`/openapi/v3`: only our group-versions (kube-apiserver copies every key it sees)."""
    paths = {}
    for version in sorted(documents):
        key = f"apis/{VISIBILITY_GROUP}/{version}"
        url = f"/openapi/v3/{key}?hash={v3_hash(documents[version])}"
        paths[key] = {"serverRelativeURL": url}
    return {"paths": paths}

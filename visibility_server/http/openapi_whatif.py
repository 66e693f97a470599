"""The OpenAPI pieces of [EXT] what-if (docs/visibility-api.md#what-if): the
`WorkloadWhatIf` schema and the POST operation, in both OpenAPI flavours."""

from __future__ import annotations

from typing import Any, Final

from visibility_server.http.discovery import WHATIF_KIND
from visibility_server.http.status import VISIBILITY_GROUP

Schema = dict[str, Any]
CONTENT_TYPES: Final = ["application/json", "application/yaml"]
_DESCRIPTION: Final = f"create a {WHATIF_KIND}: a dry run of the next scheduling cycle"


def whatif_model(version: str) -> str:
    return f"io.queuescope.visibility.{version}.{WHATIF_KIND}"


def whatif_path(version: str) -> str:
    return (
        f"/apis/{VISIBILITY_GROUP}/{version}/namespaces/{{namespace}}/localqueues/{{name}}/whatif"
    )


def _s(description: str) -> Schema:
    return {"description": description, "type": "string"}


def _i(description: str) -> Schema:
    return {"description": description, "type": "integer", "format": "int32"}


def _object(description: str, properties: Schema) -> Schema:
    return {"description": description, "type": "object", "properties": properties}


def _array(description: str, item: Schema) -> Schema:
    return {"description": description, "type": "array", "items": item}


_STRING_MAP: Final[Schema] = {"type": "object", "additionalProperties": {"type": "string"}}
_ESTIMATE: Final = _object(
    "When it may start: the forecast band (p50, and low and high of the 90% band).",
    {
        "p50": {**_s("Median start time."), "format": "date-time"},
        "low": {**_s("Start of the band."), "format": "date-time"},
        "high": {**_s("End of the band."), "format": "date-time"},
        "method": _s("How it was made: rate (the ClusterQueue's admission rate), ..."),
        "madeAt": {**_s("When it was made."), "format": "date-time"},
        "snapshot": _s("The published snapshot it was made from."),
    },
)


def whatif_schema(version: str) -> Schema:
    return {
        "description": "WorkloadWhatIf: what the next scheduling cycle would do with a "
        "Job or Workload if it were created now; nothing is created.",
        "type": "object",
        "required": ["decision", "admitted"],
        "properties": {
            "apiVersion": _s("APIVersion of this representation of the object."),
            "kind": _s("Kind of the object."),
            "metadata": _object("Empty: a what-if answer is never stored.", {}),
            "workload": _object(
                "The Workload the request stands for.",
                {
                    "name": _s("Name of the Workload."),
                    "namespace": _s("Namespace of the Workload."),
                    "priority": _i("Priority of the Workload."),
                    "localQueueName": _s("LocalQueue of the request."),
                    "clusterQueueName": _s("ClusterQueue the LocalQueue points at."),
                },
            ),
            "evaluatedAt": {**_s("The instant the dry run read."), "format": "date-time"},
            "decision": _s("Admitted, Preempting, Pending, Queued or Inadmissible."),
            "admitted": {"type": "boolean", "description": "The next cycle admits it."},
            "atHead": {"type": "boolean", "description": "The next cycle examines it."},
            "positionInClusterQueue": _i("0-based position it would take."),
            "positionInLocalQueue": _i("0-based position in its LocalQueue."),
            "pendingWorkloadsInClusterQueue": _i("Pending in the ClusterQueue, with it."),
            "pendingWorkloadsInLocalQueue": _i("Pending in the LocalQueue, with it."),
            "assignment": _object(
                "The flavors it would get.",
                {
                    "mode": _s("Fit, Preempt or NoFit."),
                    "podSets": _array(
                        "One entry per pod set.",
                        _object(
                            "A pod set's flavors and usage.",
                            {
                                "name": _s("Pod set name."),
                                "count": _i("Pods admitted."),
                                "flavors": _STRING_MAP,
                                "resourceUsage": _STRING_MAP,
                            },
                        ),
                    ),
                },
            ),
            "borrowing": _array(
                "Quota taken from the cohort beyond the ClusterQueue's nominal quota.",
                _object(
                    "",
                    {"flavor": _s(""), "resource": _s(""), "amount": _s("A quantity.")},
                ),
            ),
            "preemption": _object(
                "The workloads it would evict (only those the caller may list).",
                {
                    "victims": _array(
                        "Victims the caller may see.",
                        _object(
                            "",
                            {
                                "namespace": _s(""),
                                "name": _s(""),
                                "clusterQueueName": _s(""),
                                "priority": _i(""),
                                "reason": _s("InClusterQueue, InCohortReclamation, ..."),
                            },
                        ),
                    ),
                    "hiddenVictims": _i("Victims in namespaces the caller may not list."),
                },
            ),
            "pendingReason": _object(
                "Why it would not be admitted now.",
                {
                    "message": _s("The QuotaReserved=False message it would get."),
                    "blockers": _array("Structured blockers.", {"type": "object"}),
                },
            ),
            "estimatedStart": _ESTIMATE,
        },
        "x-kubernetes-group-version-kind": [
            {"group": VISIBILITY_GROUP, "kind": WHATIF_KIND, "version": version}
        ],
    }


_BODY_DESCRIPTION: Final = "a batch/v1 Job or a Kueue Workload (v1beta1 or v1beta2)"
_PATH_PARAMS: Final = (
    ("name", "name of the LocalQueue"),
    ("namespace", "object name and auth scope, such as for teams and projects"),
)
_RESPONSES: Final = {
    "400": "Bad Request",
    "401": "Unauthorized",
    "403": "Forbidden",
    "404": "Not Found",
    "413": "Request Entity Too Large",
    "422": "Unprocessable Entity",
    "429": "Too Many Requests",
}


def _op_id(version: str) -> str:
    return f"createVisibility{version[:1].upper()}{version[1:]}NamespacedLocalQueueWhatIf"


def v2_operation(version: str) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {
            "name": "body",
            "in": "body",
            "required": True,
            "description": _BODY_DESCRIPTION,
            "schema": {"type": "object"},
        }
    ]
    params += [
        {"name": n, "in": "path", "description": d, "required": True, "type": "string"}
        for n, d in _PATH_PARAMS
    ]
    responses: dict[str, Any] = {
        "200": {"description": "OK", "schema": {"$ref": f"#/definitions/{whatif_model(version)}"}}
    }
    responses.update({code: {"description": text} for code, text in _RESPONSES.items()})
    return {
        "post": {
            "description": _DESCRIPTION,
            "consumes": CONTENT_TYPES,
            "produces": CONTENT_TYPES,
            "schemes": ["https"],
            "tags": [f"visibility_{version}"],
            "operationId": _op_id(version),
            "parameters": params,
            "responses": responses,
            **_kubernetes_extensions(version),
        }
    }


def v3_operation(version: str) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{whatif_model(version)}"}
    responses: dict[str, Any] = {
        "200": {"description": "OK", "content": {m: {"schema": ref} for m in CONTENT_TYPES}}
    }
    responses.update({code: {"description": text} for code, text in _RESPONSES.items()})
    return {
        "post": {
            "description": _DESCRIPTION,
            "tags": [f"visibility_{version}"],
            "operationId": _op_id(version),
            "parameters": [
                {
                    "name": n,
                    "in": "path",
                    "description": d,
                    "required": True,
                    "schema": {"type": "string"},
                }
                for n, d in _PATH_PARAMS
            ],
            "requestBody": {
                "description": _BODY_DESCRIPTION,
                "required": True,
                "content": {m: {"schema": {"type": "object"}} for m in CONTENT_TYPES},
            },
            "responses": responses,
            **_kubernetes_extensions(version),
        }
    }


def _kubernetes_extensions(version: str) -> dict[str, Any]:
    """What kube-openapi adds to an operation: the action and the kind it answers with."""
    return {
        "x-kubernetes-action": "post",
        "x-kubernetes-group-version-kind": {
            "group": VISIBILITY_GROUP,
            "kind": WHATIF_KIND,
            "version": version,
        },
    }

"""Discovery documents (docs/visibility-api.md#discovery), built once at startup.

They depend only on the served versions and the enabled extensions, never on
scheduler state, so they can never fail: a failing discovery answer makes the
group-version stale in kube-apiserver and blocks namespace deletion cluster-wide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from visibility_server.http.status import VISIBILITY_GROUP

SUMMARY_KIND: Final = "PendingWorkloadsSummary"
POSITION_KIND: Final = "PendingWorkloadPosition"
WHATIF_KIND: Final = "WorkloadWhatIf"
WHATIF_SUBRESOURCE: Final = "whatif"


@dataclass(frozen=True, slots=True)
class _Subresource:
    name: str
    kind: str
    verbs: tuple[str, ...] = ("get",)


@dataclass(frozen=True, slots=True)
class _Resource:
    """A parent resource (no verbs) and its subresources; the parent's kind is its
    first subresource's."""

    name: str
    singular: str
    namespaced: bool
    subresources: tuple[_Subresource, ...]

    @property
    def kind(self) -> str:
        return self.subresources[0].kind


def _resources(pendingposition: bool, whatif: bool = False) -> list[_Resource]:
    local = [_Subresource("pendingworkloads", SUMMARY_KIND)]
    if whatif:
        # [EXT] docs/visibility-api.md#what-if: a POST, authorized as `create`.
        local.append(_Subresource(WHATIF_SUBRESOURCE, WHATIF_KIND, ("create",)))
    resources = [
        _Resource(
            "clusterqueues",
            "clusterqueue",
            False,
            (_Subresource("pendingworkloads", SUMMARY_KIND),),
        ),
        _Resource("localqueues", "localqueue", True, tuple(local)),
    ]
    if pendingposition:
        resources.append(
            _Resource(
                "workloads", "workload", True, (_Subresource("pendingposition", POSITION_KIND),)
            )
        )
    return sorted(resources, key=lambda r: r.name)


def group_version(version: str) -> str:
    return f"{VISIBILITY_GROUP}/{version}"


def api_resource_list(
    version: str, pendingposition: bool, *, whatif: bool = False
) -> dict[str, Any]:
    """`G/{v}`: `verbs` always present, `singularName` empty for subresources."""
    entries: list[dict[str, Any]] = []
    for r in _resources(pendingposition, whatif):
        entries.append(
            {
                "name": r.name,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": [],
            }
        )
        entries.extend(
            {
                "name": f"{r.name}/{sub.name}",
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": sub.kind,
                "verbs": list(sub.verbs),
            }
            for sub in r.subresources
        )
    # Sorted by name: a parent sorts right before its `parent/sub` entry.
    entries.sort(key=lambda e: str(e["name"]))
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(version),
        "resources": entries,
    }


def _group_body(versions: Sequence[str]) -> dict[str, Any]:
    listed = [{"groupVersion": group_version(v), "version": v} for v in versions]
    return {"name": VISIBILITY_GROUP, "versions": listed, "preferredVersion": listed[0]}


def api_group(versions: Sequence[str]) -> dict[str, Any]:
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_body(versions)}


def api_group_list(versions: Sequence[str]) -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group_body(versions)]}


def aggregated_discovery(
    versions: Sequence[str], pendingposition: bool, api_version: str, *, whatif: bool = False
) -> dict[str, Any]:
    """`/apis` as `APIGroupDiscoveryList` (`apidiscovery.k8s.io/v2` or `v2beta1`).

    Every served version is listed: a version claimed by an APIService but missing
    here would be published with no resources. `responseKind` is always sent because
    client-go 0.26.0 to 0.26.3 panic on a nil one.
    """

    def kind_of(version: str, kind: str) -> dict[str, str]:
        return {"group": VISIBILITY_GROUP, "version": version, "kind": kind}

    listed = []
    for version in versions:
        resources = [
            {
                "resource": r.name,
                "responseKind": kind_of(version, r.kind),
                "scope": "Namespaced" if r.namespaced else "Cluster",
                "singularResource": r.singular,
                "verbs": [],
                "subresources": [
                    {
                        "subresource": sub.name,
                        "responseKind": kind_of(version, sub.kind),
                        "verbs": list(sub.verbs),
                    }
                    for sub in r.subresources
                ],
            }
            for r in _resources(pendingposition, whatif)
        ]
        listed.append({"version": version, "freshness": "Current", "resources": resources})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{api_version}",
        "metadata": {},
        "items": [{"metadata": {"name": VISIBILITY_GROUP}, "versions": listed}],
    }

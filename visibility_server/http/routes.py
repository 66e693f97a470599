"""The path table (visibility-api.md §1), matched on the percent-decoded path.

Matching splits the decoded path on `/` exactly as the authorization attributes do
(an encoded `%2F` separates segments), so a request is routed by the same reading of
its path that authorized it. No route is ever answered by a redirect: one trailing
slash is accepted on the three discovery paths only, anything else that does not match
exactly is 404.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from visibility_server.http.status import VISIBILITY_GROUP

HEALTH_ENDPOINTS: Final = ("healthz", "livez", "readyz")
OPENAPI_V3_GROUP_PREFIX: Final = f"apis/{VISIBILITY_GROUP}/"


class Kind(enum.Enum):
    APIS = "apis"
    GROUP = "group"
    VERSION = "version"
    CLUSTER_QUEUE = "clusterqueue"
    LOCAL_QUEUE = "localqueue"
    POSITION = "pendingposition"
    OPENAPI_V2 = "openapi-v2"
    OPENAPI_V3 = "openapi-v3"
    OPENAPI_V3_VERSION = "openapi-v3-version"
    HEALTH = "health"
    METRICS = "metrics"
    VERSION_INFO = "version-info"

    @property
    def is_data(self) -> bool:
        """Endpoints 4 to 6: read the snapshot, count towards the in-flight limit."""
        return self in (Kind.CLUSTER_QUEUE, Kind.LOCAL_QUEUE, Kind.POSITION)


@dataclass(frozen=True, slots=True)
class Route:
    kind: Kind
    version: str = ""  # the API version, where the path has one
    namespace: str = ""
    name: str = ""  # queue or workload name; for health, the endpoint
    check: str = ""  # health: a single check, or "" for all

    @property
    def metric_endpoint(self) -> str:
        return _METRIC_ENDPOINTS[self.kind]


# The `endpoint` label of the request metrics: a handful of values, never a name.
_METRIC_ENDPOINTS: Final = {
    Kind.APIS: "discovery",
    Kind.GROUP: "discovery",
    Kind.VERSION: "discovery",
    Kind.CLUSTER_QUEUE: "clusterqueue",
    Kind.LOCAL_QUEUE: "localqueue",
    Kind.POSITION: "pendingposition",
    Kind.OPENAPI_V2: "openapi",
    Kind.OPENAPI_V3: "openapi",
    Kind.OPENAPI_V3_VERSION: "openapi",
    Kind.HEALTH: "health",
    Kind.METRICS: "metrics",
    Kind.VERSION_INFO: "version",
}


class Router:
    def __init__(self, versions: Collection[str], *, pendingposition: bool) -> None:
        self._versions = frozenset(versions)
        self._pendingposition = pendingposition

    def match(self, path: str) -> Route | None:
        if not path.startswith("/"):
            return None
        parts = path[1:].split("/")
        head = parts[0]
        if head == "apis":
            return self._apis(parts[1:])
        if head == "openapi":
            return self._openapi(path)
        if head in HEALTH_ENDPOINTS:
            if len(parts) == 1:
                return Route(Kind.HEALTH, name=head)
            if len(parts) == 2 and parts[1]:
                return Route(Kind.HEALTH, name=head, check=parts[1])
            return None
        if path == "/metrics":
            return Route(Kind.METRICS)
        if path == "/version":
            return Route(Kind.VERSION_INFO)
        return None

    def _apis(self, rest: list[str]) -> Route | None:
        # Discovery paths accept exactly one trailing slash.
        if rest and rest[-1] == "" and len(rest) <= 3:
            rest = rest[:-1]
            if rest and rest[-1] == "":
                return None
        if not rest:
            return Route(Kind.APIS)
        if rest[0] != VISIBILITY_GROUP:
            return None
        if len(rest) == 1:
            return Route(Kind.GROUP)
        version = rest[1]
        if version not in self._versions:
            return None
        tail = rest[2:]
        if not tail:
            return Route(Kind.VERSION, version)
        return self._resource(version, tail)

    def _resource(self, version: str, tail: list[str]) -> Route | None:
        if any(not segment for segment in tail):
            return None
        if len(tail) == 3 and tail[0] == "clusterqueues" and tail[2] == "pendingworkloads":
            return Route(Kind.CLUSTER_QUEUE, version, name=tail[1])
        if len(tail) != 5 or tail[0] != "namespaces":
            return None
        namespace, resource, name, subresource = tail[1], tail[2], tail[3], tail[4]
        if resource == "localqueues" and subresource == "pendingworkloads":
            return Route(Kind.LOCAL_QUEUE, version, namespace, name)
        if self._pendingposition and resource == "workloads" and subresource == "pendingposition":
            return Route(Kind.POSITION, version, namespace, name)
        return None

    def _openapi(self, path: str) -> Route | None:
        if path == "/openapi/v2":
            return Route(Kind.OPENAPI_V2)
        if path == "/openapi/v3":
            return Route(Kind.OPENAPI_V3)
        rest = path.removeprefix("/openapi/v3/")
        if rest != path and rest.startswith(OPENAPI_V3_GROUP_PREFIX):
            version = rest.removeprefix(OPENAPI_V3_GROUP_PREFIX)
            if version in self._versions:
                return Route(Kind.OPENAPI_V3_VERSION, version)
        return None

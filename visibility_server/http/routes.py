"""What a routed request asks for: the kind of endpoint and its path parameters.

The paths themselves (docs/visibility-api.md, "Paths served") are FastAPI routes in `routers/`; the
answers and the static documents are decided by `Route`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

HEALTH_ENDPOINTS: Final = ("healthz", "livez", "readyz")


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
    VERSION_INFO = "version-info"


@dataclass(frozen=True, slots=True)
class Route:
    kind: Kind
    version: str = ""  # the API version, where the path has one
    namespace: str = ""
    name: str = ""  # queue or workload name

"""The static documents: discovery, OpenAPI and `/version`, rendered once at startup.

Every representation a static path can answer (JSON compact or pretty, YAML, the
aggregated-discovery media types) is pre-rendered as bytes together with its ETag,
so serving one is a dictionary lookup and can never fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from visibility_server.http import discovery, openapi
from visibility_server.http.encode import json_compact, json_pretty, to_yaml
from visibility_server.http.etag import tag_of_bytes
from visibility_server.http.negotiation import Media
from visibility_server.http.routes import Kind

VERSION_INFO_KEYS: Final = (
    "major",
    "minor",
    "gitVersion",
    "gitCommit",
    "gitTreeState",
    "buildDate",
    "goVersion",
    "compiler",
    "platform",
)


@dataclass(frozen=True, slots=True)
class Document:
    body: bytes
    content_type: str
    etag: str


DocumentKey = tuple[Kind, str, Media, bool]  # (path kind, version, media, pretty)


def version_document(version_info: Mapping[str, str]) -> dict[str, str]:
    """kube's `version.Info` field order; keys it does not know follow as given."""
    known = {key: version_info[key] for key in VERSION_INFO_KEYS if key in version_info}
    extra = {k: v for k, v in version_info.items() if k not in VERSION_INFO_KEYS}
    return {**known, **extra}


class StaticDocuments:
    def __init__(
        self,
        versions: Sequence[str],
        *,
        pendingposition: bool,
        longpoll: bool,
        version_info: Mapping[str, str],
        whatif: bool = False,
    ) -> None:
        self._docs: dict[DocumentKey, Document] = {}
        self.openapi_v3_hashes: dict[str, str] = {}

        objects: list[tuple[Kind, str, Any]] = [
            (Kind.APIS, "", discovery.api_group_list(versions)),
            (Kind.GROUP, "", discovery.api_group(versions)),
        ]
        for version in versions:
            objects.append(
                (
                    Kind.VERSION,
                    version,
                    discovery.api_resource_list(version, pendingposition, whatif=whatif),
                )
            )
        for kind, version, obj in objects:
            for pretty in (False, True):
                self._add(
                    kind,
                    version,
                    Media.JSON,
                    pretty,
                    json_pretty(obj) if pretty else json_compact(obj),
                )
                self._add(kind, version, Media.YAML, pretty, to_yaml(obj))
        for media, api_version in (
            (Media.DISCOVERY_V2, "v2"),
            (Media.DISCOVERY_V2BETA1, "v2beta1"),
        ):
            obj = discovery.aggregated_discovery(
                versions, pendingposition, api_version, whatif=whatif
            )
            self._add(Kind.APIS, "", media, False, json_compact(obj))
            self._add(Kind.APIS, "", media, True, json_pretty(obj))

        info = version_document(version_info)
        self._add(Kind.VERSION_INFO, "", Media.JSON, False, json_compact(info))
        self._add(Kind.VERSION_INFO, "", Media.JSON, True, json_pretty(info))

        # OpenAPI: fixed compact bytes per build (pretty is ignored), because the v3 root
        # names each document by the hash of exactly these bytes.
        release = version_info.get("gitVersion", "v0.0.0")
        flags = {"pendingposition": pendingposition, "longpoll": longpoll, "whatif": whatif}
        v2 = json_compact(openapi.swagger_v2(versions, release, **flags))
        per_version = {v: json_compact(openapi.openapi_v3(v, release, **flags)) for v in versions}
        root = json_compact(openapi.openapi_v3_root(per_version))
        for pretty in (False, True):
            self._add(Kind.OPENAPI_V2, "", Media.JSON, pretty, v2)
            self._add(Kind.OPENAPI_V3, "", Media.JSON, pretty, root)
            for version, body in per_version.items():
                self._add(Kind.OPENAPI_V3_VERSION, version, Media.JSON, pretty, body)
        self.openapi_v3_hashes = {v: openapi.v3_hash(b) for v, b in per_version.items()}

    def _add(self, kind: Kind, version: str, media: Media, pretty: bool, body: bytes) -> None:
        self._docs[(kind, version, media, pretty)] = Document(
            body, media.content_type, tag_of_bytes(body)
        )

    def get(self, kind: Kind, version: str, media: Media, pretty: bool) -> Document:
        return self._docs[(kind, version, media, pretty)]

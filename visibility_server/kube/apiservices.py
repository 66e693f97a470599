"""Reading our two APIServices (and our admission webhook configurations) from
kube-apiserver, for `queuescope certs verify --kubeconfig` (and any other check of what
kube-apiserver trusts: docs/cluster.md#tls-and-certificates)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scheduler.kubeapi.client import Call
from visibility_server.kube.transport import KubeTransport

APISERVICE_PATH = "/apis/apiregistration.k8s.io/v1/apiservices/{name}"
WEBHOOK_CONFIGURATION_PATHS = {
    "MutatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}"
    ),
    "ValidatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{name}"
    ),
}
READ_TIMEOUT = 10.0


class ApiServiceReadError(Exception):
    """kube-apiserver answered, but not with the APIService or a 404."""


async def read_apiservices(
    transport: KubeTransport, names: Iterable[str], *, timeout: float = READ_TIMEOUT
) -> dict[str, dict[str, Any] | None]:
    """name → the APIService object, or None when kube-apiserver has none by that name.

    KubeError (status 0) when kube-apiserver cannot be reached; ApiServiceReadError on any
    other answer (a 403 names the missing `get` on apiservices)."""
    return await read_named(transport, APISERVICE_PATH, "APIService", names, timeout=timeout)


async def read_webhook_configurations(
    transport: KubeTransport,
    configurations: Iterable[tuple[str, str]],
    *,
    timeout: float = READ_TIMEOUT,
) -> dict[str, dict[str, Any] | None]:
    """(kind, name) pairs → name → the configuration or None; errors as read_apiservices."""
    found: dict[str, dict[str, Any] | None] = {}
    for kind, name in configurations:
        path = WEBHOOK_CONFIGURATION_PATHS[kind]
        found |= await read_named(transport, path, kind, (name,), timeout=timeout)
    return found


async def read_named(
    transport: KubeTransport,
    path: str,
    kind: str,
    names: Iterable[str],
    *,
    timeout: float = READ_TIMEOUT,
) -> dict[str, dict[str, Any] | None]:
    """name → the object at `path` (a template with `{name}`), None on a 404."""
    found: dict[str, dict[str, Any] | None] = {}
    for name in names:
        response = await transport.request(Call("GET", path.format(name=name), timeout=timeout))
        body = response.json()
        if response.status == 404:
            found[name] = None
        elif response.ok and isinstance(body, dict):
            found[name] = body
        else:
            raise ApiServiceReadError(
                f"reading {kind} {name}: kube-apiserver answered {response.status}: "
                f"{response.message()}"
            )
    return found

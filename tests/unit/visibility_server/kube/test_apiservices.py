"""Reading the two APIServices for `certs verify --kubeconfig`, on a scripted transport."""

from __future__ import annotations

import pytest

from scheduler.kubeapi.errors import KubeError
from tests.unit.visibility_server.kube.support import FakeTransport, response, status_error
from visibility_server.kube.apiservices import (
    APISERVICE_PATH,
    ApiServiceReadError,
    read_apiservices,
)

V1BETA1 = "v1beta1.visibility.kueue.x-k8s.io"
V1BETA2 = "v1beta2.visibility.kueue.x-k8s.io"


def path(name: str) -> str:
    return APISERVICE_PATH.format(name=name)


async def test_found_and_not_found() -> None:
    transport = FakeTransport()
    apiservice = {"kind": "APIService", "metadata": {"name": V1BETA2}, "spec": {}}
    transport.script("GET", path(V1BETA2), response(200, apiservice))
    transport.script("GET", path(V1BETA1), status_error(404, "not found"))
    found = await read_apiservices(transport, [V1BETA2, V1BETA1], timeout=3.0)
    assert found == {V1BETA2: apiservice, V1BETA1: None}
    assert [(c.method, c.path, c.timeout) for c in transport.calls] == [
        ("GET", "/apis/apiregistration.k8s.io/v1/apiservices/" + V1BETA2, 3.0),
        ("GET", "/apis/apiregistration.k8s.io/v1/apiservices/" + V1BETA1, 3.0),
    ]


async def test_forbidden_names_the_status_message() -> None:
    transport = FakeTransport()
    message = f'apiservices.apiregistration.k8s.io "{V1BETA1}" is forbidden: User "bob" cannot get'
    transport.script("GET", path(V1BETA1), status_error(403, message))
    with pytest.raises(ApiServiceReadError) as err:
        await read_apiservices(transport, [V1BETA1])
    assert str(err.value) == f"reading APIService {V1BETA1}: kube-apiserver answered 403: {message}"


async def test_a_non_object_answer_is_an_error() -> None:
    transport = FakeTransport()
    transport.script("GET", path(V1BETA1), response(200, ["not", "an", "object"]))
    with pytest.raises(ApiServiceReadError):
        await read_apiservices(transport, [V1BETA1])


async def test_transport_errors_pass_through() -> None:
    transport = FakeTransport()
    transport.script("GET", path(V1BETA1), KubeError(0, "cannot reach kube-apiserver: refused"))
    with pytest.raises(KubeError):
        await read_apiservices(transport, [V1BETA1])

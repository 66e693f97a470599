"""Status bodies, byte for byte, and the order in which checks decide
(docs/visibility-api.md#errors)."""

from __future__ import annotations

import re

import pytest

from tests.unit.visibility_server.http.support import (
    ADMIN,
    ALICE,
    BOB,
    CAROL,
    FAIL_HEADER,
    V2,
    FailingBackend,
    ReasonBackend,
    app_for,
    example_snapshot,
    get,
)
from visibility_server.authz.pipeline import Authorizer

CQ = f"{V2}/clusterqueues/cq-a/pendingworkloads"
LQ_B = f"{V2}/namespaces/team-b/localqueues/lq-b/pendingworkloads"


def status(message: str, reason: str, code: int, details: str | None = None) -> bytes:
    middle = f',"details":{details}' if details is not None else ""
    return (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        f'"message":{message},"reason":"{reason}"{middle},"code":{code}}}\n'
    ).encode()


async def test_not_found_cluster_queue() -> None:
    r = await get(app_for(), f"{V2}/clusterqueues/foo/pendingworkloads")
    assert r.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"clusterqueue.visibility.kueue.x-k8s.io \\"foo\\" not found","reason":"NotFound",'
        b'"details":{"name":"foo","group":"visibility.kueue.x-k8s.io","kind":"clusterqueue"},'
        b'"code":404}\n'
    )
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "etag" not in r.headers


async def test_not_found_local_queue() -> None:
    r = await get(app_for(), f"{V2}/namespaces/team-a/localqueues/foo/pendingworkloads")
    assert r.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"localqueue.visibility.kueue.x-k8s.io \\"foo\\" not found","reason":"NotFound",'
        b'"details":{"name":"foo","group":"visibility.kueue.x-k8s.io","kind":"localqueue"},'
        b'"code":404}\n'
    )


async def test_not_found_path() -> None:
    r = await get(app_for(), "/nope")
    assert r.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"the server could not find the requested resource","reason":"NotFound","details":{},'
        b'"code":404}\n'
    )
    assert r.headers["content-type"] == "application/json"
    assert r.headers["x-content-type-options"] == "nosniff"


async def test_unauthorized() -> None:
    r = await get(app_for(), CQ, {FAIL_HEADER: "fail"})
    assert r.status_code == 401
    assert r.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"Unauthorized","reason":"Unauthorized","code":401}\n'
    )


async def test_a_401_logs_why_with_the_client_and_the_audit_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The answer says only "Unauthorized"; the log line says why, who sent it and which
    kube-apiserver request it was (docs/operations.md#why-a-request-is-401). The caller's
    text is escaped, so a newline in a certificate's CN cannot start a line of its own."""
    with caplog.at_level("WARNING", logger="visibility_server.http.app_state"):
        r = await get(app_for(), CQ, {FAIL_HEADER: "fail", "audit-id": "4b2f-77"})
    assert r.status_code == 401
    [record] = caplog.records
    assert record.getMessage() == (
        "unable to authenticate the request: x509: subject with cn=front\\nproxy is not in "
        "the allowed list (client=127.0.0.1:123 audit_id=4b2f-77)"
    )


async def test_a_401_without_credentials_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """No credentials at all, anonymous disabled: a 401 with nothing gone wrong, not logged
    (as kube-apiserver, which logs only an authenticator's error)."""
    with caplog.at_level("DEBUG"):
        r = await get(app_for(), CQ, {FAIL_HEADER: "none"})
    assert r.status_code == 401
    assert r.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"Unauthorized","reason":"Unauthorized","code":401}\n'
    )
    assert [rec for rec in caplog.records if rec.levelno >= 30] == []


async def test_every_request_has_an_access_log_line(caplog: pytest.LogCaptureFixture) -> None:
    """docs/operations.md#the-access-log: kube-apiserver's field names, the caller's text
    quoted as JSON strings, and the same fields on the record for the JSON log format."""
    headers = {**ALICE, "audit-id": "a-1", "user-agent": 'kubectl "v1.34"'}
    with caplog.at_level("INFO", logger="visibility_server.access"):
        ok = await get(app_for(), CQ + "?limit=1", headers)
        missing = await get(app_for(), "/nope", headers)
        unauthorized = await get(app_for(), CQ, {FAIL_HEADER: "fail"})
    assert (ok.status_code, missing.status_code, unauthorized.status_code) == (200, 403, 401)
    records = [r for r in caplog.records if r.name == "visibility_server.access"]
    assert len(records) == 3
    first = records[0].getMessage()
    assert re.fullmatch(
        'HTTP verb="GET" URI="/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq-a/'
        'pendingworkloads\\?limit=1" latency="[0-9]+\\.[0-9]{3}ms" user="alice" '
        'userAgent="kubectl \\\\"v1.34\\\\"" audit-ID="a-1" srcIP="127.0.0.1:123" resp=200',
        first,
    ), first
    assert records[0].__dict__["resp"] == 200
    assert records[0].__dict__["audit-ID"] == "a-1"
    assert (
        records[1]
        .getMessage()
        .endswith(
            'user="alice" '
            'userAgent="kubectl \\"v1.34\\"" audit-ID="a-1" srcIP="127.0.0.1:123" resp=403'
        )
    )
    assert ' user="" ' in records[2].getMessage()
    assert records[2].getMessage().endswith(" resp=401")


async def test_method_not_allowed() -> None:
    r = await get(app_for(), CQ, method="POST")
    assert r.status_code == 405
    assert r.headers["allow"] == "GET, HEAD"
    assert r.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"the server does not allow this method on the requested resource",'
        b'"reason":"MethodNotAllowed","details":{},"code":405}\n'
    )


async def test_not_synced() -> None:
    r = await get(app_for(example_snapshot(synced=False)), CQ)
    assert r.status_code == 503
    assert r.headers["retry-after"] == "1"
    assert r.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"the visibility cache has not completed its initial sync","reason":"ServiceUnavailable",'
        b'"details":{"retryAfterSeconds":1},"code":503}\n'
    )


async def test_not_acceptable() -> None:
    r = await get(app_for(), CQ, {**ADMIN, "accept": "application/vnd.kubernetes.protobuf"})
    assert r.status_code == 406
    assert r.content == status(
        '"only the following media types are accepted: application/json, application/yaml, '
        'application/json;as=Table;v=v1;g=meta.k8s.io"',
        "NotAcceptable",
        406,
    )


async def test_forbidden_cluster_scope() -> None:
    r = await get(app_for(), f"{V2}/clusterqueues/cq-a/pendingworkloads", BOB)
    assert r.status_code == 403
    assert r.content == status(
        '"clusterqueues.visibility.kueue.x-k8s.io \\"cq-a\\" is forbidden: User \\"bob\\" cannot '
        'get resource \\"clusterqueues/pendingworkloads\\" in API group '
        '\\"visibility.kueue.x-k8s.io\\" at the cluster scope"',
        "Forbidden",
        403,
        '{"name":"cq-a","group":"visibility.kueue.x-k8s.io","kind":"clusterqueues"}',
    )


async def test_forbidden_namespaced() -> None:
    r = await get(app_for(), LQ_B, BOB)
    assert r.json()["message"] == (
        'localqueues.visibility.kueue.x-k8s.io "lq-b" is forbidden: User "bob" cannot get '
        'resource "localqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" '
        'in the namespace "team-b"'
    )
    assert r.json()["details"] == {
        "name": "lq-b",
        "group": "visibility.kueue.x-k8s.io",
        "kind": "localqueues",
    }


async def test_forbidden_non_resource_anonymous() -> None:
    r = await get(app_for(), "/metrics", {})
    assert r.content == status(
        '"forbidden: User \\"system:anonymous\\" cannot get path \\"/metrics\\""',
        "Forbidden",
        403,
        "{}",
    )


async def test_forbidden_with_reason() -> None:
    app = app_for(authorizer=Authorizer(ReasonBackend()))
    r = await get(app, CQ, CAROL)
    assert r.json()["message"].endswith("at the cluster scope: no RBAC policy matched")


async def test_forbidden_escapes_html() -> None:
    r = await get(app_for(), CQ, {"x-test-user": "<eve>&co"})
    assert 'User \\"&lt;eve&gt;&amp;co\\" cannot' in r.text


async def test_sar_refused_is_500_naming_the_fix() -> None:
    cause = (
        "authorization check failed: this server's identity \"system:serviceaccount:"
        'queuescope-system:queuescope-controller" may not create '
        "subjectaccessreviews.authorization.k8s.io; bind it to the ClusterRole "
        "system:auth-delegator"
    )
    app = app_for(authorizer=Authorizer(FailingBackend(cause, transient=False)))
    r = await get(app, CQ, CAROL)
    assert r.status_code == 500
    body = r.json()
    assert list(body) == [
        "kind",
        "apiVersion",
        "metadata",
        "status",
        "message",
        "reason",
        "details",
        "code",
    ]
    assert body["reason"] == "InternalError"
    assert body["message"] == f"Internal error occurred: {cause}"
    assert body["details"] == {"causes": [{"message": cause}]}


async def test_sar_transient_failure_is_503_with_retry_after() -> None:
    app = app_for(authorizer=Authorizer(FailingBackend("timeout after 10s", transient=True)))
    r = await get(app, CQ, CAROL)
    assert r.status_code == 503
    assert r.headers["retry-after"] == "1"
    assert r.content == status(
        '"authorization is temporarily unavailable: timeout after 10s"',
        "ServiceUnavailable",
        503,
        '{"retryAfterSeconds":1}',
    )


async def test_sar_failure_never_reaches_discovery() -> None:
    """The authenticated short-cut keeps discovery and OpenAPI up when SAR is down."""
    app = app_for(authorizer=Authorizer(FailingBackend("down", transient=True)))
    for path in ("/apis", f"{V2}", "/openapi/v2", "/openapi/v3", "/version", "/healthz"):
        assert (await get(app, path, CAROL)).status_code == 200, path


async def test_token_review_unavailable_is_503() -> None:
    r = await get(app_for(), CQ, {FAIL_HEADER: "unavailable"})
    assert r.status_code == 503
    assert r.headers["retry-after"] == "1"
    assert (
        r.json()["message"] == "authentication is temporarily unavailable: token review timed out"
    )


async def test_token_review_refused_is_500() -> None:
    r = await get(app_for(), CQ, {FAIL_HEADER: "boom"})
    assert r.status_code == 500
    assert r.json()["reason"] == "InternalError"


async def test_impersonation_is_403() -> None:
    r = await get(app_for(), CQ, {**ADMIN, "Impersonate-User": "bob"})
    assert r.status_code == 403
    assert r.json()["message"] == (
        "impersonation is not supported by this server; send the request through kube-apiserver"
    )
    r = await get(app_for(), "/healthz", {"impersonate-group": "x"})
    assert r.status_code == 403


async def test_unexpected_exception_is_500_status() -> None:
    def broken() -> object:
        raise RuntimeError("secret internals")

    r = await get(app_for(broken), CQ)  # type: ignore[arg-type]
    assert r.status_code == 500
    assert r.json()["reason"] == "InternalError"
    assert "secret internals" not in r.text


async def test_errors_follow_yaml_and_pretty() -> None:
    app = app_for()
    r = await get(app, "/nope", {**ADMIN, "accept": "application/yaml"})
    assert r.headers["content-type"] == "application/yaml"
    assert r.text == (
        "apiVersion: v1\ncode: 404\ndetails: {}\nkind: Status\n"
        "message: the server could not find the requested resource\n"
        "metadata: {}\nreason: NotFound\nstatus: Failure\n"
    )
    r = await get(app, "/nope?pretty=true")
    assert r.text.startswith('{\n  "kind": "Status",') and not r.text.endswith("\n")


async def test_head_errors_have_no_body() -> None:
    r = await get(app_for(), "/nope", method="HEAD")
    assert r.status_code == 404 and r.content == b""


# -- the order of checks ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "path", "method", "code"),
    [
        # authentication beats everything
        ({FAIL_HEADER: "fail", "impersonate-user": "x"}, "/nope", "POST", 401),
        # impersonation beats authorization
        ({**CAROL, "impersonate-user": "x"}, CQ, "GET", 403),
        # authorization beats route and method: no probing for paths
        (CAROL, "/nope", "GET", 403),
        (CAROL, f"{V2}/clusterqueues/nope/pendingworkloads", "GET", 403),
        (BOB, CQ, "DELETE", 403),
        # route before method, method after authorization with the mapped verb
        (ADMIN, "/nope", "POST", 404),
        (ADMIN, CQ, "POST", 405),
        (ADMIN, CQ, "PUT", 405),
        (ADMIN, CQ, "PATCH", 405),
        (ADMIN, CQ, "DELETE", 405),
        (ADMIN, CQ, "OPTIONS", 405),
        (ALICE, CQ, "POST", 403),  # create is not granted
        ({}, "/healthz", "POST", 405),  # always-allowed path, any verb
        ({**ADMIN, "accept": "text/html"}, CQ + "?limit=x", "GET", 406),
        (ADMIN, f"{V2}/clusterqueues/nope/pendingworkloads?limit=x", "GET", 400),
    ],
)
async def test_check_order(headers: dict[str, str], path: str, method: str, code: int) -> None:
    r = await get(app_for(), path, headers, method=method)
    assert r.status_code == code, r.text
    if code == 405:
        assert r.headers["allow"] == "GET, HEAD"


async def test_sync_503_comes_before_queue_404_and_after_400() -> None:
    app = app_for(example_snapshot(synced=False))
    assert (await get(app, f"{V2}/clusterqueues/nope/pendingworkloads")).status_code == 503
    assert (await get(app, f"{V2}/clusterqueues/nope/pendingworkloads?limit=x")).status_code == 400


async def test_forbidden_user_cannot_learn_about_changes() -> None:
    app = app_for()
    etag = (await get(app, CQ, ALICE)).headers["etag"]
    r = await get(app, CQ, {**BOB, "if-none-match": etag})
    assert r.status_code == 403

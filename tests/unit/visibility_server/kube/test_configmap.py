"""The `extension-apiserver-authentication` ConfigMap
(docs/cluster.md#the-authentication-configmap): parsing the object, the startup read, and the watch
with its relists and GET fallback."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.kubeapi.errors import KubeError
from tests.unit.visibility_server.authn.support import ca
from tests.unit.visibility_server.kube.support import (
    CONFIGMAP_PATH,
    CONFIGMAPS_PATH,
    FORBIDDEN,
    TIMEOUT,
    FakeTransport,
    StopWatching,
    response,
    status_error,
)
from visibility_server.authn.config import AuthenticationConfig, AuthenticationConfigError
from visibility_server.kube.calls import ApiCaller
from visibility_server.kube.configmap import (
    AuthenticationConfigWatcher,
    AuthenticationLookupError,
    config_from_configmap,
    read_authentication_config,
)

CLIENT_CA = ca("kubernetes")
FRONT_PROXY_CA = ca("front-proxy-ca")
SECOND_FRONT_PROXY_CA = ca("front-proxy-ca-2")
NAME = "extension-apiserver-authentication"


def data(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "client-ca-file": CLIENT_CA.cert_pem.decode(),
        "requestheader-client-ca-file": FRONT_PROXY_CA.cert_pem.decode(),
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
        "requestheader-uid-headers": '["X-Remote-Uid"]',
    }
    base.update({key.replace("_", "-"): value for key, value in overrides.items()})
    return {k: v for k, v in base.items() if v is not ...}


def configmap(version: str = "1", **overrides: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": "kube-system", "resourceVersion": version},
        "data": data(**overrides),
    }


DEFAULT = config_from_configmap(configmap())
LIST_FORBIDDEN = status_error(
    403,
    'configmaps is forbidden: User "system:serviceaccount:queuescope-system:'
    'queuescope-controller" cannot list resource "configmaps" in API group "" in the '
    'namespace "kube-system"',
)


# -- parsing the object --------------------------------------------------------------------


def test_a_complete_configmap() -> None:
    assert DEFAULT.client_cas == (CLIENT_CA.cert,)
    assert DEFAULT.requestheader_cas == (FRONT_PROXY_CA.cert,)
    assert DEFAULT.allowed_names == ("front-proxy-client",)
    assert DEFAULT.username_headers == ("X-Remote-User",)
    assert DEFAULT.group_headers == ("X-Remote-Group",)
    assert DEFAULT.extra_headers_prefixes == ("X-Remote-Extra-",)
    assert DEFAULT.uid_headers == ("X-Remote-Uid",)
    assert DEFAULT.anonymous_auth


def test_several_kube_apiservers_give_lists_and_bundles_in_order() -> None:
    config = config_from_configmap(
        configmap(
            requestheader_client_ca_file=(
                FRONT_PROXY_CA.cert_pem + SECOND_FRONT_PROXY_CA.cert_pem
            ).decode(),
            requestheader_allowed_names='["front-proxy-client","aggregator"]',
            requestheader_username_headers='["X-Remote-User","X-Forwarded-User"]',
        )
    )
    assert config.requestheader_cas == (FRONT_PROXY_CA.cert, SECOND_FRONT_PROXY_CA.cert)
    assert config.allowed_names == ("front-proxy-client", "aggregator")
    assert config.username_headers == ("X-Remote-User", "X-Forwarded-User")


@pytest.mark.parametrize(
    "value", [..., None, "", "null", "[]"], ids=["missing", "json-null", "empty", "null", "[]"]
)
@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("client-ca-file", "client_cas"),
        ("requestheader-client-ca-file", "requestheader_cas"),
        ("requestheader-allowed-names", "allowed_names"),
        ("requestheader-username-headers", "username_headers"),
        ("requestheader-group-headers", "group_headers"),
        ("requestheader-extra-headers-prefix", "extra_headers_prefixes"),
        ("requestheader-uid-headers", "uid_headers"),
    ],
)
def test_missing_empty_null_and_empty_list_are_empty(key: str, field: str, value: object) -> None:
    obj = configmap()
    if value is ...:
        del obj["data"][key]
    else:
        obj["data"][key] = value
    assert getattr(config_from_configmap(obj), field) == ()


@pytest.mark.parametrize("obj", [None, {"metadata": {"name": NAME}}, {"data": None}, {"data": {}}])
def test_no_configmap_or_no_data_is_an_empty_configuration(obj: dict[str, Any] | None) -> None:
    assert config_from_configmap(obj, anonymous_auth=False) == AuthenticationConfig(
        anonymous_auth=False
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"requestheader_allowed_names": "front-proxy-client"},
        {"requestheader_allowed_names": '"front-proxy-client"'},
        {"requestheader_group_headers": "[1]"},
        {"client_ca_file": "not a certificate"},
        {"requestheader_uid_headers": 7},
    ],
    ids=["bare-name", "json-string", "numbers", "bad-pem", "not-a-string"],
)
def test_unusable_values_are_refused(overrides: dict[str, Any]) -> None:
    with pytest.raises(AuthenticationConfigError):
        config_from_configmap(configmap(**overrides))


def test_unknown_keys_are_ignored() -> None:
    obj = configmap()
    obj["data"]["something-new"] = "[1, 2]"
    assert config_from_configmap(obj) == DEFAULT


# -- the startup read ------------------------------------------------------------------------


def reading(*outcomes: Any) -> FakeTransport:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAP_PATH, *outcomes)
    return transport


def caller(transport: FakeTransport, **kwargs: Any) -> ApiCaller:
    """The transport's calls on its fake clock's retry policy."""
    return ApiCaller(transport, policy=transport.clock.policy(), **kwargs)


async def test_the_startup_read() -> None:
    transport = reading(response(200, configmap()))
    config = await read_authentication_config(caller(transport), anonymous_auth=False)
    assert config == config_from_configmap(configmap(), anonymous_auth=False)
    assert [(c.method, c.path) for c in transport.calls] == [("GET", CONFIGMAP_PATH)]


async def test_a_missing_configmap_is_an_empty_configuration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = reading(status_error(404, "not found"))
    config = await read_authentication_config(caller(transport))
    assert config == AuthenticationConfig()
    assert "does not exist" in caplog.text


async def test_a_forbidden_read_stops_startup_naming_the_reader_role() -> None:
    transport = reading(FORBIDDEN)
    with pytest.raises(AuthenticationLookupError) as raised:
        await read_authentication_config(caller(transport))
    message = str(raised.value)
    assert "extension-apiserver-authentication-reader" in message
    assert "--authentication-tolerate-lookup-failure" in message


async def test_a_forbidden_read_names_the_identity_that_read() -> None:
    who = "the user of --authentication-kubeconfig /etc/authn"
    transport = reading(FORBIDDEN)
    with pytest.raises(AuthenticationLookupError) as raised:
        await read_authentication_config(caller(transport, who=who))
    assert (
        f'bind {who} to the Role "extension-apiserver-authentication-reader" in kube-system'
        in str(raised.value)
    )


async def test_an_unreachable_apiserver_is_retried_then_stops_startup() -> None:
    transport = reading(TIMEOUT)
    with pytest.raises(AuthenticationLookupError, match="did not answer"):
        await read_authentication_config(caller(transport))
    assert len(transport.calls) == 2  # 5 s, a pause, the 4.5 s left


async def test_an_unusable_configmap_stops_startup() -> None:
    transport = reading(response(200, configmap(requestheader_allowed_names="nope")))
    with pytest.raises(AuthenticationLookupError, match="requestheader-allowed-names"):
        await read_authentication_config(caller(transport))


@pytest.mark.parametrize(
    "failure", [FORBIDDEN, TIMEOUT, response(200, configmap(client_ca_file="x"))]
)
async def test_tolerated_failures_start_without_certificates(
    failure: Any, caplog: pytest.LogCaptureFixture
) -> None:
    transport = reading(failure)
    config = await read_authentication_config(
        caller(transport), anonymous_auth=False, tolerate_lookup_failure=True
    )
    assert config == AuthenticationConfig(anonymous_auth=False)
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "authentication are OFF" in caplog.text


async def test_a_401_rereads_our_token_first() -> None:
    transport = reading(status_error(401, "Unauthorized"), response(200, configmap()))
    refreshed: list[bool] = []

    async def refresh() -> None:
        refreshed.append(True)

    config = await read_authentication_config(caller(transport, refresh_credentials=refresh))
    assert config == DEFAULT
    assert refreshed == [True]


# -- the watch -------------------------------------------------------------------------------


def listing(version: str, *items: dict[str, Any]) -> Any:
    return response(
        200,
        {
            "kind": "ConfigMapList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": version},
            "items": list(items),
        },
    )


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def bookmark(version: str) -> dict[str, Any]:
    return event("BOOKMARK", {"kind": "ConfigMap", "metadata": {"resourceVersion": version}})


def gone() -> dict[str, Any]:
    return event(
        "ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    )


def watcher(
    transport: FakeTransport, current: AuthenticationConfig = DEFAULT, **kwargs: Any
) -> tuple[AuthenticationConfigWatcher, list[AuthenticationConfig]]:
    seen: list[AuthenticationConfig] = []
    return (
        AuthenticationConfigWatcher(caller(transport, **kwargs), seen.append, current=current),
        seen,
    )


async def run(w: AuthenticationConfigWatcher) -> None:
    with pytest.raises(StopWatching):
        await w.run()


def rotated() -> dict[str, Any]:
    bundle = (FRONT_PROXY_CA.cert_pem + SECOND_FRONT_PROXY_CA.cert_pem).decode()
    return configmap("6", requestheader_client_ca_file=bundle)


async def test_list_then_watch_delivers_each_change_once() -> None:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAPS_PATH, listing("5", configmap("5")))
    transport.script_watches(
        [
            event("MODIFIED", configmap("6")),  # kube-apiserver's re-sync: same content
            event("MODIFIED", rotated()),
            bookmark("9"),
        ],
    )
    w, seen = watcher(transport)
    await run(w)
    assert seen == [config_from_configmap(rotated())]
    assert w.current == seen[0]
    assert not w.polling
    # One list, then watches resuming from the list's version, then from the bookmark.
    assert transport.calls_to(CONFIGMAPS_PATH)[0].query == (
        ("fieldSelector", f"metadata.name={NAME}"),
    )
    assert [dict(query).get("resourceVersion") for _, query in transport.watch_calls] == ["5", "9"]
    first = dict(transport.watch_calls[0][1])
    assert first["fieldSelector"] == f"metadata.name={NAME}"
    assert first["allowWatchBookmarks"] == "true"
    assert int(first["timeoutSeconds"]) > 0


async def test_a_change_found_by_the_list_is_delivered() -> None:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAPS_PATH, listing("6", rotated()))
    w, seen = watcher(transport)
    await run(w)
    assert seen == [config_from_configmap(rotated())]


async def test_unusable_content_and_deletion_keep_the_current_configuration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAPS_PATH, listing("5", configmap("5")))
    transport.script_watches(
        [
            event("MODIFIED", configmap("6", client_ca_file="garbage")),
            event("DELETED", configmap("7")),
            event("ADDED", configmap("8")),
        ]
    )
    w, seen = watcher(transport)
    await run(w)
    assert seen == []
    assert w.current == DEFAULT
    assert "ignoring a change" in caplog.text
    assert "was deleted" in caplog.text


async def test_an_expired_version_relists_at_once() -> None:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAPS_PATH, listing("5", configmap("5")), listing("20", rotated()))
    transport.script_watches([gone()])
    w, seen = watcher(transport)
    await run(w)
    assert len(transport.calls_to(CONFIGMAPS_PATH)) == 2
    assert seen == [config_from_configmap(rotated())]
    assert transport.clock.sleeps == []
    assert [dict(q).get("resourceVersion") for _, q in transport.watch_calls] == ["5", "20"]


async def test_an_empty_watch_does_not_spin() -> None:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAPS_PATH, listing("5", configmap("5")))
    transport.script_watches([], [])
    w, _ = watcher(transport)
    await run(w)
    assert transport.clock.sleeps == [0.5, 0.5]


@pytest.mark.parametrize(
    "failure",
    [KubeError(0, "connection refused"), status_error(500, "x"), status_error(429, "slow")],
    ids=["connection", "500", "429"],
)
async def test_list_failures_back_off_and_relist(failure: Any) -> None:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAPS_PATH, failure, failure, failure, listing("5", rotated()))
    w, seen = watcher(transport)
    await run(w)
    assert transport.clock.sleeps == [0.5, 0.75, 1.125]
    assert seen == [config_from_configmap(rotated())]


async def test_a_broken_watch_relists_after_a_pause() -> None:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAPS_PATH, listing("5", configmap("5")))
    transport.script_watches([bookmark("7"), KubeError(0, "watch interrupted")])
    w, _ = watcher(transport)
    await run(w)
    assert len(transport.calls_to(CONFIGMAPS_PATH)) == 2
    assert transport.clock.sleeps == [0.5]


async def test_an_unexpected_failure_is_logged_and_the_watch_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAPS_PATH, listing("5", configmap("5")), listing("6", rotated()))
    transport.script_watches([RuntimeError("a bug")])
    w, seen = watcher(transport)
    await run(w)
    assert "failed unexpectedly" in caplog.text
    assert seen == [config_from_configmap(rotated())]


async def test_a_401_on_the_list_rereads_our_token() -> None:
    transport = FakeTransport()
    transport.script("GET", CONFIGMAPS_PATH, status_error(401, "Unauthorized"), listing("5"))
    refreshed: list[bool] = []

    async def refresh() -> None:
        refreshed.append(True)

    w, _ = watcher(transport, refresh_credentials=refresh)
    await run(w)
    assert refreshed == [True]


@pytest.mark.parametrize("where", ["list", "watch"])
async def test_forbidden_list_or_watch_falls_back_to_a_get_every_minute(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    transport = FakeTransport()
    transport.clock.stop_after = 3
    if where == "list":
        transport.script("GET", CONFIGMAPS_PATH, LIST_FORBIDDEN)
    else:
        transport.script("GET", CONFIGMAPS_PATH, listing("5", configmap("5")))
        transport.script_watches([LIST_FORBIDDEN])
    transport.script(
        "GET",
        CONFIGMAP_PATH,
        response(200, configmap("5")),
        status_error(503, "x"),
        response(200, rotated()),
    )
    w, seen = watcher(transport, who="the user of --authentication-kubeconfig /k")
    await run(w)
    assert w.polling
    assert (
        'bind the user of --authentication-kubeconfig /k to the Role "extension-apiserver-'
        'authentication-reader"' in caplog.text
    )
    # Polls 60 s apart: unchanged; then a 503, retried after 0.5 s, and the change.
    assert transport.clock.sleeps == [60.0, 60.0, 0.5]
    assert seen == [config_from_configmap(rotated())]

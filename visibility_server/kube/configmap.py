"""The `kube-system/extension-apiserver-authentication` ConfigMap
(docs/cluster.md#the-authentication-configmap).

`read_authentication_config` is the read the listener waits for: kube-apiserver presents
its front-proxy certificate on every probe and Python aborts handshakes from CAs it has not
loaded, so the CAs must be known before the socket binds. `AuthenticationConfigWatcher`
then follows the object: a list and a watch of that one name (`fieldSelector`), resumed
from the last resourceVersion, relisted when the watch expires or breaks; if list or watch
is forbidden (older releases granted `extension-apiserver-authentication-reader` only
`get`) it falls back to a GET every 60 s. The namespace and name are parameters only so
tests can point both at a copy. Each value that differs from the current one
goes to `on_change`; kube-apiserver's minutely re-sync of identical content does not.

A ConfigMap that cannot be used (a bad PEM bundle, a list key that is not a JSON string
array) or that disappears keeps the previous configuration: kube-apiserver rewrites it
within a minute, and dropping certificate authentication meanwhile would fail the
aggregator's probes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from scheduler.kubeapi.backoff import Backoff
from scheduler.kubeapi.client import Call, KubeRest
from scheduler.kubeapi.errors import KubeError
from scheduler.lang.readonly import ReadOnly
from visibility_server.authn.config import (
    CLIENT_CA_KEY,
    CONFIGMAP_NAME,
    CONFIGMAP_NAMESPACE,
    REQUESTHEADER_CA_KEY,
    AuthenticationConfig,
    AuthenticationConfigError,
)
from visibility_server.kube.calls import ApiCaller, Endpoint, as_caller, configmap_endpoint
from visibility_server.kube.errors import DelegationError, auth_reader_fix
from visibility_server.kube.transport import KubeTransport

logger = logging.getLogger(__name__)

DEFAULT_POLL_INTERVAL: Final = 60.0
# kube-apiserver ends a watch after `timeoutSeconds`; bookmarks arrive about every minute,
# so a read silent for longer than this means a dead connection.
WATCH_TIMEOUT_SECONDS: Final = 300
WATCH_READ_TIMEOUT: Final = 150.0
MAX_RELIST_BACKOFF: Final = 30.0
_EMPTY_VALUES: Final = frozenset({"", "null", "[]"})
_CA_KEYS: Final = (CLIENT_CA_KEY, REQUESTHEADER_CA_KEY)

ConfigListener = Callable[[AuthenticationConfig], None]


@dataclass(frozen=True, slots=True)
class ConfigMapRef:
    """Where the authentication ConfigMap is: kube-system's, or a copy in tests."""

    namespace: str = CONFIGMAP_NAMESPACE
    name: str = CONFIGMAP_NAME

    @property
    def endpoint(self) -> Endpoint:
        return configmap_endpoint(self.namespace, self.name)


AUTHENTICATION_CONFIGMAP: Final = ConfigMapRef()


class AuthenticationLookupError(Exception):
    """The ConfigMap could not be read at startup; the process should exit non-zero."""


class _GoneError(Exception):
    """The watch's resourceVersion is too old (410): list again."""


def config_from_configmap(
    configmap: Mapping[str, Any] | None, *, anonymous_auth: bool = True
) -> AuthenticationConfig:
    """The configuration a ConfigMap object says (None: it does not exist, so no CAs).

    On top of `AuthenticationConfig.from_configmap`'s rules (a missing key, "", `null`
    and `[]` are empty for list keys), a JSON null value, and "null" or "[]" for a CA
    key, are empty too. AuthenticationConfigError for anything unusable.
    """
    raw = configmap.get("data") if configmap is not None else None
    data: dict[str, str] = {}
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            if not isinstance(key, str) or value is None:
                continue
            if not isinstance(value, str):
                raise AuthenticationConfigError(f"{key}: not a string: {value!r}")
            if key in _CA_KEYS and value.strip() in _EMPTY_VALUES:
                continue
            data[key] = value
    return AuthenticationConfig.from_configmap(data, anonymous_auth=anonymous_auth)


async def read_authentication_config(
    api: KubeRest | KubeTransport | ApiCaller,
    *,
    anonymous_auth: bool = True,
    tolerate_lookup_failure: bool = False,
    where: ConfigMapRef = AUTHENTICATION_CONFIGMAP,
) -> AuthenticationConfig:
    """The startup read: await it before the listener binds.

    Transient failures are retried within the policy's budget (10 s). A ConfigMap that
    does not exist gives an empty configuration with a warning, as k8s.io/apiserver
    does. Any other failure raises AuthenticationLookupError naming the fix, unless
    `tolerate_lookup_failure` (`--authentication-tolerate-lookup-failure`): then
    certificate authentication is off and a loud warning says so. Pass an `ApiCaller` to
    choose the retry policy, the credential re-read and the identity a 403's fix names.
    """
    caller = as_caller(api)
    endpoint = where.endpoint
    try:
        configmap = await caller.get(endpoint)
        config = config_from_configmap(configmap, anonymous_auth=anonymous_auth)
    except (DelegationError, AuthenticationConfigError) as err:
        problem = f"cannot read {endpoint.what}: {err}"
        if not tolerate_lookup_failure:
            raise AuthenticationLookupError(
                f"{problem}; without it kube-apiserver's front-proxy certificate is refused "
                "(pass --authentication-tolerate-lookup-failure to start anyway)"
            ) from err
        logger.warning(
            "%s; --authentication-tolerate-lookup-failure is set, so client-certificate and "
            "front-proxy authentication are OFF: kube-apiserver's aggregated requests will "
            "fail until a restart reads the ConfigMap",
            problem,
        )
        return AuthenticationConfig(anonymous_auth=anonymous_auth)
    if configmap is None:
        logger.warning(
            "%s does not exist: no client CA and no front-proxy CA; kube-apiserver creates it "
            "when it runs with --client-ca-file or --requestheader-client-ca-file",
            endpoint.what,
        )
    return config


class AuthenticationConfigWatcher:
    """Follows the ConfigMap after the startup read; `run` until cancelled."""

    current = ReadOnly[AuthenticationConfig]()
    polling = ReadOnly[bool]()  # True once list/watch were forbidden and GETs replaced them

    def __init__(
        self,
        api: KubeRest | KubeTransport | ApiCaller,
        on_change: ConfigListener,
        *,
        current: AuthenticationConfig,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        where: ConfigMapRef = AUTHENTICATION_CONFIGMAP,
    ) -> None:
        self._endpoint = where.endpoint
        self._collection = f"/api/v1/namespaces/{where.namespace}/configmaps"
        self._selector = f"metadata.name={where.name}"
        self._name = where.name
        self._caller = as_caller(api)
        self._transport = self._caller.transport
        self._on_change = on_change
        self._current = current
        # Every later value is parsed as the first was (`--anonymous-auth`).
        self._anonymous_auth = current.anonymous_auth
        self._poll_interval = poll_interval
        self._policy = self._caller.policy
        self._refresh = self._caller.refresh_credentials
        self._polling = False

    async def run(self) -> None:
        p = self._policy
        relist = Backoff(p.initial_backoff, p.factor, cap=MAX_RELIST_BACKOFF)
        failures = 0
        while not self._polling:
            try:
                version = await self._list()
                failures = 0
                await self._watch(version)
            except _GoneError:
                continue
            except KubeError as err:
                if err.status == 403:
                    logger.warning(
                        "may not list/watch %s (%s); reading it with a GET every %gs instead. "
                        "To watch it, %s",
                        self._endpoint.what,
                        err.message or err.reason,
                        self._poll_interval,
                        auth_reader_fix(self._caller.who),
                    )
                    self._polling = True
                    break
                if err.status == 401 and self._refresh is not None:
                    await self._refresh()
                logger.warning("watching %s failed: %s", self._endpoint.what, err.detail)
            except DelegationError as err:
                logger.warning("watching %s failed: %s", self._endpoint.what, err)
            except Exception:
                # Whatever happens, keep following: this task lives as long as the server.
                logger.exception("watching %s failed unexpectedly", self._endpoint.what)
            await p.sleep(relist.delay(failures))
            failures += 1
        while True:
            await self._policy.sleep(self._poll_interval)
            await self.poll_once()

    async def poll_once(self) -> None:
        """One GET; failures are logged and the current configuration stays."""
        try:
            configmap = await self._caller.get(self._endpoint)
        except DelegationError as err:
            logger.warning("reading %s failed: %s", self._endpoint.what, err)
            return
        self._offer(configmap)

    async def _list(self) -> str:
        response = await self._transport.request(
            Call(
                "GET",
                self._collection,
                (("fieldSelector", self._selector),),
                timeout=self._policy.attempt_timeout,
            )
        )
        if not response.ok:
            raise response.error()
        doc = response.json()
        if not isinstance(doc, dict):
            raise KubeError(0, "the ConfigMap list is not a JSON object")
        items = doc.get("items") or []
        for item in items:
            if _name(item) == self._name:
                self._offer(item)
        metadata = doc.get("metadata") or {}
        return str(metadata.get("resourceVersion") or "")

    async def _watch(self, version: str) -> None:
        """Follow from `version` until something breaks; kube-apiserver's regular end of
        a watch (`timeoutSeconds`) resumes from the last version seen."""
        while True:
            query = [
                ("fieldSelector", self._selector),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", str(WATCH_TIMEOUT_SECONDS)),
            ]
            if version:
                query.append(("resourceVersion", version))
            events = 0
            async for event in self._transport.watch(
                self._collection, query=query, read_timeout=WATCH_READ_TIMEOUT
            ):
                events += 1
                version = self._event(event, version)
            if not events:
                # An empty watch (a proxy cutting it at once?) must not become a busy loop.
                await self._policy.sleep(self._policy.initial_backoff)

    def _event(self, event: Any, version: str) -> str:
        if not isinstance(event, dict):
            return version
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return version
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _GoneError
            raise KubeError(0, f"watch error: {obj.get('message', obj)}")
        metadata = obj.get("metadata") or {}
        new_version = str(metadata.get("resourceVersion") or version)
        if kind in ("ADDED", "MODIFIED") and _name(obj) == self._name:
            self._offer(obj)
        elif kind == "DELETED":
            logger.warning(
                "%s was deleted; keeping the current configuration until kube-apiserver "
                "recreates it",
                self._endpoint.what,
            )
        return new_version

    def _offer(self, configmap: Mapping[str, Any] | None) -> None:
        if configmap is None:
            logger.warning(
                "%s does not exist; keeping the current configuration",
                self._endpoint.what,
            )
            return
        try:
            config = config_from_configmap(configmap, anonymous_auth=self._anonymous_auth)
        except AuthenticationConfigError as err:
            logger.error(
                "ignoring a change of %s: %s; keeping the current configuration",
                self._endpoint.what,
                err,
            )
            return
        if config == self._current:
            return
        self._current = config
        logger.info(
            "%s changed: %d requestheader CA(s), %d client CA(s), allowed names %s",
            self._endpoint.what,
            len(config.requestheader_cas),
            len(config.client_cas),
            list(config.allowed_names) or "any",
        )
        self._on_change(config)


def _name(obj: Any) -> str:
    if not isinstance(obj, Mapping):
        return ""
    metadata = obj.get("metadata")
    return str(metadata.get("name", "")) if isinstance(metadata, Mapping) else ""


__all__ = [
    "DEFAULT_POLL_INTERVAL",
    "AuthenticationConfigWatcher",
    "AuthenticationLookupError",
    "ConfigListener",
    "config_from_configmap",
    "read_authentication_config",
]

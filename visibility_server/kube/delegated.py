"""Everything cluster mode needs for delegated authentication and authorization, in one
object (docs/cluster.md#authentication, #authorization).

Wiring (queuescope/serve_cluster.py), with `rest` the `KubeRest` of our ServiceAccount
(scheduler/kubeapi) and `reload_token` an `async () -> None` that makes it re-read its
token::

    delegated = DelegatedAuth(
        KubeIdentity(rest, reload_token),
        registry=registry,
        authentication=KubeIdentity(...),  # --authentication-kubeconfig, if given
        authorization=KubeIdentity(...),  # --authorization-kubeconfig, if given
        settings=DelegationSettings(
            anonymous_auth=args.anonymous_auth,
            tolerate_lookup_failure=args.authentication_tolerate_lookup_failure,
            token_cache_ttl=args.authentication_token_webhook_cache_ttl,
        ),
    )
    config = await delegated.load()  # before binding; AuthenticationLookupError: exit 1
    tls = ListenerTLS(pair, config.accepted_cas_pem)
    delegated.on_config_change(lambda new: tls.set_client_cas(new.accepted_cas_pem))
    authorizer = Authorizer(delegated.sar_backend, cache=CacheLimits(...))
    app = create_app(..., authenticator=delegated.authenticator, authorizer=authorizer)
    task_group.create_task(delegated.run())  # ConfigMap watch + self-check, until cancelled

As k8s.io/apiserver's delegating servers do, the authentication identity makes the
TokenReviews and reads the ConfigMap, the authorization identity makes the
SubjectAccessReviews, and either one left out is the main one. The self-check asks each
identity about its own permissions, and errors name the identity that lacks one.

With `--authentication-skip-lookup`, set `DelegationSettings.static_config` (the flags'
configuration):
`load` returns it without reading the ConfigMap and `run` only runs the self-check.
The authenticator chain follows ConfigMap changes by itself (`AuthenticatorChain.update`);
`on_config_change` callbacks run after it, in registration order.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from scheduler.kubeapi.client import KubeRest
from scheduler.lang.readonly import ReadOnly
from visibility_server.authn.chain import DEFAULT_TOKEN_CACHE_TTL, AuthenticatorChain
from visibility_server.authn.config import AuthenticationConfig
from visibility_server.kube.calls import ApiCaller
from visibility_server.kube.configmap import (
    DEFAULT_POLL_INTERVAL,
    AuthenticationConfigWatcher,
    ConfigListener,
    read_authentication_config,
)
from visibility_server.kube.errors import SERVICE_ACCOUNT
from visibility_server.kube.metrics import DelegatedAuthMetrics, delegated_auth_metrics
from visibility_server.kube.retry import RetryPolicy
from visibility_server.kube.sar import SubjectAccessReviewBackend
from visibility_server.kube.selfcheck import (
    CREATE_SUBJECT_ACCESS_REVIEWS,
    CREATE_TOKEN_REVIEWS,
    DEFAULT_INTERVAL,
    READ_AUTHENTICATION_CONFIGMAP,
    Checked,
    Permission,
    SelfCheck,
)
from visibility_server.kube.tokenreview import TokenReviewClient
from visibility_server.kube.transport import CredentialRefresher, KubeTransport, as_transport

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KubeIdentity:
    """A client of kube-apiserver as one identity: its API client, how it re-reads its
    credentials, and how messages name it (`KubeClient.identity`)."""

    api: KubeRest | KubeTransport
    refresh_credentials: CredentialRefresher | None = None
    who: str = SERVICE_ACCOUNT

    def caller(self, policy: RetryPolicy, metrics: DelegatedAuthMetrics | None = None) -> ApiCaller:
        return ApiCaller(
            as_transport(self.api),
            policy=policy,
            refresh_credentials=self.refresh_credentials,
            metrics=metrics,
            who=self.who,
        )


@dataclass(frozen=True, slots=True)
class DelegationSettings:
    """How delegated authentication behaves: the `--anonymous-auth`,
    `--authentication-tolerate-lookup-failure`, `--authentication-skip-lookup` (as the
    static configuration it stands for) and `--authentication-token-webhook-cache-ttl`
    flags, the polling and self-check intervals, and the one retry policy of every call."""

    anonymous_auth: bool = True
    tolerate_lookup_failure: bool = False
    static_config: AuthenticationConfig | None = None
    token_cache_ttl: float = DEFAULT_TOKEN_CACHE_TTL
    poll_interval: float = DEFAULT_POLL_INTERVAL
    self_check_interval: float = DEFAULT_INTERVAL
    retry: RetryPolicy | None = None


class DelegatedAuth:
    """The authenticator chain (with TokenReview), the SAR backend, the ConfigMap watcher
    and the self-check, sharing one retry policy and metric; the authentication and the
    authorization calls each go through their own identity's client."""

    # True once `load` returned: the `authentication-config` health check.
    config_loaded = ReadOnly[bool]()

    def __init__(
        self,
        main: KubeIdentity,
        *,
        registry: CollectorRegistry,
        authentication: KubeIdentity | None = None,
        authorization: KubeIdentity | None = None,
        settings: DelegationSettings | None = None,
    ) -> None:
        settings = settings or DelegationSettings()
        self.authentication_identity = authentication or main
        self.authorization_identity = authorization or main
        self._policy = settings.retry or RetryPolicy()
        self._anonymous_auth = settings.anonymous_auth
        self._tolerate = settings.tolerate_lookup_failure
        self._static = settings.static_config
        self._poll_interval = settings.poll_interval
        self._listeners: list[ConfigListener] = []
        self._watcher: AuthenticationConfigWatcher | None = None
        self._config_loaded = False
        self.metrics: DelegatedAuthMetrics = delegated_auth_metrics(registry)
        # Every call of one identity goes through its caller (its transport, its
        # credential re-read, its name in errors); both feed the one gauge.
        self._authn = self.authentication_identity.caller(self._policy, self.metrics)
        authz = self.authorization_identity.caller(self._policy, self.metrics)
        self.sar_backend = SubjectAccessReviewBackend(authz)
        self.token_reviewer = TokenReviewClient(self._authn)
        # Usable at once; `load` installs the real configuration before anything binds.
        self.authenticator = AuthenticatorChain(
            AuthenticationConfig(anonymous_auth=settings.anonymous_auth),
            self.token_reviewer,
            token_cache_ttl=settings.token_cache_ttl,
        )
        # The ConfigMap is read only when no static configuration replaces it.
        authn_needs: tuple[Permission, ...] = (CREATE_TOKEN_REVIEWS,)
        if settings.static_config is None:
            authn_needs += (READ_AUTHENTICATION_CONFIGMAP,)
        self.self_check = SelfCheck(
            [
                Checked(authz, (CREATE_SUBJECT_ACCESS_REVIEWS,)),
                Checked(self._authn, authn_needs),
            ],
            self.metrics,
            interval=settings.self_check_interval,
            policy=self._policy,
        )

    @property
    def config(self) -> AuthenticationConfig:
        return self.authenticator.config

    def on_config_change(self, listener: ConfigListener) -> None:
        """Call `listener(new_config)` on every later change (e.g. swap the listener's CAs)."""
        self._listeners.append(listener)

    async def load(self) -> AuthenticationConfig:
        """The startup read of the ConfigMap (or the static configuration); raises
        `configmap.AuthenticationLookupError` unless failures are tolerated."""
        if self._static is not None:
            config = self._static
        else:
            config = await read_authentication_config(
                self._authn,
                anonymous_auth=self._anonymous_auth,
                tolerate_lookup_failure=self._tolerate,
            )
            self._watcher = AuthenticationConfigWatcher(
                self._authn, self._changed, current=config, poll_interval=self._poll_interval
            )
        self.authenticator.update(config)
        self._config_loaded = True
        return config

    async def watch_config(self) -> None:
        """Follow the ConfigMap until cancelled (returns at once with a static config)."""
        if self._watcher is None:
            if self._static is None:
                raise RuntimeError("DelegatedAuth.load() must run before watch_config()")
            return
        await self._watcher.run()

    async def run(self) -> None:
        """`watch_config` and the self-check's loop, until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self.watch_config(), name="authentication-configmap-watch")
            group.create_task(self.self_check.run(), name="delegated-auth-self-check")

    def _changed(self, config: AuthenticationConfig) -> None:
        self.authenticator.update(config)
        for listener in self._listeners:
            try:
                listener(config)
            except Exception:
                logger.exception("a listener of authentication configuration changes failed")


__all__ = ["DelegatedAuth", "DelegationSettings", "KubeIdentity"]

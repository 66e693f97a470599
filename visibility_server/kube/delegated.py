"""Everything cluster mode needs for delegated authentication and authorization, in one
object (cluster.md §3, §4).

Wiring (queuescope/serve.py), with `api_client` a kubernetes_asyncio `ApiClient` for our
ServiceAccount and `reload_token` an `async () -> None` that makes it re-read its token::

    delegated = DelegatedAuth(
        api_client,
        registry=registry,
        refresh_credentials=reload_token,
        anonymous_auth=args.anonymous_auth,
        tolerate_lookup_failure=args.authentication_tolerate_lookup_failure,
        token_cache_ttl=args.authentication_token_webhook_cache_ttl,
    )
    config = await delegated.load()  # before binding; AuthenticationLookupError: exit 1
    tls = ListenerTLS(pair, config.accepted_cas_pem)
    delegated.on_config_change(lambda new: tls.set_client_cas(new.accepted_cas_pem))
    authorizer = Authorizer(delegated.sar_backend, allowed_ttl=..., denied_ttl=...)
    app = create_app(..., authenticator=delegated.authenticator, authorizer=authorizer)
    task_group.create_task(delegated.run())  # ConfigMap watch + self-check, until cancelled

With `--authentication-skip-lookup`, pass `static_config=` (the flags' configuration):
`load` returns it without reading the ConfigMap and `run` only runs the self-check.
The authenticator chain follows ConfigMap changes by itself (`AuthenticatorChain.update`);
`on_config_change` callbacks run after it, in registration order.
"""

from __future__ import annotations

import asyncio
import logging

from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from visibility_server.authn.chain import DEFAULT_TOKEN_CACHE_TTL, AuthenticatorChain
from visibility_server.authn.config import AuthenticationConfig
from visibility_server.kube.calls import ApiCaller
from visibility_server.kube.configmap import (
    DEFAULT_POLL_INTERVAL,
    AuthenticationConfigWatcher,
    ConfigListener,
    read_authentication_config,
)
from visibility_server.kube.metrics import DelegatedAuthMetrics, delegated_auth_metrics
from visibility_server.kube.retry import RetryPolicy
from visibility_server.kube.sar import SubjectAccessReviewBackend
from visibility_server.kube.selfcheck import DEFAULT_INTERVAL, SelfCheck
from visibility_server.kube.tokenreview import TokenReviewClient
from visibility_server.kube.transport import CredentialRefresher, KubeTransport, as_transport

logger = logging.getLogger(__name__)


class DelegatedAuth:
    """The authenticator chain (with TokenReview), the SAR backend, the ConfigMap watcher
    and the self-check, sharing one transport, retry policy, credential refresher and
    metric."""

    def __init__(
        self,
        api: ApiClient | KubeTransport,
        *,
        registry: CollectorRegistry,
        refresh_credentials: CredentialRefresher | None = None,
        anonymous_auth: bool = True,
        tolerate_lookup_failure: bool = False,
        static_config: AuthenticationConfig | None = None,
        token_cache_ttl: float = DEFAULT_TOKEN_CACHE_TTL,
        policy: RetryPolicy | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        self_check_interval: float = DEFAULT_INTERVAL,
    ) -> None:
        self._transport = as_transport(api)
        self._policy = policy or RetryPolicy()
        self._refresh = refresh_credentials
        self._anonymous_auth = anonymous_auth
        self._tolerate = tolerate_lookup_failure
        self._static = static_config
        self._poll_interval = poll_interval
        self._listeners: list[ConfigListener] = []
        self._watcher: AuthenticationConfigWatcher | None = None
        self._loaded = False
        self.metrics: DelegatedAuthMetrics = delegated_auth_metrics(registry)
        caller = ApiCaller(
            self._transport,
            policy=self._policy,
            refresh_credentials=refresh_credentials,
            metrics=self.metrics,
        )
        self.sar_backend = SubjectAccessReviewBackend(self._transport, caller=caller)
        self.token_reviewer = TokenReviewClient(self._transport, caller=caller)
        # Usable at once; `load` installs the real configuration before anything binds.
        self.authenticator = AuthenticatorChain(
            AuthenticationConfig(anonymous_auth=anonymous_auth),
            self.token_reviewer,
            token_cache_ttl=token_cache_ttl,
        )
        self.self_check = SelfCheck(
            self._transport,
            self.metrics,
            interval=self_check_interval,
            policy=self._policy,
            refresh_credentials=refresh_credentials,
        )

    @property
    def config(self) -> AuthenticationConfig:
        return self.authenticator.config

    @property
    def config_loaded(self) -> bool:
        """True once `load` returned: the `authentication-config` health check."""
        return self._loaded

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
                self._transport,
                anonymous_auth=self._anonymous_auth,
                tolerate_lookup_failure=self._tolerate,
                policy=self._policy,
                refresh_credentials=self._refresh,
            )
            self._watcher = AuthenticationConfigWatcher(
                self._transport,
                self._changed,
                current=config,
                anonymous_auth=self._anonymous_auth,
                poll_interval=self._poll_interval,
                policy=self._policy,
                refresh_credentials=self._refresh,
            )
        self.authenticator.update(config)
        self._loaded = True
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


__all__ = ["DelegatedAuth"]

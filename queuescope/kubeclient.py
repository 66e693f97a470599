"""The API client of cluster mode, and how it re-reads its token.

The common kubeconfigs and the in-cluster configuration are read without kubernetes-asyncio
(`scheduler/kubeapi/credentials.py`: importing it costs about 35 MiB); the others go
through its loaders, imported only then, as before.

Bound ServiceAccount tokens rotate (about hourly in a pod); a client that read its
token once fails with 401 after a while (docs/operations.md#troubleshooting). So the credentials are
loaded again every minute and at once after any 401 (`refresh`).

Cluster mode has up to three of them (docs/cluster.md#authentication-and-authorization-flags, as
k8s.io/apiserver's delegating servers): `--kubeconfig` (or the in-cluster configuration) for
everything, and `--authentication-kubeconfig` / `--authorization-kubeconfig` for the delegated
authentication and authorization calls when given (`ClusterClients`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from scheduler.kubeapi.client import ApiCredentials, KubeRest
from scheduler.kubeapi.credentials import Endpoint, PlainApi, from_kubeconfig, in_cluster
from visibility_server.kube.delegated import KubeIdentity
from visibility_server.kube.errors import SERVICE_ACCOUNT

log = logging.getLogger(__name__)

TOKEN_REREAD_SECONDS = 60.0


class KubeClient:
    """One set of credentials: `kubeconfig`, else the in-cluster configuration. `flag`
    is the command-line flag that named the file, for messages."""

    def __init__(self, kubeconfig: str | None, *, flag: str = "--kubeconfig") -> None:
        self.kubeconfig = kubeconfig
        self.flag = flag
        # kubernetes-asyncio's `Configuration`, or the `Endpoint` read without it.
        self.configuration: Any = None
        self.api: ApiCredentials | None = None
        # The one REST client over `api`, for cluster mode and the visibility server.
        self.rest: KubeRest | None = None
        self._lock = asyncio.Lock()

    @property
    def identity(self) -> str:
        """How messages name whoever these credentials belong to."""
        if self.kubeconfig:
            return f"the user of {self.flag} {self.kubeconfig}"
        return SERVICE_ACCOUNT

    async def _load(self) -> Any:
        """The configuration: an `Endpoint` when `credentials` reads it, else
        kubernetes-asyncio's `Configuration` filled by its loader."""
        if self.kubeconfig:
            if not os.path.isfile(self.kubeconfig):
                # kubernetes-asyncio would only say "Expected key current-context".
                raise FileNotFoundError(f"{self.flag} {self.kubeconfig}: no such file")
            plain = from_kubeconfig(self.kubeconfig)
            if plain is not None:
                return plain
            client, config = _kubernetes_asyncio()
            target = client.Configuration()
            await config.load_kube_config(config_file=self.kubeconfig, client_configuration=target)
            return target
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            plain = in_cluster(os.environ)
            if plain is not None:
                return plain
            client, config = _kubernetes_asyncio()
            target = client.Configuration()
            config.load_incluster_config(client_configuration=target)
            return target
        raise ValueError("cluster mode needs --kubeconfig, or to run in a pod (in-cluster config)")

    async def open(self) -> ApiCredentials:
        self.configuration = await self._load()
        if isinstance(self.configuration, Endpoint):
            self.api = PlainApi(self.configuration)
        else:
            client, _ = _kubernetes_asyncio()
            self.api = client.ApiClient(configuration=self.configuration)
        self.rest = KubeRest(self.api, refresh_credentials=self.refresh)
        return self.api

    async def refresh(self) -> None:
        """Re-read the credentials into the live configuration."""
        async with self._lock:
            try:
                fresh = await self._load()
            except Exception as err:  # a transient read error keeps the old token
                log.warning(
                    "event=credentials-reload-failed client=%s error=%s", self.identity, err
                )
                return
            self.configuration.api_key = dict(fresh.api_key)
            self.configuration.api_key_prefix = dict(fresh.api_key_prefix)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(TOKEN_REREAD_SECONDS)
            await self.refresh()

    async def close(self) -> None:
        if self.rest is not None:
            await self.rest.close()
            self.rest = None
        if self.api is not None:
            await self.api.close()
            self.api = None

    def as_identity(self) -> KubeIdentity:
        """This client for `DelegatedAuth`: its REST client, credential re-read and name."""
        if self.rest is None:
            raise RuntimeError("KubeClient.open() must run first")
        return KubeIdentity(self.rest, self.refresh, self.identity)


def _kubernetes_asyncio() -> tuple[Any, Any]:
    """kubernetes-asyncio's `client` and `config`, imported only for the kubeconfigs that
    need its loaders (exec plugins, auth providers...)."""
    from kubernetes_asyncio import client, config  # noqa: PLC0415 (35 MiB, seldom needed)

    return client, config


class ClusterClients:
    """The clients of cluster mode. `main` (`--kubeconfig`, else in-cluster) makes every
    call but the delegated ones: `authentication` makes the TokenReviews and reads the
    `extension-apiserver-authentication` ConfigMap, `authorization` makes the
    SubjectAccessReviews. Each of those two is a client of its own when its flag names a
    kubeconfig, else it is `main`. Every distinct client is opened, re-reads its
    credentials (`run`) and is closed once."""

    def __init__(
        self,
        kubeconfig: str | None,
        authentication_kubeconfig: str = "",
        authorization_kubeconfig: str = "",
    ) -> None:
        self.main = KubeClient(kubeconfig)
        self.authentication = self._delegated(
            authentication_kubeconfig, "--authentication-kubeconfig"
        )
        self.authorization = self._delegated(authorization_kubeconfig, "--authorization-kubeconfig")

    def _delegated(self, kubeconfig: str, flag: str) -> KubeClient:
        return KubeClient(kubeconfig, flag=flag) if kubeconfig else self.main

    @property
    def distinct(self) -> list[KubeClient]:
        clients: list[KubeClient] = []
        for kube in (self.main, self.authentication, self.authorization):
            if all(kube is not known for known in clients):
                clients.append(kube)
        return clients

    async def open(self) -> ApiCredentials:
        """Open every client (closing those already open if one fails); the main API."""
        try:
            for kube in self.distinct:
                await kube.open()
        except BaseException:
            await self.close()
            raise
        assert self.main.api is not None
        return self.main.api

    async def run(self) -> None:
        """Each client's credential re-read loop, until cancelled."""
        async with asyncio.TaskGroup() as group:
            for kube in self.distinct:
                group.create_task(kube.run(), name=f"credentials {kube.flag}")

    async def close(self) -> None:
        for kube in self.distinct:
            await kube.close()

"""The kubernetes-asyncio `ApiClient` of cluster mode, and how it re-reads its token.

Bound ServiceAccount tokens rotate (about hourly in a pod); a client that read its
token once fails with 401 after a while (cluster.md §9). So the credentials are
loaded again every minute and at once after any 401 (`refresh`).
"""

from __future__ import annotations

import asyncio
import logging
import os

from kubernetes_asyncio import client, config

log = logging.getLogger(__name__)

TOKEN_REREAD_SECONDS = 60.0


class KubeClient:
    def __init__(self, kubeconfig: str | None) -> None:
        self.kubeconfig = kubeconfig
        self.configuration = client.Configuration()
        self.api: client.ApiClient | None = None
        self._lock = asyncio.Lock()

    async def _load(self, target: client.Configuration) -> None:
        if self.kubeconfig:
            await config.load_kube_config(config_file=self.kubeconfig, client_configuration=target)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=target)  # type: ignore[no-untyped-call]
        else:
            raise ValueError(
                "cluster mode needs --kubeconfig, or to run in a pod (in-cluster config)"
            )

    async def open(self) -> client.ApiClient:
        await self._load(self.configuration)
        self.api = client.ApiClient(configuration=self.configuration)
        return self.api

    async def refresh(self) -> None:
        """Re-read the credentials into the live configuration."""
        async with self._lock:
            fresh = client.Configuration()
            try:
                await self._load(fresh)
            except Exception as err:  # a transient read error keeps the old token
                log.warning("event=credentials-reload-failed error=%s", err)
                return
            self.configuration.api_key = dict(fresh.api_key)
            self.configuration.api_key_prefix = dict(fresh.api_key_prefix)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(TOKEN_REREAD_SECONDS)
            await self.refresh()

    async def close(self) -> None:
        if self.api is not None:
            await self.api.close()

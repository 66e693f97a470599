"""`queuescope serve --kubeconfig ...` (or in a pod): cluster mode.

One asyncio loop runs the store and engine (every replica), the leader's controllers
and writers (the Lease holder), the delegated authentication and authorization
(docs/cluster.md#authentication, #authorization), certificate reloading, and the HTTPS listener.
Order matters at start: the front-proxy CA must be known before the listener binds
(docs/cluster.md#the-authentication-configmap), while the informers' first sync is awaited by
`/readyz`, never by discovery.

Shutdown (SIGTERM): `/readyz` fails at once, the leader stops writing and releases
its Lease, the server keeps answering reads for a short grace so endpoints drop the
pod, then uvicorn drains.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from queuescope import flag_values
from queuescope.configuration import load_configuration
from queuescope.engine_serving import Access, EngineServing
from queuescope.env_twins import add_switch, add_twin, env, flag_type
from queuescope.kubeclient import ClusterClients
from queuescope.lifecycle import drain, run_until_stopped
from scheduler.api import Configuration
from scheduler.api.integrations import enabled_integrations
from scheduler.core.ingest import scheduler_config
from scheduler.core.scheduler import Scheduler
from scheduler.kubeapi.client import KubeRest
from scheduler.runtime.clock import SystemClock
from scheduler.runtime.engine import Engine
from scheduler.runtime.heap_freezing import GcPacer
from scheduler.runtime.kube.cluster import ClusterRuntime, WriteSettings
from scheduler.runtime.kube.heap import release_free_heap
from scheduler.runtime.kube.leader import LeaderElector, LeaseRef, new_identity
from scheduler.runtime.kube.retention import RetentionPolicy
from scheduler.runtime.kube.status_writer import PENDING_WINDOW
from scheduler.runtime.what_if import WhatIfService
from visibility_server.authn.config import (
    DEFAULT_EXTRA_HEADERS_PREFIXES,
    DEFAULT_GROUP_HEADERS,
    DEFAULT_USERNAME_HEADERS,
    AuthenticationConfig,
)
from visibility_server.authz.cache import CacheLimits
from visibility_server.authz.pipeline import Authorizer
from visibility_server.certs import ServiceName
from visibility_server.http.health import READYZ_ONLY, HealthCheck
from visibility_server.kube.cabundle import CaBundleCheck
from visibility_server.kube.configmap import AuthenticationLookupError
from visibility_server.kube.delegated import DelegatedAuth, DelegationSettings
from visibility_server.kube.transport import as_transport
from visibility_server.serving import build_server
from visibility_server.tls.listener import ListenerTLS
from visibility_server.tls.metrics import register_serving_cert_metrics
from visibility_server.tls.reload import CertificateReloader
from visibility_server.tls.verify import load_pair, validate_serving_pair

log = logging.getLogger("queuescope.serve")

NAMESPACE = "queuescope-system"
SERVICE = "queuescope-visibility"
LEASE_NAME = "queuescope-controller-leader"
SHUTDOWN_GRACE = 5.0
DRAIN_SECONDS = 5.0  # uvicorn's wait for open requests at shutdown (docs/operations.md)


def add_cluster_flags(p: argparse.ArgumentParser) -> None:
    """The flags of cluster mode (docs/cluster.md#authentication-and-authorization-flags), each with
    a QUEUESCOPE_* twin."""
    g = p.add_argument_group("cluster mode")
    g.add_argument(
        "--authentication-kubeconfig",
        default=env("AUTHENTICATION_KUBECONFIG", ""),
        metavar="FILE",
        help="the client of TokenReviews and of the extension-apiserver-authentication "
        "ConfigMap (default: the --kubeconfig or in-cluster client)",
    )
    g.add_argument(
        "--authorization-kubeconfig",
        default=env("AUTHORIZATION_KUBECONFIG", ""),
        metavar="FILE",
        help="the client of SubjectAccessReviews (default: the --kubeconfig or in-cluster client)",
    )
    add_switch(g.add_argument, "--authentication-skip-lookup", "AUTHENTICATION_SKIP_LOOKUP")
    add_switch(
        g.add_argument,
        "--authentication-tolerate-lookup-failure",
        "AUTHENTICATION_TOLERATE_LOOKUP_FAILURE",
    )
    g.add_argument("--client-ca-file", default=env("CLIENT_CA_FILE", "") or None)
    g.add_argument("--requestheader-username-headers", default="")
    g.add_argument("--requestheader-group-headers", default="")
    g.add_argument("--requestheader-extra-headers-prefix", default="")
    g.add_argument("--requestheader-uid-headers", default="")
    add_twin(
        g.add_argument,
        "--authentication-token-webhook-cache-ttl",
        "AUTHENTICATION_TOKEN_WEBHOOK_CACHE_TTL",
        "10s",
        flag_values.seconds,
    )
    add_twin(g.add_argument, "--anonymous-auth", "ANONYMOUS_AUTH", "true", flag_values.boolean)
    g.add_argument(
        "--authorization-always-allow-paths",
        default=env("AUTHORIZATION_ALWAYS_ALLOW_PATHS", "/healthz,/readyz,/livez"),
    )
    add_twin(
        g.add_argument,
        "--authorization-webhook-cache-authorized-ttl",
        "AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL",
        "10s",
        flag_values.seconds,
    )
    add_twin(
        g.add_argument,
        "--authorization-webhook-cache-unauthorized-ttl",
        "AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL",
        "10s",
        flag_values.seconds,
    )
    add_twin(
        g.add_argument,
        "--cert-reload-interval",
        "CERT_RELOAD_INTERVAL",
        "10s",
        flag_values.positive_seconds,
    )
    add_switch(
        g.add_argument, "--allow-nonconforming-serving-cert", "ALLOW_NONCONFORMING_SERVING_CERT"
    )
    add_twin(g.add_argument, "--kube-api-qps", "KUBE_API_QPS", "50", flag_values.positive_number)
    add_twin(
        g.add_argument,
        "--kube-api-burst",
        "KUBE_API_BURST",
        "100",
        flag_values.positive_whole_number,
    )
    g.add_argument(
        "--leader-election-namespace",
        default=env("LEADER_ELECTION_NAMESPACE", "") or os.environ.get("POD_NAMESPACE", NAMESPACE),
    )
    g.add_argument(
        "--leader-election-id", default=env("LEADER_ELECTION_ID", LEASE_NAME), metavar="NAME"
    )
    g.add_argument(
        "--queue-status-interval",
        type=flag_type(flag_values.positive_seconds),
        default=None,
        help="how often queue status is written (default: the configuration's updateInterval)",
    )
    add_twin(
        g.add_argument,
        "--pending-condition-window",
        "PENDING_CONDITION_WINDOW",
        str(PENDING_WINDOW),
        flag_values.whole_number,
        metavar="N",
        help="a queued Workload's QuotaReserved=False condition is written only while it "
        "is among the first N of its ClusterQueue (docs/operations.md)",
    )
    add_twin(
        g.add_argument,
        "--status-sweep-interval",
        "STATUS_SWEEP_INTERVAL",
        "60s",
        flag_values.positive_seconds,
    )


class WriterCollector(Collector):
    """The Workload status writer's figures: what it wrote, skipped and deferred, and
    whether anything is left to do (the e2e suite and `cluster-sync` wait for quiet); the
    Events and the object retention's deletes."""

    def __init__(self, runtime: ClusterRuntime) -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[Metric]:
        writer = self.runtime.workload_writer
        stats = writer.stats
        yield _by_result(
            "queuescope_workload_status_writes",
            "Workload status differences by outcome: written, skipped (nothing a reader "
            "would notice), deferred (a pending condition beyond the head window), "
            "conflict, error",
            written=stats.writes,
            skipped=stats.skipped,
            deferred=stats.deferred,
            conflict=stats.conflicts,
            error=stats.errors,
        )
        yield GaugeMetricFamily(
            "queuescope_workload_status_backlog",
            "Workload status writes queued or in flight, and touched Workloads not yet judged",
            value=writer.backlog,
        )
        # Both stats records name their fields as the `result` labels.
        yield _by_result(
            "queuescope_events",
            "Events (events.k8s.io) by outcome: written, repeated (counted in the series of "
            "an earlier one), series_update (a series' count written), dropped (the queue "
            "was full), error",
            **asdict(self.runtime.events.stats),
        )
        retention = self.runtime.retention
        if retention is not None:
            yield _by_result(
                "queuescope_retention_deletes",
                "Deletes of objectRetentionPolicies by outcome: a finished Workload deleted, "
                "a Job or a plain Pod deactivated by Kueue deleted, conflict (changed since "
                "judged), error",
                **asdict(retention.stats),
            )
        integrations = CounterMetricFamily(
            "queuescope_integration_actions",
            "What each integration did, by action: workloads_created, started (a Job "
            "unsuspended, a Pod's gate lifted), stopped (a Job suspended, a running Pod "
            "deleted), released (a Pod's finalizer removed), errors",
            labels=["integration", "action"],
        )
        for name, controller in self.runtime.integrations().items():
            for action, value in asdict(controller.stats).items():
                integrations.add_metric([name, action], value)
        yield integrations
        yield GaugeMetricFamily(
            "queuescope_engine_idle",
            "1 while the engine has nothing to apply and no cycle to run",
            value=1.0 if self.runtime.engine.idle else 0.0,
        )


def _by_result(name: str, documentation: str, **counts: int) -> CounterMetricFamily:
    """A counter with one sample per outcome, labelled `result`."""
    counter = CounterMetricFamily(name, documentation, labels=["result"])
    for result, value in counts.items():
        counter.add_metric([result], value)
    return counter


def _names(value: str, default: tuple[str, ...]) -> tuple[str, ...]:
    found = tuple(v.strip() for v in value.split(",") if v.strip())
    return found or default


def _static_config(args: argparse.Namespace) -> AuthenticationConfig:
    """`--authentication-skip-lookup`: the flags replace the ConfigMap."""
    client_ca = Path(args.client_ca_file).read_bytes() if args.client_ca_file else b""
    requestheader = (
        Path(args.requestheader_client_ca_file).read_bytes()
        if args.requestheader_client_ca_file
        else b""
    )
    return AuthenticationConfig(
        client_ca_pem=client_ca,
        requestheader_ca_pem=requestheader,
        allowed_names=tuple(n for n in args.requestheader_allowed_names.split(",") if n),
        username_headers=_names(args.requestheader_username_headers, DEFAULT_USERNAME_HEADERS)
        if requestheader
        else (),
        group_headers=_names(args.requestheader_group_headers, DEFAULT_GROUP_HEADERS)
        if requestheader
        else (),
        extra_headers_prefixes=_names(
            args.requestheader_extra_headers_prefix, DEFAULT_EXTRA_HEADERS_PREFIXES
        )
        if requestheader
        else (),
        uid_headers=_names(args.requestheader_uid_headers, ()),
    )


def delegated_auth(
    args: argparse.Namespace, clients: ClusterClients, registry: CollectorRegistry
) -> DelegatedAuth:
    """Delegated authentication and authorization on opened `clients`: each call through
    the client its flag names (docs/cluster.md#authentication-and-authorization-flags)."""
    return DelegatedAuth(
        clients.main.as_identity(),
        registry=registry,
        authentication=clients.authentication.as_identity(),
        authorization=clients.authorization.as_identity(),
        settings=DelegationSettings(
            anonymous_auth=args.anonymous_auth,
            tolerate_lookup_failure=args.authentication_tolerate_lookup_failure,
            static_config=_static_config(args) if args.authentication_skip_lookup else None,
            token_cache_ttl=args.authentication_token_webhook_cache_ttl,
        ),
    )


def _check_serving_pair(cert_dir: Path, required: tuple[str, ...], allow: bool) -> None:
    pair = load_pair(cert_dir)
    problems = validate_serving_pair(
        pair.cert_pem, pair.key_pem, required_sans=required, now=datetime.now(UTC)
    )
    if problems and not allow:
        raise ValueError(f"serving certificate in {cert_dir} cannot be used: {'; '.join(problems)}")
    for problem in problems:
        log.warning("event=nonconforming-serving-cert problem=%s", problem)


async def run_cluster(
    args: argparse.Namespace, host: str, port: int, version: dict[str, str]
) -> int:
    if not args.cert_dir:
        raise ValueError("cluster mode needs --cert-dir (a folder with tls.crt and tls.key)")
    grace = endpoint_grace()
    cert_dir = Path(args.cert_dir)
    required_sans = (f"{SERVICE}.{NAMESPACE}.svc",)
    _check_serving_pair(cert_dir, required_sans, args.allow_nonconforming_serving_cert)

    config_obj = load_configuration(args.config, cluster_mode=True)
    scheduler, engine = _new_engine(args, config_obj)

    kube = ClusterClients(
        args.kubeconfig, args.authentication_kubeconfig, args.authorization_kubeconfig
    )
    await kube.open()
    registry = CollectorRegistry()
    delegated = delegated_auth(args, kube, registry)
    try:
        # before the listener binds (docs/cluster.md#the-authentication-configmap)
        auth_config = await delegated.load()
    except AuthenticationLookupError as err:
        await kube.close()
        log.error("event=authentication-lookup-failed error=%s", err)
        return 1
    listener = ListenerTLS(load_pair(cert_dir), auth_config.accepted_cas_pem)
    delegated.on_config_change(lambda new: listener.set_client_cas(new.accepted_cas_pem))
    authorizer = Authorizer(
        delegated.sar_backend,
        always_allow_paths=[p for p in args.authorization_always_allow_paths.split(",") if p],
        cache=CacheLimits(
            allowed_ttl=args.authorization_webhook_cache_authorized_ttl,
            denied_ttl=args.authorization_webhook_cache_unauthorized_ttl,
        ),
    )

    rest = kube.main.rest
    assert rest is not None  # opened above
    runtime = _cluster_runtime(args, rest, engine, registry, config_obj)

    stopping = asyncio.Event()
    serving = EngineServing.build(args, engine, registry)
    app = serving.app(
        args,
        Access(delegated.authenticator, authorizer),
        version_info=version,
        what_if=WhatIfService(
            scheduler,
            runtime.jobs.priority_classes,
            engine.snapshot,
            integrations=enabled_integrations(config_obj),
        ),
        health_checks=[
            HealthCheck("authentication-config", lambda: delegated.config_loaded, READYZ_ONLY),
            HealthCheck("shutdown", lambda: not stopping.is_set(), READYZ_ONLY),
        ],
        integrations=enabled_integrations(config_obj),
    )
    reloader = CertificateReloader(
        cert_dir, listener, required_sans, interval=args.cert_reload_interval
    )
    register_serving_cert_metrics(registry, reloader)
    cabundle = CaBundleCheck(
        as_transport(rest),
        lambda: listener.serving_pair.cert_pem,
        registry=registry,
        service=ServiceName(NAMESPACE, SERVICE),
    )
    server = build_server(app, listener, host, port)
    # By the drain the endpoints have dropped this pod (SHUTDOWN_GRACE): what is still
    # open is long-polls, which clients re-issue elsewhere, and a few slow requests.
    server.config.timeout_graceful_shutdown = int(DRAIN_SECONDS)

    tasks = serving.start(
        server,
        reloader,
        {
            "cluster-runtime": runtime.run(),
            "delegated-auth": delegated.run(),
            "credentials": kube.run(),
            "cabundle-check": cabundle.run(),
        },
    )

    async def freeze_after_sync() -> None:
        # The initial load lives as long as the process: keep it out of full GC passes.
        await runtime.store.synced.wait()
        await engine.flush()
        gc.freeze()
        # What the load freed, given back (docs/operations.md#memory-to-plan-for).
        await release_free_heap()

    freezer = asyncio.create_task(freeze_after_sync(), name="gc-freeze")
    log.info(
        "event=serving url=https://%s:%d mode=cluster leader_elect=%s",
        host,
        port,
        runtime.elector is not None,
    )
    failed = await run_until_stopped(tasks)
    freezer.cancel()
    return await _shut_down(
        Running(runtime, engine, server, kube, tuple(tasks), grace), stopping, failed=failed
    )


def _new_engine(
    args: argparse.Namespace, config_obj: Configuration | None
) -> tuple[Scheduler, Engine]:
    """The core (with --config's Configuration) and its engine, not scheduling until the
    Lease is ours."""
    scheduler = Scheduler(SystemClock(), scheduler_config(config_obj))
    engine = Engine(
        scheduler,
        publish_interval=args.publish_interval,
        scheduling=False,
        # The collector runs between the loop's steps, never inside one.
        gc_pacer=GcPacer(),
    )
    return scheduler, engine


def _cluster_runtime(
    args: argparse.Namespace,
    rest: KubeRest,
    engine: Engine,
    registry: CollectorRegistry,
    config: Configuration | None,
) -> ClusterRuntime:
    """The store, writers, integrations (Jobs; Pods if the Configuration turns them on)
    and object retention, with leader election if asked, and their metrics."""
    elector = None
    if args.leader_elect:
        pod = os.environ.get("POD_NAME") or socket.gethostname()
        elector = LeaderElector(
            rest,
            lease=LeaseRef(args.leader_election_namespace, args.leader_election_id),
            identity=new_identity(pod),
        )
    runtime = ClusterRuntime(
        rest,
        engine,
        elector=elector,
        writes=WriteSettings(
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
            queue_status_interval=args.queue_status_interval,
            sweep_interval=args.status_sweep_interval,
            pending_window=args.pending_condition_window,
            retention=RetentionPolicy.of(config.object_retention_policies if config else None),
            integrations=enabled_integrations(config),
        ),
    )
    registry.register(WriterCollector(runtime))
    leader_gauge = Gauge(
        "queuescope_leader", "1 on the replica that holds the Lease", registry=registry
    )
    leader_gauge.set_function(lambda: 1.0 if runtime.leading else 0.0)
    return runtime


@dataclass(frozen=True)
class Running:
    """What a cluster-mode server runs, for its shutdown."""

    runtime: ClusterRuntime
    engine: Engine
    server: uvicorn.Server
    kube: ClusterClients
    tasks: tuple[asyncio.Task[Any], ...]
    grace: float  # seconds of serving, not ready, before the drain


def endpoint_grace() -> float:
    """QUEUESCOPE_SHUTDOWN_GRACE, at most SHUTDOWN_GRACE; read at the start, so that a
    bad value stops the start rather than the shutdown."""
    try:
        return min(SHUTDOWN_GRACE, flag_values.seconds(env("SHUTDOWN_GRACE", str(SHUTDOWN_GRACE))))
    except ValueError as error:
        raise ValueError(f"QUEUESCOPE_SHUTDOWN_GRACE: {error}") from None


async def _shut_down(
    running: Running, stopping: asyncio.Event, *, failed: Sequence[asyncio.Task[Any]]
) -> int:
    """docs/operations.md, "Shutdown"; the exit code."""
    runtime, engine, server, kube, tasks = (
        running.runtime,
        running.engine,
        running.server,
        running.kube,
        list(running.tasks),
    )
    steps = ShutdownSteps()
    # Not ready at once; stop writing and hand the Lease over at once (the other
    # replica takes over while this one still answers reads), keep serving briefly so
    # endpoints drop this pod, then drain (docs/operations.md, "Shutdown").
    stopping.set()
    exit_code = 1 if failed else 0
    try:
        await runtime.shutdown()
    except Exception as err:
        log.error("event=shutdown-failed error=%r", err)
        exit_code = 1
    steps.done("lease-released")
    if not failed:
        await asyncio.sleep(running.grace)
        steps.done("endpoint-grace")
    await drain(tasks, server, engine, failed)
    steps.done("drained")
    await kube.close()
    steps.done("clients-closed")
    return exit_code


class ShutdownSteps:
    """Logs how long each shutdown step took since SIGTERM (`event=shutdown-step`)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        log.info("event=shutdown-start")

    def done(self, step: str) -> None:
        log.info("event=shutdown-step step=%s elapsed=%.3fs", step, time.monotonic() - self.started)


__all__ = ["add_cluster_flags", "delegated_auth", "run_cluster"]

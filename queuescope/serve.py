"""`queuescope serve --embedded`: the scheduler on the real clock, fed from manifest files,
with the visibility API over TLS on one asyncio loop."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import CollectorRegistry

from queuescope import eventloop, flag_values
from queuescope.configuration import load_configuration
from queuescope.engine_serving import Access, EngineServing
from queuescope.env_twins import add_switch, add_twin, env
from queuescope.lifecycle import drain, run_until_stopped
from queuescope.logformat import LOG_FORMATS, configure_logging
from queuescope.serve_cluster import add_cluster_flags, run_cluster
from queuescope.serve_forecasts import add_forecast_flags
from scheduler.api.decode import ApiError
from scheduler.api.integrations import enabled_integrations
from scheduler.core.ingest import scheduler_config
from scheduler.core.scheduler import Scheduler
from scheduler.runtime.clock import SystemClock
from scheduler.runtime.demo import DemoLoad, DemoPace
from scheduler.runtime.embedded import EmbeddedStore
from scheduler.runtime.engine import Engine
from scheduler.runtime.heap_freezing import GcPacer
from scheduler.runtime.what_if import WhatIfService
from visibility_server.authn.chain import AuthenticatorChain
from visibility_server.authn.config import (
    DEFAULT_EXTRA_HEADERS_PREFIXES,
    DEFAULT_GROUP_HEADERS,
    DEFAULT_USERNAME_HEADERS,
    AuthenticationConfig,
)
from visibility_server.authz.embedded import EmbeddedBackend
from visibility_server.authz.pipeline import Authorizer
from visibility_server.authz.rbac import RBACAuthorizer
from visibility_server.serving import build_server
from visibility_server.tls.listener import ListenerTLS
from visibility_server.tls.metrics import register_serving_cert_metrics
from visibility_server.tls.reload import CertificateReloader
from visibility_server.tls.state import embedded_serving_sans, ensure_state_dir
from visibility_server.tls.verify import load_pair

log = logging.getLogger("queuescope.serve")

EXIT_BAD_INPUT = 2
VERSION = {
    "major": "0",
    "minor": "1",
    "gitVersion": "v0.1.0",
    "platform": f"{sys.platform}/{os.uname().machine}",
    "compiler": "cpython",
    "goVersion": "",
}


def add_serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the scheduler and the visibility API")
    p.add_argument(
        "--embedded",
        nargs="+",
        metavar="PATH",
        default=[x for x in env("EMBEDDED", "").split(",") if x] or None,
        help="manifest files or folders (the simulator's kinds); no cluster needed",
    )
    add_switch(p.add_argument, "--demo", "DEMO")
    p.add_argument("--state-dir", default=env("STATE_DIR", ".queuescope"))
    p.add_argument(
        "--cert-dir",
        default=env("CERT_DIR", "") or None,
        metavar="DIR",
        help="folder with tls.crt and tls.key, watched for rotation (default: the state folder)",
    )
    add_switch(
        p.add_argument,
        "--leader-elect",
        "LEADER_ELECT",
        help="elect one scheduling replica through a coordination.k8s.io Lease (cluster mode)",
    )
    p.add_argument("--listen", default=env("LISTEN", "127.0.0.1:8443"), metavar="HOST:PORT")
    p.add_argument("--config", default=env("CONFIG", "") or None, metavar="FILE")
    p.add_argument("--kubeconfig", default=env("KUBECONFIG_FILE", "") or None)
    p.add_argument("--requestheader-client-ca-file", default=env("REQUESTHEADER_CA", "") or None)
    p.add_argument("--requestheader-allowed-names", default=env("REQUESTHEADER_NAMES", ""))
    add_twin(
        p.add_argument,
        "--publish-interval",
        "PUBLISH_INTERVAL",
        "0.2",
        flag_values.seconds,
        metavar="SECONDS",
        help="seconds between two snapshots the visibility API answers from",
    )
    add_twin(p.add_argument, "--log-level", "LOG_LEVEL", "INFO", flag_values.log_level)
    add_twin(
        p.add_argument,
        "--log-format",
        "LOG_FORMAT",
        "text",
        flag_values.one_of(LOG_FORMATS),
        metavar=flag_values.metavar(LOG_FORMATS),
    )
    add_switch(
        p.add_argument,
        "--no-access-log",
        "NO_ACCESS_LOG",
        help="no line per request at INFO (docs/operations.md#the-access-log)",
    )
    add_twin(
        p.add_argument,
        "--loop",
        "LOOP",
        "auto",
        flag_values.one_of(eventloop.LOOPS),
        metavar=flag_values.metavar(eventloop.LOOPS),
        help="event loop: uvloop where installed (auto, the default), or asyncio's own",
    )
    add_forecast_flags(p)
    # docs/visibility-api.md#what-if, "Rate limit": a token bucket per user.
    add_twin(
        p.add_argument,
        "--whatif-rate",
        "WHATIF_RATE",
        "1",
        flag_values.positive_number,
        help="what-if requests per second each user may make, on average",
    )
    add_twin(
        p.add_argument,
        "--whatif-burst",
        "WHATIF_BURST",
        "5",
        flag_values.positive_whole_number,
        help="what-if requests a user may make at once",
    )
    # docs/visibility-api.md#large-responses-and-backpressure: beyond either cap, a 429.
    add_twin(
        p.add_argument,
        "--visibility-max-inflight",
        "VISIBILITY_MAX_INFLIGHT",
        "64",
        flag_values.positive_whole_number,
        metavar="N",
        help="data requests of the visibility API answered at once",
    )
    add_twin(
        p.add_argument,
        "--visibility-max-waiters",
        "VISIBILITY_MAX_WAITERS",
        "1024",
        flag_values.positive_whole_number,
        metavar="N",
        help="long-poll requests of the visibility API waiting at once",
    )
    add_cluster_flags(p)


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--listen must be HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def _commands(state: Path, server: str) -> str:
    kubeconfig = state / "kubeconfig"
    group = "/apis/visibility.kueue.x-k8s.io/v1beta1"
    cq_path = f"{group}/clusterqueues/research-a/pendingworkloads"
    ca = state / "ca.crt"
    cert, key = state / "admin.crt", state / "admin.key"
    return "\n".join(
        [
            f"queuescope is serving the visibility API on {server}",
            "",
            "Try it:",
            f"  kubectl --kubeconfig {kubeconfig} get --raw {cq_path}",
            f"  kubectl --kubeconfig {kubeconfig} get --raw "
            f"{group}/namespaces/team-a/localqueues/main/pendingworkloads",
            f"  curl --cacert {ca} --cert {cert} --key {key} {server}{cq_path}",
            f"  curl --cacert {ca} {server}/healthz",
            "",
            "Dashboard, with a client certificate of the state folder's CA (docs/dashboard.md):",
            f"  {server}/dashboard",
            f"  queuescope certs browser --state-dir {state}   # admin.p12 to import, "
            "password queuescope",
            "",
            "A namespaced user (RBAC from the manifests decides what they see):",
            f"  queuescope certs client --state-dir {state} --user alice",
            f"  kubectl --kubeconfig {state}/users/alice.kubeconfig get --raw "
            f"{group}/namespaces/team-a/localqueues/main/pendingworkloads",
            "",
            "Stop with Ctrl-C.",
        ]
    )


async def _run_embedded(args: argparse.Namespace) -> int:
    host, port = _listen(args.listen)
    server_url = f"https://{host}:{port}"
    state = Path(args.state_dir)
    state_paths = ensure_state_dir(state, now=datetime.now(UTC), server=server_url)
    config_obj = load_configuration(args.config, list(args.embedded))
    scheduler = Scheduler(SystemClock(), scheduler_config(config_obj))
    engine = Engine(
        scheduler,
        publish_interval=args.publish_interval,
        # The collector runs between the loop's steps, never inside one.
        gc_pacer=GcPacer(),
    )
    backend = EmbeddedBackend(RBACAuthorizer())
    store = EmbeddedStore(
        args.embedded,
        engine,
        on_rbac_change=lambda objs: backend.replace(RBACAuthorizer.from_objects(objs)),
    )
    store.load()
    engine.apply_pending()
    # Everything loaded at start lives as long as the process: keep it out of the
    # collector's full passes, which would otherwise pause the shared loop.
    gc.freeze()

    requestheader = b""
    if args.requestheader_client_ca_file:
        requestheader = Path(args.requestheader_client_ca_file).read_bytes()
    allowed = tuple(n for n in args.requestheader_allowed_names.split(",") if n)
    auth_config = AuthenticationConfig(
        client_ca_pem=state_paths.ca_cert.read_bytes(),
        requestheader_ca_pem=requestheader,
        allowed_names=allowed,
        username_headers=DEFAULT_USERNAME_HEADERS if requestheader else (),
        group_headers=DEFAULT_GROUP_HEADERS if requestheader else (),
        extra_headers_prefixes=DEFAULT_EXTRA_HEADERS_PREFIXES if requestheader else (),
    )
    authenticator = AuthenticatorChain(auth_config, token_reviewer=None)
    registry = CollectorRegistry()
    serving = EngineServing.build(args, engine, registry)
    app = serving.app(
        args,
        Access(authenticator, Authorizer(backend)),
        version_info=VERSION,
        what_if=WhatIfService(
            scheduler,
            store.priority_class_objects,
            engine.snapshot,
            integrations=enabled_integrations(store.configuration()),
        ),
    )
    cert_dir = Path(args.cert_dir) if args.cert_dir else state
    if args.leader_elect:
        # One process owns the embedded store: there is no one to elect against.
        log.warning("event=leader-elect-ignored reason=embedded-mode")
    listener = ListenerTLS(load_pair(cert_dir), auth_config.accepted_cas_pem)
    reloader = CertificateReloader(cert_dir, listener, embedded_serving_sans(server_url))
    register_serving_cert_metrics(registry, reloader)
    server = build_server(app, listener, host, port)

    tasks = serving.start(server, reloader, {"manifests": store.run()})
    if args.demo:
        demo = DemoLoad(
            engine,
            store.local_queues(),
            priority_classes=store.priority_classes(),
            pace=DemoPace(seed=1),
        )
        tasks.append(asyncio.create_task(demo.run(), name="demo"))
    print(_commands(state, server_url), flush=True)
    failed = await run_until_stopped(tasks)
    await drain(tasks, server, engine, failed)
    return 1 if failed else 0


def run_serve(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_format, access_log=not args.no_access_log)
    try:
        host, port = _listen(args.listen)
        loop_name, factory = eventloop.loop_factory(args.loop)
        log.info("event=event-loop loop=%s", loop_name)
        if not args.embedded:
            return eventloop.run(run_cluster(args, host, port, VERSION), factory)
        return eventloop.run(_run_embedded(args), factory)
    except (ApiError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT

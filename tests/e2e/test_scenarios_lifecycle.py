"""Scenarios E7, E8 and E9 of docs/cluster.md#real-cluster-tests: our server dies and comes back,
and its certificates rotate, behind the real kube-apiserver.

Each test kills or rotates a server of its own (`own_server`, function-scoped) so no other
test sees it; the control plane is the session's. Waits poll with the spec's bounds as
timeouts and never sleep to assert; the rotation tests watch the APIServices' condition
with a real watch (`AvailabilityWatch`) while a `Poller` sends 4 requests per second
through kube-apiserver.
"""

from __future__ import annotations

import base64
import ssl
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from tests.e2e.aggregated import (
    CLUSTER_QUEUE_ORDER,
    VERSIONS,
    Aggregated,
    AvailabilityWatch,
    Poller,
    aggregated_server,
    cq_path,
    positions,
)
from tests.e2e.cluster import ClusterModeServer
from tests.e2e.harness import ControlPlane, wait_for
from visibility_server.certs import (
    APISERVICE_NAMES,
    begin_ca_rotation,
    finish_ca_rotation,
    issued_by,
    read_ca_bundle_patch,
    rotate_serving_cert,
)

# docs/cluster.md#real-cluster-tests E7: kube-apiserver's 30 s probe resync plus its discovery
# refresh.
E7_SECONDS = 90.0
# The poller of E8/E9: 4 requests per second for at least 30 s.
POLL_SECONDS = 30.0
# The server polls its certificate files every 10 s (--cert-reload-interval).
RELOAD_SECONDS = 60.0
# Answers that must arrive through kube-apiserver after each step of a rotation.
ANSWERS_PER_STEP = 8
STEP_SECONDS = 60.0
# The poller should manage at least half its nominal rate on a busy machine.
MIN_ANSWERS = int(POLL_SECONDS * 4 / 2)


@pytest.fixture
def own_server(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Aggregated]:
    with aggregated_server(control_plane, tmp_path, ClusterModeServer) as env:
        yield env


def _conditions(env: Aggregated) -> dict[str, tuple[str, str, str]]:
    found = {}
    for version in VERSIONS:
        condition = env.apiservice_condition(version) or {}
        found[version] = (
            str(condition.get("status")),
            str(condition.get("reason")),
            str(condition.get("message", "")),
        )
    return found


def _within(
    deadline: float,
    probe: Callable[[], Any],
    what: str,
    alive: Callable[[], None] | None = None,
) -> Any:
    """Poll `probe` until the absolute monotonic `deadline` (a bound measured from the
    event the spec counts from, not from the start of this wait)."""
    timeout = max(deadline - time.monotonic(), 1.0)
    return wait_for(probe, timeout=timeout, what=what, interval=1, alive=alive)


# -- E7 ----------------------------------------------------------------------------------


def test_e7_killed_server_goes_unavailable_and_stale_then_recovers(
    own_server: Aggregated,
) -> None:
    env = own_server
    with AvailabilityWatch(env.plane) as watch:
        assert env.discovery_freshness() == dict.fromkeys(VERSIONS, "Current")

        env.server.kill()
        killed = time.monotonic()
        # The APIService is still Available: kube-apiserver proxies, the dial or the reused
        # connection fails, and it answers 503 with the Go error.
        response = env.get(cq_path("v1beta2"))
        assert response.status == 503, response.body[:300]
        assert response.body.startswith((b"error trying to reach service", b"service unavailable"))

        def unavailable() -> dict[str, tuple[str, str, str]] | None:
            found = _conditions(env)
            down = all(status == "False" for status, _, _ in found.values())
            return found if down else None

        conditions = _within(killed + E7_SECONDS, unavailable, "Available=False after the kill")
        for status, reason, message in conditions.values():
            assert (status, reason) == ("False", "FailedDiscoveryCheck"), conditions
            assert f"localhost:{env.server.port}" in message, message

        def stale() -> dict[str, str] | None:
            found = env.discovery_freshness()
            return found if found == dict.fromkeys(VERSIONS, "Stale") else None

        _within(killed + E7_SECONDS, stale, "both group-versions Stale in /apis")
        # Not Available any more: kube-apiserver's own 503, without dialling us.
        response = env.get(cq_path("v1beta2"))
        assert (response.status, response.body) == (503, b"service unavailable\n")

        env.server.start()
        restarted = time.monotonic()

        def recovered() -> bool | None:
            found = _conditions(env)
            if any((status, reason) != ("True", "Passed") for status, reason, _ in found.values()):
                return None
            if env.discovery_freshness() != dict.fromkeys(VERSIONS, "Current"):
                return None
            answer = env.get(cq_path("v1beta2"))
            return True if answer.status == 200 else None

        _within(
            restarted + E7_SECONDS,
            recovered,
            "Available=True, Current and 200 after restart",
            alive=env.server.check_alive,
        )
        assert positions(env.get(cq_path("v1beta1")).json()) == CLUSTER_QUEUE_ORDER

    # The watch saw each APIService go down and come back, and nothing else: the same
    # watch finds no transition in E8 and E9.
    for name in APISERVICE_NAMES:
        seen = [(status, reason) for who, status, reason, _ in watch.observed if who == name]
        changes = [pair for i, pair in enumerate(seen) if i == 0 or pair != seen[i - 1]]
        assert changes == [
            ("True", "Passed"),
            ("False", "FailedDiscoveryCheck"),
            ("True", "Passed"),
        ], seen
    assert watch.error is None, watch.error


# -- E8 and E9 -------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


def _serial(env: Aggregated, trusted: bytes) -> int:
    return env.server.served_certificate(trusted).serial_number


def _wait_served(env: Aggregated, cert_pem: bytes, trusted: bytes) -> None:
    """Until a handshake with kube-apiserver's server name, trusting only `trusted`,
    presents `cert_pem` (the server reloads its files every 10 s)."""
    wanted = x509.load_pem_x509_certificate(cert_pem).serial_number
    wait_for(
        lambda: True if _serial(env, trusted) == wanted else None,
        timeout=RELOAD_SECONDS,
        what=f"the server to present serial {wanted:x}",
        interval=0.5,
        alive=env.server.check_alive,
    )


def _wait_answers(poller: Poller, since: float, what: str) -> None:
    """Until the poller has had ANSWERS_PER_STEP answers after `since`."""
    wait_for(
        lambda: True if poller.answered_since(since) >= ANSWERS_PER_STEP else None,
        timeout=STEP_SECONDS,
        what=f"{ANSWERS_PER_STEP} answers through kube-apiserver after {what}",
    )


def _finish_polling(poller: Poller) -> None:
    wait_for(
        lambda: True if time.monotonic() - poller.started >= POLL_SECONDS else None,
        timeout=POLL_SECONDS + STEP_SECONDS,
        what=f"{POLL_SECONDS:.0f} s of polling",
    )


def _check_undisturbed(env: Aggregated, watch: AvailabilityWatch, poller: Poller) -> None:
    """No APIService left Available=True, every polled answer was 200, discovery is
    Current. kube-apiserver's availability probe skips TLS verification (kube-aggregator
    v0.35 `remote_available_controller.go`: `Insecure: true`), so a `caBundle` that does
    not trust the served certificate shows in the proxied requests and in discovery
    (fetched through the proxy), not in the condition."""
    assert watch.error is None, watch.error
    assert watch.not_available() == []
    assert {name for name, *_ in watch.observed} == set(APISERVICE_NAMES)
    answers = poller.snapshot()
    assert len(answers) >= MIN_ANSWERS, f"only {len(answers)} answers in {POLL_SECONDS} s"
    assert poller.failures() == [], poller.failures()[:5]
    assert env.discovery_freshness() == dict.fromkeys(VERSIONS, "Current")


def _check_rotated(env: Aggregated, before: x509.Certificate, ca: bytes) -> x509.Certificate:
    """The server presents a new certificate from `ca` and still answers in full."""
    after = env.server.served_certificate(ca)
    assert after.serial_number != before.serial_number
    assert issued_by(after, x509.load_pem_x509_certificate(ca))
    assert positions(env.get(cq_path("v1beta2")).json()) == CLUSTER_QUEUE_ORDER
    return after


def _live_bundle(env: Aggregated) -> list[x509.Certificate]:
    bundles = []
    for name in APISERVICE_NAMES:
        obj = env.plane.get_json("apiservice", name)
        bundles.append(x509.load_pem_x509_certificates(base64.b64decode(obj["spec"]["caBundle"])))
    assert all(bundle == bundles[0] for bundle in bundles), "the APIServices disagree"
    return bundles[0]


def test_e8_serving_certificate_rotation_same_ca(own_server: Aggregated) -> None:
    env = own_server
    certs = env.server.certs
    ca = certs.ca_cert.read_bytes()
    before = env.server.served_certificate(ca)
    with AvailabilityWatch(env.plane) as watch, Poller(env, cq_path("v1beta2")) as poller:
        rotated = rotate_serving_cert(certs.root, now=_now())
        assert certs.ca_cert.read_bytes() == ca, "same CA: the caBundle stays as it is"
        _wait_served(env, rotated.cert_pem, ca)
        _wait_answers(poller, time.monotonic(), "the new certificate was served")
        _finish_polling(poller)
    _check_undisturbed(env, watch, poller)
    after = _check_rotated(env, before, ca)
    assert after.serial_number == rotated.cert.serial_number


def test_e9_ca_rotation(own_server: Aggregated) -> None:
    env = own_server
    certs = env.server.certs
    old_ca = certs.ca_cert.read_bytes()
    before = env.server.served_certificate(old_ca)
    with AvailabilityWatch(env.plane) as watch, Poller(env, cq_path("v1beta2")) as poller:
        # (1) caBundle = old + new CA; the serving certificate is unchanged.
        begin_ca_rotation(certs.root, now=_now())
        new_ca = certs.ca_cert.read_bytes()
        both = read_ca_bundle_patch(certs.ca_bundle_patch)
        assert all(len(bundle) == 2 for bundle in both.values())
        env.set_ca_bundle(old_ca + new_ca)
        _wait_answers(poller, time.monotonic(), "the old+new caBundle")
        # (2) a serving certificate from the new CA; the server reloads it.
        assert finish_ca_rotation(certs.root, now=_now())
        served = certs.tls_cert.read_bytes()
        _wait_served(env, served, new_ca)
        _wait_answers(poller, time.monotonic(), "the new-CA certificate was served")
        # (3) caBundle = the new CA only: kube-apiserver dials with new trust.
        env.set_ca_bundle(new_ca)
        _wait_answers(poller, time.monotonic(), "the new-only caBundle")
        _finish_polling(poller)
    _check_undisturbed(env, watch, poller)
    assert _live_bundle(env) == [x509.load_pem_x509_certificate(new_ca)]
    _check_rotated(env, before, new_ca)
    with pytest.raises(ssl.SSLCertVerificationError):
        env.server.served_certificate(old_ca)

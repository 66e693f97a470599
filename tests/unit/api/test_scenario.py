"""The simulator's Scenario document (docs/simulate.md)."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime

import pytest

from scheduler.api import Namespace, Scenario, Workload
from tests.unit.api.support import decode, errors, has_error, rejection


def scenario(spec: str) -> str:
    return (
        "apiVersion: simulation.queuescope.io/v1alpha1\nkind: Scenario\n"
        "metadata: {name: demo}\nspec:\n" + textwrap.indent(textwrap.dedent(spec), "  ")
    )


def load(spec: str) -> Scenario:
    obj = decode(scenario(spec))
    assert isinstance(obj, Scenario)
    return obj


def test_documented_example() -> None:
    s = load(
        """
        startTime: "2026-01-01T00:00:00Z"
        cycles: 1
        events:
        - at: 30s
          podsReady: team-a/job-1
        - at: 10m
          finish: team-a/job-1
        - at: 1m
          apply:
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: Workload
            metadata: {name: job-4, namespace: team-a}
            spec:
              podSets: [{template: {spec: {containers: [{name: c}]}}}]
        - at: 2m
          delete: {kind: Workload, namespace: team-a, name: job-2}
        - at: 3m
          deactivate: team-a/job-3
        """
    )
    spec = s.spec
    assert spec.start_time == datetime(2026, 1, 1, tzinfo=UTC)
    assert (spec.cycles, spec.until_idle) == (1, None)
    assert [e.at for e in spec.events] == [
        30_000_000,
        600_000_000,
        60_000_000,
        120_000_000,
        180_000_000,
    ]
    assert [e.action for e in spec.events] == [
        "podsReady",
        "finish",
        "apply",
        "delete",
        "deactivate",
    ]
    assert spec.events[0].target == ("team-a", "job-1")
    assert isinstance(spec.events[2].apply, Workload)
    assert spec.events[2].apply.metadata.namespace == "team-a"
    delete = spec.events[3].delete
    assert delete is not None
    assert (delete.kind, delete.namespace, delete.name) == ("Workload", "team-a", "job-2")
    assert spec.events[1].failed is False


def test_additions_activate_and_failed_finish() -> None:
    s = load(
        """
        untilIdle: true
        events:
        - {at: 0, finish: team-a/job-1, failed: true}
        - {at: 1s, activate: job-2}
        """
    )
    assert s.spec.events[0].failed is True
    assert s.spec.events[1].action == "activate"
    assert s.spec.events[1].target == ("default", "job-2")


def test_defaults() -> None:
    s = load("{}")
    assert (s.spec.start_time, s.spec.cycles, s.spec.until_idle, s.spec.events) == (
        None,
        None,
        None,
        [],
    )


def test_cycles_and_until_idle_are_exclusive() -> None:
    has_error(
        scenario("cycles: 2\nuntilIdle: true"),
        "spec",
        "cycles and untilIdle are mutually exclusive",
    )


def test_exactly_one_action() -> None:
    has_error(
        scenario("events: [{at: 1s, podsReady: a/b, finish: a/b}]"),
        "spec.events[0]",
        "exactly one of podsReady, finish, apply, delete, deactivate, activate, setCheckState "
        "must be set (got podsReady, finish)",
    )
    has_error(scenario("events: [{at: 1s}]"), "spec.events[0]", "(got none)")


def test_failed_only_with_finish() -> None:
    has_error(
        scenario("events: [{at: 1s, podsReady: a/b, failed: true}]"),
        "spec.events[0].failed",
        "only allowed with finish",
    )


@pytest.mark.parametrize(
    ("at", "message"),
    [
        ("-1s", "must be greater than or equal to 0"),
        ("5", "a unit is required"),
        ("1d", "unknown unit"),
    ],
)
def test_at_is_a_non_negative_go_duration(at: str, message: str) -> None:
    has_error(
        scenario(
            f"events: [{{at: '{at}', podsReady: a/b}}]"
            if at != "5"
            else "events: [{at: 5, podsReady: a/b}]"
        ),
        "spec.events[0].at",
        message,
    )


def test_references_are_validated() -> None:
    has_error(
        scenario("events: [{at: 1s, finish: Team/b}]"), "spec.events[0].finish", "RFC 1123 label"
    )
    has_error(
        scenario("events: [{at: 1s, finish: 'a/'}]"), "spec.events[0].finish", "namespace/name"
    )


def test_delete_kind_must_be_known() -> None:
    has_error(
        scenario("events: [{at: 1s, delete: {kind: Deployment, name: d}}]"),
        "spec.events[0].delete.kind",
        "Unsupported value",
    )


def test_applied_documents_are_decoded_and_validated() -> None:
    s = load("events: [{at: 1s, apply: {apiVersion: v1, kind: Namespace, metadata: {name: x}}}]")
    assert isinstance(s.spec.events[0].apply, Namespace)
    found = errors(
        scenario(
            "events: [{at: 1s, apply: {apiVersion: v1, kind: Namespace, metadata: {name: X}}}]"
        )
    )
    assert found[0].path == "spec.events[0].apply.metadata.name"
    found = errors(
        scenario(
            """
            events:
            - at: 1s
              apply:
                apiVersion: kueue.x-k8s.io/v1beta1
                kind: LocalQueue
                metadata: {name: q}
                spec: {clusterQeue: x}
            """
        )
    )
    assert found[0].path == "spec.events[0].apply.spec.clusterQeue"
    assert 'unknown field "clusterQeue"' in found[0].detail


def test_a_scenario_cannot_apply_a_scenario() -> None:
    has_error(
        scenario(
            "events: [{at: 1s, apply: {apiVersion: "
            "simulation.queuescope.io/v1alpha1, kind: Scenario, metadata: {name: "
            "y}}}]"
        ),
        "spec.events[0].apply",
        "cannot be applied",
    )


def test_rejection_names_the_scenario() -> None:
    err = rejection(
        scenario(
            "events: [{at: 1s, apply: {apiVersion: apps/v1, kind: Deployment, "
            "metadata: {name: d}}}]"
        )
    )
    assert str(err).startswith(
        'test.yaml: document 0 (Scenario "demo"): spec.events[0].apply.kind: unknown kind'
    )

"""ClusterQueue, Cohort and LocalQueue rules (docs/scheduling.md#api-objects)."""

from __future__ import annotations

import textwrap

import pytest

from scheduler.api import ClusterQueue, Cohort, LocalQueue, Quantity
from tests.unit.api.support import decode, errors, has_error

RQ = "spec.resourceGroups[0].flavors[0].resources[0]"


def cluster_queue(spec: str) -> str:
    return (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"
        + textwrap.indent(textwrap.dedent(spec), "  ")
    )


def cohort(spec: str, version: str = "v1beta1") -> str:
    return (
        f"apiVersion: kueue.x-k8s.io/{version}\nkind: Cohort\nmetadata: {{name: c}}\nspec:\n"
        + textwrap.indent(textwrap.dedent(spec), "  ")
    )


def one_quota(quota: str, cohort_name: str = "org") -> str:
    return cluster_queue(
        f"""
        cohort: "{cohort_name}"
        resourceGroups:
        - coveredResources: [cpu]
          flavors: [{{name: f, resources: [{{name: cpu, {quota}}}]}}]
        """
    )


def test_cluster_queue_defaults() -> None:
    cq = decode(cluster_queue("{}"))
    assert isinstance(cq, ClusterQueue)
    spec = cq.spec
    assert spec.cohort == ""
    assert spec.queueing_strategy == "BestEffortFIFO"
    assert spec.namespace_selector is None
    assert spec.flavor_fungibility.when_can_borrow == "Borrow"
    assert spec.flavor_fungibility.when_can_preempt == "TryNextFlavor"
    assert spec.preemption.within_cluster_queue == "Never"
    assert spec.preemption.reclaim_within_cohort == "Never"
    assert spec.preemption.borrow_within_cohort.policy == "Never"
    assert spec.preemption.borrow_within_cohort.max_priority_threshold is None
    assert spec.stop_policy == "None"
    assert spec.fair_sharing.weight == Quantity(1)
    assert spec.admission_checks == []
    assert cq.admission_check_names == []


def test_cluster_queue_without_spec() -> None:
    cq = decode("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\n")
    assert isinstance(cq, ClusterQueue)
    assert cq.spec.resource_groups == []


def test_admission_check_names_cover_both_forms() -> None:
    cq = decode(cluster_queue("admissionChecks: [a, b]"))
    assert isinstance(cq, ClusterQueue)
    assert cq.admission_check_names == ["a", "b"]
    cq = decode(
        cluster_queue("admissionChecksStrategy: {admissionChecks: [{name: x, onFlavors: [f]}]}")
    )
    assert isinstance(cq, ClusterQueue)
    assert cq.admission_check_names == ["x"]


def test_admission_checks_and_strategy_are_exclusive() -> None:
    has_error(
        cluster_queue(
            "admissionChecks: [a]\nadmissionChecksStrategy: {admissionChecks: [{name: b}]}"
        ),
        "spec",
        "Either AdmissionChecks or AdmissionCheckStrategy can be set, but not both",
    )


def test_admission_scope_is_accepted_with_a_valid_mode() -> None:
    decode(cluster_queue("admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}"))
    has_error(
        cluster_queue("admissionScope: {admissionMode: Sometimes}"),
        "spec.admissionScope.admissionMode",
        "Unsupported value",
    )


class TestQuotas:
    def test_valid_limits_with_cohort(self) -> None:
        cq = decode(one_quota("nominalQuota: 10, borrowingLimit: 0, lendingLimit: 10"))
        assert isinstance(cq, ClusterQueue)
        quota = cq.spec.resource_groups[0].flavors[0].resources[0]
        assert quota.borrowing_limit == Quantity(0)
        assert quota.lending_limit == Quantity(10)

    def test_negative_nominal_quota(self) -> None:
        has_error(
            one_quota("nominalQuota: -1"),
            f"{RQ}.nominalQuota",
            "must be greater than or equal to 0",
        )

    def test_negative_limits(self) -> None:
        found = errors(one_quota("nominalQuota: 1, borrowingLimit: -1, lendingLimit: -1m"))
        assert {e.path for e in found} == {f"{RQ}.borrowingLimit", f"{RQ}.lendingLimit"}
        assert all("must be greater than or equal to 0" in e.detail for e in found)

    @pytest.mark.parametrize("limit", ["borrowingLimit", "lendingLimit"])
    def test_limits_need_a_cohort(self, limit: str) -> None:
        has_error(
            one_quota(f"nominalQuota: 1, {limit}: 1", cohort_name=""),
            f"{RQ}.{limit}",
            "must be nil when cohort is empty",
        )

    def test_lending_limit_within_nominal(self) -> None:
        has_error(
            one_quota("nominalQuota: 1, lendingLimit: 1001m"),
            f"{RQ}.lendingLimit",
            "must be less than or equal to the nominalQuota",
        )

    def test_quota_outside_int64(self) -> None:
        has_error(
            one_quota("nominalQuota: 9223372036854775807"),  # fine as memory, not as cpu milli
            f"{RQ}.nominalQuota",
            "does not fit in a signed 64-bit integer",
        )


class TestResourceGroups:
    def test_too_many_groups(self) -> None:
        groups = "\n".join(
            f"- coveredResources: [r{i}]\n  flavors: [{{name: f{i}, resources: "
            f"[{{name: r{i}, nominalQuota: 1}}]}}]"
            for i in range(17)
        )
        has_error(
            cluster_queue("resourceGroups:\n" + textwrap.indent(groups, "  ")),
            "spec.resourceGroups",
            "Too many: 17: must have at most 16 items",
        )

    def test_covered_resources_required(self) -> None:
        has_error(
            cluster_queue("resourceGroups: [{coveredResources: [], flavors: []}]"),
            "spec.resourceGroups[0].coveredResources",
            "must have at least 1 item",
        )

    def test_flavors_required(self) -> None:
        has_error(
            cluster_queue("resourceGroups: [{coveredResources: [cpu], flavors: []}]"),
            "spec.resourceGroups[0].flavors",
            "must have at least 1 item",
        )

    def test_resource_names_are_qualified_names(self) -> None:
        has_error(
            cluster_queue(
                """
                resourceGroups:
                - coveredResources: [-gpu]
                  flavors: [{name: f, resources: [{name: -gpu, nominalQuota: 1}]}]
                """
            ),
            "spec.resourceGroups[0].coveredResources[0]",
            "must consist of alphanumeric characters",
        )

    def test_resource_in_two_groups(self) -> None:
        has_error(
            cluster_queue(
                """
                resourceGroups:
                - coveredResources: [cpu]
                  flavors: [{name: a, resources: [{name: cpu, nominalQuota: 1}]}]
                - coveredResources: [cpu]
                  flavors: [{name: b, resources: [{name: cpu, nominalQuota: 1}]}]
                """
            ),
            "spec.resourceGroups[1].coveredResources[0]",
            'Duplicate value: "cpu"',
        )

    def test_flavor_once_per_cluster_queue(self) -> None:
        has_error(
            cluster_queue(
                """
                resourceGroups:
                - coveredResources: [cpu]
                  flavors: [{name: a, resources: [{name: cpu, nominalQuota: 1}]}]
                - coveredResources: [memory]
                  flavors: [{name: a, resources: [{name: memory, nominalQuota: 1}]}]
                """
            ),
            "spec.resourceGroups[1].flavors[0].name",
            'Duplicate value: "a"',
        )

    def test_flavor_names_are_subdomains(self) -> None:
        has_error(
            cluster_queue(
                """
                resourceGroups:
                - coveredResources: [cpu]
                  flavors: [{name: Spot_A, resources: [{name: cpu, nominalQuota: 1}]}]
                """
            ),
            "spec.resourceGroups[0].flavors[0].name",
            "RFC 1123 subdomain",
        )

    def test_each_flavor_lists_all_covered_resources(self) -> None:
        has_error(
            cluster_queue(
                """
                resourceGroups:
                - coveredResources: [cpu, memory]
                  flavors: [{name: a, resources: [{name: cpu, nominalQuota: 1}]}]
                """
            ),
            "spec.resourceGroups[0].flavors[0].resources",
            "must have the same number of resources as the coveredResources",
        )

    def test_resources_in_covered_order(self) -> None:
        found = errors(
            cluster_queue(
                """
                resourceGroups:
                - coveredResources: [cpu, memory]
                  flavors:
                  - name: a
                    resources: [{name: memory, nominalQuota: 1}, {name: cpu, nominalQuota: 1}]
                """
            )
        )
        assert [e.path for e in found] == [
            "spec.resourceGroups[0].flavors[0].resources[0].name",
            "spec.resourceGroups[0].flavors[0].resources[1].name",
        ]
        assert 'must match the name in coveredResources ("cpu")' in found[0].detail


class TestPolicies:
    def test_borrow_within_cohort_needs_reclaim(self) -> None:
        has_error(
            cluster_queue("preemption: {borrowWithinCohort: {policy: LowerPriority}}"),
            "spec.preemption",
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        )
        decode(
            cluster_queue(
                "preemption: {reclaimWithinCohort: LowerPriority, "
                "borrowWithinCohort: {policy: LowerPriority}}"
            )
        )

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("queueingStrategy", "FIFO"),
            ("stopPolicy", "Stop"),
            ("flavorFungibility: {whenCanBorrow", "Preempt}"),
            ("flavorFungibility: {whenCanPreempt", "Borrow}"),
            ("preemption: {withinClusterQueue", "Any}"),
            ("preemption: {reclaimWithinCohort", "LowerOrNewerEqualPriority}"),
        ],
    )
    def test_enums(self, field: str, value: str) -> None:
        found = errors(cluster_queue(f"{field}: {value}"))
        assert "Unsupported value" in found[0].detail

    def test_max_priority_threshold_is_int32(self) -> None:
        has_error(
            cluster_queue(
                "preemption: {reclaimWithinCohort: Any, borrowWithinCohort: "
                "{policy: LowerPriority, maxPriorityThreshold: 2147483648}}"
            ),
            "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
            "32-bit",
        )

    @pytest.mark.parametrize("weight", ["0", "2n", "0.5", "3"])
    def test_valid_weights(self, weight: str) -> None:
        decode(cluster_queue(f"fairSharing: {{weight: {weight}}}"))

    @pytest.mark.parametrize(
        ("weight", "message"),
        [("-1", "must be greater than or equal to 0"), ("1n", "must be 0 or greater than 1n")],
    )
    def test_invalid_weights(self, weight: str, message: str) -> None:
        has_error(
            cluster_queue(f"fairSharing: {{weight: {weight}}}"), "spec.fairSharing.weight", message
        )

    def test_cohort_reference_is_a_subdomain(self) -> None:
        has_error(cluster_queue("cohort: Org"), "spec.cohort", "RFC 1123 subdomain")


class TestNamespaceSelector:
    def test_valid_selector_is_kept_raw(self) -> None:
        cq = decode(
            cluster_queue(
                """
                namespaceSelector:
                  matchLabels: {team: a}
                  matchExpressions: [{key: env, operator: In, values: [prod, dev]}]
                """
            )
        )
        assert isinstance(cq, ClusterQueue)
        assert cq.spec.namespace_selector == {
            "matchLabels": {"team": "a"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}],
        }

    @pytest.mark.parametrize(
        ("selector", "path", "message"),
        [
            (
                "{matchExpressions: [{key: a, operator: In}]}",
                ".matchExpressions[0].values",
                "must be specified",
            ),
            (
                "{matchExpressions: [{key: a, operator: Exists, values: [x]}]}",
                ".matchExpressions[0].values",
                "may not be specified",
            ),
            (
                "{matchExpressions: [{key: a, operator: Gt, values: ['1']}]}",
                ".matchExpressions[0].operator",
                "not a valid selector operator",
            ),
            (
                "{matchExpressions: [{key: '-a', operator: Exists}]}",
                ".matchExpressions[0].key",
                "must consist of alphanumeric",
            ),
            ("{matchLabels: {a: 'b c'}}", ".matchLabels[a]", "a valid label must be"),
            ("{matchLabel: {a: b}}", ".matchLabel", "unknown field"),
            (
                "{matchExpressions: [{operator: Exists}]}",
                ".matchExpressions[0].key",
                "Required value",
            ),
        ],
    )
    def test_invalid_selectors(self, selector: str, path: str, message: str) -> None:
        has_error(
            cluster_queue(f"namespaceSelector: {selector}"),
            "spec.namespaceSelector" + path,
            message,
        )


class TestCohort:
    def test_defaults(self) -> None:
        c = decode(cohort("{}"))
        assert isinstance(c, Cohort)
        assert c.spec.parent == ""
        assert c.spec.resource_groups == []
        assert c.spec.fair_sharing.weight == Quantity(1)

    def test_lending_above_nominal_is_allowed(self) -> None:
        decode(
            cohort(
                """
                parentName: org
                resourceGroups:
                - coveredResources: [cpu]
                  flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1, lendingLimit: 5}]}]
                """
            )
        )

    @pytest.mark.parametrize("limit", ["borrowingLimit", "lendingLimit"])
    def test_limits_need_a_parent(self, limit: str) -> None:
        has_error(
            cohort(
                f"""
                resourceGroups:
                - coveredResources: [cpu]
                  flavors: [{{name: f, resources: [{{name: cpu, nominalQuota: 1, {limit}: 1}}]}}]
                """
            ),
            f"{RQ}.{limit}",
            "must be nil when parent is empty",
        )

    def test_group_rules_apply(self) -> None:
        has_error(
            cohort(
                """
                parentName: org
                resourceGroups:
                - coveredResources: [cpu]
                  flavors: [{name: f, resources: [{name: memory, nominalQuota: 1}]}]
                """
            ),
            f"{RQ}.name",
            "must match the name in coveredResources",
        )

    def test_parent_name_format_uses_the_version_field_name(self) -> None:
        has_error(cohort("parentName: Org"), "spec.parentName", "RFC 1123 subdomain")
        has_error(cohort("parent: Org", "v1alpha1"), "spec.parent", "RFC 1123 subdomain")

    def test_weight(self) -> None:
        has_error(
            cohort("fairSharing: {weight: -2}"),
            "spec.fairSharing.weight",
            "greater than or equal to 0",
        )


class TestLocalQueue:
    def test_defaults(self) -> None:
        lq = decode(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: LocalQueue
            metadata: {name: lq, namespace: team-a}
            spec: {clusterQueue: cq, fairSharing: {weight: 2}}
            """
        )
        assert isinstance(lq, LocalQueue)
        assert lq.spec.cluster_queue == "cq"
        assert lq.spec.stop_policy == "None"

    def test_cluster_queue_reference_format(self) -> None:
        has_error(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: LocalQueue
            metadata: {name: lq}
            spec: {clusterQueue: CQ}
            """,
            "spec.clusterQueue",
            "RFC 1123 subdomain",
        )

    def test_namespace_must_be_a_label(self) -> None:
        has_error(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: LocalQueue
            metadata: {name: lq, namespace: team.a}
            spec: {clusterQueue: cq}
            """,
            "metadata.namespace",
            "RFC 1123 label",
        )

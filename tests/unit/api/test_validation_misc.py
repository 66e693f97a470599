"""Metadata, priority classes, Namespaces, Jobs and RBAC objects."""

from __future__ import annotations

import pytest

from scheduler.api import ClusterRole, Namespace, PriorityClass, RoleBinding, WorkloadPriorityClass
from tests.unit.api.support import decode, has_error


class TestMetadata:
    def test_name_is_required(self) -> None:
        has_error(
            "apiVersion: v1\nkind: Namespace\nmetadata: {labels: {a: b}}\n",
            "metadata.name",
            "Required value",
        )
        has_error("apiVersion: v1\nkind: Namespace\n", "metadata", "Required value")

    @pytest.mark.parametrize(
        ("kind", "name", "fragment"),
        [
            ("ResourceFlavor", "Spot", "RFC 1123 subdomain"),
            ("ClusterQueue", "a_b", "RFC 1123 subdomain"),
            ("Cohort", "x" * 254, "must be no more than 253 characters"),
            ("WorkloadPriorityClass", "High", "RFC 1123 subdomain"),
        ],
    )
    def test_kueue_names_are_subdomains(self, kind: str, name: str, fragment: str) -> None:
        extra = "value: 1\n" if kind == "WorkloadPriorityClass" else ""
        has_error(
            f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: {kind}\nmetadata: {{name: "
            f"'{name}'}}\n{extra}",
            "metadata.name",
            fragment,
        )

    def test_namespace_names_are_labels(self) -> None:
        has_error(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n",
            "metadata.name",
            "RFC 1123 label",
        )

    def test_labels_and_annotations(self) -> None:
        has_error(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, labels: {'-x': y}}\n",
            "metadata.labels[-x]",
            "name part must consist",
        )
        has_error(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, labels: {x: 'y y'}}\n",
            "metadata.labels[x]",
            "a valid label must be",
        )
        has_error(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, annotations: {'a/b/c': y}}\n",
            "metadata.annotations[a/b/c]",
            "qualified name",
        )
        ns = decode(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, annotations: "
            "{note: 'any text at all!'}}\n"
        )
        assert isinstance(ns, Namespace)


class TestPriorityClasses:
    def test_workload_priority_class(self) -> None:
        wpc = decode(
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\n"
            "metadata: {name: p}\nvalue: -5\n"
        )
        assert isinstance(wpc, WorkloadPriorityClass)
        assert (wpc.value, wpc.description) == (-5, "")

    def test_value_is_required_and_int32(self) -> None:
        has_error(
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\n"
            "metadata: {name: p}\n",
            "value",
            "Required value",
        )
        has_error(
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\n"
            "metadata: {name: p}\nvalue: 3000000000\n",
            "value",
            "32-bit",
        )

    def test_no_spec(self) -> None:
        has_error(
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\n"
            "metadata: {name: p}\nspec: {value: 1}\nvalue: 1\n",
            "spec",
            "unknown field",
        )

    def test_priority_class(self) -> None:
        pc = decode(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: "
            "{name: p}\nvalue: 10\n"
        )
        assert isinstance(pc, PriorityClass)
        assert (pc.global_default, pc.description, pc.preemption_policy) == (False, "", None)

    def test_priority_class_rules(self) -> None:
        has_error(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: "
            "{name: p}\nvalue: 1000000001\n",
            "value",
            "maximum allowed value of a user defined priority is 1000000000",
        )
        has_error(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: "
            "{name: system-x}\nvalue: 1\n",
            "metadata.name",
            "'system-' prefix are reserved",
        )
        has_error(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: "
            "{name: p}\nvalue: 1\npreemptionPolicy: Sometimes\n",
            "preemptionPolicy",
            "Unsupported value",
        )


class TestJob:
    JOB = (
        "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec: "
        "{{{spec}template: {{spec: {{containers: [{{name: c}}]}}}}}}\n"
    )

    def test_name_fits_a_label(self) -> None:
        has_error(
            self.JOB.format(name="j" * 64, spec=""),
            "metadata.name",
            "must be no more than 63 characters",
        )

    def test_counts_not_negative(self) -> None:
        has_error(
            self.JOB.format(name="j", spec="parallelism: -1, "),
            "spec.parallelism",
            "greater than or equal to 0",
        )
        has_error(
            self.JOB.format(name="j", spec="completions: -1, "),
            "spec.completions",
            "greater than or equal to 0",
        )

    def test_other_job_fields_are_accepted(self) -> None:
        decode(
            self.JOB.format(
                name="j",
                spec="backoffLimit: 6, activeDeadlineSeconds: 600, completionMode: Indexed, "
                "ttlSecondsAfterFinished: 60, podFailurePolicy: {rules: []}, ",
            )
        )

    def test_typo_in_job_spec_is_rejected(self) -> None:
        has_error(
            self.JOB.format(name="j", spec="paralelism: 2, "), "spec.paralelism", "unknown field"
        )

    def test_queue_name_label_format(self) -> None:
        has_error(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, labels: "
            "{kueue.x-k8s.io/queue-name: Q}}\n"
            "spec: {template: {spec: {containers: [{name: c}]}}}\n",
            "metadata.labels[kueue.x-k8s.io/queue-name]",
            "RFC 1123 subdomain",
        )


class TestRbac:
    def test_cluster_role_with_aggregation(self) -> None:
        role = decode(
            """
            apiVersion: rbac.authorization.k8s.io/v1
            kind: ClusterRole
            metadata:
              name: viewer
              labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
            rules:
            - apiGroups: [visibility.kueue.x-k8s.io]
              resources: [clusterqueues/pendingworkloads]
              resourceNames: [cq]
              verbs: [get]
            - nonResourceURLs: [/healthz]
              verbs: [get]
            aggregationRule:
              clusterRoleSelectors: [{matchLabels: {rbac.queuescope.io/batch-admin: "true"}}]
            """
        )
        assert isinstance(role, ClusterRole)
        assert role.rules[1].non_resource_urls == ["/healthz"]
        assert role.aggregation_rule is not None

    def test_verbs_required(self) -> None:
        has_error(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: "
            "{name: r}\nrules: [{verbs: [], resources: [x]}]\n",
            "rules[0].verbs",
            "verbs must contain at least one value",
        )

    def test_bad_aggregation_selector(self) -> None:
        has_error(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\n"
            "aggregationRule: {clusterRoleSelectors: [{matchExpressions: [{key: a, "
            "operator: In}]}]}\n",
            "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values",
            "must be specified",
        )

    def test_role_binding(self) -> None:
        binding = decode(
            """
            apiVersion: rbac.authorization.k8s.io/v1
            kind: RoleBinding
            metadata: {name: b, namespace: kube-system}
            subjects: [{kind: ServiceAccount, name: sa, namespace: queuescope-system}]
            roleRef:
              apiGroup: rbac.authorization.k8s.io
              kind: Role
              name: extension-apiserver-authentication-reader
            """
        )
        assert isinstance(binding, RoleBinding)
        assert binding.metadata.namespace == "kube-system"

    def test_binding_rules(self) -> None:
        has_error(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
            "metadata: {name: b}\n"
            "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}\n",
            "roleRef.kind",
            'supported values: "ClusterRole"',
        )
        has_error(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
            "metadata: {name: b}\n"
            "subjects: [{kind: ServiceAccount, name: sa}]\n"
            "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: r}\n",
            "subjects[0].namespace",
            "Required value",
        )
        has_error(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\n"
            "subjects: [{kind: Robot, name: r2}]\nroleRef: {apiGroup: "
            "rbac.authorization.k8s.io, kind: Role, name: r}\n",
            "subjects[0].kind",
            "Unsupported value",
        )
        has_error(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\n"
            "roleRef: {apiGroup: example.com, kind: Role, name: r}\n",
            "roleRef.apiGroup",
            "Unsupported value",
        )

    def test_rbac_names_are_path_segments(self) -> None:
        decode(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
            "metadata: {name: 'system:auth-delegator'}\n"
        )
        has_error(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
            "metadata: {name: 'a/b'}\n",
            "metadata.name",
            "may not contain '/'",
        )

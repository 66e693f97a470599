"""Decoding: every kind from realistic YAML, strictness, error paths and sources."""

from __future__ import annotations

import io
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scheduler.api import (
    ApiError,
    ClusterQueue,
    ClusterRole,
    ClusterRoleBinding,
    Cohort,
    CohortV1Alpha1,
    Configuration,
    Job,
    LocalQueue,
    Namespace,
    PriorityClass,
    Quantity,
    ResourceFlavor,
    Role,
    RoleBinding,
    Scenario,
    SourceRef,
    Workload,
    WorkloadPriorityClass,
    decode_object,
    load_documents,
    load_yaml,
    source_of,
)
from tests.unit.api.support import decode, decode_kube, errors, has_error, rejection

MANIFESTS = """\
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {team: a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: on-demand}
spec:
  nodeLabels: {instance-type: on-demand}
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
  tolerations: [{key: spot, operator: Exists, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Cohort
metadata: {name: org}
spec:
  parentName: root
  fairSharing: {weight: "2"}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  cohort: org
  namespaceSelector: {}
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: on-demand
      resources:
      - {name: cpu, nominalQuota: 9, borrowingLimit: "2", lendingLimit: 1500m}
      - {name: memory, nominalQuota: 36Gi}
  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
    withinClusterQueue: LowerPriority
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: team-a, name: user-queue}
spec: {clusterQueue: cluster-queue}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 10000
description: "high priority"
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
globalDefault: false
preemptionPolicy: Never
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: wl, namespace: team-a, creationTimestamp: 2026-01-01T00:00:05Z}
spec:
  queueName: user-queue
  podSets:
  - name: main
    count: 2
    template:
      spec:
        containers:
        - name: c
          image: busybox
          command: ["sleep", "60"]
          resources: {requests: {cpu: 500m}}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: sample-job
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: user-queue}
spec:
  parallelism: 3
  completions: 3
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: dummy
        image: busybox
        resources: {requests: {cpu: 1, memory: 200Mi}}
---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady: {enable: true}
---
apiVersion: simulation.queuescope.io/v1alpha1
kind: Scenario
metadata: {name: demo}
spec:
  startTime: "2026-01-01T00:00:00Z"
  events:
  - {at: 30s, podsReady: team-a/wl}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: team-a}
rules:
- apiGroups: [visibility.kueue.x-k8s.io]
  resources: [localqueues/pendingworkloads]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: batch-admin}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {rbac.queuescope.io/batch-admin: "true"}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice, namespace: team-a}
subjects: [{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: sa}
subjects: [{kind: ServiceAccount, name: queuescope, namespace: queuescope-system}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-admin}
"""


def test_every_kind_decodes_from_realistic_yaml() -> None:
    decoded = load_yaml(MANIFESTS, "manifests.yaml")
    kinds = [type(d.obj) for d in decoded]
    assert kinds == [
        Namespace,
        ResourceFlavor,
        Cohort,
        ClusterQueue,
        LocalQueue,
        WorkloadPriorityClass,
        PriorityClass,
        Workload,
        Job,
        Configuration,
        Scenario,
        Role,
        ClusterRole,
        RoleBinding,
        ClusterRoleBinding,
    ]
    assert [d.index for d in decoded] == list(range(15))
    cq = decoded[3].obj
    assert isinstance(cq, ClusterQueue)
    quota = cq.spec.resource_groups[0].flavors[0].resources[0]
    assert quota.nominal_quota == Quantity.parse("9")
    assert quota.lending_limit == Quantity.parse("1500m")
    assert cq.spec.preemption.borrow_within_cohort.max_priority_threshold == 100
    assert cq.spec.namespace_selector == {}
    wl = decoded[7].obj
    assert isinstance(wl, Workload)
    assert wl.metadata.creation_timestamp == datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC)
    container = wl.spec.pod_sets[0].template.spec.containers[0]
    assert container.resources.requests["cpu"] == Quantity.parse("0.5")
    # Unmodelled core/v1 fields are kept verbatim.
    assert container.to_dict()["command"] == ["sleep", "60"]
    cohort = decoded[2].obj
    assert isinstance(cohort, Cohort)
    assert cohort.spec.parent == "root"


def test_decoded_objects_remember_their_source() -> None:
    decoded = load_yaml(MANIFESTS, "manifests.yaml")
    assert decoded[4].ref == SourceRef("manifests.yaml", 4)
    assert source_of(decoded[4].obj) == SourceRef("manifests.yaml", 4)
    # The source is not part of an object's value.
    again = load_yaml(MANIFESTS.split("---\n", 4)[4], "other.yaml")[0].obj
    assert again == decoded[4].obj


def test_objects_round_trip_through_their_json_form() -> None:
    for d in load_yaml(MANIFESTS, "manifests.yaml"):
        data = d.obj.to_dict()
        assert decode_object(data, source="again.yaml", index=0) == d.obj


def test_output_omits_empty_metadata_and_pod_fields() -> None:
    wl = decode(
        """
        apiVersion: kueue.x-k8s.io/v1beta1
        kind: Workload
        metadata: {name: wl}
        spec:
          podSets:
          - template: {spec: {containers: [{name: c}]}}
        """
    )
    data = wl.to_dict()
    assert data["metadata"] == {"name": "wl", "namespace": "default"}
    assert data["spec"]["podSets"][0]["template"] == {"spec": {"containers": [{"name": "c"}]}}
    assert data["status"] == {}


class TestCohortVersions:
    def test_v1beta1_uses_parent_name(self) -> None:
        cohort = decode(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: Cohort
            metadata: {name: child}
            spec: {parentName: org}
            """
        )
        assert isinstance(cohort, Cohort)
        assert not isinstance(cohort, CohortV1Alpha1)
        assert cohort.spec.parent == "org"
        assert cohort.to_dict()["spec"]["parentName"] == "org"

    def test_v1alpha1_uses_parent(self) -> None:
        cohort = decode(
            """
            apiVersion: kueue.x-k8s.io/v1alpha1
            kind: Cohort
            metadata: {name: child}
            spec: {parent: org}
            """
        )
        assert isinstance(cohort, Cohort)
        assert cohort.spec.parent == "org"
        assert cohort.api_version == "kueue.x-k8s.io/v1alpha1"
        assert cohort.to_dict()["spec"]["parent"] == "org"

    def test_v1beta1_rejects_parent(self) -> None:
        has_error(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: Cohort
            metadata: {name: child}
            spec: {parent: org}
            """,
            "spec.parent",
            'unknown field "parent"',
        )

    def test_v1alpha1_rejects_parent_name(self) -> None:
        has_error(
            """
            apiVersion: kueue.x-k8s.io/v1alpha1
            kind: Cohort
            metadata: {name: child}
            spec: {parentName: org}
            """,
            "spec.parentName",
            'unknown field "parentName"',
        )


class TestStrictness:
    def test_unknown_field_is_rejected_with_its_path(self) -> None:
        has_error(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: ClusterQueue
            metadata: {name: cq}
            spec:
              resourceGroups:
              - coveredResources: [cpu]
                flavors:
                - name: f
                  resources: [{name: cpu, nominalQuota: 1, borrowLimit: 2}]
            """,
            "spec.resourceGroups[0].flavors[0].resources[0].borrowLimit",
            'unknown field "borrowLimit"',
        )

    def test_snake_case_names_are_unknown_fields(self) -> None:
        has_error(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: LocalQueue
            metadata: {name: lq}
            spec: {cluster_queue: cq}
            """,
            "spec.cluster_queue",
            "unknown field",
        )

    def test_unknown_metadata_field(self) -> None:
        has_error(
            """
            apiVersion: v1
            kind: Namespace
            metadata: {name: a, label: {x: y}}
            """,
            "metadata.label",
            "unknown field",
        )

    def test_real_metadata_fields_are_accepted(self) -> None:
        ns = decode_kube(
            """
            apiVersion: v1
            kind: Namespace
            metadata:
              name: a
              uid: 5b1c2d
              resourceVersion: "42"
              generation: 3
              finalizers: [kubernetes]
              ownerReferences: [{apiVersion: v1, kind: X, name: y, uid: z}]
              managedFields: [{manager: kubectl}]
            spec: {finalizers: [kubernetes]}
            status: {phase: Active}
            """
        )
        assert ns.metadata.finalizers == ["kubernetes"]
        assert ns.metadata.owner_references[0]["name"] == "y"

    def test_pod_spec_accepts_unmodelled_kubernetes_fields(self) -> None:
        wl = decode(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: Workload
            metadata: {name: wl}
            spec:
              podSets:
              - template:
                  spec:
                    volumes: [{name: v, emptyDir: {}}]
                    containers:
                    - name: c
                      readinessProbe: {exec: {command: ["true"]}}
            """
        )
        assert isinstance(wl, Workload)
        assert wl.spec.pod_sets[0].template.spec.to_dict()["volumes"][0]["name"] == "v"

    def test_resources_keep_strict_fields(self) -> None:
        has_error(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: Workload
            metadata: {name: wl}
            spec:
              podSets:
              - template:
                  spec:
                    containers: [{name: c, resources: {request: {cpu: 1}}}]
            """,
            "spec.podSets[0].template.spec.containers[0].resources.request",
            "unknown field",
        )

    @pytest.mark.parametrize(
        ("field", "value", "expected"),
        [
            ("count", '"3"', "expected an integer, got string"),
            ("count", "1.5", "expected an integer, got number"),
            ("count", "true", "expected an integer, got boolean"),
            ("name", "1", "expected a string, got integer"),
            ("count", "4294967296", "does not fit in a 32-bit signed integer"),
        ],
    )
    def test_type_errors(self, field: str, value: str, expected: str) -> None:
        has_error(
            f"""
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: Workload
            metadata: {{name: wl}}
            spec:
              podSets:
              - {field}: {value}
                template: {{spec: {{containers: [{{name: c}}]}}}}
            """,
            f"spec.podSets[0].{field}",
            expected,
        )

    def test_map_value_type_error_names_the_key(self) -> None:
        has_error(
            """
            apiVersion: v1
            kind: Namespace
            metadata: {name: a, labels: {enabled: true}}
            """,
            "metadata.labels[enabled]",
            "expected a string, got boolean",
        )

    def test_enum_error_lists_supported_values(self) -> None:
        has_error(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: ClusterQueue
            metadata: {name: cq}
            spec: {stopPolicy: Drain}
            """,
            "spec.stopPolicy",
            'Unsupported value: "Drain": supported values: "None", "Hold", "HoldAndDrain"',
        )

    def test_missing_required_field(self) -> None:
        has_error(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: ClusterQueue
            metadata: {name: cq}
            spec:
              resourceGroups:
              - coveredResources: [cpu]
                flavors: [{name: f, resources: [{name: cpu}]}]
            """,
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "Required value",
        )

    def test_bad_quantity(self) -> None:
        has_error(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: ClusterQueue
            metadata: {name: cq}
            spec:
              resourceGroups:
              - coveredResources: [cpu]
                flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1.5.3}]}]
            """,
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            'invalid quantity "1.5.3"',
        )

    def test_timestamps_need_a_time_zone(self) -> None:
        has_error(
            """
            apiVersion: v1
            kind: Namespace
            metadata: {name: a, creationTimestamp: "2026-01-01T00:00:00"}
            """,
            "metadata.creationTimestamp",
            "RFC 3339",
        )

    def test_timestamps_from_strings_and_yaml_are_utc(self) -> None:
        ns = decode_kube(
            """
            apiVersion: v1
            kind: Namespace
            metadata: {name: a, creationTimestamp: "2026-01-01T02:00:00.123456789+02:00"}
            """
        )
        assert ns.metadata.creation_timestamp == datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
        assert ns.to_dict()["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00.123456Z"


class TestApiServerBehaviour:
    def test_namespaced_objects_default_to_the_default_namespace(self) -> None:
        lq = decode_kube(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: LocalQueue
            metadata: {name: lq}
            spec: {clusterQueue: cq}
            """
        )
        assert lq.metadata.namespace == "default"

    def test_cluster_scoped_objects_drop_a_namespace(self) -> None:
        cq = decode_kube(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: ClusterQueue
            metadata: {name: cq, namespace: team-a}
            """
        )
        assert cq.metadata.namespace is None

    def test_explicit_null_means_unset(self) -> None:
        cq = decode(
            """
            apiVersion: kueue.x-k8s.io/v1beta1
            kind: ClusterQueue
            metadata: {name: cq}
            spec: {cohort: null, preemption: null, namespaceSelector: null}
            """
        )
        assert isinstance(cq, ClusterQueue)
        assert cq.spec.cohort == ""
        assert cq.spec.preemption.within_cluster_queue == "Never"
        assert cq.spec.namespace_selector is None


class TestDocuments:
    def test_unknown_kind(self) -> None:
        err = rejection(
            """
            apiVersion: apps/v1
            kind: Deployment
            metadata: {name: d}
            """
        )
        assert err.path == "kind"
        assert 'unknown kind "Deployment"' in err.detail
        assert str(err).startswith(
            'test.yaml: document 0 (Deployment "d"): kind: unknown kind "Deployment"'
        )

    def test_unknown_version(self) -> None:
        err = rejection(
            """
            apiVersion: kueue.x-k8s.io/v1beta3
            kind: ClusterQueue
            metadata: {name: cq}
            """
        )
        assert err.path == "apiVersion"
        assert '"kueue.x-k8s.io/v1beta1"' in err.detail
        assert '"kueue.x-k8s.io/v1beta2"' in err.detail

    def test_missing_kind(self) -> None:
        err = rejection("apiVersion: v1\nmetadata: {name: a}\n")
        assert err.path == "kind"

    def test_non_mapping_document(self) -> None:
        err = rejection("- a\n- b\n")
        assert "must be an object" in err.detail
        assert err.index == 0

    def test_empty_documents_are_skipped_but_counted(self) -> None:
        text = (
            "---\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n"
            "# only a comment\n"
        )
        decoded = load_yaml(text, "f.yaml")
        assert [(type(d.obj), d.index) for d in decoded] == [(Namespace, 1)]
        bad = "---\n\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: A}\n"
        with pytest.raises(ApiError) as info:
            load_yaml(bad, "f.yaml")
        assert info.value.index == 1

    def test_list_documents_expand(self) -> None:
        text = textwrap.dedent(
            """
            apiVersion: v1
            kind: List
            items:
            - {apiVersion: v1, kind: Namespace, metadata: {name: a}}
            - {apiVersion: v1, kind: Namespace, metadata: {name: b}}
            """
        )
        decoded = load_yaml(text, "list.yaml")
        assert [d.obj.metadata.name for d in decoded if isinstance(d.obj, Namespace)] == ["a", "b"]
        assert [d.item for d in decoded] == [0, 1]
        with pytest.raises(ApiError) as info:
            load_yaml(text.replace("name: b", "name: B"), "list.yaml")
        assert str(info.value).startswith('list.yaml: document 0, items[1] (Namespace "B"):')

    def test_yaml_syntax_error_names_the_line(self) -> None:
        text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\na: [1\n"
        with pytest.raises(ApiError) as info:
            load_yaml(text, "bad.yaml")
        assert info.value.index == 1
        assert info.value.line == 6
        assert str(info.value).startswith("bad.yaml: document 1: invalid YAML at line 6")

    def test_duplicate_keys_are_rejected(self) -> None:
        with pytest.raises(ApiError, match='duplicate key "name"'):
            load_yaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: a, name: b}\n", "d.yaml")


class TestLoadDocuments:
    def test_error_names_file_index_object_and_field(self, tmp_path: Path) -> None:
        path = tmp_path / "cq.yaml"
        path.write_text(
            textwrap.dedent(
                """
                apiVersion: v1
                kind: Namespace
                metadata: {name: a}
                ---
                apiVersion: kueue.x-k8s.io/v1beta1
                kind: ResourceFlavor
                metadata: {name: f}
                ---
                apiVersion: kueue.x-k8s.io/v1beta1
                kind: ClusterQueue
                metadata: {name: team-a}
                spec:
                  cohort: org
                  resourceGroups:
                  - coveredResources: [cpu]
                    flavors:
                    - name: f
                      resources: [{name: cpu, nominalQuota: 1, lendingLimit: 2}]
                """
            )
        )
        with pytest.raises(ApiError) as info:
            load_documents([str(path)])
        err = info.value
        assert (err.source, err.index, err.kind, err.name) == (
            str(path),
            2,
            "ClusterQueue",
            "team-a",
        )
        assert err.path == "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"
        assert str(err) == (
            f'{path}: document 2 (ClusterQueue "team-a"): '
            "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: "
            "must be less than or equal to the nominalQuota"
        )

    def test_directories_are_read_by_name_not_recursively(self, tmp_path: Path) -> None:
        for name in ("b.yml", "a.yaml", "c.txt"):
            (tmp_path / name).write_text(
                f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name[0]}}}\n"
            )
        (tmp_path / "sub").mkdir()
        (tmp_path / "sub" / "d.yaml").write_text(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: d}\n"
        )
        decoded = load_documents([str(tmp_path)])
        assert [d.obj.metadata.name for d in decoded if isinstance(d.obj, Namespace)] == ["a", "b"]
        assert decoded[1].source == str(tmp_path / "b.yml")

    def test_stdin(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(
            "sys.stdin", io.StringIO("apiVersion: v1\nkind: Namespace\nmetadata: {name: A}\n")
        )
        with pytest.raises(ApiError) as info:
            load_documents(["-"])
        assert str(info.value).startswith('<stdin>: document 0 (Namespace "A"): metadata.name:')

    def test_missing_path(self, tmp_path: Path) -> None:
        missing = str(tmp_path / "nope.yaml")
        with pytest.raises(ApiError, match="no such file or directory") as info:
            load_documents([missing])
        assert info.value.source == missing


def test_all_errors_are_reported_first_one_in_fields() -> None:
    found = errors(
        """
        apiVersion: kueue.x-k8s.io/v1beta1
        kind: ClusterQueue
        metadata: {name: cq}
        spec:
          resourceGroups:
          - coveredResources: [cpu]
            flavors: [{name: f, resources: [{name: cpu, nominalQuota: -1, borrowingLimit: 1}]}]
        """
    )
    assert [e.path for e in found] == [
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
    ]

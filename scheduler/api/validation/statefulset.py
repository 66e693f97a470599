"""Rules of an apps/v1 StatefulSet document (docs/simulate.md#statefulsets).

Offline nothing else checks a StatefulSet: there is no kube-apiserver and no webhook, so
its replica count, its pod template (as a Job's is checked) and its queue name (Kueue's
webhook rule, with its message) are checked here. In cluster mode kube-apiserver and the
webhook have already held it to these rules, so reading one to make its Workload finds
nothing new.
"""

from __future__ import annotations

from scheduler.api.errors import FieldError
from scheduler.api.parent_admission import queue_name_errors
from scheduler.api.statefulset_model import StatefulSet
from scheduler.api.validation.common import at_least
from scheduler.api.validation.workload import validate_pod_spec


def validate_statefulset(sts: StatefulSet) -> list[FieldError]:
    errors = at_least("spec.replicas", sts.spec.replicas, 0)
    errors += validate_pod_spec("spec.template.spec", sts.spec.template.spec)
    errors += queue_name_errors({"metadata": {"labels": sts.metadata.labels}})
    return errors

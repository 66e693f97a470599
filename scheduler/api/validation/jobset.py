"""Rules of a JobSet document read offline (docs/simulate.md#jobsets).

Offline nothing else checks a JobSet: there is no kube-apiserver, no JobSet webhook and no
Kueue webhook, so what its Workload is made of is checked here: at least one replicated
Job, each named by a DNS label used once, replicas, parallelism and completions not
negative, each pod template as a Job's is, and the queue and priority labels by Kueue's
rules. In cluster mode JobSet's CRD and webhook and ours have already held it to these,
so reading one to make its Workload finds nothing new.
"""

from __future__ import annotations

from scheduler.api.errors import FieldError
from scheduler.api.jobset_model import JobSet
from scheduler.api.validation.common import at_least, duplicate, label, required
from scheduler.api.validation.paths import index
from scheduler.api.validation.queue_labels import queued_label_errors
from scheduler.api.validation.workload import validate_pod_spec

REPLICATED_JOBS = "spec.replicatedJobs"


def validate_jobset(jobset: JobSet) -> list[FieldError]:
    replicated = jobset.spec.replicated_jobs
    errors = [] if replicated else [required(REPLICATED_JOBS, "must have at least 1 item")]
    seen: set[str] = set()
    for i, entry in enumerate(replicated):
        path = index(REPLICATED_JOBS, i)
        errors += label(f"{path}.name", entry.name)
        if entry.name in seen:
            errors.append(duplicate(f"{path}.name", entry.name))
        seen.add(entry.name)
        errors += at_least(f"{path}.replicas", entry.replicas, 0)
        job = entry.template.spec
        errors += at_least(f"{path}.template.spec.parallelism", job.parallelism, 0)
        errors += at_least(f"{path}.template.spec.completions", job.completions, 0)
        errors += validate_pod_spec(f"{path}.template.spec.template.spec", job.template.spec)
    return errors + queued_label_errors(jobset.metadata.labels)

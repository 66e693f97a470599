"""What an integration's controller did (`jobs.py`, `pods.py`): the Workloads it made,
the times it started and stopped its objects' pods, the finalizers it released, and the
failures (an object it could not make a Workload of, a write the server refused)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class IntegrationStats:
    workloads_created: int = 0
    started: int = 0  # a Job unsuspended, a Pod's gate lifted
    stopped: int = 0  # a Job suspended, a running Pod deleted
    released: int = 0  # a Pod's finalizer removed
    errors: int = 0

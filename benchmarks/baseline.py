"""The upstream-equivalent baseline of `visibility-latency`: NOT used by the product.

Upstream Kueue answers a ClusterQueue's pending-workloads request by copying the
ClusterQueue's whole pending set (heap, inadmissible and in-flight workloads) and
sorting the copy with the queue's comparator, on every request, whatever the `limit`;
it then walks the sorted copy up to `offset + limit` to count positions per LocalQueue.
That is O(N log N) per request. This module does the same against our live core, and
renders the page with the same item fields, so the benchmark can put the two side by
side on the same server stack (TLS, uvicorn, httptools) in the same run.

It lives in `benchmarks/` only and is reached only through the benchmark server's
`/bench/baseline/...` route.
"""

from __future__ import annotations

from typing import Any

import orjson

from scheduler.core.queue.fifo import FifoQueue
from scheduler.core.scheduler import Scheduler
from scheduler.core.visibility import owner_references
from scheduler.core.workload import OwnerRef
from scheduler.runtime.pages import PageItem
from scheduler.runtime.workload_records import PendingEntry
from visibility_server.http.discovery import SUMMARY_KIND
from visibility_server.http.render import item_object

API_VERSION = "visibility.kueue.x-k8s.io/v1beta1"


def upstream_copy_and_sort_page(s: Scheduler, cluster_queue: str, offset: int, limit: int) -> bytes:
    """One page the upstream way: copy the whole pending set, sort it, walk to the page."""
    queue = s.queues.queue(cluster_queue)
    if queue is None:
        raise KeyError(cluster_queue)
    if not isinstance(queue, FifoQueue):
        raise TypeError("the baseline reads the built-in queue's pending set")
    # The copy: the queue's key -> entry map holds heap, parked and in-flight entries
    # (upstream's totalElements()), in store order, not in queue order.
    pending = list(queue._entries.values())  # noqa: SLF001 - upstream reads its whole store
    pending.sort(key=queue.order_key)  # upstream: sort.Slice with the queue comparator
    items: list[Any] = []
    per_local_queue: dict[tuple[str, str], int] = {}
    offset, limit = max(0, offset), max(0, limit)
    for index, qe in enumerate(pending):
        if len(items) >= limit:
            break
        lq = (qe.namespace, qe.local_queue)
        position_in_lq = per_local_queue.get(lq, 0)
        per_local_queue[lq] = position_in_lq + 1
        if index < offset:
            continue
        wl = s.objects.workloads[qe.key]
        owners = tuple(OwnerRef(*o) for o in owner_references(wl.raw))
        entry = PendingEntry.make(
            wl.namespace, wl.name, wl.creation, owners, wl.priority, wl.queue_name
        )
        items.append(item_object(PageItem(entry, index, position_in_lq)))
    return orjson.dumps(
        {"kind": SUMMARY_KIND, "apiVersion": API_VERSION, "metadata": {}, "items": items}
    )

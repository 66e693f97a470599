"""The runtime's Kubernetes side: list/watch into the engine, status writes out of it,
the batch/v1 Job integration and leader election (docs/cluster.md#high-availability, issue 5)."""

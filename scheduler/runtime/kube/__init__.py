"""The runtime's Kubernetes side: list/watch into the engine, status writes out of it,
the batch/v1 Job integration and leader election (cluster.md §7, issue 5)."""

"""Authentication of visibility-server callers (docs/cluster.md#authentication)."""

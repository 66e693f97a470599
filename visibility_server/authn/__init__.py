"""Authentication of visibility-server callers (cluster.md §3)."""

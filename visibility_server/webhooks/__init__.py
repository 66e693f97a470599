"""Webhooks kube-apiserver calls on our server: CRD conversion (docs/operations.md)."""

"""Language-level helpers every layer may use (docs/architecture.md): they import nothing
of queuescope's and know nothing of Kubernetes, scheduling or I/O."""

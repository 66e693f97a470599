"""The client of kube-apiserver shared by cluster mode (`scheduler.runtime.kube`) and the
visibility server (`visibility_server.kube`), which may not import each other
(docs/architecture.md)."""

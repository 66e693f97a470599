"""Delegated authentication and authorization against a real kube-apiserver
(docs/cluster.md#authentication, docs/cluster.md#authorization): SubjectAccessReview, TokenReview,
the `extension-apiserver-authentication` ConfigMap and the self-check. `delegated.DelegatedAuth` is
the one object the wiring needs.
"""

"""Delegated authentication and authorization against a real kube-apiserver (cluster.md §3,
§4): SubjectAccessReview, TokenReview, the `extension-apiserver-authentication` ConfigMap
and the self-check. `delegated.DelegatedAuth` is the one object the wiring needs.
"""

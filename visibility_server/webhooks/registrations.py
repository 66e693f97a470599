"""The webhook configurations of manifests/webhooks, by name: what the certificate
tooling sets the caBundle of, and what `make deploy` applies after the rollout and
`make undeploy` deletes first (docs/operations.md, "Admission webhooks").
tests/unit/manifests checks these names against the manifests."""

from __future__ import annotations

from typing import Final

# (kind, configuration name, the names of its webhooks)
WEBHOOK_CONFIGURATIONS: Final = (
    (
        "MutatingWebhookConfiguration",
        "queuescope-mutating",
        (
            "mjob.queuescope.io",
            "mjob-default-queue.queuescope.io",
            "mpod.queuescope.io",
            "mdeployment.queuescope.io",
            "mdeployment-default-queue.queuescope.io",
            "mstatefulset.queuescope.io",
            "mstatefulset-default-queue.queuescope.io",
            "mjobset.queuescope.io",
            "mjobset-default-queue.queuescope.io",
        ),
    ),
    (
        "ValidatingWebhookConfiguration",
        "queuescope-validating",
        (
            "vkueue.queuescope.io",
            "vjob.queuescope.io",
            "vpod.queuescope.io",
            "vdeployment.queuescope.io",
            "vstatefulset.queuescope.io",
            "vjobset.queuescope.io",
        ),
    ),
)
ADMISSION_API_VERSION: Final = "admissionregistration.k8s.io/v1"

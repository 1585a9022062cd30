"""``NUMAResourcesScheduler.spec.kubeSchedulerImage`` names only the upstream kube-scheduler (issue 25, item 13).

The image runs with a ServiceAccount that can bind and delete every pod: a free string let anyone who
may edit the custom resource run an image of their choosing with those rights. Only
``registry.k8s.io/kube-scheduler`` with a release tag and/or a digest is accepted, by the parser and by
the CRD's schema (the real API server's check of the same pattern is in tests/realkube).
"""

from __future__ import annotations

import re

import pytest

from numaplane.operator.api.scheduler import KUBE_SCHEDULER_IMAGE_PATTERN, SINGLETON_NAME, NUMAResourcesScheduler
from numaplane.operator.crds import all_crds
from numaplane.operator.errors import SpecError

DIGEST = "sha256:" + "0123456789abcdef" * 4


def _cr(image: str) -> dict[str, object]:
    return {
        "apiVersion": "numaplane.io/v1",
        "kind": "NUMAResourcesScheduler",
        "metadata": {"name": SINGLETON_NAME},
        "spec": {"mode": "extender", "kubeSchedulerImage": image},
    }


@pytest.mark.parametrize(
    "image",
    [
        "registry.k8s.io/kube-scheduler:v1.36.2",
        f"registry.k8s.io/kube-scheduler@{DIGEST}",
        f"registry.k8s.io/kube-scheduler:v1.36.2@{DIGEST}",
        "registry.k8s.io/kube-scheduler:v1.37.0-rc.1",
    ],
)
def test_the_upstream_image_by_tag_or_digest_is_accepted(image: str) -> None:
    assert NUMAResourcesScheduler.from_dict(_cr(image)).kube_scheduler_image == image


@pytest.mark.parametrize(
    "image",
    [
        "ghcr.io/attacker/kube-scheduler:v1.36.2",
        "registry.k8s.io/kube-scheduler-debug:v1.36.2",
        "registry.k8s.io/kube-scheduler:latest",
        "registry.k8s.io/kube-scheduler",
        "registry.k8s.io/kube-scheduler@sha256:short",
        "registry.k8s.io/kube-scheduler:v1.36.2\nghcr.io/x",
        "registry.k8s.io/kube-scheduler:v1.36.2" + "0" * 300,
    ],
)
def test_any_other_image_is_refused_naming_the_field(image: str) -> None:
    with pytest.raises(SpecError) as caught:
        NUMAResourcesScheduler.from_dict(_cr(image))
    assert any("spec.kubeSchedulerImage" in p and "registry.k8s.io/kube-scheduler" in p for p in caught.value.problems)


def test_the_crd_schema_carries_the_same_pattern() -> None:
    crd = next(c for c in all_crds() if c["spec"]["names"]["kind"] == "NUMAResourcesScheduler")
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    field = spec["kubeSchedulerImage"]
    assert field["pattern"] == KUBE_SCHEDULER_IMAGE_PATTERN and field["maxLength"] == 256
    assert re.fullmatch(field["pattern"], field["default"])
    assert not re.fullmatch(field["pattern"], "ghcr.io/attacker/kube-scheduler:v1.36.2")

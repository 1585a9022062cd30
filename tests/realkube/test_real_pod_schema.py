"""The shipped Pod schema is the real kube-apiserver's, and numaplane refuses what it refuses.

``kubectl apply --validate=strict --dry-run=server`` against the real v1.36 API server is the
reference: for each manifest, numaplane's verdict (problem paths) matches the server's (refused or
not, and the field it names). ``scripts/gen_pod_schema.py --check`` compares the shipped data with
the schema a freshly started API server serves.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from numaplane.resources.podschema import pod_schema_problems
from numaplane_harness.kubecluster import ControlPlane

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
_LIMITS = {"limits": {"cpu": "2", "memory": "1Gi"}}


def _pod(name: str, container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox", **container}], **spec},
    }


_CASES = [
    (_pod("ok", {"resources": _LIMITS, "ports": [{"containerPort": 80}]}), None),
    (_pod("resource", {"resource": _LIMITS}), "spec.containers[0].resource"),
    (_pod("resouces", {"resouces": _LIMITS}), "spec.containers[0].resouces"),
    (_pod("limit", {"resources": {"limit": {"cpu": "1"}}}), "spec.containers[0].resources.limit"),
    (_pod("specfield", {"resources": _LIMITS}, nodeSelecter={"a": "b"}), "spec.nodeSelecter"),
]


@pytest.mark.parametrize(("doc", "field"), _CASES, ids=[c[0]["metadata"]["name"] for c in _CASES])
def test_numaplane_refuses_what_the_real_api_server_refuses(
    control_plane: ControlPlane, doc: dict[str, Any], field: str | None
) -> None:
    server = control_plane.kubectl(
        "apply", "--validate=strict", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(doc)
    )
    ours = [p.path for p in pod_schema_problems(doc)]
    if field is None:
        assert server.returncode == 0, server.stderr
        assert ours == []
    else:
        assert server.returncode != 0 and f'unknown field "{field}"' in server.stderr, server.stderr
        assert ours == [field]


def test_the_shipped_schema_is_the_one_the_real_api_server_serves() -> None:
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_pod_schema.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "up to date" in run.stdout

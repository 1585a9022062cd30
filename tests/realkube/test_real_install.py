"""Installing numaplane on a real kube-apiserver v1.36.2: every rendered object is accepted.

A fake API server cannot refuse a CRD for its CEL cost or a rule that does not compile; the real one
does, so every object ``numaplane render`` prints and every kustomization under ``deploy/`` is created
here for real (CRDs first, then the rest), and the CRDs' CEL rules are exercised with objects the API
server must refuse.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from numaplane_harness.kubecluster import ControlPlane

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-c", "from numaplane.cli import main; main()")


def _render(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run([*CLI, "render", *args], capture_output=True, text=True, check=True, cwd=REPO).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _apply(cp: ControlPlane, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return cp.kubectl("apply", "--server-side", "--field-manager=numaplane-test", *args, stdin=stdin)


def _crds_first(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(docs, key=lambda d: d["kind"] != "CustomResourceDefinition")


def test_every_rendered_object_is_created_for_real(control_plane: ControlPlane) -> None:
    docs = _crds_first(_render())
    assert {d["kind"] for d in docs} >= {"CustomResourceDefinition", "Deployment", "ClusterRole", "Namespace"}
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    got = _apply(control_plane, "-f", "-", stdin=yaml.safe_dump_all(crds))
    assert got.returncode == 0, got.stderr
    for crd in crds:
        name = crd["metadata"]["name"]
        waited = control_plane.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
        assert waited.returncode == 0, waited.stderr
    rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    got = _apply(control_plane, "-f", "-", stdin=yaml.safe_dump_all(rest))
    assert got.returncode == 0, got.stderr
    for doc in rest:
        meta = doc["metadata"]
        args = ["get", doc["kind"].lower(), meta["name"], "-o", "name"]
        if "namespace" in meta:
            args += ["-n", meta["namespace"]]
        found = control_plane.kubectl(*args)
        assert found.returncode == 0, (doc["kind"], meta["name"], found.stderr)


def test_kubectl_apply_k_deploy_and_samples(control_plane: ControlPlane) -> None:
    got = control_plane.kubectl("apply", "-k", str(REPO / "deploy"))
    assert got.returncode == 0, got.stderr
    for crd in ("numaresourcesoperators.numaplane.io", "noderesourcepolicies.numaplane.io"):
        assert (
            control_plane.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s").returncode == 0
        )
    got = control_plane.kubectl("apply", "-k", str(REPO / "deploy" / "samples"))
    assert got.returncode == 0, got.stderr
    listed = control_plane.kubectl(
        "get", "numaresourcesoperators,numaresourcesschedulers,noderesourcepolicies", "-o", "name"
    )
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.split()) == 3


def test_render_output_dir_is_a_complete_kustomization(control_plane: ControlPlane, tmp_path: Path) -> None:
    target = tmp_path / "new-deploy"
    subprocess.run([*CLI, "render", "--output-dir", str(target)], check=True, cwd=REPO)
    built = control_plane.kubectl("kustomize", str(target))
    assert built.returncode == 0, built.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(built.stdout) if d]
    assert kinds.count("CustomResourceDefinition") == 4
    got = control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(target))
    assert got.returncode == 0, got.stderr


def _policy(name: str, cpu_manager: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "numaplane.io/v1",
            "kind": "NodeResourcePolicy",
            "metadata": {"name": name},
            "spec": {"nodeGroup": "workers", "config": {"cpuManager": cpu_manager}},
        }
    )


def test_crd_cel_rules_are_enforced_by_the_real_api_server(control_plane: ControlPlane) -> None:
    assert control_plane.kubectl("apply", "-k", str(REPO / "deploy" / "crd")).returncode == 0
    control_plane.kubectl(
        "wait", "--for=condition=Established", "crd/noderesourcepolicies.numaplane.io", "--timeout=60s"
    )
    bad = control_plane.kubectl(
        "create",
        "-f",
        "-",
        stdin=_policy("cel-none-options", {"policy": "none", "options": {"full-pcpus-only": "true"}}),
    )
    assert bad.returncode != 0
    assert "options are not allowed with policy none" in bad.stderr
    good = control_plane.kubectl(
        "create",
        "-f",
        "-",
        stdin=_policy("cel-static-options", {"policy": "static", "options": {"full-pcpus-only": "true"}}),
    )
    assert good.returncode == 0, good.stderr
    typed = control_plane.kubectl(
        "create",
        "-f",
        "-",
        stdin=_policy("cel-bool-option", {"policy": "static", "options": {"full-pcpus-only": True}}),
    )
    assert typed.returncode != 0 and "string" in typed.stderr
    control_plane.kubectl("delete", "noderesourcepolicy", "cel-static-options", "--ignore-not-found")


def _scheduler_cr(spec: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "numaplane.io/v1",
            "kind": "NUMAResourcesScheduler",
            "metadata": {"name": "numaresourcesscheduler"},
            "spec": spec,
        }
    )


def _scheduler_crd_established(cp: ControlPlane) -> None:
    assert cp.kubectl("apply", "-k", str(REPO / "deploy" / "crd")).returncode == 0
    cp.kubectl("wait", "--for=condition=Established", "crd/numaresourcesschedulers.numaplane.io", "--timeout=60s")


def _accepted(result: subprocess.CompletedProcess[str]) -> bool:
    """A server-side dry run passed validation (the singleton may exist from another test: then only its
    name is refused, after validation)."""
    return result.returncode == 0 or "AlreadyExists" in result.stderr


def test_the_real_api_server_refuses_a_foreign_kube_scheduler_image(control_plane: ControlPlane) -> None:
    """``kubeSchedulerImage`` (issue 25, item 13): the CRD's pattern, checked by the real API server."""
    _scheduler_crd_established(control_plane)

    def dry_run(image: str, **extra: Any) -> subprocess.CompletedProcess[str]:
        spec = {"mode": "extender", "kubeSchedulerImage": image, **extra}
        return control_plane.kubectl("create", "--dry-run=server", "-f", "-", stdin=_scheduler_cr(spec))

    bad = dry_run("ghcr.io/x/kube-scheduler:v1")
    assert bad.returncode != 0 and "kubeSchedulerImage" in bad.stderr, bad.stderr
    good = dry_run("registry.k8s.io/kube-scheduler:v1.36.2")
    assert _accepted(good), good.stderr
    # spec.kubeSchedulerClient: the CEL rule burst >= qps, checked by the real API server too
    image = "registry.k8s.io/kube-scheduler:v1.36.2"
    refused = dry_run(image, kubeSchedulerClient={"qps": 300, "burst": 100})
    assert refused.returncode != 0 and "burst must be at least qps" in refused.stderr, refused.stderr
    raised = dry_run(image, kubeSchedulerClient={"qps": 1000})
    assert _accepted(raised), raised.stderr
    # ... and only in extender mode: an option that does not apply is refused
    standalone = {"mode": "standalone", "kubeSchedulerClient": {"qps": 1000}}
    unused = control_plane.kubectl("create", "--dry-run=server", "-f", "-", stdin=_scheduler_cr(standalone))
    assert unused.returncode != 0 and "kubeSchedulerClient applies to mode extender only" in unused.stderr, (
        unused.stderr
    )


def test_the_real_api_server_allows_default_scheduler_in_extender_mode_only(control_plane: ControlPlane) -> None:
    """docs/scheduler.md's first example (``schedulerName: default-scheduler``, extender mode) is accepted by
    the CRD's CEL rule on the real API server; the same name for the standalone scheduler is refused."""
    _scheduler_crd_established(control_plane)

    def dry_run(spec: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return control_plane.kubectl("create", "--dry-run=server", "-f", "-", stdin=_scheduler_cr(spec))

    extender = dry_run({"schedulerName": "default-scheduler", "mode": "extender"})
    assert _accepted(extender), extender.stderr
    standalone = dry_run({"schedulerName": "default-scheduler"})
    assert standalone.returncode != 0, standalone.stdout
    assert "must not be default-scheduler unless mode is extender" in standalone.stderr, standalone.stderr

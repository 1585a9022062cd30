"""``numaplane render`` and the deploy/ drift check, through the real command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from numaplane.cli import main
from numaplane.operator.layout import deploy_files
from numaplane.operator.render import render_install, sample_resources, to_yaml
from numaplane.operator.render_common import Settings

REPO = Path(__file__).resolve().parents[2]


def test_default_render_is_the_install() -> None:
    result = CliRunner().invoke(main, ["render"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert docs == render_install(Settings())


def test_render_from_custom_resources(tmp_path: Path) -> None:
    source = tmp_path / "crs.yaml"
    source.write_text(to_yaml(sample_resources()))
    result = CliRunner().invoke(
        main, ["render", "--from", str(source), "--image", "example.org/np:2", "--namespace", "numa"]
    )
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("DaemonSet", "numaplane-exporter-worker") in names
    assert ("Deployment", "numaplane-scheduler") in names
    assert ("Deployment", "numaplane-operator") not in names

    def node_side(d: dict[str, Any]) -> bool:
        return d["metadata"]["labels"].get("numaplane.io/owner") == "numaresourcesoperator" or d["metadata"][
            "name"
        ] == ("numaplane-node")

    assert all(d["metadata"].get("namespace", "numa") == "numa" for d in docs if not node_side(d))
    assert {d["metadata"].get("namespace", "numaplane-node") for d in docs if node_side(d)} == {"numaplane-node"}
    moved = CliRunner().invoke(main, ["render", "--from", str(source), "--node-namespace", "numa-node"])
    assert moved.exit_code == 0, moved.output
    daemonsets = [d for d in yaml.safe_load_all(moved.stdout) if d["kind"] == "DaemonSet"]
    assert daemonsets and {d["metadata"]["namespace"] for d in daemonsets} == {"numa-node"}
    with_install = CliRunner().invoke(main, ["render", "--from", str(source), "--install"])
    assert "name: numaplane-operator\n" in with_install.stdout


def test_render_refuses_one_namespace_for_both() -> None:
    result = CliRunner().invoke(main, ["render", "--namespace", "np", "--node-namespace", "np"])
    assert result.exit_code == 2
    assert "--node-namespace must differ from --namespace" in result.output
    bad = CliRunner().invoke(main, ["render", "--node-namespace", "Not_A_Name"])
    assert bad.exit_code == 2 and "--node-namespace" in bad.output
    operator = CliRunner().invoke(main, ["operator", "--image", "np:1", "--namespace", "np", "--node-namespace", "np"])
    assert operator.exit_code == 2 and "--node-namespace must differ from --namespace" in operator.output


def test_render_refuses_an_invalid_resource(tmp_path: Path) -> None:
    bad = sample_resources()[0]
    bad["spec"]["nodeGroups"].append({"name": "all", "nodeSelector": {}})
    source = tmp_path / "bad.yaml"
    source.write_text(to_yaml([bad]))
    result = CliRunner().invoke(main, ["render", "--from", str(source)])
    assert result.exit_code == 2  # bad input
    assert "OverlappingNodeGroups" in result.output and "'all'" in result.output


def test_output_dir_writes_the_deploy_tree(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["render", "--output-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.yaml")}
    assert written == set(deploy_files())
    top = yaml.safe_load((tmp_path / "kustomization.yaml").read_text())
    assert top["kind"] == "Kustomization" and top["resources"] == ["crd", "rbac", "operator", "admission"]
    for folder in ("crd", "rbac", "operator", "samples"):
        listed = yaml.safe_load((tmp_path / folder / "kustomization.yaml").read_text())["resources"]
        for name in listed:
            assert (tmp_path / folder / name).is_file() or (REPO / "deploy" / folder / name).is_file(), name


def test_committed_deploy_tree_matches_render() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts/check_deploy.py")], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_render_the_default_scheduler_with_the_extender_as_the_docs_show(tmp_path: Path) -> None:
    """docs/scheduler.md's first example: kube-scheduler's default profile calling the extender. The
    operator renders that pair for ``schedulerName: default-scheduler`` in extender mode only."""
    cr = {
        "apiVersion": "numaplane.io/v1",
        "kind": "NUMAResourcesScheduler",
        "metadata": {"name": "numaresourcesscheduler"},
        "spec": {"schedulerName": "default-scheduler", "mode": "extender"},
    }
    source = tmp_path / "nrs.yaml"
    source.write_text(yaml.safe_dump(cr))
    result = CliRunner().invoke(main, ["render", "--from", str(source)])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    config = yaml.safe_load(next(iter(config_map["data"].values())))
    assert [p["schedulerName"] for p in config["profiles"]] == ["default-scheduler"]
    assert config["extenders"][0]["nodeCacheCapable"] is True and config["extenders"][0]["bindVerb"] == "bind"
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    extender = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "extender")
    assert "--scheduler-name=default-scheduler" in extender["args"]
    # standalone, numaplane's own scheduler would take every pod of the default profile: still refused
    source.write_text(yaml.safe_dump({**cr, "spec": {"schedulerName": "default-scheduler"}}))
    refused = CliRunner().invoke(main, ["render", "--from", str(source)])
    assert refused.exit_code == 2
    assert "must not be default-scheduler unless mode is extender" in refused.output
    assert "Traceback" not in refused.output


def test_render_refuses_a_kube_scheduler_client_in_standalone_mode(tmp_path: Path) -> None:
    """``spec.kubeSchedulerClient`` rate-limits kube-scheduler's client, which only extender mode runs: in
    standalone mode it would be silently unused, so it is refused, one line, exit 2."""
    cr = {
        "apiVersion": "numaplane.io/v1",
        "kind": "NUMAResourcesScheduler",
        "metadata": {"name": "numaresourcesscheduler"},
        "spec": {"mode": "standalone", "kubeSchedulerClient": {"qps": 500}},
    }
    source = tmp_path / "nrs.yaml"
    source.write_text(yaml.safe_dump(cr))
    refused = CliRunner().invoke(main, ["render", "--from", str(source)])
    assert refused.exit_code == 2, refused.output
    assert "spec.kubeSchedulerClient" in refused.output and "applies to mode extender only" in refused.output
    assert "Traceback" not in refused.output
    cr["spec"]["mode"] = "extender"
    source.write_text(yaml.safe_dump(cr))
    assert CliRunner().invoke(main, ["render", "--from", str(source)]).exit_code == 0

"""Strict in, honest out (issue 26 findings 6, 7, 8 and 11): each test runs the real ``numaplane`` entry
point in a subprocess and checks the exit code and the one-line message (or the document written)."""

from __future__ import annotations

import io
import json
import signal
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from cli_helpers import NUMAPLANE, REPO, numaplane

from numaplane.sim.cluster import load_topology
from numaplane.sim.snapshot import SnapshotWriter
from numaplane.topology.document import topology_to_dict

MACHINE = "intel-xeon-e5-2680-2s2n-16c-pci"  # 16 CPUs, NUMA nodes 0 and 1
POD = REPO / "examples" / "pods" / "guaranteed.yaml"


def _free_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


# ---- finding 6: the take-over interlock reads only a KubeletConfiguration --------------------------------


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n", "kind 'Pod'"),
        ("", "the file is empty"),
        ("cpuManagerPolicy: none\n", "no kind"),
        ("apiVersion: v1\nkind: KubeletConfiguration\n", "apiVersion 'v1'"),
        ("kind: KubeletConfiguration\ncpuManagerPolicy: none\n", "no apiVersion"),
    ],
)
def test_agent_check_refuses_what_is_not_a_kubelet_configuration(tmp_path: Path, text: str, what: str) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text(text)
    run = numaplane("agent", "--check", "--kubelet-config", str(path))
    assert run.code == 2, run.stdout
    assert "not a KubeletConfiguration" in run.error_line and what in run.error_line and str(path) in run.error_line
    assert json.loads(run.stdout)["mayTakeOver"] is None  # never true


def test_agent_check_still_reads_a_kubelet_configuration(tmp_path: Path) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: none\n")
    run = numaplane("agent", "--check", "--kubelet-config", str(path))
    assert run.code == 0 and json.loads(run.stdout)["mayTakeOver"] is True


# ---- finding 7: the node config in one pass, the machine included ----------------------------------------


def test_node_config_every_problem_at_once_with_the_machine(tmp_path: Path) -> None:
    config = tmp_path / "node.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "bogus": 1,
                "topologyManager": {"policy": "single-numa-nod"},
                "cpuManager": {"reservedCPUs": "0,112", "options": {"full-pcpus-onl": "true"}},
                "memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 7, "limits": {"memory": "1Gi"}}]},
                "devices": {"example.com/gpu": [{"id": "g0", "numa": [9]}]},
            }
        )
    )
    run = numaplane("admit", "--topology", MACHINE, "--config", str(config), str(POD))
    assert run.code == 2
    line = run.error_line
    assert "6 problems" in line, line
    for path in (
        "bogus: unknown field",
        "topologyManager.policy",
        "cpuManager.options.full-pcpus-onl",
        "cpuManager.reservedCPUs: CPU 112 not online on this machine",
        "memoryManager.reservedMemory[0].numaNode: NUMA node 7 is not on this machine",
        "devices.example.com/gpu[0].numa: NUMA node 9 is not on this machine",
    ):
        assert path in line, path


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 7, "limits": {"memory": "1Gi"}}]}},
         "memoryManager.reservedMemory[0].numaNode"),
        ({"devices": {"example.com/gpu": [{"id": "g0", "numa": [0]}, {"id": "g1", "numa": [9]}]}},
         "devices.example.com/gpu[1].numa"),
        ({"cpuManager": {"reservedCPUCount": 40}}, "cpuManager.reservedCPUCount"),
    ],
)  # fmt: skip
def test_node_config_naming_what_the_machine_lacks_is_refused(tmp_path: Path, config: object, path: str) -> None:
    file = tmp_path / "node.yaml"
    file.write_text(yaml.safe_dump(config))
    run = numaplane("admit", "--topology", MACHINE, "--config", str(file), str(POD))
    assert run.code == 2 and path in run.error_line and "1 problem" in run.error_line


# ---- finding 8: render ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "flag", "says"),
    [
        (["--image", ""], "--image", "an image reference is required"),
        (["--image", "has space:1"], "--image", "is not a container image reference"),
        (["--namespace", "Bad_NS!"], "--namespace", "is not a namespace name"),
    ],
)
def test_render_refuses_an_image_or_namespace_no_cluster_would_take(args: list[str], flag: str, says: str) -> None:
    run = numaplane("render", *args)
    assert run.code == 2 and run.stdout == ""
    assert flag in run.error_line and says in run.error_line


def test_render_from_a_folder_of_custom_resources(tmp_path: Path) -> None:
    run = numaplane("render", "--from", "deploy/samples/")
    assert run.code == 0, run.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(run.stdout)]
    each = numaplane(
        "render", *[a for f in sorted((REPO / "deploy/samples").glob("n*.yaml")) for a in ("--from", str(f))]
    )
    assert kinds == [d["kind"] for d in yaml.safe_load_all(each.stdout)] and "DaemonSet" in kinds
    empty = numaplane("render", "--from", str(tmp_path))
    assert empty.code == 2 and "no .yaml, .yml, .json files in this folder" in empty.error_line


# ---- finding 11: flags and conventions --------------------------------------------------------------------


@pytest.mark.parametrize("command", ["e2e", "snapshot"])
@pytest.mark.parametrize("flag", ["--server", "--api-server"])
def test_both_names_of_the_api_server_flag_are_accepted(tmp_path: Path, command: str, flag: str) -> None:
    extra = ["-o", str(tmp_path / "snap.yaml"), "-q"] if command == "snapshot" else []
    run = numaplane(command, flag, _free_url(), *extra)
    assert run.code == 1 and ("unreachable" in run.error_line or "cannot read" in run.error_line), run.stderr


def test_e2e_junit_names_the_unreachable_cluster(tmp_path: Path) -> None:
    junit = tmp_path / "e2e.xml"
    run = numaplane("e2e", "--api-server", _free_url(), "-o", "junit", "--junit-file", str(junit))
    assert run.code == 1 and "cannot read the cluster" in run.error_line
    for text in (run.stdout, junit.read_text()):
        suite = ET.fromstring(text).find("testsuite")
        assert suite is not None and suite.get("failures") == "1"
        (case,) = suite.findall("testcase")
        failure = case.find("failure")
        assert case.get("name") == "cluster-reachable" and failure is not None
        assert "cannot read the cluster" in (failure.get("message") or "")


def test_topology_json_is_camel_case_with_kind_and_reads_back(tmp_path: Path) -> None:
    run = numaplane("topology", "--sysfs", str(REPO / f"../shared/topologies/real/{MACHINE}.tar.gz"), "-o", "json")
    assert run.code == 0, run.stderr
    doc = json.loads(run.stdout)
    assert (doc["apiVersion"], doc["kind"]) == ("numaplane.io/v1", "Topology")
    assert doc["numNumaNodes"] == 2 and "memoryTotalBytes" in doc["numaNodes"][0] and "num_cpus" not in doc
    saved = tmp_path / "machine.json"
    saved.write_text(run.stdout)
    again = numaplane("topology", "--from", str(saved), "-o", "json")
    assert again.code == 0 and again.stdout == run.stdout
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**doc, "kind": "Pod"}))
    refused = numaplane("topology", "--from", str(wrong))
    assert refused.code == 2 and "kind 'Pod'" in refused.error_line


def test_what_if_json_has_api_version_and_kind(tmp_path: Path) -> None:
    out = io.StringIO()
    writer = SnapshotWriter(out, {"source": "test"})
    writer.section("nodes")
    writer.add({"name": "n1", "labels": {}, "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}})
    writer.close()
    snap = tmp_path / "snap.yaml"
    snap.write_text(out.getvalue())
    run = numaplane("simulate", "--from", str(snap), "-o", "json")
    assert run.code == 0, run.stderr
    doc = json.loads(run.stdout)
    assert (doc["apiVersion"], doc["kind"]) == ("numaplane.io/v1", "WhatIfReport")


@pytest.mark.parametrize("content", [None, "apiVersion: v1\nkind: Pod\n", "topologyManagerPolicy: restricted\n"])
def test_exporter_oneshot_with_an_unusable_kubelet_config_is_bad_input(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "kubelet.yaml"
    if content is not None:
        path.write_text(content)
    run = numaplane(
        "exporter", "--oneshot", "--kubelet-config", str(path), "--podresources-socket", f"fake://{tmp_path}"
    )
    assert run.code == 2 and run.error_line.startswith(f"Error: --kubelet-config: {path}")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_daemon_exits_130_on_ctrl_c_and_0_on_sigterm(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    topology = tmp_path / "machine.json"
    topology.write_text(json.dumps(topology_to_dict(load_topology(MACHINE))))
    ready = tmp_path / "state" / "agent_state.json"
    proc = subprocess.Popen(
        [
            NUMAPLANE,
            "agent",
            f"--nri-socket={tmp_path / 'nri.sock'}",
            f"--state-dir={tmp_path / 'state'}",
            f"--topology={topology}",
            "--kubelet-config=",
            f"--podresources-socket={tmp_path / 'pr.sock'}",
            "--metrics-address=",
            "--health-address=",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists(), proc.communicate(timeout=5)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert ("Error: interrupted" in err) == (code == 130)


def test_resync_period_is_a_duration_in_simulate_and_scheduler() -> None:
    for args in (["simulate"], ["scheduler", "run", "--api-server", _free_url()], ["scheduler", "extender"]):
        run = numaplane(*args, "--resync-period", "soon")
        assert run.code == 2 and "'soon' is not a duration" in run.error_line, (args, run.stderr)
    run = numaplane("simulate", "--nodes", "2", "--resync-period", "1m30s", "--schedulers", "default", "-o", "json")
    assert run.code == 0, run.stderr
    assert "1m30s" not in run.stderr and '"overReserveResyncPeriodSeconds": 90.0' in run.stdout


def test_agent_podresources_socket_default_is_where_the_rendered_daemonset_serves_it() -> None:
    rendered = numaplane("render", "--from", "deploy/samples/").stdout
    agents = [
        c
        for d in yaml.safe_load_all(rendered)
        if d["kind"] == "DaemonSet"
        for c in d["spec"]["template"]["spec"]["containers"]
        if c["args"][0] == "agent"
    ]
    assert agents
    (flag,) = [a for a in agents[0]["args"] if a.startswith("--podresources-socket=")]
    assert f"[default:{flag.split('=', 1)[1]}]" in "".join(numaplane("agent", "--help").stdout.split())


def test_agent_missing_config_is_refused_before_the_state_folder(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "agent_state.json").write_text("{}")  # a checkpoint used to make a missing --config go unnoticed
    before = sorted(p.name for p in state.iterdir())
    run = numaplane("agent", "--config", str(tmp_path / "node.yaml"), "--state-dir", str(state))
    assert run.code == 2 and f"--config {tmp_path / 'node.yaml'}: no such file" in run.error_line
    assert sorted(p.name for p in state.iterdir()) == before
    fresh = numaplane("agent", "--config", str(tmp_path / "node.yaml"), "--state-dir", str(tmp_path / "new"))
    assert fresh.code == 2 and not (tmp_path / "new").exists()

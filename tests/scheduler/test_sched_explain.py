"""``numaplane explain``: per-node verdicts, zone shortfalls, what was ignored; files and the API server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from sched_helpers import node_doc, nrt_doc, pod_doc, seed_crd, zone_doc

from numaplane.cli.explain import command
from numaplane.kube.resources import NODE, NODE_RESOURCE_TOPOLOGY
from numaplane.resources.pod import parse_pod
from numaplane.scheduler.explain import explain_pod
from numaplane.testing.fakeapi import FakeApiServer


def cluster() -> list[dict[str, Any]]:
    return [
        nrt_doc(
            "roomy",
            [
                zone_doc(0, {"cpu": (4, 4), "memory": ("8Gi", "8Gi")}),
                zone_doc(1, {"cpu": (4, 1), "memory": ("8Gi", "8Gi")}),
            ],
        ),
        nrt_doc(
            "tight",
            [
                zone_doc(0, {"cpu": (4, 1), "memory": ("8Gi", "8Gi")}),
                zone_doc(1, {"cpu": (4, 2), "memory": ("8Gi", "512Mi")}),
            ],
        ),
        nrt_doc(
            "odd",
            [
                zone_doc("numa-node-0", {"cpu": (8, 8), "memory": ("8Gi", "8Gi")}),
                zone_doc(1, {"cpu": (4, 4), "memory": ("8Gi", "8Gi")}),
            ],
        ),
    ]


def test_explanations_per_node() -> None:
    docs = cluster()
    broken = nrt_doc("broken", [zone_doc(0, {"cpu": (4, 4)})])
    broken["zones"][0]["resources"][0]["available"] = "four"
    sources = [(f"file{i}", d) for i, d in enumerate([*docs, broken, {"kind": "NodeResourceTopology"}])]
    sources.append(("again", docs[0]))
    report = explain_pod(parse_pod(pod_doc("web", 3)), sources)
    by_node = {n.node: n for n in report.nodes}
    assert [n.node for n in report.nodes][:2] == ["odd", "roomy"] or report.fitting == ["odd", "roomy"]
    assert set(report.fitting) == {"odd", "roomy"}
    roomy = by_node["roomy"]
    assert roomy.fits and roomy.placements == (("main", 0),) and roomy.score is not None
    assert (roomy.policy, roomy.scope) == ("single-numa-node", "container")
    tight = by_node["tight"]
    assert not tight.fits and tight.reason == "cannot align container"
    assert (tight.unit, tight.resource) == ("main", "cpu")
    assert {(s["zone"], s["resource"], s["requested"], s["available"]) for s in tight.shortfalls} == {
        ("node-0", "cpu", "3", "1"),
        ("node-1", "cpu", "3", "2"),
        ("node-1", "memory", "1Gi", "512Mi"),
    }
    odd = by_node["odd"]
    assert odd.fits and [z.source for z in odd.ignored_zones] == ["numa-node-0"]
    assert "not node-<id>" in odd.ignored_zones[0].reason
    assert by_node["broken"].reason == "malformed node topology data"
    assert any("resources[0].available" in note for note in by_node["broken"].notes)
    ignored = {(i.source, i.reason) for i in report.ignored}
    assert ("file4", "not a NodeResourceTopology object with metadata.name") in ignored
    assert ("file0", "another NodeResourceTopology for node roomy follows") in ignored
    doc = report.to_dict()
    assert doc["pod"] == "default/web" and doc["qosClass"] == "Guaranteed" and doc["fits"] == 2
    json.dumps(doc)


def test_node_objects_decide_the_node_set() -> None:
    nodes = [node_doc("roomy"), node_doc("plain")]
    report = explain_pod(parse_pod(pod_doc("web", 3)), [("f", d) for d in cluster()], nodes)
    by_node = {n.node: n for n in report.nodes}
    assert set(by_node) == {"roomy", "plain"}
    assert by_node["plain"].fits and not by_node["plain"].checked
    assert "no NodeResourceTopology" in by_node["plain"].summary()
    assert {i.reason for i in report.ignored} == {"no Node object named odd", "no Node object named tight"}
    # a device the Node does not advertise fails at once, even where zones list it
    dev = nrt_doc("dev", [zone_doc(0, {"cpu": (4, 4), "memory": ("8Gi", "8Gi"), "vendor.com/nic": (2, 2)})])
    pod = pod_doc("nic", 1)
    pod["spec"]["containers"][0]["resources"]["requests"]["vendor.com/nic"] = "1"
    pod["spec"]["containers"][0]["resources"]["limits"]["vendor.com/nic"] = "1"
    without = explain_pod(parse_pod(pod), [("f", dev)], [node_doc("dev")])
    assert without.nodes[0].reason == "cannot align container" and without.nodes[0].resource == "vendor.com/nic"
    assumed = explain_pod(parse_pod(pod), [("f", dev)])  # no Node objects: zones' resources are assumed advertised
    assert assumed.nodes[0].fits


def write_inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(pod_doc("web", 3)))
    nrts = tmp_path / "nrts"
    nrts.mkdir()
    docs = cluster()
    (nrts / "roomy.json").write_text(json.dumps(docs[0]))
    (nrts / "more.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs[1:]}))
    (nrts / "garbage.yaml").write_text("zones: [unclosed\n")
    (nrts / "node.yaml").write_text(yaml.safe_dump(node_doc("roomy")))
    (nrts / "notes.txt").write_text("not read")
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump_all([node_doc(n) for n in ("roomy", "tight", "odd")]))
    return pod, nrts, nodes


def test_cli_formats(tmp_path: Path) -> None:
    pod, nrts, nodes = write_inputs(tmp_path)
    runner = CliRunner()
    result = runner.invoke(command, ["--pod", str(pod), "--nrt", str(nrts), "--nodes", str(nodes), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [n["node"] for n in doc["nodes"] if n["fits"]] == ["odd", "roomy"] or doc["fits"] == 2
    reasons = {i["source"].rsplit("/", 1)[-1]: i["reason"] for i in doc["ignored"]}
    assert reasons["garbage.yaml"].startswith("unreadable")
    assert reasons["node.yaml"] == "kind 'Node' is not NodeResourceTopology"
    result = runner.invoke(command, ["--pod", str(pod), "--nrt", str(nrts), "-o", "yaml"])
    assert result.exit_code == 0 and yaml.safe_load(result.output)["pod"] == "default/web"
    result = runner.invoke(command, ["--pod", str(pod), "--nrt", str(nrts), "--nodes", str(nodes)], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "cannot align container" in text
    assert "node-1: memory 1Gi requested, 512Mi available" in text
    assert "ignored zone numa-node-0" in text and "main → NUMA 0" in text
    assert "garbage.yaml: unreadable" in text


def test_cli_usage_errors(tmp_path: Path) -> None:
    pod, nrts, _ = write_inputs(tmp_path)
    runner = CliRunner()
    assert runner.invoke(command, ["--pod", str(pod)]).exit_code == 2
    assert runner.invoke(command, ["--pod", str(pod), "--nrt", str(nrts), "--api-server", "http://x"]).exit_code == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "metadata": {"name": "x"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "many"}}}]},
            }
        )
    )
    result = runner.invoke(command, ["--pod", str(bad), "--nrt", str(nrts)])
    assert result.exit_code == 2 and "cpu" in result.output


async def test_cli_reads_the_cluster(tmp_path: Path) -> None:
    pod, _, _ = write_inputs(tmp_path)
    async with FakeApiServer() as server:
        await seed_crd(server.store)
        for doc in cluster():
            await server.store.create(NODE_RESOURCE_TOPOLOGY, doc)
            await server.store.create(NODE, node_doc(doc["metadata"]["name"]))
        await server.store.create(NODE, node_doc("no-nrt"))
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        runner = CliRunner()
        result = await asyncio.to_thread(
            runner.invoke, command, ["--pod", str(pod), "--kubeconfig", str(kubeconfig), "-o", "json"]
        )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert {n["node"]: n["fits"] for n in doc["nodes"]} == {"roomy": True, "odd": True, "no-nrt": True, "tight": False}
    assert doc["ignored"] == []


def test_cli_refuses_a_pod_with_a_negative_limit(tmp_path: Path) -> None:
    pod, nrts, _ = write_inputs(tmp_path)
    doc = pod_doc("web", 3)
    doc["spec"]["initContainers"] = [{"name": "init", "resources": {"limits": {"cpu": "-2"}}}]
    pod.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(command, ["--pod", str(pod), "--nrt", str(nrts)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "invalid pod at spec.initContainers[0].resources.limits.cpu: quantity '-2'" in result.output


def test_a_node_without_per_zone_memory_is_explained() -> None:
    """Memory manager None: zones carry no memory rows, and every Guaranteed pod asking memory is refused."""
    no_memory = nrt_doc("no-memory", [zone_doc(0, {"cpu": (8, 8)}), zone_doc(1, {"cpu": (8, 8)})])
    report = explain_pod(parse_pod(pod_doc("db", 2)), [("file", no_memory)])
    (node,) = report.nodes
    assert not node.fits and node.resource == "memory"
    assert any("memory manager policy is None" in note and "Static" in note for note in node.notes)

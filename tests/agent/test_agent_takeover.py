"""The take-over switch: the agent refuses to enforce while the kubelet's static managers are on."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from numaplane.agent.errors import AgentConfigError
from numaplane.agent.takeover import CONDITION_TYPE, check, check_source
from numaplane.cli import main
from numaplane.exporter.errors import KubeletConfigError
from numaplane.exporter.kubelet import parse_kubelet_config
from numaplane.kube.resources import EVENT, POD
from numaplane.testing.fakeapi import FakeApiServer

STATIC = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\n"
NONE = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntopologyManagerPolicy: best-effort\n"


def test_static_cpu_or_memory_manager_refuses() -> None:
    assert not check({"cpuManagerPolicy": "static"}, "f").may_take_over
    assert not check({"memoryManagerPolicy": "Static"}, "f").may_take_over
    both = check({"cpuManagerPolicy": "static", "memoryManagerPolicy": "Static"}, "f")
    assert len(both.reasons) == 2 and "refusing to enforce" in both.message()


def test_defaults_and_topology_manager_alone_allow_with_a_warning() -> None:
    assert check({}, "f").may_take_over
    verdict = check({"topologyManagerPolicy": "single-numa-node"}, "f")
    assert verdict.may_take_over and verdict.warnings


@pytest.fixture
def configz() -> Iterator[str]:
    body = json.dumps({"kubeletconfig": {"cpuManagerPolicy": "static", "memoryManagerPolicy": "None"}}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/v1/nodes/n1/proxy/configz"
    finally:
        server.shutdown()


def test_configz_envelope_is_read(configz: str) -> None:
    verdict = check_source(configz)
    assert verdict.cpu_manager_policy == "static" and not verdict.may_take_over


def test_agent_check_prints_and_exits_by_verdict(tmp_path: Path) -> None:
    static, none = tmp_path / "static.yaml", tmp_path / "none.yaml"
    static.write_text(STATIC)
    none.write_text(NONE)
    refused = CliRunner().invoke(main, ["agent", "--check", "--kubelet-config", str(static)])
    assert refused.exit_code == 1 and json.loads(refused.output)["mayTakeOver"] is False
    allowed = CliRunner().invoke(main, ["agent", "--check", "--kubelet-config", str(none)])
    assert allowed.exit_code == 0 and json.loads(allowed.output)["warnings"]
    missing = CliRunner().invoke(main, ["agent", "--check", "--kubelet-config", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2


def test_agent_refuses_to_start_while_the_kubelet_pins(tmp_path: Path) -> None:
    static = tmp_path / "static.yaml"
    static.write_text(STATIC)
    args = ["agent", "--kubelet-config", str(static), "--state-dir", str(tmp_path / "s"), "--log-format", "console"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "refusing to enforce" in result.output and "cpuManagerPolicy" in result.output


async def test_refusal_is_a_condition_and_an_event_on_the_agent_pod(
    tmp_path: Path, fake_apiserver: FakeApiServer
) -> None:
    kube = fake_apiserver.port_client()
    try:
        await kube.create(
            POD,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "agent-x1", "namespace": "default"},
                "spec": {"containers": [{"name": "agent", "image": "numaplane"}]},
            },
        )
        static = tmp_path / "static.yaml"
        static.write_text(STATIC)
        args = [
            *("agent", "--kubelet-config", str(static), "--state-dir", str(tmp_path / "s"), "--watch-pods"),
            *("--api-server", fake_apiserver.url, "--pod-name", "agent-x1", "--pod-namespace", "default"),
            *("--node-name", "node-x1"),
        ]
        result = await asyncio.to_thread(CliRunner().invoke, main, args)
        assert result.exit_code == 1, result.output
        pod = await kube.get(POD, "agent-x1", namespace="default")
        (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == CONDITION_TYPE]
        assert condition["status"] == "False" and condition["reason"] == "KubeletStaticPolicy"
        assert "cpuManagerPolicy" in condition["message"]
        (event,) = (await kube.list(EVENT, namespace="default")).items
        assert event["type"] == "Warning" and event["reason"] == "KubeletStaticPolicy"
        assert event["involvedObject"]["name"] == "agent-x1" and event["involvedObject"]["kind"] == "Pod"
        assert event["involvedObject"]["uid"] == pod["metadata"]["uid"]
        assert "cpuManagerPolicy" in event["message"]
        # reported as its node: what the API server's admission policy compares with the token's node
        assert event["source"]["host"] == "node-x1" and event["reportingInstance"] == "node-x1"
    finally:
        await kube.close()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("kind: KubeletConfiguration\ncpuManagerPolicy: static\n", "not a KubeletConfiguration (no apiVersion"),
        (STATIC + "cpuManagerPolicy: 1\n", "cpuManagerPolicy: must be a string, got int"),
        (STATIC.replace("cpuManagerPolicy", "CPUManagerPolicy"), "CPUManagerPolicy: unknown field"),
        (STATIC + "topologyManagerPolicy: strict\n", "topologyManagerPolicy: 'strict' is not one of"),
    ],
)
def test_the_agent_reads_the_kubelet_config_with_the_exporters_strict_reader(
    tmp_path: Path, text: str, reason: str
) -> None:
    """One reader (numaplane.kube.kubeletconfig) for the agent and the exporter: the same refusals."""
    path = tmp_path / "kubelet.yaml"
    path.write_text(text)
    with pytest.raises(AgentConfigError) as agent:
        check_source(str(path))
    assert str(agent.value).startswith(f"kubelet configuration {path}: ") and reason in str(agent.value)
    with pytest.raises(KubeletConfigError) as exporter:
        parse_kubelet_config(text, str(path))
    assert str(exporter.value).startswith(f"{path}: ") and reason in str(exporter.value)

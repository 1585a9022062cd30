"""``numaplane exporter``: --oneshot output, usage errors, and the daemon as a real process (JSON logs, SIGTERM)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from exp_helpers import NODE, assert_valid, attribute, zone_row

from numaplane.cli.exporter import command
from numaplane.kube.errors import NotFound
from numaplane.kube.resources import CRD, NODE_RESOURCE_TOPOLOGY
from numaplane.kube.resources import NODE as NODE_RES
from numaplane.nrt.crd import crd_manifest
from numaplane.testing.fakeapi import FakeApiServer


@pytest.fixture
def fake_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "podres"
    folder.mkdir()
    (folder / "get_allocatable_resources.json").write_text(json.dumps({"cpu_ids": [1, 2, 3, 5, 6, 7]}))
    pods = [{"name": "gu", "namespace": "default", "containers": [{"name": "c", "cpu_ids": [1, 2]}]}]
    (folder / "list.json").write_text(json.dumps({"pod_resources": pods}))
    return folder


@pytest.fixture(autouse=True)
def keep_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs must not reconfigure the test session's logging."""
    monkeypatch.setattr("numaplane.observability.logs.configure_logging", lambda fmt="json", level="info": None)


def _args(fake_dir: Path, sysfs_root: Path, *extra: str) -> list[str]:
    return [
        "--node-name",
        NODE,
        "--podresources-socket",
        f"fake://{fake_dir}",
        "--sysfs-root",
        str(sysfs_root),
        *extra,
    ]


def test_oneshot_prints_the_object(fake_dir: Path, sysfs_root: Path, tmp_path: Path) -> None:
    kubelet = tmp_path / "kubelet.yaml"
    kubelet.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntopologyManagerPolicy: restricted\ntopologyManagerScope: pod\n"
    )
    runner = CliRunner()
    result = runner.invoke(command, [*_args(fake_dir, sysfs_root, "--kubelet-config", str(kubelet)), "--oneshot"])
    assert result.exit_code == 0, result.output
    obj = json.loads(result.stdout)
    assert_valid(obj)
    assert attribute(obj, "topologyManagerPolicy") == "restricted"
    assert zone_row(obj, "node-0", "cpu")["available"] == "1"
    flags = ["--topology-manager-policy", "single-numa-node", "--topology-manager-scope", "container"]
    result = runner.invoke(
        command, [*_args(fake_dir, sysfs_root, "--kubelet-config", str(kubelet), *flags), "--oneshot", "-o", "yaml"]
    )
    assert result.exit_code == 0, result.output
    obj = yaml.safe_load(result.stdout)
    assert_valid(obj)
    assert attribute(obj, "topologyManagerPolicy") == "single-numa-node"  # flags win over the file


def test_usage_and_input_errors(fake_dir: Path, sysfs_root: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(command, [*_args(fake_dir, sysfs_root), "--oneshot"])
    assert result.exit_code == 2 and "Topology Manager" in result.output
    tm = ["--topology-manager-policy", "none", "--topology-manager-scope", "pod"]
    result = runner.invoke(command, [*_args(fake_dir, sysfs_root, *tm), "--exclude-pods", "a/b/c", "--oneshot"])
    assert result.exit_code == 2 and "pod exclude" in result.output
    (fake_dir / "list.json").write_text("[")
    result = runner.invoke(command, [*_args(fake_dir, sysfs_root, *tm), "--oneshot"])
    assert result.exit_code == 1 and "podresources_malformed" in result.output


async def test_daemon_process_publishes_logs_json_and_stops_on_sigterm(
    fake_dir: Path, sysfs_root: Path, short_dir: Path
) -> None:
    async with FakeApiServer() as api:
        await api.store.create(CRD, crd_manifest())
        await api.store.create(NODE_RES, {"metadata": {"name": NODE}})
        argv = [
            *_args(fake_dir, sysfs_root, "--topology-manager-policy", "none", "--topology-manager-scope", "pod"),
            "--api-server",
            api.url,
            "--notify-file",
            str(short_dir / "notify"),
            "--metrics-address",
            "127.0.0.1:0",
            "--health-address",
            "",
        ]
        code = "import sys; from numaplane.cli import main; sys.exit(main())"
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            code,
            "exporter",
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while True:
                try:
                    obj = await api.store.get(NODE_RESOURCE_TOPOLOGY, NODE)
                    break
                except NotFound:
                    assert process.returncode is None, "the exporter exited early"
                    assert loop.time() < deadline, "no object within 20 s"
                    await asyncio.sleep(0.05)
            assert_valid(obj)
            assert obj["metadata"]["ownerReferences"][0]["kind"] == "Node"
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(process.communicate(), 20)
        assert process.returncode == 0, stderr.decode()
        lines = [json.loads(line) for line in stderr.decode().splitlines() if line.strip()]
        events = {line["event"] for line in lines}
        assert {"exporter_started", "object_published", "exporter_stopped"} <= events
        started = next(line for line in lines if line["event"] == "exporter_started")
        assert started["node"] == NODE and started["level"] == "info" and "timestamp" in started

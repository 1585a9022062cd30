"""Issue 23 item 2, agent mode: the NRT's Topology Manager attributes are the policy the agent applied *now*.

The agent writes the configuration in force to ``--applied-policy-file`` at start and after every applied
change; the exporter (``--applied-policy-file``, the same file) watches it and republishes at once,
without a restart. Proven with both real processes: ``numaplane agent`` (NRI from the project's fake
runtime, its own PodResources socket) and ``numaplane exporter`` reading that socket and publishing to
the fake API server. On the old main the exporter took the policy from a flag rendered from the
NodeResourcePolicy, so the attribute kept the old policy until the exporter pod was rolled.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from exp_helpers import NODE, assert_valid, attribute

from numaplane.agent.appliedpolicy import AppliedPolicyWriter
from numaplane.cli.exporter import command as exporter_command
from numaplane.exporter.applied import AppliedPolicySource
from numaplane.exporter.errors import AppliedPolicyError
from numaplane.kube.errors import NotFound
from numaplane.kube.resources import CRD, NODE_RESOURCE_TOPOLOGY
from numaplane.kube.resources import NODE as NODE_RES
from numaplane.nrt.crd import crd_manifest
from numaplane.policy.config import NodeResourceConfig, parse_config
from numaplane.testing.fakeapi import FakeApiServer
from numaplane_harness.nrifake import FakeRuntime

pytestmark = pytest.mark.timeout(90)

CODE = "import sys; from numaplane.cli import main; sys.exit(main())"


def policy(tm: str, scope: str = "container", revision: str = "1") -> str:
    doc = {
        "apiVersion": "numaplane.io/v1",
        "kind": "NodeResourceConfig",
        "metadata": {"revision": revision},
        "topologyManager": {"policy": tm, "scope": scope},
        "cpuManager": {"policy": "static", "reservedCPUs": "0"},
    }
    return json.dumps(doc)


@asynccontextmanager
async def process(args: list[str], log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", CODE, *args, stdout=sink, stderr=sink)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def wait_for(what: str, check: Any, logs: list[Path], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)
            raise AssertionError(f"not within {timeout} s: {what}\n{tails}")
        await asyncio.sleep(0.05)


async def test_the_exporter_publishes_the_policy_the_agent_applies_now(sysfs_root: Path, short_dir: Path) -> None:
    config = short_dir / "config.json"
    config.write_text(policy("single-numa-node", revision="1"))
    applied = short_dir / "run" / "applied-policy.json"
    runtime = FakeRuntime()
    await runtime.listen(str(short_dir / "nri.sock"))
    agent_log, exporter_log = short_dir / "agent.log", short_dir / "exporter.log"
    logs = [agent_log, exporter_log]
    agent_args = [
        "agent",
        f"--nri-socket={short_dir / 'nri.sock'}",
        f"--state-dir={short_dir / 'state'}",
        f"--config={config}",
        "--config-poll-interval=0.05",
        f"--sysfs-root={sysfs_root}",
        f"--node-name={NODE}",
        f"--podresources-socket={short_dir / 'pr.sock'}",
        f"--notify-file={short_dir / 'run' / 'notify'}",
        f"--applied-policy-file={applied}",
        "--kubelet-config=",
        "--metrics-address=",
        "--health-address=",
        "--log-format=console",
    ]
    try:
        async with FakeApiServer() as api:
            await api.store.create(CRD, crd_manifest())
            await api.store.create(NODE_RES, {"metadata": {"name": NODE}})
            exporter_args = [
                "exporter",
                f"--node-name={NODE}",
                f"--podresources-socket=unix://{short_dir / 'pr.sock'}",
                f"--sysfs-root={sysfs_root}",
                f"--applied-policy-file={applied}",
                "--refresh-mode=events",
                f"--notify-file={short_dir / 'run' / 'notify'}",
                "--heartbeat=0",
                f"--api-server={api.url}",
                "--metrics-address=",
                "--health-address=",
                "--log-format=console",
                "--log-level=debug",
            ]

            async def nrt() -> dict[str, Any] | None:
                try:
                    return await api.store.get(NODE_RESOURCE_TOPOLOGY, NODE)
                except NotFound:
                    return None

            async def policy_is(want: str) -> dict[str, Any] | None:
                obj = await nrt()
                return obj if obj is not None and attribute(obj, "topologyManagerPolicy") == want else None

            # the exporter first, as a DaemonSet may start it: no applied policy yet, so nothing is published
            async with process(exporter_args, exporter_log) as exporter:
                await wait_for(
                    "the exporter says it has no applied policy yet",
                    lambda: _logged(exporter_log, "no applied policy yet"),
                    logs,
                )
                assert await nrt() is None
                async with process(agent_args, agent_log) as agent:
                    obj = await wait_for("the NRT with the agent's policy", lambda: policy_is("single-numa-node"), logs)
                    assert_valid(obj)
                    assert attribute(obj, "topologyManagerScope") == "container"
                    # the policy changes live in the agent (the ConfigMap's file); the NRT follows, no restart
                    config.write_text(policy("restricted", "pod", revision="2"))
                    changed = time.monotonic()
                    obj = await wait_for("the NRT with the new policy", lambda: policy_is("restricted"), logs)
                    took = time.monotonic() - changed
                    assert attribute(obj, "topologyManagerScope") == "pod"
                    assert exporter.returncode is None and agent.returncode is None  # neither restarted
                    assert took < 5.0, took
                    written = json.loads(applied.read_text())
                    assert written["metadata"]["revision"] == "2" and written["metadata"]["node"] == NODE
                    # a rejected policy is never published: the agent keeps the old one in force
                    config.write_text(json.dumps({"topologyManager": {"policy": "sometimes"}}))
                    await wait_for("the agent rejects it", lambda: _logged(agent_log, "config rejected"), logs)
                    await asyncio.sleep(0.5)
                    obj = await nrt()
                    assert obj is not None and attribute(obj, "topologyManagerPolicy") == "restricted"
                    assert json.loads(applied.read_text())["metadata"]["revision"] == "2"
                print(f"\npolicy change → NRT attribute: {took:.3f} s (agent config poll 0.05 s)")
    finally:
        await runtime.close()


async def _logged(log: Path, text: str) -> bool:
    return log.exists() and text in log.read_text(errors="replace")


async def test_the_agent_writes_the_policy_in_force_atomically(tmp_path: Path) -> None:
    path = tmp_path / "run" / "applied-policy.json"
    results: list[bool] = []
    writer = AppliedPolicyWriter(path, NODE, on_result=results.append)
    writer.prepare()
    config = parse_config({"topologyManager": {"policy": "best-effort", "scope": "pod"}})
    assert await writer.write(config, "7")
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert not [p for p in path.parent.iterdir() if p.name != path.name]  # no temp file left
    settings = AppliedPolicySource(path).read()
    assert (settings.topology_manager_policy, settings.topology_manager_scope) == ("best-effort", "pod")
    assert (settings.cpu_manager_policy, settings.memory_manager_policy) == ("static", "None")
    # the document is the agent's own configuration format: it parses back to the same config
    doc = json.loads(path.read_text())
    assert parse_config(doc) == config and doc["metadata"]["revision"] == "7"
    # a failing write is reported (counted, readiness details), never raised
    blocker = tmp_path / "file"
    blocker.write_text("")
    broken = AppliedPolicyWriter(blocker / "applied.json", NODE, on_result=results.append)
    assert not await broken.write(NodeResourceConfig(), None)
    assert "applied.json" in broken.last_error
    assert results == [True, False]


def test_unusable_applied_policy_files_are_errors_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "applied.json"
    with pytest.raises(AppliedPolicyError, match=f"{path}: no applied policy yet"):
        AppliedPolicySource(path).read()
    path.write_text("{")
    with pytest.raises(AppliedPolicyError, match=str(path)):
        AppliedPolicySource(path).read()
    path.write_text(json.dumps({"topologyManager": {"policy": "sometimes"}}))
    with pytest.raises(AppliedPolicyError, match=f"{path}: invalid configuration"):
        AppliedPolicySource(path).read()


def test_the_applied_policy_file_excludes_the_other_sources(tmp_path: Path, sysfs_root: Path) -> None:
    applied = tmp_path / "applied.json"
    base = ["--node-name", NODE, "--podresources-socket", f"fake://{tmp_path}", "--sysfs-root", str(sysfs_root)]
    runner = CliRunner()
    for extra in (
        ["--kubelet-config", str(tmp_path / "kubelet.yaml")],
        ["--topology-manager-policy", "restricted", "--topology-manager-scope", "pod"],
    ):
        result = runner.invoke(exporter_command, [*base, "--applied-policy-file", str(applied), *extra, "--oneshot"])
        assert result.exit_code == 2, result.output
        assert "--applied-policy-file" in result.output and "Traceback" not in result.output

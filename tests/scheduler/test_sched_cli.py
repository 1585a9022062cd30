"""``numaplane scheduler extender|run`` as processes against the fake API server, and their usage errors."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
from pathlib import Path

import aiohttp
from click.testing import CliRunner
from sched_helpers import FakeKubelets, eventually, load_capture, nrt_doc, pod_doc, seed_crd, zone_doc

from numaplane.cli.scheduler import _config, group
from numaplane.kube.resources import LEASE, NAMESPACE, NODE, NODE_RESOURCE_TOPOLOGY, POD
from numaplane.testing.fakeapi import FakeApiServer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from numaplane.cli import main; main()",
        "scheduler",
        *args,
        stderr=asyncio.subprocess.PIPE,
    )


async def http_status(url: str) -> int:
    try:
        async with aiohttp.ClientSession() as http, http.get(url) as response:
            return response.status
    except aiohttp.ClientError:
        return 0


async def terminate(proc: asyncio.subprocess.Process) -> tuple[int | None, str]:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    return proc.returncode, err.decode(errors="replace")


async def test_extender_process(shared_dir: Path) -> None:
    async with FakeApiServer() as server:
        store = server.store
        await seed_crd(store)
        await store.create(NAMESPACE, {"metadata": {"name": "numaplane-wire"}})
        request = load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json")
        for node in load_capture(shared_dir, "nodecachecapable-false.filter.guaranteed.json")["Nodes"]["items"]:
            await store.create(NODE, node)
        await store.create(
            NODE_RESOURCE_TOPOLOGY, nrt_doc("rig-node", [zone_doc(0, {"cpu": (2, 2), "memory": ("1Gi", "1Gi")})])
        )
        port, metrics_port = free_port(), free_port()
        proc = await spawn(
            "extender",
            f"--api-server={server.url}",
            f"--listen=127.0.0.1:{port}",
            f"--metrics-address=127.0.0.1:{metrics_port}",
            "--url-prefix=/numaplane",
            "--scheduler-name=numaplane-extender-test",
            "--cache=passthrough",
        )
        try:
            await eventually(lambda: _is(f"http://127.0.0.1:{port}/readyz", 200), timeout=20, interval=0.1)
            async with aiohttp.ClientSession() as http:
                async with http.post(f"http://127.0.0.1:{port}/numaplane/filter", data=json.dumps(request)) as r:
                    assert r.status == 200
                    body = await r.json()
                async with http.get(f"http://127.0.0.1:{metrics_port}/metrics") as r:
                    metrics = await r.text()
                async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
                    assert r.status == 404  # metrics moved to their own address
            assert body["NodeNames"] == ["numaplane-fake-node", "rig-node"]  # no NRT on the first: passes unchecked
            assert body["Error"] == ""
            assert (
                'numaplane_scheduler_info{cache="passthrough",mode="extender",scoring_strategy="LeastAllocated"} 1.0'
                in metrics
            )
        finally:
            code, err = await terminate(proc)
        assert code == 0, err[-2000:]
        assert '"event": "extender listening"' in err


async def _is(url: str, status: int) -> bool:
    return await http_status(url) == status


async def test_run_process_binds_under_leader_election() -> None:
    async with FakeApiServer() as server:
        store = server.store
        await seed_crd(store)
        await FakeKubelets(store, ["worker"]).seed()
        health, metrics = free_port(), free_port()
        proc = await spawn(
            "run",
            f"--api-server={server.url}",
            f"--health-address=127.0.0.1:{health}",
            f"--metrics-address=127.0.0.1:{metrics}",
            "--leader-elect",
            "--leader-elect-namespace=default",
            "--leader-elect-identity=proc-1",
            "--resync-period=0.5",
            "--log-level=debug",
        )
        try:
            await eventually(lambda: _is(f"http://127.0.0.1:{health}/readyz", 200), timeout=20, interval=0.1)
            await store.create(POD, pod_doc("web", 2))

            async def is_bound() -> bool:
                return bool((await store.get(POD, "web"))["spec"].get("nodeName"))

            await eventually(is_bound, timeout=15)
            async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{metrics}/metrics") as r:
                text = await r.text()
            assert 'numaplane_scheduler_binds_total{result="success"} 1.0' in text
            assert "numaplane_scheduler_leader 1.0" in text
            assert 'numaplane_scheduler_scheduling_attempt_duration_seconds_count{result="scheduled"} 1.0' in text
        finally:
            code, err = await terminate(proc)
        assert code == 0, err[-2000:]
        lease = await store.get(LEASE, "numaplane-scheduler", namespace="default")
        assert not lease["spec"].get("holderIdentity")  # released on SIGTERM
        assert '"event": "assumed"' in err and '"node": "worker"' in err


def test_usage_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    help_text = runner.invoke(group, ["--help"]).output
    assert "extender" in help_text and "run" in help_text
    bad = tmp_path / "config.yaml"
    bad.write_text("scoringStrategy: {type: Fastest}\n")
    cases = [
        ["run", "--config", str(bad)],
        ["run", "--resource-weight", "cpu"],
        ["run", "--metrics-address", "nowhere"],
        ["extender", "--address", "127.0.0.1:99999"],
        ["run", "--leader-elect", "--leader-elect-lease-duration", "1", "--leader-elect-renew-deadline", "2"],
    ]
    for args in cases:
        result = runner.invoke(group, args)
        assert result.exit_code == 2, (args, result.output)
    assert "invalid ScoringStrategyType" in runner.invoke(group, ["run", "--config", str(bad)]).output


def _operator_args(mode: str, **spec: object) -> list[list[str]]:
    """The numaplane container args the operator renders for a NUMAResourcesScheduler."""
    from numaplane.operator.api.scheduler import API_VERSION, KIND, SINGLETON_NAME, NUMAResourcesScheduler
    from numaplane.operator.render_common import Settings
    from numaplane.operator.render_scheduler import render_scheduler_objects

    nrs = NUMAResourcesScheduler.from_dict(
        {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": SINGLETON_NAME}, "spec": {"mode": mode, **spec}}
    )
    out = []
    for obj in render_scheduler_objects(nrs, Settings()):
        if obj["kind"] == "Deployment":
            for c in obj["spec"]["template"]["spec"]["containers"]:
                if c.get("args", [""])[0] == "scheduler":
                    out.append(c["args"])
    return out


def test_the_operators_command_lines_are_accepted() -> None:
    """Contract with numaplane.operator.render_scheduler: every rendered command line parses here."""
    variants = [
        ("standalone", {}),
        ("standalone", {"replicas": 2, "cacheResyncPeriod": "0s", "schedulerInformer": "Shared", "logLevel": "Debug"}),
        ("extender", {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 3}]}}),
    ]
    seen = set()
    for mode, spec in variants:
        for args in _operator_args(mode, **spec):
            assert args[0] == "scheduler"
            command = group.commands[args[1]]
            ctx = command.make_context(args[1], list(args[2:]))
            seen.add(args[1])
            defaults = ("numaplane-scheduler",)
            config = _config(ctx.params, defaults)
            if spec.get("cacheResyncPeriod") == "0s":
                assert config.cache_mode == "passthrough" and config.cache.informer_mode == "Shared"
            else:
                assert config.cache_mode == "overreserve" and config.cache.resync_period_seconds == 5.0
            if mode == "extender":
                assert ctx.params["address"] == "127.0.0.1:8888"
                assert config.strategy.type == "MostAllocated" and config.strategy.weight("cpu") == 3
            elif spec.get("replicas"):
                assert ctx.params["leader_elect"] and ctx.params["leader_elect_lease_name"] == "numaplane-scheduler"
    assert seen == {"run", "extender"}

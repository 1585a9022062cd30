"""``numaplane operator`` as a process against the fake API server: probes, metrics, deploys, stops."""

from __future__ import annotations

import asyncio
import copy
import signal
import socket
import sys

import httpx2

from numaplane.kube.resources import CRD, DAEMON_SET
from numaplane.nrt.crd import crd_manifest
from numaplane.operator.controller import NUMA_RESOURCES_OPERATOR
from numaplane.operator.crds import all_crds
from numaplane.operator.render import sample_resources
from numaplane.testing.fakeapi import FakeApiServer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_operator_process_serves_probes_and_deploys() -> None:
    async with FakeApiServer() as server:
        kube = server.port_client()
        for crd in [*all_crds(), crd_manifest()]:
            await kube.create(CRD, crd)
        metrics, health = _free_port(), _free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "from numaplane.cli import main; main()",
            "operator",
            f"--server={server.url}",
            "--namespace=numaplane-system",
            "--image=example.org/np:1",
            "--leader-elect",
            f"--metrics-address=127.0.0.1:{metrics}",
            f"--health-address=127.0.0.1:{health}",
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await kube.create(NUMA_RESOURCES_OPERATOR, copy.deepcopy(sample_resources()[0]))
            async with httpx2.AsyncClient(trust_env=False) as http:
                ready = False
                for _ in range(150):
                    await asyncio.sleep(0.1)
                    try:
                        ready = (await http.get(f"http://127.0.0.1:{health}/readyz")).status_code == 200
                        names = {
                            o["metadata"]["name"]
                            for o in (await kube.list(DAEMON_SET, namespace="numaplane-node")).items
                        }
                    except httpx2.HTTPError:
                        continue
                    body = (await http.get(f"http://127.0.0.1:{metrics}/metrics")).text
                    done = 'numaplane_operator_reconcile_total{controller="operator",result="success"}' in body
                    if ready and done and "numaplane-exporter-worker" in names:
                        break
                else:
                    raise AssertionError("operator never became ready and deployed")
                assert (await http.get(f"http://127.0.0.1:{health}/healthz")).status_code == 200
            ds = await kube.get(DAEMON_SET, "numaplane-exporter-worker", namespace="numaplane-node")
            assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "example.org/np:1"
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), 20)
        assert proc.returncode == 0, err.decode()[-2000:]
        await kube.close()

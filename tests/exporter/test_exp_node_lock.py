"""Issue 23 item 4: one exporter per node at a time (RTE PR#394: two exporters flap the object).

Two real ``numaplane exporter`` processes for the same node, with different views of it (their own
``fake://`` PodResources answers: 2 CPUs taken on node-0, or none), publish to the fake API server
with the same ``--lock-file``. The second waits — alive, not ready, its ``/readyz`` and its log naming
the holder — and the object never shows its view while the first runs; once the first is killed
(SIGKILL: the kernel releases the lock) the second takes over within a second. On the old main
both published, and the object alternated between the two views.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from exp_helpers import NODE, zone_row

from numaplane.exporter.errors import ExporterConfigError
from numaplane.exporter.nodelock import NodeLock
from numaplane.kube.errors import Gone
from numaplane.kube.resources import CRD, NODE_RESOURCE_TOPOLOGY
from numaplane.kube.resources import NODE as NODE_RES
from numaplane.nrt.crd import crd_manifest
from numaplane.testing.fakeapi import FakeApiServer

pytestmark = pytest.mark.timeout(90)

CODE = "import sys; from numaplane.cli import main; sys.exit(main())"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(folder: Path, taken: list[int]) -> Path:
    folder.mkdir()
    (folder / "get_allocatable_resources.json").write_text(json.dumps({"cpu_ids": [1, 2, 3, 5, 6, 7]}))
    pods = [{"name": "gu", "namespace": "default", "containers": [{"name": "c", "cpu_ids": taken}]}] if taken else []
    (folder / "list.json").write_text(json.dumps({"pod_resources": pods}))
    return folder


@asynccontextmanager
async def exporter(args: list[str], log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CODE, "exporter", *args, stdout=sink, stderr=sink
        )
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


async def readyz(port: int) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/readyz") as answer:
        return answer.status, json.loads(await answer.text())


async def until(what: str, check: Any, logs: list[Path], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = await check()
        except (OSError, aiohttp.ClientError):
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}" for p in logs)
            raise AssertionError(f"not within {timeout} s: {what}\n{tails}")
        await asyncio.sleep(0.05)


async def test_a_second_exporter_for_the_node_waits_instead_of_flapping_the_object(
    sysfs_root: Path, short_dir: Path
) -> None:
    lock = short_dir / "run" / "exporter.lock"
    async with FakeApiServer() as api:
        await api.store.create(CRD, crd_manifest())
        await api.store.create(NODE_RES, {"metadata": {"name": NODE}})
        seen: list[str] = []  # node-0's available CPUs in every version the server stores

        async def follow() -> None:
            version: str | None = None
            while True:
                try:
                    async for event in api.store.watch(NODE_RESOURCE_TOPOLOGY, resource_version=version):
                        version = event.resource_version or version
                        if event.type.value in ("ADDED", "MODIFIED"):
                            seen.append(zone_row(event.object, "node-0", "cpu")["available"])
                except Gone:
                    version = None

        watcher = asyncio.create_task(follow())
        ports = [free_port(), free_port()]
        logs = [short_dir / "first.log", short_dir / "second.log"]

        def args(name: str, taken: list[int], port: int) -> list[str]:
            return [
                f"--node-name={NODE}",
                f"--podresources-socket=fake://{answers(short_dir / name, taken)}",
                f"--sysfs-root={sysfs_root}",
                "--topology-manager-policy=single-numa-node",
                "--topology-manager-scope=container",
                "--refresh-mode=periodic",
                "--period=0.2",
                "--heartbeat=0",
                f"--api-server={api.url}",
                f"--lock-file={lock}",
                "--metrics-address=",
                f"--health-address=127.0.0.1:{port}",
                "--log-format=console",
            ]

        try:
            async with exporter(args("first", [1, 2], ports[0]), logs[0]) as first:

                async def first_published() -> bool:
                    return seen[-1:] == ["1"] and (await readyz(ports[0]))[0] == 200

                await until("the first exporter's object", first_published, logs)
                async with exporter(args("second", [], ports[1]), logs[1]) as second:

                    async def second_waits() -> dict[str, Any] | None:
                        status, details = await readyz(ports[1])
                        return details if status == 503 and "waiting" in str(details.get("node_lock")) else None

                    details = await until("the second exporter waiting for the lock", second_waits, logs)
                    assert f"pid={first.pid}" in details["node_lock"], details
                    log = logs[1].read_text()
                    assert "node_lock_busy" in log and f"pid={first.pid}" in log
                    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{ports[1]}/healthz") as r:
                        assert r.status == 200  # alive: a liveness restart would not help
                    await asyncio.sleep(2.0)  # ten periods of both: the object keeps the first's view
                    assert set(seen) == {"1"}, seen
                    assert second.returncode is None
                    first.send_signal(signal.SIGKILL)
                    killed = time.monotonic()
                    await first.wait()

                    async def second_published() -> bool:
                        return seen[-1:] == ["3"] and (await readyz(ports[1]))[0] == 200

                    await until("the second exporter takes over", second_published, logs)
                    took = time.monotonic() - killed
                    assert took < 3.0, took
                    assert "node_lock_acquired" in logs[1].read_text()
            assert seen == ["1", "3"], seen  # one hand-over, no flapping
            print(f"\nfirst exporter killed → second one published: {took:.2f} s (lock retry 0.5 s)")
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)


def test_the_lock_is_exclusive_released_on_close_and_names_its_holder(tmp_path: Path) -> None:
    path = tmp_path / "run" / "exporter.lock"
    first, second = NodeLock(path, node=NODE, pod="exp-a"), NodeLock(path, node=NODE)
    assert first.try_acquire() and first.held
    assert not second.try_acquire() and not second.held  # another open file description: refused
    assert f"node={NODE} pod=exp-a" in second.holder()
    first.release()
    assert second.try_acquire()
    second.release()


def test_an_unusable_lock_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ExporterConfigError, match=f"lock file {blocker / 'exporter.lock'}"):
        NodeLock(blocker / "exporter.lock", node=NODE).try_acquire()


def test_the_cli_refuses_an_unusable_lock_file_in_one_line(sysfs_root: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    fake = answers(tmp_path / "podres", [])
    got = subprocess.run(
        [
            sys.executable, "-c", CODE, "exporter", f"--node-name={NODE}", f"--podresources-socket=fake://{fake}",
            f"--sysfs-root={sysfs_root}", "--topology-manager-policy=none", "--topology-manager-scope=container",
            "--api-server=http://127.0.0.1:9", f"--lock-file={blocker / 'exporter.lock'}",
            "--metrics-address=", "--health-address=",
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert got.returncode == 2, got.stderr
    assert "Traceback" not in got.stderr
    errors = [line for line in got.stderr.splitlines() if line.startswith("Error:")]
    assert errors and f"lock file {blocker / 'exporter.lock'}" in errors[0], got.stderr

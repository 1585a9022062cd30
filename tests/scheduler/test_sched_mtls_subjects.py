"""Mutual TLS on the extender accepts only the allowed client subjects (issue 25 item 9).

Before: every certificate the client CA signed passed — with the cluster CA, every kubelet's and every
user's. Now the client's common name or subjectAltName must be on ``--client-allowed-subject`` (default
kube-scheduler's identity, ``system:kube-scheduler``); any other client gets HTTP 403 before a verb runs.
Real certificates from the harness's cluster CA (``numaplane_harness.kubecerts``), real TLS handshakes.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from sched_helpers import load_capture
from test_sched_extender import seed
from test_sched_hardening import started

from numaplane.observability.tls import DEFAULT_CLIENT_SUBJECTS, client_identity, server_context
from numaplane.testing.fakeapi import FakeApiServer
from numaplane_harness.kubecerts import CertificateAuthority

pytestmark = pytest.mark.timeout(60)


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as api:
        yield api


class Certs:
    """A cluster-like CA and the clients it signs: kube-scheduler, a kubelet, an admin, a SAN-named one."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(exist_ok=True)
        self.ca = CertificateAuthority.create(folder, "ca", "cluster-ca")
        self.server = self.ca.issue("extender", "numaplane-extender", server_ips=("127.0.0.1",), client=False)
        self.clients = {
            "kube-scheduler": self.ca.issue("kube-scheduler", "system:kube-scheduler"),
            "kubelet": self.ca.issue("kubelet", "system:node:worker-1", organizations=("system:nodes",)),
            "admin": self.ca.issue("admin", "kubernetes-admin", organizations=("system:masters",)),
            # a serving+client certificate: CN 'custom-scheduler', SAN DNS 'scheduler.example'
            "by-san": self.ca.issue("by-san", "custom-scheduler", server_names=("scheduler.example",)),
        }
        # the same CN as kube-scheduler, signed by another CA: refused at the handshake
        other = CertificateAuthority.create(folder, "other-ca", "other-ca")
        self.foreign = other.issue("foreign", "system:kube-scheduler")

    def context(self) -> ssl.SSLContext:
        return server_context(str(self.server[0]), str(self.server[1]), str(self.ca.cert_path))

    def client(self, pair: tuple[Path, Path] | None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca.cert_path))
        if pair is not None:
            context.load_cert_chain(str(pair[0]), str(pair[1]))
        return context


async def filter_as(port: int, body: bytes, client: ssl.SSLContext) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"https://127.0.0.1:{port}/filter", data=body, ssl=client) as response,
    ):
        return response.status, await response.json(content_type=None)


def test_client_identity_reads_common_name_and_subject_alt_names() -> None:
    peer = {
        "subject": ((("organizationName", "system:nodes"),), (("commonName", "system:node:a"),)),
        "subjectAltName": (("DNS", "a.example"), ("IP Address", "10.0.0.1"), ("othername", "<unsupported>")),
    }
    assert client_identity(peer) == ("system:node:a", "a.example", "10.0.0.1")
    assert client_identity(None) == client_identity({}) == ()
    assert DEFAULT_CLIENT_SUBJECTS == ("system:kube-scheduler",)


async def test_only_kube_scheduler_passes_by_default(server: FakeApiServer, shared_dir: Path, tmp_path: Path) -> None:
    certs = Certs(tmp_path / "pki")
    service = await started(server, shared_dir, tls=certs.context(), client_subjects=DEFAULT_CLIENT_SUBJECTS)
    body = json.dumps(load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json")).encode()
    try:
        port = service.ports["extender"]
        status, answer = await filter_as(port, body, certs.client(certs.clients["kube-scheduler"]))
        assert status == 200 and answer["NodeNames"] == ["rig-node"]
        # the same CA signed these: the handshake passes, the subject does not
        for who in ("kubelet", "admin", "by-san"):
            status, answer = await filter_as(port, body, certs.client(certs.clients[who]))
            assert status == 403, who
            assert "is not allowed" in answer["error"], answer
        # another CA, the right name: no handshake at all
        with pytest.raises(aiohttp.ClientError):
            await filter_as(port, body, certs.client(certs.foreign))
        # no certificate at all: no handshake either
        with pytest.raises(aiohttp.ClientError):
            await filter_as(port, body, certs.client(None))
    finally:
        await service.close()


async def test_a_subject_alt_name_can_be_allowed(server: FakeApiServer, shared_dir: Path, tmp_path: Path) -> None:
    certs = Certs(tmp_path / "pki")
    service = await started(server, shared_dir, tls=certs.context(), client_subjects=("scheduler.example",))
    body = json.dumps(load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json")).encode()
    try:
        port = service.ports["extender"]
        assert (await filter_as(port, body, certs.client(certs.clients["by-san"])))[0] == 200
        assert (await filter_as(port, body, certs.client(certs.clients["kube-scheduler"])))[0] == 403
    finally:
        await service.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CLI = [sys.executable, "-c", "from numaplane.cli import main; main()"]


async def test_the_command_line_defaults_to_kube_scheduler(
    server: FakeApiServer, shared_dir: Path, tmp_path: Path
) -> None:
    """``numaplane scheduler extender --client-ca-file`` without ``--client-allowed-subject``: the real entry
    point refuses a kubelet's certificate and serves kube-scheduler's."""
    await seed(server, shared_dir)
    certs = Certs(tmp_path / "pki")
    port = _free_port()
    args = [
        *CLI, "scheduler", "extender", "--api-server", server.url, f"--address=127.0.0.1:{port}",
        "--scheduler-name=topology-aware-scheduler", "--log-format=console",
        "--tls-cert-file", str(certs.server[0]), "--tls-private-key-file", str(certs.server[1]),
        "--client-ca-file", str(certs.ca.cert_path),
    ]  # fmt: skip
    log = tmp_path / "extender.log"
    with open(log, "wb") as out:
        process = await asyncio.create_subprocess_exec(*args, stdout=out, stderr=out)
    body = json.dumps(load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json")).encode()
    try:
        status: int | None = None
        for _ in range(200):
            try:
                status, _answer = await filter_as(port, body, certs.client(certs.clients["kube-scheduler"]))
                if status == 200:
                    break
            except aiohttp.ClientError:
                pass
            assert process.returncode is None, log.read_text()
            await asyncio.sleep(0.1)
        assert status == 200, log.read_text()
        assert (await filter_as(port, body, certs.client(certs.clients["kubelet"])))[0] == 403
        assert "client certificate refused" in log.read_text()
    finally:
        process.terminate()
        await process.wait()


def test_an_allowed_subject_without_a_client_ca_is_a_usage_error() -> None:
    done = subprocess.run(
        [*CLI, "scheduler", "extender", "--client-allowed-subject", "x"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("Error: --client-allowed-subject needs --client-ca-file"), done.stderr

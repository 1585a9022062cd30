"""The extender under hostile callers (issue 15, items 1, 2, 3 and 11).

A made-up Node never enters the cache; bind only follows our own filter, for our pods, to real nodes;
bodies are bounded before and after decompression; every malformed body is a 400 (never a 500); TLS
with client-certificate verification as kube-scheduler's ``enableHTTPS``/``tlsConfig`` expects; the
process stays up and flat in memory under hostile bodies.
"""

from __future__ import annotations

import copy
import datetime
import gzip
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from click.testing import CliRunner
from sched_helpers import eventually, load_capture
from test_sched_extender import PROFILE, filter_with_uid, seed

from numaplane.limits import MAX_EXTENDER_DECODED_BYTES
from numaplane.observability.tls import server_context
from numaplane.scheduler.config import SchedulerConfig
from numaplane.scheduler.service import ExtenderService
from numaplane.testing.fakeapi import FakeApiServer


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as api:
        yield api


async def started(server: FakeApiServer, shared: Path, **kw: Any) -> ExtenderService:
    await seed(server, shared)
    service = ExtenderService(
        server.port_client(), SchedulerConfig(scheduler_names=(PROFILE,)), address="127.0.0.1:0", **kw
    )
    await service.start()

    async def ready() -> bool:
        return service.ready

    await eventually(ready)
    return service


async def post(port: int, verb: str, data: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"http://127.0.0.1:{port}/{verb}",
            data=data,
            headers={"Content-Type": "application/json", **(headers or {})},
        ) as response,
    ):
        text = await response.text()
        return response.status, json.loads(text) if text.startswith("{") else text


def fake_nodes(template: dict[str, Any], count: int) -> list[dict[str, Any]]:
    nodes = []
    for i in range(count):
        node = copy.deepcopy(template)
        node["metadata"]["name"] = f"made-up-{i}"
        nodes.append(node)
    return nodes


async def test_request_nodes_never_enter_the_cache_nor_pass(server: FakeApiServer, shared_dir: Path) -> None:
    service = await started(server, shared_dir)
    try:
        port = service.ports["extender"]
        request = load_capture(shared_dir, "nodecachecapable-false.filter.guaranteed.json")
        known = set(service.state.nodes)
        made_up = fake_nodes(request["Nodes"]["items"][1], 500)
        request["Nodes"]["items"] = made_up + request["Nodes"]["items"]
        status, body = await post(port, "filter", json.dumps(request).encode())
        assert status == 200
        assert set(service.state.nodes) == known
        assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == ["rig-node"]
        assert sum(1 for v in body["FailedAndUnresolvableNodes"].values() if v == "node not found") == 500
        # a known node's object with another resourceVersion does not replace ours either
        rig = copy.deepcopy(request["Nodes"]["items"][-1])
        rig["metadata"]["resourceVersion"] = "999999"
        rig["status"]["allocatable"]["cpu"] = "512"
        before = service.state.nodes["rig-node"].doc
        request["Nodes"]["items"] = [rig]
        await post(port, "filter", json.dumps(request).encode())
        assert service.state.nodes["rig-node"].doc is before
    finally:
        await service.close()


async def test_bind_only_our_pods_to_real_nodes_that_passed_our_filter(server: FakeApiServer, shared_dir: Path) -> None:
    service = await started(server, shared_dir)
    try:
        port = service.ports["extender"]
        uid = (await server.store.get(_pod(), "gu-ncc-true", namespace="numaplane-wire"))["metadata"]["uid"]
        bind = {**load_capture(shared_dir, "nodecachecapable-true.bind.guaranteed.json"), "PodUID": uid}
        for node, reason in (("no-such-node", "not found"), ("rig-node", "did not pass")):
            status, body = await post(port, "bind", json.dumps({**bind, "Node": node}).encode())
            assert status == 200 and reason in body["Error"], body
        filter_request = filter_with_uid(shared_dir, "nodecachecapable-true.filter.guaranteed.json", uid)
        await post(port, "filter", json.dumps(filter_request).encode())
        # a node that did not pass (numaplane-fake-node is full) is refused, the one that passed is bound
        status, body = await post(port, "bind", json.dumps({**bind, "Node": "numaplane-fake-node"}).encode())
        assert "does not fit node 'numaplane-fake-node'" in body["Error"]
        status, body = await post(port, "bind", json.dumps(bind).encode())
        assert body == {"Error": ""}
        # a pod of another scheduler: refused even after a filter
        other = copy.deepcopy(await server.store.get(_pod(), "gu-ncc-false", namespace="numaplane-wire"))
        other["spec"]["schedulerName"] = "someone-else"
        await server.store.replace(_pod(), other)

        async def foreign() -> bool:
            pod = service.state.pods.get("numaplane-wire/gu-ncc-false")
            return pod is not None and pod.scheduler_name == "someone-else"

        await eventually(foreign)
        filter_request["Pod"] = other
        await post(port, "filter", json.dumps(filter_request).encode())
        status, body = await post(
            port,
            "bind",
            json.dumps({**bind, "PodName": "gu-ncc-false", "PodUID": other["metadata"]["uid"]}).encode(),
        )
        assert "schedulerName" in body["Error"]
    finally:
        await service.close()


def _pod() -> Any:
    from numaplane.kube.resources import POD

    return POD


def test_the_cli_listens_on_loopback_by_default() -> None:
    from numaplane.cli.scheduler import extender

    defaults = {p.name: p.default for p in extender.params}
    assert defaults["address"] == "127.0.0.1:8888"
    from numaplane.scheduler.service import ExtenderService as Service

    assert Service.__init__.__kwdefaults__["address"] == "127.0.0.1:8888"
    result = CliRunner().invoke(extender, ["--client-ca-file", "/nonexistent"])
    assert result.exit_code == 2 and "--tls-cert-file" in result.output


HOSTILE_BODIES: list[tuple[str, bytes, int]] = [
    ("filter", b"[" * 100_000 + b"]" * 100_000, 400),
    ("filter", b'{"Pod": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400),
    ("filter", b'{"Pod": ' + b'{"a":' * 1000 + b"1" + b"}" * 1000 + b', "NodeNames": []}', 400),
    ("filter", b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [' + b"[" * 5000 + b"]" * 5000 + b"]}}", 400),
    ("filter", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": ' + b"9" * 5000 + b"}", 400),
    (
        "filter",
        b'{"Pod": {"metadata": {"name": "p"}, "spec": {"nodeName": ' + b"9" * 5000 + b'}}, "NodeNames": []}',
        400,
    ),
    ("bind", b'{"PodName": "p\\u0000\\n", "Node": "n"}', 400),
    ("bind", b'{"PodName": "p", "Node": "n\\r\\nHost: evil"}', 400),
    ("bind", b'{"PodName": "p", "Node": "' + b"n" * 300 + b'"}', 400),
    ("bind", b'{"PodName": "p", "Node": "n", "PodUID": "\\u0007"}', 400),
    (
        "prioritize",
        b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": '
        b'{"requests": {"cpu": [1]}}}]}}, "NodeNames": []}',
        400,
    ),
    (
        "prioritize",
        b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": '
        b'{"requests": {"cpu": "' + b"9" * 4400 + b'"}}}]}}, "NodeNames": []}',
        400,
    ),
]


async def test_hostile_bodies_get_400_and_the_extender_stays_up(server: FakeApiServer, shared_dir: Path) -> None:
    service = await started(server, shared_dir)
    try:
        port = service.ports["extender"]
        for verb, body, code in HOSTILE_BODIES:
            status, answer = await post(port, verb, body)
            assert status == code, (verb, body[:80], answer)
            assert len(answer["Error"]) < 500
        request = load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json")
        status, body = await post(port, "filter", json.dumps(request).encode())
        assert status == 200 and body["NodeNames"] == ["rig-node"]
    finally:
        await service.close()


async def test_a_gzip_bomb_is_refused_while_reading(server: FakeApiServer, shared_dir: Path) -> None:
    service = await started(server, shared_dir)
    try:
        port = service.ports["extender"]
        bomb = gzip.compress(b'{"Pod": "' + b" " * (MAX_EXTENDER_DECODED_BYTES + 1024) + b'"}', 9)
        assert len(bomb) < 100 * 1024
        rss_before = _rss_bytes()
        for _ in range(5):
            status, answer = await post(port, "filter", bomb, {"Content-Encoding": "gzip"})
            assert status == 413, answer
        # refused while reading: far less than one decoded body stays in memory
        assert _rss_bytes() - rss_before < MAX_EXTENDER_DECODED_BYTES * 2
        status, _ = await post(port, "filter", b"x" * (MAX_EXTENDER_DECODED_BYTES + 1))
        assert status == 413
    finally:
        await service.close()


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def test_rss_stays_flat_under_hostile_bodies(server: FakeApiServer, shared_dir: Path) -> None:
    service = await started(server, shared_dir)
    try:
        port = service.ports["extender"]
        template = load_capture(shared_dir, "nodecachecapable-false.filter.guaranteed.json")
        template["Nodes"]["items"] = fake_nodes(template["Nodes"]["items"][1], 2000)
        fake_filter = json.dumps(template).encode()
        bodies = [body for _verb, body, _code in HOSTILE_BODIES] + [fake_filter]
        async with aiohttp.ClientSession() as http:

            async def burst(n: int) -> None:
                for i in range(n):
                    body = bodies[i % len(bodies)]
                    async with http.post(f"http://127.0.0.1:{port}/filter", data=body) as response:
                        await response.read()

            await burst(60)  # warm up: allocator pools, caches
            before = _rss_bytes()
            await burst(300)
            after = _rss_bytes()
        assert len(service.state.nodes) == 2
        assert after - before < 64 * 1024**2, (before, after)
    finally:
        await service.close()


# --- TLS ---------------------------------------------------------------------------------------------


def _certificates(tmp: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def issue(
        subject: str, key: ec.EllipticCurvePrivateKey, issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(issuer[0] if issuer else name(subject))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        if issuer is None:
            builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        elif subject == "server":
            import ipaddress

            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
            ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        else:
            builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        return builder.sign(issuer[1] if issuer else key, hashes.SHA256())

    files: dict[str, Path] = {}
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = issue("test-ca", ca_key, None)
    files["ca"] = tmp / "ca.crt"
    files["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for who in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = issue(who, key, (ca.subject, ca_key))
        files[f"{who}.crt"] = tmp / f"{who}.crt"
        files[f"{who}.crt"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files[f"{who}.key"] = tmp / f"{who}.key"
        files[f"{who}.key"].write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return files


async def test_tls_with_client_certificate_verification(
    server: FakeApiServer, shared_dir: Path, tmp_path: Path
) -> None:
    files = _certificates(tmp_path)
    context = server_context(str(files["server.crt"]), str(files["server.key"]), str(files["ca"]))
    service = await started(server, shared_dir, tls=context)
    try:
        port = service.ports["extender"]
        url = f"https://127.0.0.1:{port}/filter"
        body = json.dumps(load_capture(shared_dir, "nodecachecapable-true.filter.guaranteed.json")).encode()
        client = ssl.create_default_context(cafile=str(files["ca"]))
        # no client certificate: the handshake fails
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.ClientError):
                async with http.post(url, data=body, ssl=client) as response:
                    await response.read()
            # plain HTTP on the TLS port: no answer from the verbs
            with pytest.raises(aiohttp.ClientError):
                async with http.post(f"http://127.0.0.1:{port}/filter", data=body) as response:
                    await response.read()
                    raise aiohttp.ClientError(str(response.status))
        client.load_cert_chain(str(files["client.crt"]), str(files["client.key"]))
        async with aiohttp.ClientSession() as http, http.post(url, data=body, ssl=client) as response:
            assert response.status == 200
            assert (await response.json())["NodeNames"] == ["rig-node"]
    finally:
        await service.close()


# --- item 6: an unparseable NRT update never leaves the old one in force -------------------------------


@pytest.mark.parametrize(
    "bad_zone",
    [
        {"cpu": ("9" * 4400, "9" * 4400), "memory": ("8Gi", "8Gi")},  # a 4,400-digit quantity
        {"cpu": ([1], [1]), "memory": ("8Gi", "8Gi")},  # a list as a quantity
    ],
)
def test_an_unparseable_nrt_update_makes_the_node_fail_with_a_reason(bad_zone: dict[str, Any]) -> None:
    from sched_helpers import node_doc, nrt_doc, pod_doc, zone_doc

    from numaplane.resources.pod import parse_pod
    from numaplane.scheduler.state import SchedulerState

    state = SchedulerState(SchedulerConfig(cache_mode="passthrough"))
    state.node_upserted(node_doc("n", 8))
    state.nrt_upserted(nrt_doc("n", [zone_doc(0, {"cpu": (4, 4), "memory": ("8Gi", "8Gi")})]))
    pod = parse_pod(pod_doc("p", 2))
    assert "n" in state.evaluate(pod, ["n"]).scores
    bad = nrt_doc("n", [zone_doc(0, bad_zone)])
    if isinstance(bad_zone["cpu"][0], list):
        for r in bad["zones"][0]["resources"]:
            if r["name"] == "cpu":
                r["capacity"] = r["allocatable"] = r["available"] = [1]
    state.nrt_upserted(bad)
    ev = state.evaluate(pod, ["n"])
    assert "n" not in ev.scores and "n" in ev.failed
    reason = ev.reason("n")
    assert reason and len(reason) < 500


def test_a_zone_named_with_5000_digits_replaces_the_old_nrt() -> None:
    from sched_helpers import node_doc, nrt_doc, pod_doc, zone_doc

    from numaplane.resources.pod import parse_pod
    from numaplane.scheduler.state import SchedulerState

    state = SchedulerState(SchedulerConfig(cache_mode="passthrough"))
    state.node_upserted(node_doc("n", 8))
    state.nrt_upserted(nrt_doc("n", [zone_doc(0, {"cpu": (4, 4), "memory": ("8Gi", "8Gi")})]))
    pod = parse_pod(pod_doc("p", 2))
    assert "n" in state.evaluate(pod, ["n"]).scores
    state.nrt_upserted(nrt_doc("n", [zone_doc("node-" + "9" * 5000, {"cpu": (4, 0), "memory": ("8Gi", "8Gi")})]))
    ev = state.evaluate(pod, ["n"])
    assert "n" not in ev.scores  # no usable NUMA zone left: the old zone 0 is not in force

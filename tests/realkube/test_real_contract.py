"""The fake API server agrees with the real one where tests rely on it: the same requests against both.

Each test runs twice — against ``numaplane.testing.fakeapi`` and against the real kube-apiserver
v1.36.2 — through the production adapter (:class:`LightkubePort`), and asserts the same outcome:
CRDs the real server refuses for their CEL rules, custom resources pruned and validated against their
schema and CEL rules, optimistic concurrency (409), server-side apply ownership and conflicts, and a
watch from an expired version (410 Gone, then relisting works).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from numaplane.kube.client import LightkubePort
from numaplane.kube.errors import Conflict, Gone, Invalid
from numaplane.kube.port import CONFIG_MAP, CRD, NAMESPACE, KubePort, Resource
from numaplane.testing.fakeapi import FakeApiServer
from numaplane_harness.kubecluster import ControlPlane, kubeconfig

pytestmark = pytest.mark.timeout(120)

GROUP = "contract.numaplane.io"


@dataclass
class Api:
    """One API server under contract: its port, a fresh namespace, and how to expire watch history."""

    name: str
    kube: KubePort
    namespace: str
    fake: FakeApiServer | None
    real: ControlPlane | None

    def expire_history(self, latest: str) -> None:
        """Forget the watch history up to ``latest`` (the fake's compaction; etcd's on the real one)."""
        if self.fake is not None:
            self.fake.store.compact()
        if self.real is not None:
            self.real.compact_etcd(int(latest))


@pytest_asyncio.fixture(params=["fakeapi", "real"])
async def api(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Api]:
    namespace = f"contract-{uuid.uuid4().hex[:8]}"
    async with contextlib.AsyncExitStack() as stack:
        fake: FakeApiServer | None = None
        real: ControlPlane | None = None
        if request.param == "fakeapi":
            fake = await stack.enter_async_context(FakeApiServer())
            kube: KubePort = fake.port_client()
        else:
            cp: ControlPlane = request.getfixturevalue("control_plane")
            real = cp
            path = tmp_path / "kubeconfig"
            admin = {"client-certificate": str(cp.pki.admin_cert), "client-key": str(cp.pki.admin_key)}
            path.write_text(kubeconfig(cp.url, cp.ca_file, admin))
            kube = LightkubePort.from_kubeconfig(path)
        stack.push_async_callback(kube.close)
        await kube.create(NAMESPACE, {"metadata": {"name": namespace}})
        yield Api(request.param, kube, namespace, fake, real)
        with contextlib.suppress(Exception):
            await kube.delete(NAMESPACE, namespace)


def _crd(plural: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": plural.capitalize()[:-1],
                "plural": plural,
                "singular": plural[:-1],
                "listKind": plural.capitalize()[:-1] + "List",
            },
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}],
        },
    }


def _spec_schema(spec: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": spec}}


async def _served(api: Api, crd: dict[str, Any]) -> Resource:
    await api.kube.create(CRD, crd)
    plural = crd["spec"]["names"]["plural"]
    res = Resource(GROUP, "v1", crd["spec"]["names"]["kind"], plural, True, False)
    for _ in range(100):  # the real server takes a moment to establish and serve a new CRD
        try:
            await api.kube.list(res, namespace=api.namespace)
            return res
        except Exception:
            await asyncio.sleep(0.1)
    raise AssertionError(f"{plural} not served")


async def test_crds_refused_for_their_cel_rules(api: Api) -> None:
    untyped = _spec_schema(
        {
            "type": "object",
            "properties": {
                "options": {"type": "object", "additionalProperties": {"x-kubernetes-preserve-unknown-fields": True}}
            },
            "x-kubernetes-validations": [{"rule": "!has(self.options) || size(self.options) == 0", "message": "m"}],
        }
    )
    item = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 8}},
        "x-kubernetes-validations": [
            {"rule": "self.a.matches('^[a-z]+$') && duration(self.a) > duration('1s')", "message": "m"}
        ],
    }
    unbounded = _spec_schema({"type": "object", "properties": {"groups": {"type": "array", "items": item}}})
    tag = uuid.uuid4().hex[:6]
    with pytest.raises(Invalid) as undefined:
        await api.kube.create(CRD, _crd(f"untyped{tag}s", untyped))
    with pytest.raises(Invalid):
        await api.kube.create(CRD, _crd(f"unbounded{tag}s", unbounded))
    print(f"{api.name}: {undefined.value}")
    # the same rules are accepted once the values are typed and the list bounded
    typed = _spec_schema(
        {
            **untyped["properties"]["spec"],
            "properties": {"options": {"type": "object", "additionalProperties": {"type": "string"}}},
        }
    )
    bounded = _spec_schema(
        {"type": "object", "properties": {"groups": {"type": "array", "items": item, "maxItems": 8}}}
    )
    for plural, schema in ((f"typed{tag}s", typed), (f"bounded{tag}s", bounded)):
        await api.kube.create(CRD, _crd(plural, schema))
        await api.kube.delete(CRD, f"{plural}.{GROUP}")


async def test_custom_resources_are_pruned_and_validated(api: Api) -> None:
    schema = _spec_schema(
        {
            "type": "object",
            "required": ["count"],
            "properties": {
                "count": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "limit": {
                    "x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "pattern": "^[0-9]+(Mi|Gi)?$",
                },
            },
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.mode) || self.mode != 'slow' || self.count < 10",
                    "message": "slow allows fewer than 10",
                }
            ],
        }
    )
    tag = uuid.uuid4().hex[:6]
    res = await _served(api, _crd(f"widgets{tag}s", schema))
    try:
        kind = res.kind
        ok = await api.kube.create(
            res,
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": kind,
                "metadata": {"name": "ok"},
                "spec": {"count": 3, "limit": "2Gi", "unknown": 1},
                "extra": {"x": 1},
            },
            namespace=api.namespace,
        )
        assert ok["spec"] == {"count": 3, "limit": "2Gi"}  # unknown fields pruned
        assert "extra" not in ok
        for name, spec, words in (
            ("zero", {"count": 0}, "count"),
            ("missing", {"mode": "fast"}, "count"),
            ("enum", {"count": 1, "mode": "medium"}, "mode"),
            ("quantity", {"count": 1, "limit": "2 Gi"}, "limit"),
            ("cel", {"count": 20, "mode": "slow"}, "slow allows fewer than 10"),
        ):
            with pytest.raises(Invalid) as refused:
                await api.kube.create(
                    res,
                    {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": name}, "spec": spec},
                    namespace=api.namespace,
                )
            assert words in str(refused.value), (api.name, name, str(refused.value))
    finally:
        await api.kube.delete(CRD, f"{res.plural}.{GROUP}")


async def test_a_stale_resource_version_is_a_conflict(api: Api) -> None:
    created = await api.kube.create(
        CONFIG_MAP, {"metadata": {"name": "cfg"}, "data": {"a": "1"}}, namespace=api.namespace
    )
    await api.kube.patch(CONFIG_MAP, "cfg", {"data": {"a": "2"}}, namespace=api.namespace)
    with pytest.raises(Conflict) as info:
        await api.kube.replace(CONFIG_MAP, {**created, "data": {"a": "3"}})
    assert info.value.code == 409


async def test_server_side_apply_ownership(api: Api) -> None:
    def doc(**data: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "ssa", "namespace": api.namespace},
            "data": data,
        }

    await api.kube.apply(CONFIG_MAP, doc(a="1", b="1"), field_manager="alice")
    with pytest.raises(Conflict):
        await api.kube.apply(CONFIG_MAP, doc(a="2"), field_manager="bob")
    taken = await api.kube.apply(CONFIG_MAP, doc(a="2"), field_manager="bob", force=True)
    assert taken["data"] == {"a": "2", "b": "1"}
    # alice stops applying 'a' (bob owns it now, it stays) and 'b' (only alice owned it: removed)
    after = await api.kube.apply(CONFIG_MAP, doc(c="1"), field_manager="alice")
    assert after["data"] == {"a": "2", "c": "1"}
    managers = {m["manager"] for m in after["metadata"]["managedFields"]}
    assert managers == {"alice", "bob"}


async def test_a_watch_from_an_expired_version(api: Api) -> None:
    """Fake: 410 Gone after compaction. Real v1.36: its watch cache answers a version older than its
    window with the current objects as synthetic ADDED events (checked with etcd compacted too), not
    410. A consumer loses nothing either way; the informer relists on Gone and replaces its store on
    a fresh list (tests/kube/test_kube_informer.py)."""
    old = (await api.kube.list(CONFIG_MAP, namespace=api.namespace)).resource_version
    latest = await api.kube.create(CONFIG_MAP, {"metadata": {"name": "w1"}}, namespace=api.namespace)
    api.expire_history(latest["metadata"]["resourceVersion"])
    stream = api.kube.watch(CONFIG_MAP, namespace=api.namespace, resource_version=old)
    if api.fake is not None:
        with pytest.raises(Gone) as info:
            await asyncio.wait_for(anext(aiter(stream)), 10)
        assert info.value.code == 410
    else:
        first = await asyncio.wait_for(anext(aiter(stream)), 10)
        # the current objects of the namespace (w1, or one the controller-manager publishes in every namespace)
        assert first.type.value == "ADDED" and first.object["metadata"]["namespace"] == api.namespace
    with contextlib.suppress(Exception):
        await stream.aclose()  # type: ignore[attr-defined]
    fresh = await api.kube.list(CONFIG_MAP, namespace=api.namespace)
    assert "w1" in {o["metadata"]["name"] for o in fresh.items}
    stream = api.kube.watch(CONFIG_MAP, namespace=api.namespace, resource_version=fresh.resource_version)
    await api.kube.create(CONFIG_MAP, {"metadata": {"name": "w2"}}, namespace=api.namespace)
    event = await asyncio.wait_for(anext(aiter(stream)), 10)
    assert event.object["metadata"]["name"] == "w2"
    await stream.aclose()  # type: ignore[attr-defined]

"""Exporter configuration: the kubelet config file, flags overriding it, and option validation."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from numaplane.exporter.errors import ExporterConfigError, KubeletConfigError
from numaplane.exporter.kubelet import KubeletConfigSource, parse_kubelet_config
from numaplane.exporter.options import ExporterOptions, PodExclude, RefreshMode, parse_address
from numaplane.kube.kubeletconfig import KubeletConfiguration
from numaplane.topology.cpuset import CPUSet

FULL = """
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
memoryManagerPolicy: Static
topologyManagerPolicy: single-numa-node
topologyManagerScope: pod
reservedSystemCPUs: "0,4"
"""


def test_kubelet_config_fields_are_read() -> None:
    settings = parse_kubelet_config(FULL)
    assert settings == KubeletConfiguration("single-numa-node", "pod", CPUSet([0, 4]), "static", "Static")


HEAD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def test_absent_fields_take_the_kubelet_defaults() -> None:
    assert parse_kubelet_config(HEAD) == KubeletConfiguration()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "the file is empty"),
        ("{}\n", "the file is empty"),
        ("topologyManagerPolicy: restricted\n", "no kind"),
        ("kind: KubeletConfiguration\ntopologyManagerPolicy: restricted\n", "no apiVersion"),
        ("apiVersion: v1\nkind: KubeletConfiguration\n", "apiVersion 'v1'"),
        ("kind: Pod\n", "kind 'Pod'"),
        ("- a list\n", "a list, not a mapping"),
    ],
)
def test_what_is_not_a_kubelet_configuration_is_refused(text: str, needle: str) -> None:
    """As the kubelet's own loader (and ``agent --check``, the same reader): kind and apiVersion required."""
    with pytest.raises(KubeletConfigError, match=re.escape(f"cfg.yaml: not a KubeletConfiguration ({needle}")):
        parse_kubelet_config(text, "cfg.yaml")


def test_flags_override_the_file_key_by_key() -> None:
    settings = parse_kubelet_config(FULL).overridden(policy="restricted", reserved_cpus=CPUSet([1]))
    assert (settings.topology_manager_policy, settings.topology_manager_scope) == ("restricted", "pod")
    assert settings.reserved_system_cpus == CPUSet([1])


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (HEAD + "topologyManagerPolicy: single-numa\n", "cfg.yaml: topologyManagerPolicy: 'single-numa' is not"),
        (HEAD + "topologyManagerScope: node\n", "cfg.yaml: topologyManagerScope: 'node' is not one of"),
        (HEAD + "reservedSystemCPUs: 0-x\n", "cfg.yaml: reservedSystemCPUs: "),
        (HEAD + "topologyManagerPolicy: 3\n", "cfg.yaml: topologyManagerPolicy: must be a string, got int"),
        (HEAD + "cpuManagerPolicy: [static]\n", "cfg.yaml: cpuManagerPolicy: must be a string, got list"),
        # the kubelet's lenient decoding would read it (Go matches names case-insensitively): refused
        (HEAD + "TopologyManagerPolicy: restricted\n", "cfg.yaml: TopologyManagerPolicy: unknown field"),
        (HEAD + "a: [unclosed\n", "cfg.yaml: not valid YAML/JSON"),
        (HEAD + "a: &x [1]\nb: *x\n", "cfg.yaml: YAML aliases"),
    ],
)
def test_bad_kubelet_config_is_a_typed_error(text: str, needle: str) -> None:
    with pytest.raises(KubeletConfigError, match=re.escape(needle)) as info:
        parse_kubelet_config(text, "cfg.yaml")
    assert info.value.kind == "kubelet_config"
    assert "cfg.yaml" in str(info.value)


def test_config_source_rereads_only_on_change_and_recovers(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(FULL)
    source = KubeletConfigSource(path)
    assert source.read().topology_manager_scope == "pod"
    path.write_text(HEAD + "topologyManagerPolicy: bogus\n")
    os.utime(path, ns=(1, 1))
    with pytest.raises(KubeletConfigError):
        source.read()
    with pytest.raises(KubeletConfigError):  # every read of a broken file fails (each one is counted)
        source.read()
    path.write_text(HEAD + "topologyManagerPolicy: restricted\n")
    assert source.read().topology_manager_policy == "restricted"
    path.unlink()
    with pytest.raises(KubeletConfigError, match="cannot read"):
        source.read()


def test_pod_exclude_globs() -> None:
    rule = PodExclude.parse("kube-*/coredns-*")
    assert rule.matches("kube-system", "coredns-abc")
    assert not rule.matches("default", "coredns-abc")
    any_ns = PodExclude.parse("monitor-*")
    assert str(any_ns) == "*/monitor-*"
    assert any_ns.matches("x", "monitor-1")
    for bad in ("", "a/b/c", "ns/"):
        with pytest.raises(ExporterConfigError):
            PodExclude.parse(bad)


def test_options_are_validated_as_a_whole(tmp_path: Path) -> None:
    tm = {"topology_manager_policy": "none", "topology_manager_scope": "pod"}
    with pytest.raises(ExporterConfigError, match="notify file"):
        ExporterOptions(node_name="n", refresh_mode=RefreshMode.EVENTS, **tm)
    with pytest.raises(ExporterConfigError, match="Topology Manager"):
        ExporterOptions(node_name="n")
    with pytest.raises(ExporterConfigError, match="policy"):
        ExporterOptions(node_name="n", topology_manager_policy="strict", topology_manager_scope="pod")
    with pytest.raises(ExporterConfigError, match="node name"):
        ExporterOptions(node_name="", **tm)
    with pytest.raises(ExporterConfigError, match="period"):
        ExporterOptions(node_name="n", period_seconds=0, **tm)
    with pytest.raises(ExporterConfigError, match="address"):
        ExporterOptions(node_name="n", metrics_address="nowhere", **tm)
    ok = ExporterOptions(node_name="n", kubelet_config_file=tmp_path / "k.yaml", refresh_mode=RefreshMode.PERIODIC)
    assert ok.refresh_mode.periodic and not ok.refresh_mode.events
    assert RefreshMode.BOTH.periodic and RefreshMode.BOTH.events


def test_parse_address() -> None:
    assert parse_address(":2112") == ("0.0.0.0", 2112)
    assert parse_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_address("[::1]:8081") == ("::1", 8081)

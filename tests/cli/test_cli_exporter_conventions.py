"""``exporter --oneshot`` without a kubelet says what to do; every command's help has an example
that exists; one flag name for the API server; ``--list-topologies`` honours ``-o`` (items 9, 10)."""

from __future__ import annotations

import json
import re

import pytest
from cli_helpers import REPO, numaplane

from numaplane.cli import COMMANDS


def test_exporter_oneshot_without_a_kubelet_says_what_to_do() -> None:
    run = numaplane(
        "exporter",
        "--oneshot",
        "--podresources-socket",
        "/nonexistent/kubelet.sock",
        "--topology-manager-policy",
        "single-numa-node",
        "--topology-manager-scope",
        "container",
    )
    assert run.code == 1
    line = run.error_line
    assert "/nonexistent/kubelet.sock" in line and "fake://DIR" in line and "--podresources-socket" in line
    assert "fake://DIR" in numaplane("exporter", "--help").stdout


@pytest.mark.parametrize("name", [n for n in COMMANDS if n != "scheduler"] + ["scheduler extender", "scheduler run"])
def test_every_help_has_an_example_whose_files_exist(name: str) -> None:
    text = numaplane(*name.split(), "--help").stdout
    assert re.search(r"Examples?:", text), text
    for path in re.findall(r"\b((?:examples|deploy)/\S+\.ya?ml)\b", text):
        assert (REPO / path).is_file(), path


@pytest.mark.parametrize(
    "name", ["operator", "agent", "exporter", "explain", "scheduler extender", "scheduler run", "e2e", "snapshot"]
)
def test_both_names_of_the_api_server_flag_everywhere(name: str) -> None:
    """One option, two names (issue 26 item 11): ``--api-server URL`` and kubectl's ``--server URL``."""
    text = numaplane(*name.split(), "--help").stdout
    assert re.search(r"--api-server, --server URL", text), text


def test_list_topologies_honours_output() -> None:
    doc = json.loads(numaplane("simulate", "--list-topologies", "-o", "json").stdout)
    assert doc["kind"] == "BuiltinTopologyList" and len(doc["items"]) == 25
    assumed = {i["name"] for i in doc["items"] if i["memoryAssumed"]}
    assert assumed == {
        "amd-epyc7451-2s8n-96t",
        "amd-ryzen5-1600-1s1n-12t",
        "intel-xeon-x7550-4s-64t-3nodes",
        "riscv-sophgo-sg2042-1s4n-64c",
    }
    assert all(i["memoryBytes"] > 0 for i in doc["items"])

"""Numbers in a topology document are bounded before they are used (issue 25 item 11): a CPU id of
2**40 was a MemoryError (a 2**40-bit mask), a negative CPU id a ``ValueError: negative shift count``,
a distance of ``1e999`` an ``OverflowError``; each is now a TopologyFormatError naming the field, and
``numaplane topology --from`` answers with one line and exit 2."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numaplane.topology.document import topology_from_dict, topology_to_dict
from numaplane.topology.errors import TopologyFormatError
from numaplane.topology.model import synthetic

BASE = topology_to_dict(synthetic(sockets=2, cores_per_numa=2, threads_per_core=1))
CLI = (sys.executable, "-c", "from numaplane.cli import main; main()")


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


HOSTILE = {
    "cpu 2**40": ((("cpus", 0, "cpu"), 2**40), r"\$\.cpus\[0\]\.cpu: 1099511627776 is out of range 0-65535"),
    "cpu -1": ((("cpus", 0, "cpu"), -1), r"\$\.cpus\[0\]\.cpu: -1 is out of range"),
    "numa 2**40": ((("cpus", 1, "numa"), 2**40), r"\$\.cpus\[1\]\.numa: .* out of range -1-1023"),
    "node id -5": ((("numa_nodes", 0, "id"), -5), r"\$\.numa_nodes\[0\]\.id: -5 is out of range"),
    "distance 1e999": ((("numa_nodes", 0, "distances", "1"), float("inf")), r"distances\.1: expected a SLIT"),
    "distance 2**70": ((("numa_nodes", 0, "distances", "1"), 2**70), r"distances\.1: expected a SLIT"),
    "distance key huge": ((("numa_nodes", 0, "distances", "9" * 5000), 10), r"distances\.9{20}: not a NUMA node id"),
    "memory 10**400": ((("numa_nodes", 0, "memory_total_bytes"), 10**400), r"an integer of 401 digits"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_numbers_are_format_errors_naming_the_field(case: str) -> None:
    (path, value), message = HOSTILE[case]
    with pytest.raises(TopologyFormatError, match=message):
        topology_from_dict(_with(path, value))


@pytest.mark.parametrize("case", ["cpu 2**40", "distance 1e999", "memory 10**400"])
def test_the_cli_answers_one_line_and_exit_2(case: str, tmp_path: Path) -> None:
    (path, value), _ = HOSTILE[case]
    text = json.dumps(_with(path, value)).replace("Infinity", "1e999")
    doc = tmp_path / "topo.json"
    doc.write_text(text)
    got = subprocess.run(
        [*CLI, "topology", "--from", str(doc)], check=False, capture_output=True, text=True, timeout=60
    )
    assert got.returncode == 2, got.stderr
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in got.stderr, got.stderr
    assert "topo.json" in lines[0] or "$." in lines[0], lines[0]


_NUMBER = st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.booleans() | st.none() | st.text(max_size=5)


def _paths() -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for i, cpu in enumerate(BASE["cpus"]):
        out += [("cpus", i, k) for k in cpu]
    for i, node in enumerate(BASE["numa_nodes"]):
        out += [("numa_nodes", i, k) for k in node if k != "distances"]
        out += [("numa_nodes", i, "distances", k) for k in node["distances"]]
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_paths()), _NUMBER), min_size=1, max_size=4))
def test_fuzz_from_dict_raises_only_format_errors(edits: list[tuple[tuple[Any, ...], Any]]) -> None:
    doc = copy.deepcopy(BASE)
    for path, value in edits:
        node: Any = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    try:
        topo = topology_from_dict(doc)
    except TopologyFormatError:
        return
    topology_to_dict(topo)  # what was accepted is usable
    for node in topo.numa_nodes:
        node.cpus.format()

"""``numaplane simulate --plugin``: the simulator loads a vendor plugin on every node."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from accelerator_plugin import RESOURCE, plugin_factory
from click.testing import CliRunner

from numaplane.cli import main
from numaplane.nrt.from_manager import node_nrt
from numaplane.sim.cluster import build_templates, instantiate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "accelerator_plugin.py"


def test_simulated_nodes_run_the_plugin_and_publish_its_resource() -> None:
    (template,) = build_templates(
        [("intel-xeon-gold6330-2s2n-112t-pci", 1)], policy="single-numa-node", scope="container"
    )
    node = instantiate(replace(template, plugins=(plugin_factory,)))
    assert node.allocatable[RESOURCE].value() == 2 * len(template.topology.numa_ids)
    zones = node_nrt(node.manager, node.name).zones
    assert all(any(r.name == RESOURCE for r in z.resources) for z in zones)


def test_simulate_cli_loads_the_plugin_file() -> None:
    args = ["simulate", "--nodes", "2", "--pods", "30", "-q", "-o", "json", "--plugin", str(EXAMPLE)]
    result = CliRunner().invoke(main, [*args, "--schedulers", "numa-LeastAllocated-overreserve"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["schedulers"][0]["placed"] > 0


def test_simulate_cli_names_a_bad_plugin_file(tmp_path: Path) -> None:
    bad = tmp_path / "nothing.py"
    bad.write_text("x = 1\n")
    result = CliRunner().invoke(main, ["simulate", "--nodes", "1", "--pods", "1", "-q", "--plugin", str(bad)])
    assert result.exit_code != 0 and "plugin_factory" in result.output

"""Agent config files with hostile values (issue 15, item 10): rejected and reported (the config-valid
metric drops to 0, the old config stays), at reload and at start, never an untyped error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from numaplane.agent.configwatch import ConfigWatcher, read_config
from numaplane.agent.errors import AgentConfigError
from numaplane.agent.metrics import AgentMetrics
from numaplane.agent.state import NodeAgentState
from numaplane.policy.config import parse_config
from numaplane.policy.errors import PolicyConfigError
from numaplane.policy.manager import ResourceManager
from numaplane.topology.model import synthetic

TOPOLOGY = synthetic(sockets=2, cores_per_numa=4, threads_per_core=2)


def _memory(quantity: Any) -> dict[str, Any]:
    return {"memoryManager": {"policy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": quantity}}]}}


HOSTILE: list[dict[str, Any]] = [
    _memory([1, 2]),
    _memory("9" * 5000),
    _memory({"a": 1}),
    {"cpuManager": {"reservedCPUCount": 10**5000}},
    {"cpuManager": {"reservedCPUs": "0-" + "9" * 5000}},
    {"cpuManager": {"reservedCPUs": ",".join(["1"] * 100_000)}},
    {"topologyManager": {"policy": "best-effort", "options": {"max-allowable-numa-nodes": "9" * 5000}}},
    {"topologyManager": {"policy": "best-effort", "options": {"max-allowable-numa-nodes": 10**5000}}},
]


@pytest.mark.parametrize("doc", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_config_values_are_policy_config_errors(doc: dict[str, Any]) -> None:
    with pytest.raises(PolicyConfigError) as info:
        ResourceManager(TOPOLOGY, doc)
    assert len(str(info.value)) < 1000
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, {}))
    with pytest.raises(PolicyConfigError):
        node_state.reconfigure(doc)


def test_a_huge_integer_quantity_is_capped_like_the_api_server() -> None:
    config = parse_config(_memory(10**5000))  # capped to 2**63-1 (upstream caps, never fails)
    assert config.reserved_memory[0]["memory"] == 2**63 - 1


@pytest.mark.parametrize("doc", HOSTILE[:3], ids=range(3))
async def test_a_hostile_reload_is_rejected_and_reported(tmp_path: Path, doc: dict[str, Any]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("cpuManager: {reservedCPUs: '0'}\n")
    node_state = NodeAgentState(ResourceManager(TOPOLOGY, parse_config(read_config(path)[0])))
    metrics = AgentMetrics()

    async def apply(new: Any) -> None:
        node_state.reconfigure(new)

    watcher = ConfigWatcher(path, apply, interval_seconds=3600, metrics=metrics)
    await watcher.check()
    metrics.config_valid.set(1)
    path.write_text(
        yaml.safe_dump(doc)
        if not isinstance(doc["memoryManager"]["reservedMemory"][0]["limits"]["memory"], int)
        else "memoryManager: {policy: Static, reservedMemory: [{numaNode: 0, limits: {memory: " + "9" * 5000 + "}}]}\n"
    )
    await asyncio.sleep(0.01)
    assert not await watcher.check()
    assert watcher.last_error and metrics.config_valid._value.get() == 0
    assert node_state.manager.config.reserved_cpus is not None  # the old config stays


def test_deeply_nested_config_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("[" * 50_000 + "]" * 50_000)
    with pytest.raises(AgentConfigError):
        read_config(path)

"""The agent's house (issue 29): its long-lived tasks are children of one supervisor, and the node
config is parsed once at start and once per changed file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from test_agent_nri import CONFIG, TOPOLOGY, options, running_agent

from numaplane.agent import daemon
from numaplane.agent.daemon import Agent
from numaplane.kube.client import LightkubePort
from numaplane.kube.clock import FakeClock, format_time
from numaplane.policy import config as policy_config
from numaplane.policy import manager as policy_manager

pytestmark = pytest.mark.timeout(60)


async def test_every_long_lived_task_is_a_child_of_the_agents_supervisor(
    short_tmp: Path, fake_kube: LightkubePort
) -> None:
    (short_tmp / "config.json").write_text(json.dumps({**CONFIG, "dra": {"enabled": True}}))
    agent = Agent(options(short_tmp, pod_name="agent-0", pod_namespace="numaplane"), topology=TOPOLOGY, kube=fake_kube)
    await agent.start()
    try:
        assert agent.tasks.names() == [
            "checkpoint-writer",
            "config-watcher",
            "informer-node-pods",
            "informer-node-slices",
            "informer-resource-claims",
            "nri-plugin",
            "nri-update-sender",
            "policy-reporter",
            "waiting-reporter",
        ]
        assert agent.tasks.running and agent.tasks.dead() == {}
        assert agent.liveness() == (True, {"dead": []})
    finally:
        await agent.stop()
    assert not agent.tasks.running
    assert set(agent.tasks.dead()) == set(agent.tasks.names())  # nothing left behind


async def test_the_node_config_is_parsed_once_at_start_and_once_per_change(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[Any] = []
    real = policy_config.parse_config

    def counting(doc: Any, machine: Any = None) -> policy_config.NodeResourceConfig:
        parsed.append(doc)
        return real(doc, machine)

    # every name the agent and its manager reach parse_config by
    monkeypatch.setattr(daemon, "parse_config", counting)
    monkeypatch.setattr(policy_manager, "parse_config", counting)
    opts = options(short_tmp)
    async with running_agent(opts) as agent:
        assert parsed == [CONFIG]
        assert opts.config_file is not None and agent.watcher is not None
        changed = {**CONFIG, "topologyManager": {"policy": "best-effort"}}
        opts.config_file.write_text(json.dumps(changed))
        async with asyncio.timeout(5):
            while agent.watcher.applied < 1:
                await asyncio.sleep(0.02)
        assert agent.state is not None and agent.state.manager.config.topology_policy == "best-effort"
        assert parsed == [CONFIG, changed]


async def test_the_agents_timestamps_read_the_clock_it_is_given(short_tmp: Path) -> None:
    """Issue 29: the agent passes its clock down, as the scheduler and the operator do: the applied
    policy file's ``appliedAt`` and a quarantined checkpoint's name carry the clock's time."""
    clock = FakeClock()
    clock.advance(3600.0)
    applied = short_tmp / "applied.json"
    (short_tmp / "state").mkdir()
    (short_tmp / "state" / "agent_state.json").write_bytes(b"junk")  # moved aside at start
    agent = Agent(options(short_tmp, applied_policy_file=applied), topology=TOPOLOGY, clock=clock)
    await agent.start()
    try:
        written = json.loads(applied.read_text())
    finally:
        await agent.stop()
    assert written["metadata"]["appliedAt"] == format_time(clock.now()) == "2025-01-01T01:00:00Z"
    assert agent.quarantined is not None and agent.quarantined.name == "agent_state.json.corrupted-20250101T010000Z"

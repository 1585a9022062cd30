"""The one table of scoring strategies (placement/model/strategies.py) is what every consumer lists."""

from __future__ import annotations

import click
import pytest

from numaplane.cli.explain import command as explain_command
from numaplane.cli.scheduler import group as scheduler_group
from numaplane.operator.api.scheduler import ScoringType
from numaplane.operator.crds import numa_resources_scheduler_crd
from numaplane.placement.model.errors import PlacementConfigError
from numaplane.placement.model.strategies import STRATEGIES, STRATEGY_TYPES, ScoringStrategy, StrategyType
from numaplane.scheduler.config import config_from_document
from numaplane.scheduler.errors import SchedulerConfigError


def _choices(command: click.Command) -> list[str]:
    (option,) = [p for p in command.params if p.name == "scoring_strategy"]
    assert isinstance(option.type, click.Choice)
    return list(option.type.choices)


def test_cli_operator_and_crd_list_the_table() -> None:
    assert STRATEGY_TYPES == tuple(kind.value for kind in StrategyType) == tuple(STRATEGIES)
    assert _choices(explain_command) == list(STRATEGY_TYPES)
    assert isinstance(scheduler_group, click.Group)
    for verb in ("run", "extender"):
        assert _choices(scheduler_group.commands[verb]) == list(STRATEGY_TYPES)
    assert [kind.value for kind in ScoringType] == list(STRATEGY_TYPES)
    schema = numa_resources_scheduler_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    scoring = schema["properties"]["spec"]["properties"]["scoringStrategy"]["properties"]["type"]
    assert scoring["enum"] == list(STRATEGY_TYPES) and scoring["default"] == "LeastAllocated"


def test_validation_accepts_the_table_and_names_anything_else() -> None:
    for name in STRATEGY_TYPES:
        assert ScoringStrategy(name).type == name and type(ScoringStrategy(name).type) is str
        assert config_from_document({"scoringStrategy": {"type": name}}).strategy.kind is StrategyType(name)
    with pytest.raises(PlacementConfigError, match="invalid ScoringStrategyType 'Fastest'"):
        ScoringStrategy("Fastest")
    with pytest.raises(SchedulerConfigError, match="scoringStrategy: invalid ScoringStrategyType 'Fastest'"):
        config_from_document({"scoringStrategy": {"type": "Fastest"}})

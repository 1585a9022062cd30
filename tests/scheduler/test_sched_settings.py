"""The scheduler's settings from its options: a configuration file, then the flags that were given."""

from __future__ import annotations

from pathlib import Path

import pytest

from numaplane.scheduler.errors import SchedulerConfigError
from numaplane.scheduler.settings import settings_from_options

NAMES = ("numaplane-scheduler",)


def test_no_options_give_the_defaults_for_the_modes_names() -> None:
    config = settings_from_options(NAMES)
    assert config.scheduler_names == NAMES
    assert config.strategy.type == "LeastAllocated"


def test_resource_weights_replace_the_whole_table_and_must_be_name_equals_integer() -> None:
    config = settings_from_options(NAMES, scoring_strategy="MostAllocated", resource_weight=["cpu=3"])
    assert config.strategy.type == "MostAllocated" and dict(config.strategy.weights) == {"cpu": 3}
    kept = settings_from_options(NAMES, scoring_strategy="BalancedAllocation")
    assert dict(kept.strategy.weights) == dict(settings_from_options(NAMES).strategy.weights)
    for bad in ("cpu", "cpu=", "=3", "cpu=x"):
        with pytest.raises(SchedulerConfigError, match="NAME=INTEGER"):
            settings_from_options(NAMES, resource_weight=[bad])


def test_a_zero_resync_period_means_passthrough_and_a_positive_one_overreserve() -> None:
    off = settings_from_options(NAMES, resync_period="0s")
    assert off.cache_mode == "passthrough"
    on = settings_from_options(NAMES, resync_period="7s", informer_mode="shared")
    assert (on.cache_mode, on.cache.resync_period_seconds, on.cache.informer_mode) == ("overreserve", 7.0, "Shared")
    explicit = settings_from_options(NAMES, resync_period="0", cache_mode="discard-reserved")
    assert explicit.cache_mode == "discard-reserved"


def test_flags_override_the_file_and_an_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "args.yaml"
    path.write_text("scoringStrategy: {type: MostAllocated}\n")
    assert settings_from_options(NAMES, config_file=path).strategy.type == "MostAllocated"
    assert settings_from_options(NAMES, config_file=path, scoring_strategy="LeastNUMANodes").strategy.type == (
        "LeastNUMANodes"
    )
    path.write_text("[unclosed\n")
    with pytest.raises(SchedulerConfigError, match="cannot read"):
        settings_from_options(NAMES, config_file=path)

"""The scheduler's settings from its command line: a configuration file, then single values over it.

:func:`settings_from_options` is what ``numaplane scheduler run|extender`` parse into (the CLI only
collects the flags): the defaults for the mode's scheduler names, then ``--config FILE`` (plugin args or
a whole KubeSchedulerConfiguration, :func:`~numaplane.scheduler.config.config_from_document`), then the
flags that were given. Rules the flags follow:

* ``--scoring-strategy`` and ``--resource-weight NAME=INTEGER`` replace the strategy's type and its
  whole weight table respectively (a weight table from the file is kept when no weight is given);
* ``--resync-period`` 0 (or negative) means no resync: the passthrough cache unless ``--cache`` says
  otherwise; a positive period turns the file's passthrough cache into the over-reserve one;
* ``--informer-mode`` is case-insensitive (``shared`` → ``Shared``).

Errors are :class:`~numaplane.scheduler.errors.SchedulerConfigError` (or the placement layer's
:class:`~numaplane.placement.model.errors.PlacementConfigError` for an invalid strategy).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from numaplane.documents import DocumentError, read_document
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.scheduler.config import SchedulerConfig, config_from_document, parse_period
from numaplane.scheduler.errors import SchedulerConfigError

__all__ = ["settings_from_options"]


def _weights(items: Iterable[str]) -> dict[str, int]:
    weights: dict[str, int] = {}
    for item in items:
        name, sep, value = str(item).partition("=")
        if not sep or not name or not value.strip().isdigit():
            raise SchedulerConfigError(f"--resource-weight {item!r} must be NAME=INTEGER")
        weights[name] = int(value)
    return weights


def settings_from_options(
    default_names: tuple[str, ...],
    *,
    config_file: Path | None = None,
    scheduler_names: Iterable[str] = (),
    scoring_strategy: str | None = None,
    resource_weight: Iterable[str] = (),
    cache_mode: str | None = None,
    resync_period: str | None = None,
    informer_mode: str | None = None,
    foreign_pods_detect: str | None = None,
    kubelet_admission: bool | None = None,
) -> SchedulerConfig:
    """The configuration the options describe (module docstring); ``None``/empty: not given."""
    config = SchedulerConfig(scheduler_names=default_names)
    if config_file is not None:
        try:
            doc = read_document(config_file)
        except DocumentError as exc:
            raise SchedulerConfigError(f"cannot read {exc}") from exc
        try:
            config = config_from_document(doc, config)
        except SchedulerConfigError as exc:
            raise SchedulerConfigError(f"{config_file}: {exc}") from exc
    strategy = config.strategy
    weights_given = tuple(resource_weight)
    if scoring_strategy or weights_given:
        weights = _weights(weights_given) if weights_given else dict(strategy.weights)
        strategy = ScoringStrategy(scoring_strategy or strategy.type, weights)
    period: float | None = None
    if resync_period is not None:
        period = parse_period(str(resync_period))
        if period <= 0:
            period = None
            cache_mode = cache_mode or "passthrough"
        else:
            cache_mode = cache_mode or ("overreserve" if config.cache_mode == "passthrough" else None)
    return config.with_overrides(
        scheduler_names=tuple(scheduler_names) or None,
        cache_mode=cache_mode,
        resync_period_seconds=period,
        informer_mode=str(informer_mode).capitalize() if informer_mode else None,
        strategy=strategy,
        foreign_pods_detect=foreign_pods_detect,
        kubelet_admission=kubelet_admission,
    )

"""Scheduler configuration: cache mode, scoring strategy, filter options, queue timings.

One :class:`SchedulerConfig` serves both the extender and the standalone scheduler. It is read from a
YAML/JSON document (:func:`config_from_document`) in either of two forms, then flags override single
fields (:meth:`SchedulerConfig.with_overrides`):

* the flat form — the NodeResourceTopologyMatch plugin args plus numaplane's own keys::

      schedulerNames: [numaplane-scheduler]      # or schedulerName: ...
      scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]}
      cacheResyncPeriodSeconds: 5                # > 0: over-reserve cache; <= 0: passthrough
      discardReservedNodes: false                # true: discard-reserved cache (wins)
      cache: {foreignPodsDetect: All, resyncMethod: Autodetect, informerMode: Dedicated, resyncScope: All}
      # numaplane's four deliberate differences from upstream (true by default; false = upstream):
      #   cache: {adoptNewNRTs: true, keepLateReservations: true, rechargeUncovered: true, matchWithoutTerminalPods: true}
      kubeletAdmission: false                    # also check restricted / best-effort nodes
      numaScoreWeight: 1                         # standalone only: weight of the NUMA score
      fitScoreWeight: 1                          # standalone only: weight of LeastAllocated node fit
      percentageOfNodesToScore: 100              # standalone only: 100 every node; 0 adaptive (kube-scheduler's)
      podInitialBackoffSeconds: 1
      podMaxBackoffSeconds: 10
      podMaxInUnschedulablePodsSeconds: 60

* a ``KubeSchedulerConfiguration``: the profiles whose ``pluginConfig`` has ``NodeResourceTopologyMatch``
  args give the scheduler names, and the first such args give the plugin keys above (its top-level
  ``percentageOfNodesToScore`` too).

Cache mode follows the plugin (scheduler-nrt.md D): ``discardReservedNodes`` wins, else a positive
``cacheResyncPeriodSeconds`` selects over-reserve, else passthrough. Without any document the default
is **over-reserve with a 5 s resync** (upstream's default is passthrough, which over-commits when pods
arrive faster than the exporter republishes). Units: seconds everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from numaplane.limits import MAX_CONFIG_INTEGER, MAX_CONFIG_SECONDS
from numaplane.placement.caches.cache import make_cache
from numaplane.placement.caches.cachebase import NRTCache
from numaplane.placement.caches.overreserve import (
    OverReserveConfig,
)
from numaplane.placement.cycle import SelectionRules
from numaplane.placement.explain.filter import FilterOptions
from numaplane.placement.model.errors import PlacementConfigError
from numaplane.placement.model.strategies import ScoringStrategy
from numaplane.resources.duration import parse_seconds
from numaplane.resources.errors import DurationError
from numaplane.scheduler.errors import SchedulerConfigError

__all__ = [
    "CACHE_MODES",
    "DEFAULT_EXTENDER_NAMES",
    "DEFAULT_SCHEDULER_NAME",
    "PLUGIN_NAME",
    "CacheMode",
    "SchedulerConfig",
    "config_from_document",
    "parse_cache_mode",
    "parse_period",
]

CacheMode = Literal["passthrough", "overreserve", "discard-reserved"]
CACHE_MODES: tuple[CacheMode, ...] = ("passthrough", "overreserve", "discard-reserved")
DEFAULT_SCHEDULER_NAME = "numaplane-scheduler"
#: The settings :meth:`SchedulerConfig.with_overrides` routes to its over-reserve cache's config.
_CACHE_FIELDS = frozenset(f.name for f in fields(OverReserveConfig)) - {"profile_names"}
#: The kube-scheduler profiles an extender serves by default (used to tell our pods from foreign ones).
DEFAULT_EXTENDER_NAMES = ("default-scheduler",)
PLUGIN_NAME = "NodeResourceTopologyMatch"


@dataclass(frozen=True)
class SchedulerConfig:
    """Everything the scheduler state and loops need to know (module docstring). Times in seconds."""

    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)
    strategy: ScoringStrategy = field(default_factory=ScoringStrategy)
    cache_mode: CacheMode = "overreserve"
    #: The over-reserve cache's settings, defined once there (its ``profile_names`` are ours:
    #: :meth:`over_reserve_config`); :meth:`with_overrides` takes its field names too.
    cache: OverReserveConfig = field(default_factory=OverReserveConfig)
    kubelet_admission: bool = False
    numa_score_weight: int = 1
    fit_score_weight: int = 1
    percentage_of_nodes_to_score: int = 100
    backoff_initial_seconds: float = 1.0
    backoff_max_seconds: float = 10.0
    max_unschedulable_seconds: float = 60.0
    bind_concurrency: int = 16
    #: ``scheduler run --dra``: allocate the supported subset of pods' DRA claims (scheduler/dra.py).
    dra: bool = False

    def __post_init__(self) -> None:
        if not self.scheduler_names or any(not n for n in self.scheduler_names):
            raise SchedulerConfigError("at least one non-empty scheduler name is needed")
        if self.cache_mode not in CACHE_MODES:
            raise SchedulerConfigError(f"cache mode must be one of {', '.join(CACHE_MODES)}, not {self.cache_mode!r}")
        if self.numa_score_weight < 0 or self.fit_score_weight < 0:
            raise SchedulerConfigError("score weights must be >= 0")
        if not 0 <= self.percentage_of_nodes_to_score <= 100:
            raise SchedulerConfigError("percentageOfNodesToScore must be within 0..100")
        if not 0 < self.backoff_initial_seconds <= self.backoff_max_seconds:
            raise SchedulerConfigError("need 0 < podInitialBackoffSeconds <= podMaxBackoffSeconds")
        if self.max_unschedulable_seconds <= 0 or self.bind_concurrency < 1:
            raise SchedulerConfigError("podMaxInUnschedulablePodsSeconds must be > 0 and bind concurrency >= 1")

    @property
    def selection(self) -> SelectionRules:
        """The standalone scheduler's node-selection rule: the configured weights and search share
        (``percentage_of_nodes_to_score``: 100, the default, filters and scores every node)."""
        return SelectionRules(
            self.numa_score_weight,
            self.fit_score_weight,
            percentage_of_nodes_to_score=self.percentage_of_nodes_to_score,
        )

    @property
    def filter_options(self) -> FilterOptions:
        return FilterOptions(kubelet_admission=self.kubelet_admission)

    def over_reserve_config(self) -> OverReserveConfig:
        """The over-reserve cache's settings; our scheduler names are the "own" profiles."""
        return replace(self.cache, profile_names=frozenset(self.scheduler_names))

    def make_cache(self) -> NRTCache:
        """A fresh NRT cache of the configured mode."""
        return make_cache(
            resync_period_seconds=self.cache.resync_period_seconds if self.cache_mode == "overreserve" else 0,
            discard_reserved_nodes=self.cache_mode == "discard-reserved",
            config=self.over_reserve_config(),
        )

    def with_overrides(self, **values: Any) -> SchedulerConfig:
        """A copy with the given fields replaced; ``None`` values are ignored (flag not given). The
        fields of :class:`OverReserveConfig` (but ``profile_names``) replace those of :attr:`cache`;
        an invalid one raises :class:`SchedulerConfigError` naming it."""
        known = {f.name for f in fields(self)}
        given = {k: v for k, v in values.items() if v is not None}
        cached = {k: given.pop(k) for k in list(given) if k in _CACHE_FIELDS}
        unknown = set(given) - known
        if unknown:
            raise SchedulerConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        if cached:
            try:
                given["cache"] = replace(given.get("cache", self.cache), **cached)
            except PlacementConfigError as exc:
                raise SchedulerConfigError(str(exc)) from exc
        return replace(self, **given)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary (logged at start-up)."""
        return {
            "schedulerNames": list(self.scheduler_names),
            "cache": self.cache_mode,
            "resyncPeriodSeconds": self.cache.resync_period_seconds,
            "scoringStrategy": self.strategy.type,
            "weights": dict(self.strategy.weights),
            "kubeletAdmission": self.kubelet_admission,
            "upstreamDifferences": {
                "adoptNewNRTs": self.cache.adopt_new_nrts,
                "keepLateReservations": self.cache.keep_late_reservations,
                "rechargeUncovered": self.cache.recharge_uncovered,
                "matchWithoutTerminalPods": self.cache.match_without_terminal_pods,
            },
        }


def _number(doc: Mapping[str, Any], key: str) -> float | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchedulerConfigError(f"{key} must be a number, not {_short(value)}")
    if not -MAX_CONFIG_SECONDS <= value <= MAX_CONFIG_SECONDS:  # also nan, inf and 400-digit integers
        raise SchedulerConfigError(
            f"{key} must be a number of seconds within ±{MAX_CONFIG_SECONDS}, not {_short(value)}"
        )
    return float(value)


def _int(doc: Mapping[str, Any], key: str) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchedulerConfigError(f"{key} must be an integer, not {_short(value)}")
    if not -MAX_CONFIG_INTEGER <= value <= MAX_CONFIG_INTEGER:
        raise SchedulerConfigError(f"{key} must be an integer within ±{MAX_CONFIG_INTEGER}, not {_short(value)}")
    return value


def _short(value: Any) -> str:
    """``repr(value)`` cut to 40 characters (a 400-digit number is named, not printed)."""
    text = (
        repr(value) if not isinstance(value, int) or abs(value) < 10**40 else f"a {len(str(abs(value)))}-digit integer"
    )
    return text if len(text) <= 40 else text[:40] + "..."


def _bool(doc: Mapping[str, Any], key: str) -> bool | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise SchedulerConfigError(f"{key} must be true or false, not {value!r}")
    return value


def _names(doc: Mapping[str, Any]) -> tuple[str, ...] | None:
    if "schedulerNames" in doc:
        names = doc["schedulerNames"]
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise SchedulerConfigError("schedulerNames must be a list of non-empty strings")
        return tuple(names)
    name = doc.get("schedulerName")
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        raise SchedulerConfigError("schedulerName must be a non-empty string")
    return (name,)


#: The plugin args' keys this reads (the NodeResourceTopologyMatch args and numaplane's own); an args
#: object may also carry its own ``apiVersion``/``kind``. Any other key is refused, naming it.
_ARGS_KEYS = frozenset(
    {
        "apiVersion",
        "kind",
        "scoringStrategy",
        "cacheResyncPeriodSeconds",
        "discardReservedNodes",
        "cache",
        "kubeletAdmission",
        "numaScoreWeight",
        "fitScoreWeight",
        "percentageOfNodesToScore",
        "podInitialBackoffSeconds",
        "podMaxBackoffSeconds",
        "podMaxInUnschedulablePodsSeconds",
        "bindConcurrency",
    }
)
#: The flat form's own keys besides the args (a KubeSchedulerConfiguration names them by its profiles).
_FLAT_KEYS = _ARGS_KEYS | {"schedulerNames", "schedulerName"}
#: The args' ``cache`` object: its choices and its switches (numaplane's deliberate differences from
#: upstream), each a key and the :class:`SchedulerConfig` field it sets; no other key is read.
_CACHE_CHOICES = (
    ("foreignPodsDetect", "foreign_pods_detect"),
    ("resyncMethod", "resync_method"),
    ("informerMode", "informer_mode"),
    ("resyncScope", "resync_scope"),
)
_CACHE_SWITCHES = (
    ("adoptNewNRTs", "adopt_new_nrts"),
    ("keepLateReservations", "keep_late_reservations"),
    ("rechargeUncovered", "recharge_uncovered"),
    ("matchWithoutTerminalPods", "match_without_terminal_pods"),
)
_CACHE_KEYS = tuple(key for key, _ in (*_CACHE_CHOICES, *_CACHE_SWITCHES))


def _refuse_unknown(obj: Mapping[str, Any], known: frozenset[str] | tuple[str, ...], where: str) -> None:
    """Raise :class:`SchedulerConfigError` naming the first key of ``obj`` (at path ``where``) not in ``known``:
    a misspelt key must not leave its setting at the default unnoticed."""
    for key in obj:
        if key not in known:
            raise SchedulerConfigError(f"{where}{key}: unknown key (known: {', '.join(sorted(known))})")


def _from_kube_scheduler_configuration(doc: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...], str]:
    profiles = doc.get("profiles") or []
    if not isinstance(profiles, list):
        raise SchedulerConfigError("profiles must be a list")
    names: list[str] = []
    args: dict[str, Any] | None = None
    args_at = ""
    for i, profile in enumerate(profiles):
        where = f"profiles[{i}]"
        if not isinstance(profile, Mapping):
            raise SchedulerConfigError(f"{where}: every profile must be an object")
        entries = profile.get("pluginConfig") or []
        if not isinstance(entries, list):
            raise SchedulerConfigError(f"{where}.pluginConfig must be a list, not {_short(entries)}")
        for j, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise SchedulerConfigError(f"{where}.pluginConfig[{j}] must be an object, not {_short(entry)}")
            if entry.get("name") == PLUGIN_NAME:
                name = profile.get("schedulerName") or "default-scheduler"
                if not isinstance(name, str):
                    raise SchedulerConfigError(f"{where}.schedulerName must be a string, not {_short(name)}")
                names.append(name)
                if args is None:
                    found = entry.get("args") or {}
                    if not isinstance(found, Mapping):
                        raise SchedulerConfigError(f"{where}.pluginConfig[{j}].args must be an object")
                    args, args_at = dict(found), f"{where}.pluginConfig[{j}].args."
    if args is None:
        raise SchedulerConfigError(f"no profile of the KubeSchedulerConfiguration configures {PLUGIN_NAME}")
    return args, tuple(names), args_at


def config_from_document(doc: Any, base: SchedulerConfig | None = None) -> SchedulerConfig:
    """Read a configuration document (module docstring) on top of ``base`` (default: the defaults).

    Raises :class:`SchedulerConfigError` naming the offending key.
    """
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise SchedulerConfigError("the configuration must be a YAML/JSON object")
    config = base or SchedulerConfig()
    names: tuple[str, ...] | None
    if doc.get("kind") == "KubeSchedulerConfiguration":
        args, names, args_at = _from_kube_scheduler_configuration(doc)
        _refuse_unknown(args, _ARGS_KEYS, args_at)
        if "percentageOfNodesToScore" in doc:  # a top-level KubeSchedulerConfiguration field
            args = {**args, "percentageOfNodesToScore": doc["percentageOfNodesToScore"]}
    else:
        args_at = ""
        _refuse_unknown(doc, _FLAT_KEYS, args_at)
        args, names = dict(doc), _names(doc)
    values: dict[str, Any] = {"scheduler_names": names}
    if "scoringStrategy" in args:
        strategy = args["scoringStrategy"]
        if not isinstance(strategy, Mapping):
            raise SchedulerConfigError("scoringStrategy must be an object")
        try:
            values["strategy"] = ScoringStrategy.from_dict(strategy)
        except PlacementConfigError as exc:
            raise SchedulerConfigError(f"scoringStrategy: {exc}") from exc
    period = _number(args, "cacheResyncPeriodSeconds")
    discard = _bool(args, "discardReservedNodes")
    if discard:
        values["cache_mode"] = "discard-reserved"
    elif period is not None:
        values["cache_mode"] = "overreserve" if period > 0 else "passthrough"
    if period is not None and period > 0:
        values["resync_period_seconds"] = period
    cache = args.get("cache") or {}
    if not isinstance(cache, Mapping):
        raise SchedulerConfigError("cache must be an object")
    _refuse_unknown(cache, _CACHE_KEYS, f"{args_at}cache.")
    for key, attr in _CACHE_CHOICES:
        if key in cache:
            values[attr] = cache[key]
    for key, attr in _CACHE_SWITCHES:
        values[attr] = _bool(cache, key)
    values["kubelet_admission"] = _bool(args, "kubeletAdmission")
    values["numa_score_weight"] = _int(args, "numaScoreWeight")
    values["fit_score_weight"] = _int(args, "fitScoreWeight")
    values["percentage_of_nodes_to_score"] = _int(args, "percentageOfNodesToScore")
    values["backoff_initial_seconds"] = _number(args, "podInitialBackoffSeconds")
    values["backoff_max_seconds"] = _number(args, "podMaxBackoffSeconds")
    values["max_unschedulable_seconds"] = _number(args, "podMaxInUnschedulablePodsSeconds")
    values["bind_concurrency"] = _int(args, "bindConcurrency")
    return config.with_overrides(**values)


def parse_period(text: str) -> float:
    """Seconds from a Go duration (``5s``, ``1m30s``, ``250ms``, ``0``; :mod:`numaplane.resources.duration`)
    or, as the ``--resync-period`` flag has always accepted, a plain non-negative number of seconds (``5``, ``0.5``).
    """
    try:
        return parse_seconds(text)
    except DurationError as exc:
        raise SchedulerConfigError(f"period {exc}") from exc


def parse_cache_mode(text: str) -> CacheMode:
    """``passthrough`` / ``overreserve`` (also ``over-reserve``) / ``discard-reserved``."""
    normalized = text.strip().lower().replace("_", "-")
    if normalized == "over-reserve":
        normalized = "overreserve"
    for mode in CACHE_MODES:
        if mode == normalized:
            return mode
    raise SchedulerConfigError(f"cache mode must be one of {', '.join(CACHE_MODES)}, not {text!r}")

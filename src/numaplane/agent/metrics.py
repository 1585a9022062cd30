"""The agent's Prometheus metrics (one registry per agent, so tests can run several agents).

Names follow ``numaplane_agent_<thing>_<unit>``; label sets are small and bounded (no pod or container
names). Durations are seconds, sizes bytes, CPU counts are counts.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["AgentMetrics"]

_LATENCY_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0)


class AgentMetrics:
    """Every metric of one agent, registered in :attr:`registry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry

        def counter(name: str, documentation: str, *labels: str) -> Counter:
            return Counter(name, documentation, list(labels), registry=r)

        def gauge(name: str, documentation: str, *labels: str) -> Gauge:
            return Gauge(name, documentation, list(labels), registry=r)

        def by_result(name: str, documentation: str) -> Counter:
            """A counter of ``name`` with the one label ``result`` (ok/error, applied/rejected, ...)."""
            return counter(name, documentation, "result")

        self.nri_requests = counter(
            "numaplane_agent_nri_requests", "NRI requests served, by method and result.", "method", "result"
        )
        self.nri_duration = Histogram(
            "numaplane_agent_nri_request_duration_seconds",
            "Time to answer an NRI request.",
            ["method"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.nri_connected = gauge("numaplane_agent_nri_connected", "1 while registered with the runtime.")
        self.nri_sessions_without_sync = gauge(
            "numaplane_agent_nri_sessions_without_synchronize",
            "Registered NRI sessions in a row that ended before the runtime sent Synchronize (0 once one arrives;"
            " the usual cause: a runtime state over 4 MiB on a runtime that cannot split Synchronize).",
        )
        self.unsolicited_calls = counter(
            "numaplane_agent_nri_unsolicited_calls",
            "Runtime.UpdateContainers calls made (only to a runtime whose NRI cannot deadlock on them).",
        )
        self.owed_updates = gauge(
            "numaplane_agent_owed_updates",
            "Containers owed a cpuset update, waiting for the runtime's next CreateContainer, UpdateContainer or"
            " StopContainer request or Synchronize (on runtimes where unsolicited updates would deadlock it).",
        )
        self.nri_registrations = counter(
            "numaplane_agent_nri_registrations", "Successful registrations with the runtime."
        )
        self.admissions = counter(
            "numaplane_agent_admissions",
            "Container admissions by result (admitted/rejected) and reason.",
            "result",
            "reason",
        )
        self.unpinned = gauge(
            "numaplane_agent_unpinned_containers",
            "Running containers Synchronize could not admit (they wait in the shared pool for resources).",
        )
        self.background_crashes = counter(
            "numaplane_agent_background_task_crashes",
            "Background tasks (checkpoint writer, update sender, config watcher, reporter) that died and were restarted.",
            "task",
        )
        self.adoptions = by_result(
            "numaplane_agent_adoptions",
            "Running containers found by Synchronize that the agent did not know, by result.",
        )
        self.container_updates = counter(
            "numaplane_agent_container_updates",
            "Container cpuset updates sent to the runtime, by path (create/stop/update/sync/remove/repin/...) and"
            " result (ok: in the answer that caused it; in-reply: owed, then carried by a later answer;"
            " failed/unsent: an unsolicited call the runtime refused or that could not be sent).",
            "path",
            "result",
        )
        self.containers = gauge("numaplane_agent_containers", "Tracked containers by kind (exclusive/shared).", "kind")
        self.exclusive_cpus = gauge("numaplane_agent_exclusive_cpus", "CPUs held exclusively.")
        self.shared_pool_cpus = gauge("numaplane_agent_shared_pool_cpus", "CPUs in the shared pool.")
        self.sync_duration = gauge(
            "numaplane_agent_last_synchronize_duration_seconds", "Duration of the last Synchronize."
        )
        self.checkpoint_writes = by_result("numaplane_agent_checkpoint_writes", "Checkpoint writes by result.")
        self.checkpoint_write_duration = Histogram(
            "numaplane_agent_checkpoint_write_duration_seconds",
            "Time to write the checkpoint (worker thread).",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.checkpoint_load = by_result(
            "numaplane_agent_checkpoint_loads",
            "Checkpoint loads at start by result (restored/missing/corrupted/foreign).",
        )
        self.config_reloads = by_result(
            "numaplane_agent_config_reloads", "Config file reloads by result (applied/rejected)."
        )
        self.config_valid = gauge(
            "numaplane_agent_config_last_reload_valid", "1 if the config file's current content is in force."
        )
        self.config_generation = gauge(
            "numaplane_agent_config_generation", "Configs applied since start (1 = the initial one)."
        )
        self.config_rejected_info = gauge(
            "numaplane_agent_config_rejected",
            "1 with the reason of the last rejected config (reason truncated to 200 characters).",
            "reason",
        )
        self.plugin_registrations = by_result(
            "numaplane_agent_plugin_registrations", "Out-of-process plugin registrations by result (accepted/refused)."
        )
        self.plugin_available = gauge(
            "numaplane_agent_plugin_available", "1 while an out-of-process plugin answers.", "plugin"
        )

        self.notify_touches = by_result(
            "numaplane_agent_notify_touches",
            "Touches of the exporter's notify file after allocation changes, by result (ok/error).",
        )
        self.applied_policy_writes = by_result(
            "numaplane_agent_applied_policy_writes",
            "Writes of the applied policy file (the configuration in force, read by the exporter), by result (ok/error).",
        )

    def set_config_rejected(self, reason: str) -> None:
        self.config_rejected_info.clear()
        if reason:
            self.config_rejected_info.labels(reason=reason[:200]).set(1)

"""Contract between the operator's renderers and the components' command lines.

Every container the operator renders that runs the numaplane image (exporter, agent, scheduler,
extender, operator) has its ``args`` parsed by the real click command, exactly as the image's
``ENTRYPOINT numaplane`` would: an unknown option, a stray argument or a bad value fails here. The
parsed options are then built the way each command builds them (which validates them as a whole),
and the pod wiring is checked: every ``$(VAR)`` is defined in the container's env, every path the
component reads or writes lies in a volume mount, agent and exporter of a group meet on the same
host files (the agent's PodResources socket, the notify file), the bind ports are the ports the
probes and Services use, and the scheduler names agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import PurePosixPath
from typing import Any

import click
import pytest

from numaplane.cli import main
from numaplane.operator.api.meta import API_VERSION
from numaplane.operator.render import parse_resources, render_install, render_stack, sample_resources
from numaplane.operator.render_common import HEALTH_PORT, METRICS_PORT, Settings

NRO = {"apiVersion": API_VERSION, "kind": "NUMAResourcesOperator", "metadata": {"name": "numaresourcesoperator"}}
NRS = {"apiVersion": API_VERSION, "kind": "NUMAResourcesScheduler", "metadata": {"name": "numaresourcesscheduler"}}


def nro(*groups: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {**NRO, "spec": {"nodeGroups": list(groups), **spec}}


def group(name: str, enforcement: str = "kubelet", **config: Any) -> dict[str, Any]:
    return {
        "name": name,
        "nodeSelector": {"matchLabels": {"numaplane.io/node-group": name}},
        "enforcement": enforcement,
        "config": config,
    }


def nrs(**spec: Any) -> dict[str, Any]:
    return {**NRS, "spec": spec}


def policy(name: str, node_group: str, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "NodeResourcePolicy",
        "metadata": {"name": name},
        "spec": {"nodeGroup": node_group, "config": config},
    }


REFRESH = [
    {"infoRefreshMode": "Periodic"},
    {"infoRefreshMode": "Periodic", "infoRefreshPeriod": "1m30s"},
    {"infoRefreshMode": "Events"},
    {"infoRefreshMode": "PeriodicAndEvents", "infoRefreshPeriod": "250ms"},
    {"infoRefreshMode": "PeriodicAndEvents", "infoRefreshPeriod": "0s"},
    {"infoRefreshMode": "Events", "infoRefreshPeriod": "0s"},
]

VARIANTS: dict[str, list[dict[str, Any]]] = {
    "samples": sample_resources(),
    "kubelet-defaults": [nro(group("workers"))],
    "agent-defaults": [nro(group("latency", "agent"))],
    **{
        f"{enforcement}-refresh-{i}": [nro(group("g", enforcement, **refresh))]
        for enforcement in ("kubelet", "agent")
        for i, refresh in enumerate(REFRESH)
    },
    "agent-policy-and-options": [
        nro(
            group("a", "agent", podsFingerprinting="Enabled", infoRefreshPause="Enabled", infoRefreshMode="Events"),
            group("b", "kubelet", podsFingerprinting="Disabled"),
            podExcludes=[{"namespace": "kube-*"}, {"name": "debug-*"}, {"namespace": "ns", "name": "p"}],
            logLevel="TraceAll",
        ),
        policy("a", "a", {"topologyManager": {"policy": "restricted", "scope": "pod"}}),
    ],
    "standalone": [nro(group("w")), nrs(mode="standalone")],
    "standalone-ha-passthrough": [
        nrs(
            mode="standalone",
            replicas=3,
            cacheResyncPeriod="0s",
            schedulerInformer="Shared",
            logLevel="Debug",
            schedulerName="numa-aware",
        )
    ],
    "standalone-scoring": [
        nrs(
            mode="standalone",
            cacheResyncPeriod="1m30s",
            scoringStrategy={"type": "BalancedAllocation", "resources": [{"name": "cpu", "weight": 5}]},
        )
    ],
    "standalone-least-numa": [nrs(scoringStrategy={"type": "LeastNUMANodes"})],
    "extender": [nro(group("w", "agent")), nrs(mode="extender")],
    "extender-ha-scoring": [
        nrs(
            mode="extender",
            replicas=2,
            schedulerName="numa-extended",
            scoringStrategy={
                "type": "MostAllocated",
                "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}],
            },
            schedulerInformer="Shared",
        )
    ],
}


def rendered(variant: str) -> list[dict[str, Any]]:
    return render_stack(parse_resources(VARIANTS[variant]), Settings())


def workloads(objects: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """``(workload, pod spec, container)`` of every container of every DaemonSet and Deployment."""
    for obj in objects:
        if obj["kind"] in ("DaemonSet", "Deployment"):
            spec = obj["spec"]["template"]["spec"]
            for c in spec["containers"]:
                yield obj, spec, c


def resolve(args: list[str]) -> tuple[str, click.Command, list[str]]:
    """The click command ``numaplane <args>`` runs, its name and its own arguments."""
    command: click.Command = main
    name = "numaplane"
    rest = list(args)
    while isinstance(command, click.Group):
        assert rest, f"{name} needs a subcommand"
        sub = command.get_command(click.Context(command), rest[0])
        assert sub is not None, f"no command {rest[0]!r} under {name!r}"
        name, command, rest = rest[0], sub, rest[1:]
    return name, command, rest


#: What the kubelet expands a ``$(VAR)`` of these names to before the command sees it (the downward API's
#: value in a pod of the install namespace); other references stay as written.
EXPANDED = {"POD_NAMESPACE": "numaplane-system"}


def parse(args: list[str]) -> tuple[str, click.Context]:
    """Parse like the real command line would; unknown options and stray arguments fail the test."""
    args = [re.sub(r"\$\((\w+)\)", lambda m: EXPANDED.get(m.group(1), m.group(0)), a) for a in args]
    name, command, rest = resolve(args)
    try:
        ctx = command.make_context(name, rest)
    except click.UsageError as exc:
        pytest.fail(f"`numaplane {' '.join(args)}` is refused: {exc.format_message()}")
    assert not ctx.args, f"stray arguments in {args}"
    return name, ctx


def host_path(spec: Mapping[str, Any], container: Mapping[str, Any], path: str) -> str:
    """The node path (``hostPath``) or ``<kind>:<name>/<rest>`` a container path lives in; fails if unmounted."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    best: tuple[int, str] | None = None
    p = PurePosixPath(path)
    for mount in container.get("volumeMounts", []):
        root = PurePosixPath(mount["mountPath"])
        if p == root or root in p.parents:
            rel = p.relative_to(root)
            volume = volumes[mount["name"]]
            if "hostPath" in volume:
                target = str(PurePosixPath(volume["hostPath"]["path"]) / rel)
            elif "configMap" in volume:
                target = f"configMap:{volume['configMap']['name']}/{rel}"
            else:
                target = f"{next(k for k in volume if k != 'name')}:{mount['name']}/{rel}"
            if best is None or len(str(root)) > best[0]:
                best = (len(str(root)), target)
    assert best is not None, f"{container['name']}: {path} is not in any volume mount"
    return best[1]


def socket_path(target: str) -> str:
    return target.removeprefix("unix://")


def port_of(address: str) -> int:
    return int(address.rpartition(":")[2])


def check_env(container: Mapping[str, Any]) -> None:
    defined = {e["name"] for e in container.get("env", [])}
    for arg in container["args"]:
        for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", arg):
            assert var in defined, f"{container['name']}: $({var}) in {arg!r} is not in the container's env"


def check_ports(container: Mapping[str, Any], params: Mapping[str, Any]) -> None:
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    assert port_of(str(params["metrics_address"])) == ports["metrics"] == METRICS_PORT
    assert port_of(str(params["health_address"])) == ports["health"] == HEALTH_PORT
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["port"] == "health"


def check_exporter(spec: Mapping[str, Any], container: Mapping[str, Any], ctx: click.Context) -> dict[str, str]:
    from numaplane.cli.exporter import _options

    options = _options(ctx.params)  # validates the whole option set (refresh mode vs period, TM config…)
    assert options.node_name == "$(NODE_NAME)"
    assert host_path(spec, container, str(options.sysfs_root / "sys")) == "/sys"
    wiring = {"podresources": host_path(spec, container, socket_path(options.podresources_socket))}
    # one exporter per node: every exporter locks a file on the host (issue 23 item 4)
    assert options.lock_file is not None
    wiring["lock"] = host_path(spec, container, str(options.lock_file))
    if options.kubelet_config_file is not None:
        host_path(spec, container, str(options.kubelet_config_file))
    else:  # agent mode: the policy is the one the agent applied, from the file it writes (issue 23 item 2)
        assert options.applied_policy_file is not None
        assert options.topology_manager_policy is None and options.topology_manager_scope is None
        wiring["applied-policy"] = host_path(spec, container, str(options.applied_policy_file))
    if options.refresh_mode.events and options.kubelet_config_file is not None:
        # kubelet mode: the event source is the kubelet's own checkpoints (nobody touches a notify file)
        assert options.notify_file is None and options.kubelet_state_dir is not None
        assert host_path(spec, container, str(options.kubelet_state_dir)) == Settings().kubelet_state_dir
        mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(options.kubelet_state_dir))
        assert mount["readOnly"]
    elif options.refresh_mode.events:
        assert options.notify_file is not None and options.kubelet_state_dir is None
        wiring["notify"] = host_path(spec, container, str(options.notify_file))
    else:
        assert options.notify_file is None and options.kubelet_state_dir is None
    return wiring


def check_agent(spec: Mapping[str, Any], container: Mapping[str, Any], ctx: click.Context) -> dict[str, str]:
    from numaplane.cli.agent import _options

    options = _options(ctx.params)
    assert ctx.params["watch_pods"], "the agent has RBAC to read its node's pods: it should use it"
    # the policy report goes on the agent's own pod: its name and namespace come from the downward API
    fields = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in container["env"]}
    envvars = {p.name: p.envvar for p in ctx.command.params}
    assert fields[str(envvars["pod_name"])] == "metadata.name"
    assert fields[str(envvars["pod_namespace"])] == "metadata.namespace"
    assert options.node_name == "$(NODE_NAME)"
    assert host_path(spec, container, str(options.sysfs_root / "sys")) == "/sys"
    host_path(spec, container, options.nri_socket)
    host_path(spec, container, str(options.state_dir))
    assert options.plugin_dir is not None and options.config_file is not None
    host_path(spec, container, str(options.plugin_dir))
    assert host_path(spec, container, str(options.config_file)).startswith("configMap:numaplane-policy-")
    assert options.podresources_socket is not None and options.notify_file is not None
    assert options.applied_policy_file is not None
    # the take-over check reads the kubelet's configuration from the host, read-only
    assert host_path(spec, container, str(ctx.params["kubelet_config"])) == Settings().kubelet_config_file
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == ctx.params["kubelet_config"])
    assert mount["readOnly"]
    return {
        "podresources": host_path(spec, container, socket_path(options.podresources_socket)),
        "notify": host_path(spec, container, str(options.notify_file)),
        "applied-policy": host_path(spec, container, str(options.applied_policy_file)),
    }


def check_scheduler(
    objects: list[dict[str, Any]], workload: Mapping[str, Any], name: str, ctx: click.Context, cr: Mapping[str, Any]
) -> None:
    from numaplane.cli.scheduler import _check_addresses, _config
    from numaplane.scheduler.config import DEFAULT_EXTENDER_NAMES, DEFAULT_SCHEDULER_NAME

    defaults = DEFAULT_EXTENDER_NAMES if name == "extender" else (DEFAULT_SCHEDULER_NAME,)
    config = _config(ctx.params, defaults)
    wanted = cr.get("schedulerName", "numaplane-scheduler")
    assert config.scheduler_names == (wanted,)
    if cr.get("cacheResyncPeriod") == "0s":
        assert config.cache_mode == "passthrough"
    else:
        assert config.cache_mode == "overreserve"
    if "scoringStrategy" in cr:
        assert config.strategy.type == cr["scoringStrategy"]["type"]
        for weight in cr["scoringStrategy"].get("resources", []):
            assert config.strategy.weight(weight["name"]) == weight["weight"]
    assert config.cache.informer_mode == cr.get("schedulerInformer", "Dedicated")
    if name == "extender":
        _check_addresses(ctx.params["address"], ctx.params["metrics_address"], ctx.params["health_address"])
        import yaml

        cm = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("scheduler-config"))
        ksc = yaml.safe_load(cm["data"]["config.yaml"])
        assert [p["schedulerName"] for p in ksc["profiles"]] == [wanted]
        assert ksc["extenders"][0]["urlPrefix"] == f"http://{ctx.params['address']}/"
    else:
        _check_addresses(ctx.params["metrics_address"], ctx.params["health_address"])
        replicas = int(cr.get("replicas", 1))
        assert ctx.params["leader_elect"] is (replicas > 1)
        assert workload["spec"]["replicas"] == replicas


def check_operator(ctx: click.Context) -> None:
    assert ctx.params["leader_elect"] and ctx.params["image"]
    assert ctx.params["namespace"] == EXPANDED["POD_NAMESPACE"]  # --namespace=$(POD_NAMESPACE), expanded


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_rendered_command_line_parses_and_is_wired(variant: str) -> None:
    objects = rendered(variant)
    crs = {doc["kind"]: doc.get("spec", {}) for doc in VARIANTS[variant]}
    wiring: dict[tuple[str, str], dict[str, str]] = {}  # (component, group) → host files
    seen = set()
    for workload, spec, container in workloads(objects):
        if "command" in container:  # the stock kube-scheduler: not ours
            assert container["command"] == ["kube-scheduler"]
            continue
        assert container["image"] == Settings().image
        check_env(container)
        name, ctx = parse(container["args"])
        seen.add(name)
        check_ports(container, ctx.params)
        group_name = workload["metadata"]["labels"].get("numaplane.io/node-group", "")
        if name == "exporter":
            wiring[("exporter", group_name)] = check_exporter(spec, container, ctx)
        elif name == "agent":
            wiring[("agent", group_name)] = check_agent(spec, container, ctx)
        elif name in ("run", "extender"):
            check_scheduler(objects, workload, name, ctx, crs["NUMAResourcesScheduler"])
        else:
            pytest.fail(f"unexpected command {name!r}")
        level = ctx.params.get("log_level")
        wanted_level = "info" if _cr_log_level(crs, name) == "Normal" else "debug"
        assert level == wanted_level
    for (component, group_name), files in wiring.items():
        if component == "agent":
            exporter = wiring[("exporter", group_name)]
            # the exporter reads the agent's PodResources socket and watches the file the agent touches
            assert exporter["podresources"] == files["podresources"]
            if "notify" in exporter:
                assert exporter["notify"] == files["notify"]
            # ... and publishes the policy the agent writes it applied
            assert exporter["applied-policy"] == files["applied-policy"]
    # whatever its group (kubelet or agent mode), every exporter locks the same host file
    assert len({files["lock"] for (component, _), files in wiring.items() if component == "exporter"}) <= 1
    if "NUMAResourcesOperator" in crs:
        assert "exporter" in seen
    if "NUMAResourcesScheduler" in crs:
        assert seen & {"run", "extender"}


def _cr_log_level(crs: Mapping[str, Mapping[str, Any]], command: str) -> str:
    kind = "NUMAResourcesScheduler" if command in ("run", "extender") else "NUMAResourcesOperator"
    return str(crs[kind].get("logLevel", "Normal"))


def test_kubelet_mode_exporter_reads_the_kubelets_socket_and_config() -> None:
    objects = rendered("kubelet-defaults")
    [(_, spec, container)] = list(workloads(objects))
    _, ctx = parse(container["args"])
    files = check_exporter(spec, container, ctx)
    settings = Settings()
    assert files["podresources"] == f"{settings.kubelet_podresources_dir}/kubelet.sock"
    assert host_path(spec, container, str(ctx.params["kubelet_config"])) == settings.kubelet_config_file


@pytest.mark.parametrize(
    ("refresh", "mode", "period"),
    [
        ({"infoRefreshMode": "Periodic", "infoRefreshPeriod": "1m30s"}, "periodic", 90.0),
        ({"infoRefreshMode": "Events"}, "events", None),
        ({"infoRefreshMode": "PeriodicAndEvents", "infoRefreshPeriod": "250ms"}, "both", 0.25),
        # upstream: "explicit 0 disables" the periodic refresh; the exporter refuses 'both' with 0
        ({"infoRefreshMode": "PeriodicAndEvents", "infoRefreshPeriod": "0s"}, "events", None),
    ],
)
def test_refresh_modes_reach_the_exporter(refresh: dict[str, str], mode: str, period: float | None) -> None:
    from numaplane.cli.exporter import _options

    objects = render_stack(parse_resources([nro(group("g", "agent", **refresh))]), Settings())
    [container] = [c for w, _, c in workloads(objects) if w["metadata"]["name"] == "numaplane-exporter-g"]
    _, ctx = parse(container["args"])
    options = _options(ctx.params)
    assert options.refresh_mode.value == mode
    if period is not None:
        assert options.period_seconds == period
    assert ("--period" in " ".join(container["args"])) is (period is not None)


def test_the_default_install_runs_the_operator_command() -> None:
    [(_, _, container)] = list(workloads(render_install(Settings())))
    check_env(container)
    name, ctx = parse(container["args"])
    assert name == "operator"
    check_operator(ctx)
    check_ports(container, ctx.params)


def test_an_unknown_option_is_caught() -> None:
    """The checker itself: a flag the component does not have fails the contract."""
    with pytest.raises(pytest.fail.Exception, match="No such option"):
        parse(["agent", "--no-such-flag=1"])
    with pytest.raises(pytest.fail.Exception, match="No such option"):
        parse(["scheduler", "run", "--listen=:1"])

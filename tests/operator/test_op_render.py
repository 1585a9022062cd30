# ruff: noqa: E402  (optional test dependencies are checked with importorskip before the imports that need them)
"""Rendered manifests: valid Kubernetes objects, least-privilege RBAC, the expected shapes."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import pytest

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate (test extra)")
import yaml

from numaplane.operator.api.numaresources import NUMAResourcesOperator
from numaplane.operator.api.policy import NodeResourcePolicy
from numaplane.operator.assignment import assign_policies
from numaplane.operator.rbac import Rule
from numaplane.operator.render import Inputs, parse_resources, render_install, render_stack, sample_resources
from numaplane.operator.render_common import LABEL_MANAGED_BY, LABEL_OWNER, Settings
from numaplane.operator.render_scheduler import kube_scheduler_configuration
from numaplane.policy.config import parse_config

SETTINGS = Settings()


def samples(**changes: Any) -> list[dict[str, Any]]:
    docs = copy.deepcopy(sample_resources())
    for doc in docs:
        doc["metadata"]["uid"] = f"uid-{doc['kind'].lower()}"
    if "scheduler" in changes:
        docs[1]["spec"].update(changes["scheduler"])
    if "groups" in changes:
        docs[0]["spec"]["nodeGroups"] = changes["groups"]
    return docs


def stack(**changes: Any) -> list[dict[str, Any]]:
    return render_stack(parse_resources(samples(**changes)), SETTINGS)


def find(objects: Iterable[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise AssertionError(f"no {kind}/{name}")


VARIANTS = {
    "install": lambda: render_install(SETTINGS),
    "standalone": stack,
    "extender": lambda: stack(scheduler={"mode": "extender", "replicas": 3}),
    "extender-dra": lambda: stack(scheduler={"mode": "extender", "dra": "Enabled"}),
    "kubelet-only": lambda: stack(groups=[{"name": "w", "nodeSelector": {"matchLabels": {"a": "b"}}}]),
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_manifest_validates_against_kubernetes_openapi(variant: str) -> None:
    objects = VARIANTS[variant]()
    assert objects
    for obj in objects:
        kubernetes_validate.validate(obj, "1.35.0", strict=True)


def test_render_is_deterministic() -> None:
    assert stack() == stack()
    assert render_install(SETTINGS) == render_install(SETTINGS)


def _all_objects() -> list[dict[str, Any]]:
    return [o for make in VARIANTS.values() for o in make()]


def _rules(objects: Iterable[dict[str, Any]], kinds: tuple[str, ...] = ("ClusterRole", "Role")) -> list[dict[str, Any]]:
    return [r for o in objects if o["kind"] in kinds for r in o["rules"]]


def test_rbac_has_no_wildcards() -> None:
    for rule in _rules(_all_objects()):
        for field in ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs"):
            assert not any("*" in v for v in rule.get(field, [])), rule


def test_exporter_writes_only_nrt_objects() -> None:
    objects = stack()
    for kind in ("ClusterRole",):
        role = find(objects, kind, "numaplane-exporter")
        for rule in role["rules"]:
            writes = set(rule["verbs"]) - {"get", "list", "watch"}
            if writes:
                assert rule["apiGroups"] == ["topology.node.k8s.io"] and rule["resources"] == ["noderesourcetopologies"]
    assert not [o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "numaplane-exporter"]


def _grants(rules: Iterable[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    out = set()
    for r in rules:
        for g in r["apiGroups"]:
            for res in r["resources"]:
                for v in r["verbs"]:
                    for name in r.get("resourceNames") or [""]:
                        out.add((g, res, v, name))
    return out


def _covered(grant: tuple[str, str, str, str], held: set[tuple[str, str, str, str]]) -> bool:
    g, res, v, name = grant
    return (g, res, v, "") in held or (g, res, v, name) in held


def _operator_held(install: list[dict[str, Any]], namespace: str) -> set[tuple[str, str, str, str]]:
    """What the operator may do in ``namespace``: its ClusterRole plus its Role of that namespace."""
    roles = [
        o
        for o in install
        if o["kind"] == "Role"
        and o["metadata"]["name"] == "numaplane-operator"
        and o["metadata"]["namespace"] == namespace
    ]
    return _grants(find(install, "ClusterRole", "numaplane-operator")["rules"]) | _grants(_rules(roles, ("Role",)))


def test_operator_holds_every_permission_it_grants() -> None:
    install = render_install(SETTINGS)
    cluster_held = _grants(find(install, "ClusterRole", "numaplane-operator")["rules"])
    for variant in ("standalone", "extender", "extender-dra"):
        objects = VARIANTS[variant]()
        for grant in _grants(_rules(objects, ("ClusterRole",))):
            assert _covered(grant, cluster_held), grant
        for role_ in (o for o in objects if o["kind"] == "Role"):
            held = _operator_held(install, role_["metadata"]["namespace"])
            for grant in _grants(role_["rules"]):
                assert _covered(grant, held), (role_["metadata"]["namespace"], grant)


def test_operator_creates_workloads_only_where_it_runs_them() -> None:
    """DaemonSets (root) only in the node namespace, Deployments only in the install namespace."""
    install = render_install(SETTINGS)
    in_install = _operator_held(install, SETTINGS.namespace)
    in_nodes = _operator_held(install, SETTINGS.node_namespace)
    assert not _covered(("apps", "daemonsets", "create", ""), in_install)
    assert _covered(("apps", "daemonsets", "delete", ""), in_install)  # prunes an earlier layout's DaemonSets
    assert _covered(("apps", "daemonsets", "create", ""), in_nodes)
    assert not _covered(("apps", "deployments", "create", ""), in_nodes)
    assert not _covered(("", "pods", "create", ""), in_nodes)


def test_operator_can_manage_every_kind_it_renders() -> None:
    install = render_install(SETTINGS)
    plural = {
        "ServiceAccount": ("", "serviceaccounts"),
        "ConfigMap": ("", "configmaps"),
        "Service": ("", "services"),
        "DaemonSet": ("apps", "daemonsets"),
        "Deployment": ("apps", "deployments"),
        "NetworkPolicy": ("networking.k8s.io", "networkpolicies"),
        "Role": ("rbac.authorization.k8s.io", "roles"),
        "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"),
        "ClusterRole": ("rbac.authorization.k8s.io", "clusterroles"),
        "ClusterRoleBinding": ("rbac.authorization.k8s.io", "clusterrolebindings"),
        "Namespace": ("", "namespaces"),
        "CustomResourceDefinition": ("apiextensions.k8s.io", "customresourcedefinitions"),
    }
    for obj in _all_objects():
        if obj["kind"] not in plural or obj["metadata"]["name"].startswith("numaplane-operator"):
            continue
        if obj["kind"] == "CustomResourceDefinition" and obj["spec"]["group"] == "numaplane.io":
            continue  # installed by deploy/, not by the operator
        group, res = plural[obj["kind"]]
        held = _operator_held(install, obj["metadata"].get("namespace", ""))
        for verb in ("get", "create", "patch"):
            assert _covered((group, res, verb, obj["metadata"]["name"]), held), (
                obj["kind"],
                obj["metadata"]["name"],
                verb,
            )


def test_rule_merge_is_a_union() -> None:
    from numaplane.operator.rbac import merge_rules

    merged = merge_rules(
        [Rule.of([""], ["pods"], ["get"])], [Rule.of([""], ["pods"], ["list"]), Rule.of([""], ["nodes"], ["get"])]
    )
    assert [r.to_dict() for r in merged] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    ]


def test_no_privileged_containers_and_non_root_where_possible() -> None:
    for obj in _all_objects():
        if obj["kind"] not in ("DaemonSet", "Deployment"):
            continue
        for c in obj["spec"]["template"]["spec"]["containers"]:
            sc = c["securityContext"]
            assert sc.get("privileged") in (None, False)
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["readOnlyRootFilesystem"] is True
            if obj["kind"] == "Deployment":
                assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0


def test_daemonsets_per_group() -> None:
    objects = stack()
    exporters = sorted(
        o["metadata"]["name"] for o in objects if o["kind"] == "DaemonSet" and "exporter" in o["metadata"]["name"]
    )
    agents = sorted(
        o["metadata"]["name"] for o in objects if o["kind"] == "DaemonSet" and "agent" in o["metadata"]["name"]
    )
    assert exporters == ["numaplane-exporter-latency", "numaplane-exporter-worker"]
    assert agents == ["numaplane-agent-latency"]
    ds = find(objects, "DaemonSet", "numaplane-exporter-worker")
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][0] == "exporter"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "numaplane.io/node-group", "operator": "In", "values": ["worker"]}]}
    ]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["/host/sys"]["readOnly"] and volumes["host-sys"]["hostPath"]["path"] == "/sys"
    assert volumes["kubelet-podresources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    assert mounts["/host-kubelet/config.yaml"]["readOnly"]
    assert "--kubelet-config=/host-kubelet/config.yaml" in container["args"]
    assert pod["priorityClassName"] == "system-node-critical"
    # agent: NRI socket dir and state dir; policy ConfigMap mounted; no config hash (live reload)
    agent = find(objects, "DaemonSet", "numaplane-agent-latency")
    apod = agent["spec"]["template"]
    assert "annotations" not in apod["metadata"]
    avol = {v["name"]: v for v in apod["spec"]["volumes"]}
    assert avol["nri"]["hostPath"]["path"] == "/var/run/nri"
    assert avol["state"]["hostPath"]["path"] == "/var/lib/numaplane"
    assert avol["policy"]["configMap"]["name"] == "numaplane-policy-latency"


@pytest.mark.parametrize(
    ("config", "present", "absent"),
    [
        (
            {},
            ["--refresh-mode=periodic", "--period=10", "--pods-fingerprint-method=with-exclusive-resources"],
            ["--notify-file=/host-run-numaplane/notify", "--no-publish"],
        ),
        ({"podsFingerprinting": "Disabled"}, ["--no-pods-fingerprint"], ["--pods-fingerprint"]),
        ({"podsFingerprinting": "Enabled"}, ["--pods-fingerprint", "--pods-fingerprint-method=all"], []),
        (
            {"infoRefreshMode": "Events"},
            ["--refresh-mode=events", "--kubelet-state-dir=/host-kubelet-state"],
            ["--period=10", "--notify-file=/host-run-numaplane/notify"],
        ),
        (
            {"infoRefreshMode": "PeriodicAndEvents", "infoRefreshPeriod": "32s"},
            ["--period=32", "--kubelet-state-dir=/host-kubelet-state"],
            ["--notify-file=/host-run-numaplane/notify"],
        ),
        ({"infoRefreshPause": "Enabled"}, ["--no-publish"], []),
        ({}, [], ["--dra"]),
        ({"dra": "Enabled"}, ["--dra"], []),
        (
            {"dra": "Enabled", "draNumaAttributes": ["gpu.amd.com/numaNode", "accel.example.com/numa"]},
            ["--dra", "--dra-numa-attribute=gpu.amd.com/numaNode", "--dra-numa-attribute=accel.example.com/numa"],
            [],
        ),
    ],
)
def test_exporter_args_follow_node_group_config(config: dict[str, Any], present: list[str], absent: list[str]) -> None:
    objects = stack(groups=[{"name": "w", "nodeSelector": {"matchLabels": {"a": "b"}}, "config": config}])
    args = find(objects, "DaemonSet", "numaplane-exporter-w")["spec"]["template"]["spec"]["containers"][0]["args"]
    for flag in present:
        assert flag in args
    for flag in absent:
        assert flag not in args


def test_tolerations_replace_defaults() -> None:
    default = find(stack(), "DaemonSet", "numaplane-exporter-worker")["spec"]["template"]["spec"]["tolerations"]
    assert default == [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]
    tol = [{"key": "dedicated", "operator": "Equal", "value": "numa", "effect": "NoSchedule"}]
    objects = stack(groups=[{"name": "w", "nodeSelector": {}, "config": {"tolerations": tol}}])
    assert find(objects, "DaemonSet", "numaplane-exporter-w")["spec"]["template"]["spec"]["tolerations"] == tol


def test_policy_configmap_is_the_agents_config_document() -> None:
    objects = stack()
    cm = find(objects, "ConfigMap", "numaplane-policy-latency")
    document = yaml.safe_load(cm["data"]["config.yaml"])
    parse_config(document)
    policy = NodeResourcePolicy.from_dict(sample_resources()[2])
    assert document == policy.config_document()
    assert cm["metadata"]["annotations"]["numaplane.io/policy-revision"] == policy.revision
    # the agent-mode exporter learns the policy from the agent (the file it writes what it applied to),
    # never from a flag: a policy change does not roll the exporters (issue 23 item 2)
    args = find(objects, "DaemonSet", "numaplane-exporter-latency")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [a for a in args if a.startswith("--topology-manager-")]
    assert "--applied-policy-file=/host-run-numaplane/applied-policy.json" in args
    agent = find(objects, "DaemonSet", "numaplane-agent-latency")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--applied-policy-file={SETTINGS.run_dir}/applied-policy.json" in agent
    changed = samples()
    changed[2]["spec"]["config"]["topologyManager"]["policy"] = "restricted"
    again = render_stack(parse_resources(changed), SETTINGS)
    exporter = find(objects, "DaemonSet", "numaplane-exporter-latency")
    assert find(again, "DaemonSet", "numaplane-exporter-latency") == exporter


def test_agent_group_without_policy_gets_the_default_document() -> None:
    docs = samples()[:2]
    objects = render_stack(parse_resources(docs), SETTINGS)
    document = yaml.safe_load(find(objects, "ConfigMap", "numaplane-policy-latency")["data"]["config.yaml"])
    assert parse_config(document).topology_policy == "none"
    assert document["metadata"]["policy"] == ""


def test_policy_assignment_reasons() -> None:
    inputs = parse_resources(samples()[:1])
    base = sample_resources()[2]

    def policy(name: str, group: str, created: str) -> NodeResourcePolicy:
        doc = copy.deepcopy(base)
        doc["metadata"] = {"name": name, "creationTimestamp": created}
        doc["spec"]["nodeGroup"] = group
        return NodeResourcePolicy.from_dict(doc)

    result = assign_policies(
        inputs.operator,
        [
            policy("newer", "latency", "2026-01-02T00:00:00Z"),
            policy("older", "latency", "2026-01-01T00:00:00Z"),
            policy("kubelet", "worker", "2026-01-01T00:00:00Z"),
            policy("lost", "nowhere", "2026-01-01T00:00:00Z"),
        ],
    )
    assert result.by_group["latency"].metadata.name == "older"
    assert result.rejected["newer"][0] == "ConflictingPolicy"
    assert result.rejected["kubelet"][0] == "NodeGroupNotInAgentMode"
    assert result.rejected["lost"][0] == "NodeGroupNotFound"


def test_owner_references_and_prune_labels() -> None:
    for obj in stack(scheduler={"mode": "extender"}):
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/part-of"] == "numaplane"
        if obj["kind"] in ("Namespace", "CustomResourceDefinition"):
            assert LABEL_OWNER not in labels and "ownerReferences" not in obj["metadata"]
            continue
        (ref,) = obj["metadata"]["ownerReferences"]
        assert labels[LABEL_MANAGED_BY] == "numaplane-operator"
        assert ref["controller"] is True and ref["apiVersion"] == "numaplane.io/v1"
        assert labels[LABEL_OWNER] == ref["kind"].lower() and ref["uid"] == f"uid-{ref['kind'].lower()}"


def test_gitops_rendering_has_no_owner_references() -> None:
    docs = sample_resources()
    assert all("ownerReferences" not in o["metadata"] for o in render_stack(parse_resources(docs), SETTINGS))


def test_nrt_crd_can_be_left_to_the_cluster() -> None:
    docs = samples()
    docs[0]["metadata"]["annotations"] = {"numaplane.io/nrt-crd": "external"}
    kinds = [o["kind"] for o in render_stack(parse_resources(docs), SETTINGS)]
    assert "CustomResourceDefinition" not in kinds
    assert "CustomResourceDefinition" in [o["kind"] for o in stack()]


def test_namespace_pod_security_labels() -> None:
    for make in (stack, lambda: render_install(SETTINGS)):
        install_ns = find(make(), "Namespace", "numaplane-system")["metadata"]["labels"]
        node_ns = find(make(), "Namespace", "numaplane-node")["metadata"]["labels"]
        assert install_ns["pod-security.kubernetes.io/enforce"] == "restricted"
        assert install_ns["pod-security.kubernetes.io/warn"] == "restricted"
        assert node_ns["pod-security.kubernetes.io/enforce"] == "privileged"
        assert node_ns["pod-security.kubernetes.io/audit"] == "baseline"


def _restricted_problems(spec: dict[str, Any]) -> list[str]:
    """What keeps a pod spec from Pod Security ``restricted`` (the checks of the level that rendered pods
    could miss: host namespaces and paths, privilege, escalation, capabilities, non-root, seccomp)."""
    problems = [f"host{k}" for k in ("Network", "PID", "IPC") if spec.get(f"host{k}")]
    problems += [f"volume {v['name']} is hostPath" for v in spec.get("volumes") or [] if "hostPath" in v]
    pod_sc = spec.get("securityContext") or {}
    for c in [*spec.get("initContainers", []), *spec["containers"]]:
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            problems.append(f"{c['name']} privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{c['name']} may escalate")
        if (sc.get("capabilities") or {}).get("drop") != ["ALL"] or set(
            (sc.get("capabilities") or {}).get("add") or []
        ) - {"NET_BIND_SERVICE"}:
            problems.append(f"{c['name']} keeps capabilities")
        if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) or sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            problems.append(f"{c['name']} may run as root")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{c['name']} seccomp {seccomp}")
        if c.get("ports") and any("hostPort" in p for p in c["ports"]):
            problems.append(f"{c['name']} hostPort")
    return problems


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_pod_of_the_install_namespace_meets_restricted(variant: str) -> None:
    """Issue 25 item 13: only the node namespace allows privileged pods; every workload left in the install
    namespace (operator, scheduler in both modes) meets ``restricted``; the root DaemonSets are elsewhere."""
    workloads = [o for o in VARIANTS[variant]() if o["kind"] in ("Deployment", "DaemonSet")]
    assert workloads
    for obj in workloads:
        where = obj["metadata"]["namespace"]
        if obj["kind"] == "DaemonSet":
            assert where == SETTINGS.node_namespace, obj["metadata"]["name"]
            assert _restricted_problems(obj["spec"]["template"]["spec"])  # root + hostPath: why they moved
        else:
            assert where == SETTINGS.namespace, obj["metadata"]["name"]
            assert _restricted_problems(obj["spec"]["template"]["spec"]) == [], obj["metadata"]["name"]


def test_node_objects_live_in_the_node_namespace() -> None:
    objects = render_stack(parse_resources(samples()), Settings(namespace="np", node_namespace="np-node"))
    node_side = [
        o for o in objects if o["metadata"].get("labels", {}).get("numaplane.io/owner") == "numaresourcesoperator"
    ]
    assert {o["metadata"].get("namespace") for o in node_side} == {None, "np-node"}
    subjects = [s for o in node_side if o["kind"].endswith("Binding") for s in o["subjects"]]
    assert subjects and {s["namespace"] for s in subjects} == {"np-node"}
    scheduler_side = [
        o for o in objects if o["metadata"].get("labels", {}).get("numaplane.io/owner") == "numaresourcesscheduler"
    ]
    assert {o["metadata"].get("namespace") for o in scheduler_side} == {None, "np"}


def test_network_policies_cover_every_workload() -> None:
    for make in VARIANTS.values():
        objects = make()
        policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
        for obj in objects:
            if obj["kind"] not in ("DaemonSet", "Deployment"):
                continue
            labels = obj["spec"]["template"]["metadata"]["labels"]
            selecting = [
                p
                for p in policies
                if all(labels.get(k) == v for k, v in p["spec"]["podSelector"]["matchLabels"].items())
            ]
            assert len(selecting) == 1, obj["metadata"]["name"]
            (np,) = selecting
            assert np["spec"]["policyTypes"] == ["Ingress", "Egress"]
            assert {p["port"] for p in np["spec"]["egress"][0]["ports"]} == {443, 6443}
            # metrics only from the scrapers' namespaces, never from any source (issue 25 item 8)
            [ingress] = np["spec"]["ingress"]
            assert ingress["from"] == [{"namespaceSelector": {"matchLabels": {"numaplane.io/scrape-metrics": "true"}}}]
            assert [p["port"] for p in ingress["ports"]] == [8080]


def test_metrics_services_select_pods_with_a_metrics_port() -> None:
    for make in VARIANTS.values():
        objects = make()
        for svc in (o for o in objects if o["kind"] == "Service"):
            selector = svc["spec"]["selector"]
            pods = [
                o["spec"]["template"]
                for o in objects
                if o["kind"] in ("DaemonSet", "Deployment")
                and all(o["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in selector.items())
            ]
            assert pods, svc["metadata"]["name"]
            for pod in pods:
                assert any(p["name"] == "metrics" for c in pod["spec"]["containers"] for p in c.get("ports", []))


def test_standalone_scheduler() -> None:
    objects = stack(scheduler={"replicas": 3})
    dep = find(objects, "Deployment", "numaplane-scheduler")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["args"][:2] == ["scheduler", "run"]
    for flag in (
        "--scheduler-name=numaplane-scheduler",
        "--cache-resync-period=5s",
        "--resource-weight=cpu=2",
        "--leader-elect",
        "--informer-mode=dedicated",
    ):
        assert flag in c["args"]
    assert dep["spec"]["replicas"] == 3
    assert not [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "numaplane-scheduler-config"
    ]
    one = find(stack(), "Deployment", "numaplane-scheduler")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--leader-elect" not in one


KSC_TOP = {
    "apiVersion",
    "kind",
    "leaderElection",
    "profiles",
    "extenders",
    "clientConnection",
    "parallelism",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
}
KSC_EXTENDER = {
    "urlPrefix",
    "filterVerb",
    "prioritizeVerb",
    "preemptVerb",
    "bindVerb",
    "weight",
    "enableHTTPS",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
}
KSC_LEADER = {
    "leaderElect",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "resourceLock",
    "resourceName",
    "resourceNamespace",
}
KSC_PROFILE = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
KSC_POINTS = {
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "multiPoint",
}


def test_kube_scheduler_configuration_is_well_formed() -> None:
    objects = stack(scheduler={"mode": "extender", "replicas": 2, "schedulerName": "numa"})
    cm = find(objects, "ConfigMap", "numaplane-scheduler-config")
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    assert cfg == kube_scheduler_configuration(
        parse_resources(samples(scheduler={"mode": "extender", "replicas": 2, "schedulerName": "numa"})).scheduler,
        SETTINGS,
    )  # type: ignore[arg-type]
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1" and cfg["kind"] == "KubeSchedulerConfiguration"
    assert set(cfg) <= KSC_TOP
    assert set(cfg["leaderElection"]) <= KSC_LEADER and cfg["leaderElection"]["leaderElect"] is True
    assert cfg["leaderElection"]["resourceNamespace"] == SETTINGS.namespace
    (profile,) = cfg["profiles"]
    assert set(profile) <= KSC_PROFILE and profile["schedulerName"] == "numa"
    assert set(profile["plugins"]) <= KSC_POINTS
    for point in profile["plugins"].values():
        assert set(point) <= {"enabled", "disabled"}
        assert all(set(p) <= {"name", "weight"} for p in point.get("enabled", []) + point.get("disabled", []))
    (ext,) = cfg["extenders"]
    assert set(ext) <= KSC_EXTENDER
    assert isinstance(ext["weight"], int) and ext["weight"] > 0 and isinstance(ext["nodeCacheCapable"], bool)
    # the extender sidecar listens where the kube-scheduler calls it
    dep = find(objects, "Deployment", "numaplane-scheduler")
    containers = {c["name"]: c for c in dep["spec"]["template"]["spec"]["containers"]}
    assert containers["extender"]["args"][:2] == ["scheduler", "extender"]
    listen = next(a for a in containers["extender"]["args"] if a.startswith("--listen="))
    assert ext["urlPrefix"] == f"http://{listen.split('=', 1)[1]}/"
    assert containers["kube-scheduler"]["image"].startswith("registry.k8s.io/kube-scheduler:")
    assert "--config=/etc/numaplane/scheduler/config.yaml" in containers["kube-scheduler"]["args"]
    # a config change rolls the pods
    annotation = dep["spec"]["template"]["metadata"]["annotations"]["numaplane.io/config-hash"]
    other = find(stack(scheduler={"mode": "extender", "replicas": 1}), "Deployment", "numaplane-scheduler")
    assert other["spec"]["template"]["metadata"]["annotations"]["numaplane.io/config-hash"] != annotation


def test_kube_scheduler_client_rate_limit_is_rendered() -> None:
    """``spec.kubeSchedulerClient`` becomes ``clientConnection`` (default 200/400, not kube-scheduler's 50/100)."""

    def client(**spec: Any) -> Any:
        cm = find(stack(scheduler={"mode": "extender", **spec}), "ConfigMap", "numaplane-scheduler-config")
        return yaml.safe_load(cm["data"]["config.yaml"])["clientConnection"]

    assert client() == {"qps": 200, "burst": 400}
    assert client(kubeSchedulerClient={"qps": 1000, "burst": 1500}) == {"qps": 1000, "burst": 1500}


def test_image_is_configurable_and_shared() -> None:
    objects = render_stack(parse_resources(samples()), Settings(image="example.org/np:1"))
    images = {
        c["image"]
        for o in objects
        if o["kind"] in ("DaemonSet", "Deployment")
        for c in o["spec"]["template"]["spec"]["containers"]
        if c["name"] != "kube-scheduler"
    }
    assert images == {"example.org/np:1"}


def test_empty_inputs_render_only_the_namespaces() -> None:
    assert [o["metadata"]["name"] for o in render_stack(Inputs(), SETTINGS)] == ["numaplane-node", "numaplane-system"]


def test_operator_reconciled_objects_never_include_our_crds() -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in stack()}
    assert not any(k == "CustomResourceDefinition" and n.endswith(".numaplane.io") for k, n in kinds)
    assert NUMAResourcesOperator  # imported for type context


@pytest.mark.parametrize("variant", ["standalone", "kubelet-only"])
def test_exporter_args_parse_with_the_real_exporter_cli(variant: str) -> None:
    """The rendered exporter command line is accepted by ``numaplane exporter`` itself."""
    cli = pytest.importorskip("numaplane.cli.exporter", reason="exporter CLI not present")
    for obj in VARIANTS[variant]():
        if obj["kind"] == "DaemonSet" and obj["metadata"]["labels"]["app.kubernetes.io/component"] == "exporter":
            args = obj["spec"]["template"]["spec"]["containers"][0]["args"]
            assert args[0] == "exporter"
            ctx = cli.command.make_context("exporter", list(args[1:]))
            assert ctx.params["node_name"] == "$(NODE_NAME)"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"draNumaAttributes": ["gpu.amd.com/numaNode"]}, "config.draNumaAttributes: needs dra: Enabled"),
        ({"dra": "Enabled", "draNumaAttributes": ["numaNode"]}, "'numaNode' is not a qualified attribute name"),
        ({"dra": "Enabled", "draNumaAttributes": ["a.b/c", "a.b/c"]}, "duplicate attribute 'a.b/c'"),
        ({"dra": "On"}, "config.dra"),
    ],
)
def test_bad_dra_node_group_config_is_refused_naming_the_field(config: dict[str, Any], message: str) -> None:
    from numaplane.operator.errors import SpecError

    with pytest.raises(SpecError) as caught:
        parse_resources(samples(groups=[{"name": "w", "nodeSelector": {"matchLabels": {"a": "b"}}, "config": config}]))
    assert message in str(caught.value), caught.value


@pytest.mark.parametrize("mode", ["standalone", "extender"])
def test_scheduler_dra_renders_the_dra_flag_in_either_mode(mode: str) -> None:
    """``spec.dra: Enabled`` → ``scheduler run --dra`` (standalone) or ``scheduler extender --dra``; the flags
    parse with the real CLI; off by default."""
    from numaplane.cli.scheduler import group as scheduler_cli

    verb = "run" if mode == "standalone" else "extender"

    def args_of(objects: list[dict[str, Any]]) -> list[str]:
        dep = find(objects, "Deployment", "numaplane-scheduler")
        (container,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["args"][0] == "scheduler"]
        return list(container["args"])

    args = args_of(stack(scheduler={"mode": mode, "dra": "Enabled"}))
    assert args[:2] == ["scheduler", verb] and "--dra" in args
    assert "--dra" not in args_of(stack(scheduler={"mode": mode}))
    ctx = scheduler_cli.commands[verb].make_context(verb, args[2:])
    assert ctx.params["dra"] is True


def test_extender_with_dra_keeps_kube_schedulers_dynamic_resources_plugin_and_its_rights() -> None:
    """Extender mode with ``spec.dra: Enabled``: kube-scheduler's profile keeps ``DynamicResources`` (it
    allocates the claims) and its ClusterRole may write their status; without it, neither."""
    from numaplane.operator.render import parse_resources as parse

    for dra, enabled in (("Enabled", True), ("Disabled", False)):
        inputs = parse(samples(scheduler={"mode": "extender", "dra": dra}))
        assert inputs.scheduler is not None
        (profile,) = kube_scheduler_configuration(inputs.scheduler, SETTINGS)["profiles"]
        assert ("plugins" not in profile) is enabled, profile
        role = find(stack(scheduler={"mode": "extender", "dra": dra}), "ClusterRole", "numaplane-scheduler")
        writes = {
            (r, v)
            for rule in role["rules"]
            if "resource.k8s.io" in rule["apiGroups"]
            for r in rule["resources"]
            for v in rule["verbs"]
        }
        assert (("resourceclaims/status", "update") in writes) is enabled
        assert (("resourceclaims/binding", "update") in writes) is enabled
        assert (("resourceclaims", "update") in writes) is enabled  # PreBind adds its finalizer

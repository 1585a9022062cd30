"""The ``deploy/`` tree: rendered install manifests in a kustomize-compatible layout (pure).

:func:`deploy_files` maps relative paths to file contents::

    kustomization.yaml            resources: crd, rbac, operator, admission
    crd/        kustomization.yaml, one file per CRD (the NRT CRD's content comes from numaplane.nrt)
    rbac/       kustomization.yaml, service_account, cluster_role(+binding), role(+binding),
                node_role(+binding) (the operator's rights in the node namespace)
    operator/   kustomization.yaml, namespace, node_namespace, deployment, service, network_policy
    admission/  kustomization.yaml, one file per ValidatingAdmissionPolicy(+Binding), by object name
    samples/    kustomization.yaml, one custom resource per file (not part of the base install)

``kubectl apply -k deploy/`` installs the operator; ``kubectl apply -k deploy/samples`` then creates
the example custom resources. The CLI writes these files; ``scripts/check_deploy.py`` fails CI when
the committed tree differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numaplane.nrt.crd import crd_manifest as nrt_crd_manifest
from numaplane.operator.render import render_install, sample_resources, to_yaml
from numaplane.operator.render_common import Settings
from numaplane.resources.meta import name_of

__all__ = ["HEADER", "NRT_CRD_FILE", "deploy_files", "kustomization"]

HEADER = "# Rendered by `numaplane render --output-dir deploy`; do not edit (CI: scripts/check_deploy.py)."
#: The NRT CRD's file; its content is ``numaplane.nrt.crd.crd_manifest()``.
NRT_CRD_FILE = "crd/noderesourcetopologies.yaml"

_RBAC_FILES = {
    "ServiceAccount": "service_account.yaml",
    "ClusterRole": "cluster_role.yaml",
    "ClusterRoleBinding": "cluster_role_binding.yaml",
    "Role": "role.yaml",
    "RoleBinding": "role_binding.yaml",
}
_OPERATOR_FILES = {
    "Namespace": "namespace.yaml",
    "Deployment": "deployment.yaml",
    "Service": "service.yaml",
    "NetworkPolicy": "network_policy.yaml",
}

_ADMISSION_KINDS = {"ValidatingAdmissionPolicy": "policy", "ValidatingAdmissionPolicyBinding": "binding"}


def kustomization(resources: list[str]) -> str:
    doc = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources}
    return to_yaml([doc], header=HEADER)


def _file(obj: Mapping[str, Any]) -> str:
    return to_yaml([obj], header=HEADER)


def deploy_files(settings: Settings | None = None) -> dict[str, str]:
    """Relative path → file text for the whole ``deploy/`` tree (every file its kustomizations list)."""
    settings = settings or Settings()
    nrt_name = name_of(nrt_crd_manifest())
    files: dict[str, str] = {}
    crd_files: list[str] = []
    rbac_files: list[str] = []
    operator_files: list[str] = []
    admission_files: list[str] = []
    for obj in render_install(settings):
        kind = obj["kind"]
        name = name_of(obj)
        # the node namespace and what lives in it: the same file names with a ``node_`` prefix
        node = settings.node_namespace in (obj["metadata"].get("namespace"), name if kind == "Namespace" else None)
        prefix = "node_" if node else ""
        if kind == "CustomResourceDefinition":
            path = NRT_CRD_FILE if name == nrt_name else f"crd/{name}.yaml"
            crd_files.append(path.split("/", 1)[1])
        elif kind in _RBAC_FILES:
            path = f"rbac/{prefix}{_RBAC_FILES[kind]}"
            rbac_files.append(f"{prefix}{_RBAC_FILES[kind]}")
        elif kind in _OPERATOR_FILES:
            path = f"operator/{prefix}{_OPERATOR_FILES[kind]}"
            operator_files.append(f"{prefix}{_OPERATOR_FILES[kind]}")
        elif kind in _ADMISSION_KINDS:
            name_file = f"{_ADMISSION_KINDS[kind]}.{name}.yaml"
            path = f"admission/{name_file}"
            admission_files.append(name_file)
        else:  # pragma: no cover - render_install renders only the kinds above
            raise ValueError(f"no place in deploy/ for {kind}")
        if path in files:  # pragma: no cover - one object per kind in each folder
            raise ValueError(f"two objects for {path}")
        files[path] = _file(obj)
    files["crd/kustomization.yaml"] = kustomization(sorted(crd_files))
    files["rbac/kustomization.yaml"] = kustomization(rbac_files)
    files["operator/kustomization.yaml"] = kustomization(operator_files)
    files["admission/kustomization.yaml"] = kustomization(admission_files)
    samples = []
    for obj in sample_resources():
        name = f"{obj['kind'].lower()}.yaml"
        files[f"samples/{name}"] = _file(obj)
        samples.append(name)
    files["samples/kustomization.yaml"] = kustomization(samples)
    files["kustomization.yaml"] = kustomization(["crd", "rbac", "operator", "admission"])
    return dict(sorted(files.items()))

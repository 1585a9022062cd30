"""What the in-memory store serves because of its CRDs: their resources, schemas and admission.

:class:`CRDServing` follows every committed write of a ``CustomResourceDefinition``
(:meth:`CRDServing.changed`) and answers, for any other write, the object the API server stores
(:meth:`CRDServing.admit`: pruned and validated by its CRD's structural schema and CEL rules, see
:mod:`numaplane.kube.crdschema`). A CRD whose rules kube-apiserver would refuse is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from numaplane.kube.crdschema import CRDSchema, crd_rule_problems
from numaplane.kube.errors import Invalid
from numaplane.kube.port import EventType, JsonObj
from numaplane.kube.resources import CRD, Resource, resources_from_crd
from numaplane.resources.meta import name_of

__all__ = ["CRDServing", "is_crd"]


def is_crd(res: Resource) -> bool:
    """True for ``customresourcedefinitions`` (any version)."""
    return res.group == CRD.group and res.plural == CRD.plural


class CRDServing:
    """The resources and schemas served by the stored CRDs (keyed by CRD name / group, version, plural)."""

    def __init__(self) -> None:
        self.resources: dict[str, list[Resource]] = {}
        self.schemas: dict[tuple[str, str, str], CRDSchema] = {}

    def served(self) -> list[Resource]:
        """Every resource version served by a stored CRD."""
        return [res for resources in self.resources.values() for res in resources]

    def admit(self, res: Resource, obj: JsonObj) -> JsonObj:
        """``obj`` as the API server stores it; :class:`Invalid` when the schema or rules refuse it."""
        if is_crd(res):
            problems = [
                f"spec.versions[{v.get('name')}].schema.openAPIV3Schema{p}"
                for v in (obj.get("spec") or {}).get("versions") or []
                if isinstance(v, Mapping)
                for p in crd_rule_problems(((v.get("schema") or {}).get("openAPIV3Schema")) or {})
            ]
            if problems:
                raise Invalid(
                    f'CustomResourceDefinition "{obj["metadata"].get("name")}" is invalid: ' + "; ".join(problems)
                )
            return obj
        schema = self.schemas.get((res.group, res.version, res.plural))
        if schema is None:
            return obj
        pruned, violations = schema.admit(obj)
        if violations:
            name = (obj.get("metadata") or {}).get("name")
            raise Invalid(f'{res.kind} "{name}" is invalid: ' + "; ".join(violations[:20]))
        return pruned

    def changed(self, kind: EventType, crd: JsonObj) -> list[Resource]:
        """Follow one committed CRD write; for a deletion, the resources it served (whose objects go too)."""
        name = str(name_of(crd))
        spec = crd.get("spec") or {}
        for version in spec.get("versions") or []:
            key = (
                str(spec.get("group", "")),
                str(version.get("name", "")),
                str((spec.get("names") or {}).get("plural", "")),
            )
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if kind is EventType.DELETED or not isinstance(schema, Mapping):
                self.schemas.pop(key, None)
            else:
                self.schemas[key] = CRDSchema(schema)
        old = self.resources.pop(name, [])
        if kind is EventType.DELETED:
            return old
        try:
            self.resources[name] = resources_from_crd(crd)
        except (ValueError, KeyError):
            self.resources[name] = []
        return []

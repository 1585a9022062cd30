"""The JSON Schema of the resource manager's configuration document (:mod:`numaplane.policy.config`).

:data:`CONFIG_SCHEMA` (draft 2020-12) describes the shape :func:`~numaplane.policy.config.parse_config`
accepts; the parser takes its policy and scope enumerations and its unknown-field check from here, so
the two cannot drift apart. ``numaplane admit --print-config-schema`` prints it, the operator's
``NodeResourcePolicy`` CRD embeds it, and the docs' reference section is generated from it. The schema
checks shape only: cross-field rules (e.g. options valid for the chosen policy) are the parser's.
"""

from __future__ import annotations

from typing import Any

from numaplane.limits import MAX_DEVICE_ID_CHARS

__all__ = ["API_VERSION", "CONFIG_SCHEMA", "CPU_POLICIES", "KIND", "MEMORY_POLICIES", "TM_POLICIES", "TM_SCOPES"]

API_VERSION = "numaplane.io/v1"
KIND = "NodeResourceConfig"
TM_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TM_SCOPES = ("container", "pod")
CPU_POLICIES = ("static", "none")
MEMORY_POLICIES = ("Static", "None")

_OPTIONS_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": {"type": ["string", "boolean", "integer"]}}

CONFIG_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "numaplane NodeResourceConfig",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": API_VERSION},
        "kind": {"const": KIND},
        "metadata": {"type": "object"},
        "topologyManager": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "policy": {"enum": list(TM_POLICIES)},
                "scope": {"enum": list(TM_SCOPES)},
                "options": _OPTIONS_SCHEMA,
            },
        },
        "cpuManager": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "policy": {"enum": list(CPU_POLICIES)},
                "reservedCPUs": {"type": "string"},
                "reservedCPUCount": {"type": "integer", "minimum": 0},
                "options": _OPTIONS_SCHEMA,
            },
        },
        "memoryManager": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "policy": {"enum": list(MEMORY_POLICIES)},
                "reservedMemory": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["numaNode", "limits"],
                        "properties": {
                            "numaNode": {"type": "integer", "minimum": 0},
                            "limits": {"type": "object", "additionalProperties": {"type": ["string", "integer"]}},
                        },
                    },
                },
            },
        },
        "dra": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "enabled": {"type": "boolean"},
                "numaAttributes": {"type": "array", "items": {"type": "string"}},
            },
        },
        "devices": {
            "type": "object",
            "additionalProperties": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["id"],
                    "properties": {
                        "id": {"type": "string", "minLength": 1, "maxLength": MAX_DEVICE_ID_CHARS},
                        "numa": {"type": ["array", "null"], "items": {"type": "integer", "minimum": 0}},
                        "healthy": {"type": "boolean"},
                    },
                },
            },
        },
    },
}

"""Errors of the policy package (resource policies, topology manager, resource manager).

Exception tree::

    PolicyError                          (base)
    ├── PolicyConfigError                invalid policy configuration or options (construction time)
    │   └── ReconfigureRejected          a new config conflicts with existing state; lists ``problems``
    ├── AdmissionError                   a pod/container cannot be admitted; ``reason`` is the kubelet's
    │   │                                admission reason string shown in pod status
    │   ├── TopologyAffinityError        reason "TopologyAffinityError" (topology manager)
    │   ├── SMTAlignmentError            reason "SMTAlignmentError" (cpu full-pcpus-only)
    │   ├── UnexpectedAdmissionError     reason "UnexpectedAdmissionError" (any other allocation error)
    │   └── PluginUnavailableError       an out-of-process plugin crashed or timed out
    └── StateError                       state corrupt / inconsistent (e.g. Start validation)

Messages of allocation errors equal the kubelet's text exactly where the conformance cases pin it.
"""

from __future__ import annotations


class PolicyError(Exception):
    """Base class of the policy package's errors."""


class PolicyConfigError(PolicyError, ValueError):
    """Invalid configuration (unknown option, bad value, inconsistent reserved set...)."""


class ReconfigureRejected(PolicyConfigError):
    """A reconfiguration was refused as a whole; ``problems`` lists every reason."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("configuration rejected: " + "; ".join(problems))
        self.problems = list(problems)


class AdmissionError(PolicyError):
    """A pod or container cannot be admitted. ``reason`` is the admission reason (CamelCase)."""

    reason = "UnexpectedAdmissionError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TopologyAffinityError(AdmissionError):
    """The merged hint is not acceptable under the topology manager policy."""

    reason = "TopologyAffinityError"


class SMTAlignmentError(AdmissionError):
    """``full-pcpus-only``: the request cannot be satisfied with whole physical cores."""

    reason = "SMTAlignmentError"


class UnexpectedAdmissionError(AdmissionError):
    """Any other allocation failure (kubelet surfaces it as ``UnexpectedAdmissionError``)."""

    reason = "UnexpectedAdmissionError"


class PluginUnavailableError(AdmissionError):
    """An out-of-process resource plugin is not reachable, crashed or timed out."""

    reason = "PluginUnavailable"


class StateError(PolicyError):
    """Policy state is inconsistent with the machine or the configuration."""

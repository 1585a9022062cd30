"""Fault injection for the fake API server: make the next N matching requests fail.

A :class:`Fault` matches on the Kubernetes verb (``get``, ``list``, ``watch``, ``create``, ``update``,
``patch``, ``delete``, ``discovery``), the resource (``pods``, ``pods/status``, ``pods/binding``,
``leases``, ...), the HTTP method and a regular expression searched in the URL path; unset
criteria match everything. The first matching fault with hits left answers the request with its
status code and a Kubernetes ``Status`` body; the request never reaches the store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Fault", "FaultInjector"]


@dataclass(slots=True)
class Fault:
    """Fail up to ``times`` matching requests (``times=None``: until removed) with ``status``."""

    status: int
    times: int | None = 1
    verb: str | None = None
    resource: str | None = None
    method: str | None = None
    path: re.Pattern[str] | None = None
    message: str = ""
    reason: str = ""
    hits: int = 0

    def matches(self, *, verb: str, resource: str, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.verb is not None and self.verb != verb:
            return False
        if self.resource is not None and self.resource != resource:
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return self.path is None or self.path.search(path) is not None

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.hits >= self.times


@dataclass(slots=True)
class FaultInjector:
    """The active faults, consulted once per request in insertion order."""

    faults: list[Fault] = field(default_factory=list)

    def add(
        self,
        status: int,
        *,
        times: int | None = 1,
        verb: str | None = None,
        resource: str | None = None,
        method: str | None = None,
        path: str | None = None,
        message: str = "",
        reason: str = "",
    ) -> Fault:
        fault = Fault(
            status=status,
            times=times,
            verb=verb,
            resource=resource,
            method=method,
            path=re.compile(path) if path is not None else None,
            message=message or f"injected fault: HTTP {status}",
            reason=reason,
        )
        self.faults.append(fault)
        return fault

    def take(self, *, verb: str, resource: str, method: str, path: str) -> Fault | None:
        """The fault that answers this request (its hit is counted), if any."""
        for fault in self.faults:
            if fault.matches(verb=verb, resource=resource, method=method, path=path):
                fault.hits += 1
                self.faults = [f for f in self.faults if not f.exhausted]
                return fault
        return None

    def clear(self) -> None:
        self.faults.clear()

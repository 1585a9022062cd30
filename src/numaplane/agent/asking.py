"""The agent's driver of admissions that ask out-of-process plugins (``policy/asks.py``).

The state machine (``state.NodeAgentState``) parks an admission that needs answers from out-of-process
plugins and returns it as a value, :class:`~numaplane.agent.records.Pending`; :meth:`Answering.call`
then gets the answers — every plugin of one batch concurrently, each within its own deadline
(``grpcapi.pluginapi.asking``) — without holding anything, and calls ``resume()``, which finishes the
call from where it parked.

Invariants:

* every call into the state machine, and every answer fed to a run, runs synchronously on the event
  loop between two awaits: decisions on the manager's state never interleave, and nothing waits
  for a plugin while inside one. So a pod that waits for a slow or hung plugin does not delay any
  other pod: they are decided while it waits (the ask/decide invariant of ``policy/asks.py`` keeps
  the decisions correct);
* a parked run is answered by one task at a time: a second call that meets the same run (RUN_POD_SANDBOX
  and the pod's first CreateContainer) waits for the same answers instead of asking again, and its
  ``resume()`` finds what the first one decided;
* a run whose every caller went away (cancelled) is abandoned: what it holds is released.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from numaplane.agent.records import Pending
from numaplane.agent.state import NodeAgentState
from numaplane.grpcapi.pluginapi.asking import settle
from numaplane.policy.asks import AdmissionRun
from numaplane.policy.manager import Admission

__all__ = ["Answering"]

_T = TypeVar("_T")


class Answering:
    """Makes state machine calls, answering the admissions they park (see the module docstring)."""

    def __init__(self, state: NodeAgentState) -> None:
        self.state = state
        self._settling: dict[AdmissionRun[Admission], asyncio.Task[None]] = {}
        self._waiters: dict[AdmissionRun[Admission], int] = {}
        self.asked = 0  # runs answered (for tests and metrics)

    async def call(self, fn: Callable[[], _T | Pending[_T]]) -> _T:
        """``fn()``; a :class:`Pending` it returns is answered and resumed (see the module docstring)."""
        result = fn()
        if not isinstance(result, Pending):
            return result
        run: AdmissionRun[Admission] = result.run
        self._waiters[run] = self._waiters.get(run, 0) + 1
        try:
            await self._settle(run)
        except asyncio.CancelledError:
            if self._waiters[run] == 1:
                self._abandon(run)
            raise
        finally:
            self._waiters[run] -= 1
            if not self._waiters[run]:
                del self._waiters[run]
        return result.resume()

    async def _settle(self, run: AdmissionRun[Admission]) -> None:
        task = self._settling.get(run)
        if task is None:
            self.asked += 1
            task = asyncio.get_running_loop().create_task(settle(run, list(self.state.manager.plugins)))
            self._settling[run] = task
            task.add_done_callback(lambda _task: self._settling.pop(run, None))
        await asyncio.shield(task)

    def _abandon(self, run: AdmissionRun[Admission]) -> None:
        state = self.state
        uid = run.pod.uid
        if state.parked.get(uid) is not run:
            return
        task = self._settling.pop(run, None)
        if task is not None:
            task.cancel()
        state.abandon(uid)
        if run.result is not None and run.result.admitted:
            state.manager.remove(uid)  # decided for nobody: no record or pod entry holds it

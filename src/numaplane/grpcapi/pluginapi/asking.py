"""The asynchronous driver of the manager's asks (``policy/asks.py``) for out-of-process plugins.

:func:`answer_all` answers one batch of asks: those of out-of-process plugins
(:class:`~numaplane.grpcapi.pluginapi.adapter.GrpcResourcePlugin`) concurrently, each within its
plugin's deadline, the others by a plain in-process call. :func:`settle` answers a run until it is
finished; :func:`admit` is ``manager.admit`` for a manager with out-of-process plugins, and
:func:`flush` sends what the manager left for them (releases, configuration) and refreshes the views
it reads.

Invariant: answers are fed to the run on the event loop, between two awaits, so a run's decision
steps never interleave with other calls on the manager made from the same loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from numaplane.grpcapi.pluginapi.adapter import GrpcResourcePlugin
from numaplane.policy.asks import AdmissionRun, Answer, Ask, answer_in_process
from numaplane.policy.manager import Admission, ResourceManager
from numaplane.policy.plugin import ResourcePlugin
from numaplane.resources.pod import Pod

__all__ = ["admit", "answer_all", "flush", "settle"]


async def answer_all(asks: Sequence[Ask], plugins: Mapping[str, ResourcePlugin]) -> list[Answer]:
    """The answers to ``asks``, in their order (remote ones concurrently, each within its deadline)."""

    async def one(ask: Ask) -> Answer:
        plugin = plugins[ask.plugin]
        if isinstance(plugin, GrpcResourcePlugin):
            return await plugin.answer(ask)
        return answer_in_process(plugins, ask)

    if len(asks) == 1:
        return [await one(asks[0])]
    return list(await asyncio.gather(*(one(ask) for ask in asks)))


async def settle(run: AdmissionRun[Admission], plugins: Sequence[ResourcePlugin]) -> None:
    """Answer ``run``'s asks until it is finished (or was aborted meanwhile)."""
    by_name = {p.name: p for p in plugins}
    while not run.done:
        answers = await answer_all(run.asks, by_name)
        if not run.done:  # aborted while we waited
            run.answer(answers)


async def admit(manager: ResourceManager, pod: Pod) -> Admission:
    """``manager.admit(pod)`` with out-of-process plugins answered asynchronously."""
    run = manager.begin(pod)
    await settle(run, manager.plugins)
    assert run.result is not None
    return run.result


async def flush(manager: ResourceManager) -> None:
    """Every out-of-process plugin's :meth:`~GrpcResourcePlugin.flush`, concurrently."""
    remote = [p for p in manager.plugins if isinstance(p, GrpcResourcePlugin)]
    await asyncio.gather(*(p.flush() for p in remote))

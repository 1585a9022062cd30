"""The sans-I/O plugin boundary: the manager asks, the plugin answers, the manager decides.

An admission is an :class:`AdmissionRun`, a small state machine built on a generator. Its
:attr:`~AdmissionRun.asks` are plain data (:class:`HintsAsk`, :class:`AllocateAsk`) addressed to
*asked* plugins (every plugin that is not built in: vendor plugins, in process or out of process);
whoever drives the run answers them (:class:`HintsAnswer`, :class:`AllocateAnswer`, or
:class:`Unanswered` when the plugin did not answer in time) with :meth:`AdmissionRun.answer`, in the
order of the asks, and the run proceeds to its next asks or to its decision
(:attr:`AdmissionRun.result`). The run itself never calls an asked plugin and does no I/O.

The sequence is the kubelet topology manager's (``topology_manager.TopologyManager.admit``), step
for step: per container (container scope) or once per pod (pod scope) every provider's hints, the
merge, admit or reject, then ``allocate`` on every provider in registration order, stopping at the
first failure. One batch of asks is one of:

* the hints of every asked plugin that wants the container (or the pod, in pod scope) — these
  may be answered concurrently;
* one ``allocate`` of one asked plugin (allocations stay sequential, in registration order, so the
  first failure stops the container exactly as on the kubelet).

Built-in plugins are answered in process, inside the step that uses the answer.

Invariant (state that changes between ask and decide): a driver may run other admissions and
releases while a run waits for answers. So

* built-in answers are never held across a wait: built-in hints are computed *after* the asked
  plugins' hints arrived, in the same synchronous step as the merge and the built-in allocations,
  so the decision always sees the built-in state of that moment;
* an asked plugin's hints may be stale by the time the merged hint is sent back to it with
  ``allocate``; the plugin re-validates there (its ``allocate`` is all-or-nothing, see
  ``plugin.py``), so a stale hint can only make its allocation fail — refusing the pod with the
  plugin's reason — never hand out anything twice;
* what the run allocated for earlier containers of its pod is held (other admissions see it taken)
  until the run finishes: on a rejection, an exception or :meth:`AdmissionRun.abort`, everything the
  pod holds is released before the run ends.

Scope: an asked plugin is only asked about containers that request or limit one of its resources
(as the kubelet's Device Manager); a container that needs no asked plugin never waits.

:func:`answer_in_process` answers an ask by calling an in-process plugin object; the manager's
synchronous :meth:`~numaplane.policy.manager.ResourceManager.admit` uses it (simulator, conformance,
``numaplane admit``). Out-of-process plugins are answered by the agent's asynchronous driver.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from numaplane.policy.errors import AdmissionError, PluginUnavailableError, TopologyAffinityError
from numaplane.policy.hints import NO_AFFINITY, TopologyHint
from numaplane.policy.plugin import PluginAllocation, ResourcePlugin
from numaplane.policy.topology_manager import (
    AFFINITY_ERROR_MESSAGE,
    POLICY_NONE,
    ProviderHints,
    TopologyAdmission,
    TopologyManager,
    admission_error,
)
from numaplane.resources.pod import Container, Pod

__all__ = [
    "AdmissionRun",
    "AllocateAnswer",
    "AllocateAsk",
    "Answer",
    "Ask",
    "HintsAnswer",
    "HintsAsk",
    "Provider",
    "Unanswered",
    "answer_in_process",
    "answers_in_process",
    "topology_steps",
    "wants",
]


@dataclass(frozen=True, eq=False)
class HintsAsk:
    """Ask ``plugin`` for its hints for ``container`` of ``pod`` (``container`` ``None``: the whole pod)."""

    plugin: str
    pod: Pod
    container: str | None


@dataclass(frozen=True, eq=False)
class AllocateAsk:
    """Ask ``plugin`` to allocate for ``container`` of ``pod`` honouring the merged ``hint``."""

    plugin: str
    pod: Pod
    container: str
    hint: TopologyHint


Ask = HintsAsk | AllocateAsk


@dataclass(frozen=True)
class HintsAnswer:
    """The plugin's hints (``None``: no preference; see ``topology_manager.ProviderHints``)."""

    hints: ProviderHints


@dataclass(frozen=True)
class AllocateAnswer:
    """The plugin's allocation, or the admission error it refused with (exactly one is set)."""

    allocation: PluginAllocation | None = None
    error: AdmissionError | None = None


@dataclass(frozen=True)
class Unanswered:
    """The plugin did not answer (deadline passed, transport failure, isolated): ``reason`` says why.

    For either kind of ask the pod is refused with ``PluginUnavailable``, naming the plugin."""

    reason: str


Answer = HintsAnswer | AllocateAnswer | Unanswered
R = TypeVar("R")
Steps = Generator[tuple[Ask, ...], Sequence[Answer], TopologyAdmission]
HintSteps = Generator[tuple[Ask, ...], Sequence[Answer], list[ProviderHints]]
AllocateSteps = Generator[tuple[Ask, ...], Sequence[Answer], None]


def wants(plugin: ResourcePlugin, container: Container) -> bool:
    """Whether ``container`` requests (or limits) one of ``plugin``'s resources; a plugin with a
    ``wants_container(container)`` method decides itself (the DRA hint provider: containers using claims)."""
    decide = getattr(plugin, "wants_container", None)
    if decide is not None:
        return bool(decide(container))
    return any(r in container.requests or r in container.limits for r in plugin.resources)


@dataclass
class Provider:
    """One plugin in one run: answered in process (built in) or asked; what it gave, per container."""

    plugin: ResourcePlugin
    asked: bool
    given: dict[str, PluginAllocation]

    def wants(self, container: Container) -> bool:
        return not self.asked or wants(self.plugin, container)


def _unavailable(provider: Provider, reason: str) -> PluginUnavailableError:
    plugin = provider.plugin
    return PluginUnavailableError(
        f"plugin {plugin.name!r} is unavailable ({reason}); "
        f"resources {', '.join(sorted(plugin.resources))} cannot be admitted until it answers again"
    )


class _Refused(Exception):
    def __init__(self, error: AdmissionError) -> None:
        self.error = error


def _hints(pod: Pod, container: Container | None, providers: Sequence[Provider]) -> HintSteps:
    """Every provider's hints, asked ones first (one batch), built-in ones after (fresh)."""
    asked = [p for p in providers if p.asked and (_pod_wants(p, pod) if container is None else p.wants(container))]
    asks = tuple(HintsAsk(p.plugin.name, pod, None if container is None else container.name) for p in asked)
    answers: dict[int, ProviderHints] = {}
    if asks:
        got = yield asks
        for provider, answer in zip(asked, got, strict=True):
            if isinstance(answer, Unanswered):
                raise _Refused(_unavailable(provider, answer.reason))
            if not isinstance(answer, HintsAnswer):
                raise TypeError(f"a hints ask answered with {type(answer).__name__}")
            answers[id(provider)] = answer.hints
    out: list[ProviderHints] = []
    for provider in providers:
        if provider.asked:
            out.append(answers.get(id(provider)))
        elif container is None:
            out.append(provider.plugin.pod_hints(pod))
        else:
            out.append(provider.plugin.hints(pod, container))
    return out


def _pod_wants(provider: Provider, pod: Pod) -> bool:
    return any(provider.wants(c) for c in pod.all_containers())


def _allocate(pod: Pod, container: Container, hint: TopologyHint, providers: Sequence[Provider]) -> AllocateSteps:
    """``allocate`` on every provider in order; stops at the first failure (raised as :class:`_Refused`)."""
    for provider in providers:
        if not provider.wants(container):
            continue
        if provider.asked:
            (answer,) = yield (AllocateAsk(provider.plugin.name, pod, container.name, hint),)
            if isinstance(answer, Unanswered):
                raise _Refused(_unavailable(provider, answer.reason))
            if not isinstance(answer, AllocateAnswer):
                raise TypeError(f"an allocate ask answered with {type(answer).__name__}")
            if answer.error is not None:
                raise _Refused(answer.error)
            allocation = answer.allocation or PluginAllocation(provider.plugin.name)
        else:
            try:
                allocation = provider.plugin.allocate(pod, container, hint)
            except Exception as exc:  # the kubelet turns any provider error into an admission result
                raise _Refused(admission_error(exc)) from None
        provider.given[container.name] = allocation


def topology_steps(tm: TopologyManager, pod: Pod, providers: Sequence[Provider]) -> Steps:
    """``tm.admit(pod, providers)`` as steps (see the module docstring); the same verdicts and stored hints."""
    stored: dict[str, TopologyHint] = {}
    if tm.policy == POLICY_NONE:
        for container in pod.all_containers():
            try:
                yield from _allocate(pod, container, NO_AFFINITY, providers)
            except _Refused as refused:
                return TopologyAdmission(False, stored, refused.error, container.name)
        return TopologyAdmission(True, stored)
    pod_hint: TopologyHint | None = None
    if tm.scope == "pod":
        try:
            pod_hints = yield from _hints(pod, None, providers)
        except _Refused as refused:
            return TopologyAdmission(False, stored, refused.error)
        pod_hint, ok = tm.merge(pod_hints)
        if not ok:
            return TopologyAdmission(False, stored, TopologyAffinityError(AFFINITY_ERROR_MESSAGE))
    for container in pod.all_containers():
        try:
            if pod_hint is None:
                hints = yield from _hints(pod, container, providers)
                hint, ok = tm.merge(hints)
                if not ok:
                    tm.remove_pod(pod.uid)
                    error: AdmissionError = TopologyAffinityError(AFFINITY_ERROR_MESSAGE)
                    return TopologyAdmission(False, stored, error, container.name)
            else:
                hint = pod_hint
            tm.store(pod.uid, container.name, hint)
            stored[container.name] = hint
            yield from _allocate(pod, container, hint, providers)
        except _Refused as refused:
            tm.remove_pod(pod.uid)
            return TopologyAdmission(False, stored, refused.error, container.name)
    return TopologyAdmission(True, stored)


class AdmissionRun(Generic[R]):
    """One pod's admission in progress (see the module docstring).

    ``asks`` is empty exactly when the run is finished; ``result`` is then the decision (whatever
    ``finish`` made of the topology verdict; ``None`` after :meth:`abort`). ``abort`` ends an
    unfinished run: ``finish`` is told (``None``) and releases what the pod holds. Not thread-safe:
    one driver per run.
    """

    def __init__(self, pod: Pod, steps: Steps, finish: Callable[[TopologyAdmission | None], R | None]) -> None:
        self.pod = pod
        self._steps = steps
        self._finish = finish
        self.asks: tuple[Ask, ...] = ()
        self.result: R | None = None
        self._advance(None)

    @classmethod
    def decided(cls, pod: Pod, result: R) -> AdmissionRun[R]:
        """A run finished before it asked anything (e.g. an already admitted pod)."""
        return cls(pod, _no_steps(), lambda _verdict: result)

    @property
    def done(self) -> bool:
        return not self.asks

    def _advance(self, answers: Sequence[Answer] | None) -> None:
        try:
            asks = next(self._steps) if answers is None else self._steps.send(answers)
        except StopIteration as stop:
            self.asks = ()
            self.result = self._finish(stop.value)
            return
        except BaseException:
            self.asks = ()
            self._finish(None)
            raise
        self.asks = asks

    def answer(self, answers: Sequence[Answer]) -> None:
        """Answer the current asks, in their order; the run proceeds to its next asks or its decision."""
        if self.done:
            raise ValueError("the admission run is finished")
        if len(answers) != len(self.asks):
            raise ValueError(f"{len(self.asks)} asks, {len(answers)} answers")
        self._advance(list(answers))

    def abort(self) -> None:
        """Give up an unfinished run: what the pod holds is released (no-op when finished)."""
        if self.done:
            return
        self._steps.close()
        self.asks = ()
        self._finish(None)


def _no_steps() -> Steps:
    return TopologyAdmission(True)
    yield ()  # a generator that asks nothing


def answer_in_process(plugins: Mapping[str, ResourcePlugin], ask: Ask) -> Answer:
    """Answer ``ask`` by calling the in-process plugin object it names (the synchronous driver).

    Only for plugins that run in this process (:func:`answers_in_process`; a ``TypeError`` for
    others); an exception from ``hints`` propagates (as when the manager called plugins directly),
    one from ``allocate`` becomes the admission error."""
    plugin = plugins[ask.plugin]
    if not answers_in_process(plugin):
        raise TypeError(f"plugin {plugin.name!r} runs out of process: its asks are answered by an asynchronous driver")
    container = None if ask.container is None else _container(ask.pod, ask.container)
    if isinstance(ask, HintsAsk):
        return HintsAnswer(plugin.pod_hints(ask.pod) if container is None else plugin.hints(ask.pod, container))
    assert container is not None
    try:
        return AllocateAnswer(plugin.allocate(ask.pod, container, ask.hint))
    except Exception as exc:
        return AllocateAnswer(error=admission_error(exc))


def answers_in_process(plugin: ResourcePlugin) -> bool:
    """Whether ``plugin`` answers asks by a plain call (its ``answers_in_process`` attribute, default ``True``;
    the gRPC adapter of an out-of-process plugin says ``False``)."""
    return bool(getattr(plugin, "answers_in_process", True))


def _container(pod: Pod, name: str) -> Container:
    return next(c for c in pod.all_containers() if c.name == name)

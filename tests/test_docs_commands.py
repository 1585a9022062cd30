"""The docs' commands are real (issue 26): every ``sh`` block of README.md and docs/*.md is checked, and
run where it can run here.

* **Checked, every block** (and every inline `` `numaplane ...` `` / `` `kubectl ...` `` span of those
  pages, and the examples of every command's ``--help``): each ``numaplane`` command exists, each flag
  is one of that command's options, each repository file it names (``examples/...``, ``deploy/...``)
  exists, and each ``kubectl`` namespace is one numaplane installs into or Kubernetes has. A block
  naming a missing flag, file or namespace fails.
* **Run, every block that can run here** (offline: the simulator, ``explain`` and ``admit`` on the
  shipped examples, the exporter on ``fake://`` answers): in bash ``-euo pipefail`` from the repository,
  with this environment's ``numaplane`` first on ``PATH``; each must exit 0.
* **Not run here** — :data:`NOT_RUN_HERE`, an explicit list with the reason of each: blocks that need a
  cluster, serve as daemons, install from nothing or take minutes; docs/install.md's blocks run in
  order against the real control plane in ``tests/realkube/test_real_install_guide.py``. An entry
  that no longer names a block fails, so the list cannot go stale.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from numaplane.cli import main
from numaplane.operator.render_common import DEFAULT_NAMESPACE, DEFAULT_NODE_NAMESPACE

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```sh\n(?P<body>.*?)^```", re.S | re.M)
INLINE = re.compile(r"`((?:numaplane|kubectl) [^`]+)`")
#: Repository paths a command may name; anything else (cluster.yaml, tls.crt, $IMAGE) is the reader's.
REPO_PATH = re.compile(r"^(?:examples|deploy|docs|scripts|image)/")
#: Namespaces a kubectl command in the docs may name.
NAMESPACES = frozenset({DEFAULT_NAMESPACE, DEFAULT_NODE_NAMESPACE, "default", "kube-system"})

#: Whole pages whose blocks run elsewhere.
PAGES_RUN_ELSEWHERE = {
    "docs/install.md": "run in order against the real control plane by tests/realkube/test_real_install_guide.py",
}
#: (page, first line of the block) -> why it does not run here.
NOT_RUN_HERE = {
    ("README.md", "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/numaplane simulate"): (
        "installs from nothing (minutes): .ci/run does exactly this; `numaplane simulate` runs below (docs/simulator.md)"
    ),
    ("README.md", "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest -q"): (
        "the test suite itself"
    ),
    ("README.md", "numaplane snapshot --kubeconfig ~/.kube/config -o cluster.yaml"): "needs a cluster (kubeconfig)",
    ("docs/simulator.md", "numaplane snapshot -o cluster.yaml && numaplane simulate --from cluster.yaml --set-policy single-numa-node"): (
        "needs a cluster (kubeconfig)"
    ),
    ("docs/simulator.md", "pip install -e '.[dev]'                     # mypy's mypyc; a C compiler must be on the PATH"): (
        "installs the dev extra and compiles for a minute: tests/policy/test_policy_compiled.py builds and runs it"
    ),
    ("docs/scheduler.md", "numaplane scheduler extender --listen 127.0.0.1:8888 --scheduler-name default-scheduler \\"): (
        "a daemon serving a cluster's kube-scheduler"
    ),
    ("docs/scheduler.md", "numaplane scheduler extender --listen :8888 --tls-cert-file tls.crt --tls-private-key-file tls.key \\"): (
        "a daemon serving a cluster's kube-scheduler, with the reader's certificates"
    ),
    ("docs/scheduler.md", "numaplane scheduler extender --listen 127.0.0.1:8888 --scheduler-name numaplane-extender"): (
        "a daemon serving a cluster's kube-scheduler"
    ),
    ("docs/scheduler.md", "numaplane scheduler run --leader-elect --leader-election-namespace numaplane-system \\"): (
        "a daemon scheduling a cluster's pods"
    ),
    ("docs/scheduler.md", "numaplane explain --pod examples/pods/guaranteed.yaml --kubeconfig ~/.kube/config"): (
        "needs a cluster (kubeconfig)"
    ),
    ("docs/workloads.md", "numaplane explain --pod examples/pods/guaranteed.yaml --kubeconfig ~/.kube/config"): (
        "needs a cluster (kubeconfig)"
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    body: str

    @property
    def first(self) -> str:
        return self.body.strip().splitlines()[0]

    @property
    def why_not_run(self) -> str | None:
        return PAGES_RUN_ELSEWHERE.get(self.page) or NOT_RUN_HERE.get((self.page, self.first))

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    out = []
    for page in PAGES:
        text = page.read_text()
        for m in BLOCK.finditer(text):
            out.append(Block(str(page.relative_to(REPO)), text.count("\n", 0, m.start()) + 1, m.group("body")))
    return out


def commands(text: str) -> Iterator[list[str]]:
    """The simple commands of shell ``text`` (continuations joined, comments, pipes, ``&&`` and
    redirections split off, leading ``VAR=value`` assignments dropped), as argument lists."""
    for line in text.replace("\\\n", " ").splitlines():
        yield from _line_commands(line)


def _line_commands(line: str) -> Iterator[list[str]]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote or a trailing backslash (an inline span cut short)
        tokens = line.split()
    current: list[str] = []
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
            continue
        if token and set(token) <= set("();<>|&\n"):
            if current:
                yield current
            current = []
            skip_next = ">" in token or "<" in token  # the redirection's file is not a command
            continue
        if not current and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token):
            continue
        current.append(token)
    if current:
        yield current


def _options(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


def problems(args: list[str]) -> list[str]:
    """What in one command names something that does not exist (empty: nothing)."""
    program = Path(args[0]).name
    if program == "kubectl":
        return _kubectl_problems(args)
    if program != "numaplane":
        return []
    out: list[str] = []
    ctx = click.Context(main)
    command: click.Command = main
    rest = args[1:]
    while isinstance(command, click.Group):
        while rest and rest[0].startswith("-"):  # the group's own options (--debug)
            if rest[0] not in _options(command):
                out.append(f"{' '.join(args[:2])}: no option {rest[0]}")
            rest = rest[1:]
        if not rest:
            return out
        if "|" in rest[0]:  # a synopsis: `scheduler extender|run`
            missing = [n for n in rest[0].split("|") if command.get_command(ctx, n) is None]
            return [*out, *(f"no command {n!r} in {' '.join(args)}" for n in missing)]
        sub = command.get_command(ctx, rest[0])
        if sub is None:
            return [*out, f"no command {rest[0]!r} in {' '.join(args)}"]
        command, rest = sub, rest[1:]
    known = _options(command)
    for token in rest:
        flag = token.split("=", 1)[0]
        if flag.startswith("-") and len(flag) > 1 and not flag[1:].replace(".", "").isdigit():
            if flag not in known:
                out.append(f"numaplane {command.name}: no option {flag}")
        elif REPO_PATH.match(token) and not (REPO / token).exists():
            out.append(f"numaplane {command.name}: no file {token}")
    return out


def _kubectl_problems(args: list[str]) -> list[str]:
    out = []
    for i, token in enumerate(args):
        value = None
        if token in ("-n", "--namespace") and i + 1 < len(args):
            value = args[i + 1]
        elif token.startswith("--namespace="):
            value = token.split("=", 1)[1]
        if value is not None and value not in NAMESPACES:
            out.append(
                f"kubectl: namespace {value!r} (numaplane installs into {DEFAULT_NAMESPACE} and {DEFAULT_NODE_NAMESPACE})"
            )
        if REPO_PATH.match(token) and not (REPO / token.rstrip("/")).exists():
            out.append(f"kubectl: no file {token}")
    return out


def help_examples() -> list[tuple[str, str]]:
    """``(command, example line)`` of the Examples in every command's ``--help``."""
    out = []
    ctx = click.Context(main)
    stack: list[tuple[str, click.Command]] = [
        (n, c) for n in main.list_commands(ctx) if (c := main.get_command(ctx, n))
    ]
    while stack:
        name, command = stack.pop()
        if isinstance(command, click.Group):
            stack += [(f"{name} {n}", c) for n in command.list_commands(ctx) if (c := command.get_command(ctx, n))]
            continue
        out += [
            (name, line.strip()) for line in (command.help or "").splitlines() if line.strip().startswith("numaplane ")
        ]
    return out


# ---- checked -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", blocks(), ids=str)
def test_every_block_names_existing_commands_flags_files_and_namespaces(block: Block) -> None:
    found = [p for args in commands(block.body) for p in problems(args)]
    assert not found, f"{block}: {found}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_inline_commands_of_the_docs_name_existing_flags_and_namespaces(page: Path) -> None:
    found = []
    for span in INLINE.findall(page.read_text()):
        for args in commands(span):
            found += [p for p in problems(args) if "no file" not in p]  # inline spans name placeholders
    assert not found, found


def test_help_examples_name_existing_flags_and_files() -> None:
    examples = help_examples()
    assert len(examples) >= 20
    found = [f"{name}: {p}" for name, line in examples for args in commands(line) for p in problems(args)]
    assert not found, found


def test_the_not_run_list_names_blocks_that_exist() -> None:
    firsts = {(b.page, b.first) for b in blocks()}
    assert not set(NOT_RUN_HERE) - firsts, "stale entries: " + repr(sorted(set(NOT_RUN_HERE) - firsts))
    assert all((REPO / page).is_file() for page in PAGES_RUN_ELSEWHERE)


def test_a_missing_flag_file_or_namespace_is_found() -> None:
    """The checker itself: each kind of mistake the docs had is caught."""
    text = (
        "numaplane render --set image=x | kubectl apply -f -\n"
        "numaplane explain --pod examples/pods/nope.yaml --nrt examples/nrts/\n"
        "kubectl -n numaplane get events\n"
        "numaplane simulatte\n"
    )
    found = [p for args in commands(text) for p in problems(args)]
    assert found == [
        "numaplane render: no option --set",
        "numaplane explain: no file examples/pods/nope.yaml",
        "kubectl: namespace 'numaplane' (numaplane installs into numaplane-system and numaplane-node)",
        "no command 'simulatte' in numaplane simulatte",
    ]


# ---- run ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", [b for b in blocks() if b.why_not_run is None], ids=str)
def test_offline_blocks_run(block: Block) -> None:
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    env.pop("NUMAPLANE_DEBUG", None)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.body],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{block} exited {done.returncode}:\n{done.stderr[-3000:]}"

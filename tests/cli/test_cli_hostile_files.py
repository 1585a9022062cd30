"""Hostile files given to the CLI (issue 15, item 14): deeply nested documents, 5,000-digit integers
and huge counts are one-line errors, never tracebacks (the loaders raise typed errors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from numaplane.cli import main
from numaplane.documents import DocumentError, load_json, load_yaml, load_yaml_all

DEEP = "[" * 100_000 + "]" * 100_000
BIG = "9" * 5000


@pytest.mark.parametrize("text", [DEEP, f"a: {BIG}\n", "{" * 70 + "}" * 70, "a: [" * 100 + "]" * 100, "\t: x"])
def test_the_loaders_raise_document_errors(text: str) -> None:
    for load in (load_yaml, load_yaml_all):
        with pytest.raises(DocumentError):
            load(text)


@pytest.mark.parametrize("text", [DEEP, f'{{"a": {BIG}}}', "{" * 10, '{"a": [' + "[" * 100 + "]" * 100 + "]}"])
def test_load_json_raises_document_errors(text: str) -> None:
    with pytest.raises(DocumentError):
        load_json(text)


def _files(tmp: Path) -> dict[str, Path]:
    files = {
        "deep.json": DEEP,
        "bigint.yaml": f"a: {BIG}\n",
        "topo.json": '{"cpus": [{"cpu": ' + BIG + "}]}",
        "sched.yaml": "kind: KubeSchedulerConfiguration\nprofiles: [{pluginConfig: [{name: NodeResourceTopologyMatch, "
        "args: {scoringStrategy: {resources: [{name: cpu, weight: " + BIG + "}]}}}]}]\n",
        "count.yaml": "pods: [{name: a, count: 1000000000, spec: {containers: [{name: c}]}}]\n",
        "bigcount.yaml": "pods: [{name: a, count: " + BIG + ", spec: {containers: [{name: c}]}}]\n",
        "pod.json": '{"metadata": {"name": "p"}}',
    }
    out = {}
    for name, text in files.items():
        out[name] = tmp / name
        out[name].write_text(text)
    return out


COMMANDS = [
    ["topology", "--from", "deep.json"],
    ["topology", "--from", "bigint.yaml"],
    ["topology", "--from", "topo.json"],
    ["scheduler", "extender", "--config", "deep.json"],
    ["scheduler", "extender", "--config", "bigint.yaml"],
    ["scheduler", "extender", "--config", "sched.yaml"],
    ["simulate", "--workload", "count.yaml"],
    ["simulate", "--workload", "bigcount.yaml"],
    ["simulate", "--workload", "deep.json"],
    ["simulate", "--topology", "deep.json"],
    ["admit", "--config", "deep.json", "pod.json"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_cli_answers_hostile_files_with_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (1, 2), result.output
    assert not isinstance(result.exception, (RecursionError, TypeError)) or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert "Error" in result.output and len(result.output) < 2000, result.output

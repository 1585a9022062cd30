"""Every CLI error is one line naming the input: exit 2 for unusable arguments or input, 1 for
failures, 130 on Ctrl-C, never a traceback unless ``numaplane --debug`` (issue 14, item 5)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from cli_helpers import NUMAPLANE, REPO, numaplane

POD = """apiVersion: v1
kind: Pod
metadata: {name: x, annotations: {numaplane.io/cpu-strategy: "[/]bad"}}
spec: {containers: [{name: c, resources: {limits: {cpu: "2", memory: 1Gi}}}]}
"""


def test_render_from_a_folder_without_custom_resources_is_one_line_exit_2() -> None:
    run = numaplane("render", "--from", "deploy")  # only kustomize's own file at its top
    assert run.code == 2
    assert "deploy" in run.error_line and "no .yaml, .yml, .json files in this folder" in run.error_line


def test_debug_shows_the_traceback() -> None:
    run = numaplane("--debug", "render", "--output-dir", "/proc/no-such-folder")
    assert run.code == 1 and "Traceback" in run.stderr


def test_admit_with_an_empty_config_file(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "pod.yaml").write_text(POD)
    run = numaplane("admit", "--config", str(tmp_path / "empty.yaml"), str(tmp_path / "pod.yaml"))
    assert run.code == 2 and "empty.yaml" in run.error_line and "empty" in run.error_line


def test_conformance_on_a_broken_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "kind": "cpu-take"}\n{"id": "b",\n')
    run = numaplane("conformance", str(tmp_path / "cases.jsonl"))
    assert run.code == 2 and "cases.jsonl:2:" in run.error_line


def test_truncated_sysfs_archive_is_an_error_not_aborted(tmp_path: Path, shared_dir: Path) -> None:
    archive = tmp_path / "truncated.tar.gz"
    archive.write_bytes((shared_dir / "topologies/real/amd-epyc7451-2s8n-96t.tar.gz").read_bytes()[:3000])
    run = numaplane("topology", "--sysfs", str(archive))
    assert run.code == 2 and "truncated.tar.gz" in run.error_line and "Aborted" not in run.stderr


def test_rich_markup_in_user_strings_is_printed_literally(tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text(POD)
    run = numaplane("admit", str(tmp_path / "pod.yaml"))
    assert run.code == 1, run.stderr  # rejected: InvalidPreference
    assert "Traceback" not in run.stderr and "[/]bad" in run.stdout and "InvalidPreference" in run.stdout


def test_operator_without_a_cluster_says_what_to_do() -> None:
    run = numaplane("operator", "--image", "x")
    assert run.code == 1
    assert "--kubeconfig" in run.error_line and "--api-server" in run.error_line


def test_simulate_report_target_is_checked_before_the_run() -> None:
    run = numaplane("simulate", "--report", "/proc/nope", timeout=20)  # no progress line: nothing ran
    assert run.code == 2 and "/proc/nope" in run.error_line


def test_usage_errors_are_one_line_exit_2() -> None:
    run = numaplane("admit", "--no-such-flag")
    assert run.code == 2 and "--no-such-flag" in run.error_line


@pytest.mark.timeout(120)
def test_ctrl_c_exits_130_and_keeps_the_schedulers_already_run() -> None:
    proc = subprocess.Popen(
        [NUMAPLANE, "simulate", "--nodes", "400", "--pods", "6000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # wait until the first scheduler is done
        if ": done in" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "default" in out and "interrupted" in (out + err)
    assert "Traceback" not in err


def test_no_command_prints_the_help() -> None:
    run = numaplane()
    assert run.code == 2 and "Usage: numaplane" in run.stderr and "Error" not in run.stderr

"""``numaplane simulate`` from the command line: defaults, inputs, outputs and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from numaplane.cli import main
from numaplane.topology.document import topology_to_dict

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["simulate", "-q", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_output_is_deterministic_and_complete() -> None:
    args = ("--nodes", "6", "--pods", "120", "--schedulers", "default,numa:LeastAllocated:overreserve", "-o", "json")
    code, out, _ = _run(*args)
    assert code == 0
    doc = json.loads(out)
    assert doc["kind"] == "SimulationReport"
    assert [s["scheduler"] for s in doc["schedulers"]] == ["default", "numa-LeastAllocated-overreserve"]
    for s in doc["schedulers"]:
        assert s["pods"] == 120
        assert s["placed"] + s["pending"] + s["failedAfterRecreates"] <= 120 + s["rejectedAtNode"]
    again = json.loads(_run(*args)[1])
    strip = [{k: v for k, v in s.items() if k != "wallSeconds"} for s in doc["schedulers"]]
    assert strip == [{k: v for k, v in s.items() if k != "wallSeconds"} for s in again["schedulers"]]


def test_example_workloads_run(tmp_path: Path) -> None:
    for example in sorted((REPO / "examples" / "workloads").glob("*.yaml")):
        code, out, err = _run("--workload", str(example), "--nodes", "8", "--schedulers", "default", "-o", "json")
        assert code == 0, (example, err)
        assert json.loads(out)["schedulers"][0]["pods"] > 0


def test_report_writes_html_and_plots(tmp_path: Path) -> None:
    code, _, _ = _run(
        "--nodes",
        "4",
        "--pods",
        "60",
        "--schedulers",
        "default,numa-LeastAllocated-passthrough",
        "--report",
        str(tmp_path / "r"),
    )
    assert code == 0
    names = {p.name for p in (tmp_path / "r").iterdir()}
    assert {"index.html", "admission_failures.png", "strategies.png", "zone_heatmap.png", "pending.png"} <= names
    html = (tmp_path / "r" / "index.html").read_text()
    assert "numa-LeastAllocated-passthrough" in html and "<img" in html


def test_invalid_workload_names_file_entry_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "kind: Workload\npods:\n  - name: ok\n    spec: {containers: [{name: c}]}\n"
        "  - name: broken\n    spec:\n      containers:\n        - name: c\n"
        "          resources: {requests: {cpu: lots}}\n"
    )
    code, _, err = _run("--workload", str(bad))
    assert code != 0
    assert str(bad) in err and "pods[1]" in err and "cpu" in err and "Traceback" not in err


def test_unknown_topology_and_scheduler_are_clear_errors() -> None:
    code, _, err = _run("--topology", "no-such-machine=3")
    assert code != 0 and "no-such-machine" in err and "built-in" in err
    code, _, err = _run("--schedulers", "numa:Fastest")
    assert code != 0 and "Fastest" in err


def test_topology_from_a_json_file(tmp_path: Path) -> None:
    from numaplane.topology.model import synthetic

    path = tmp_path / "m.json"
    path.write_text(json.dumps(topology_to_dict(synthetic(sockets=2, cores_per_numa=8))))
    code, out, err = _run("--topology", f"{path}=3", "--pods", "40", "--schedulers", "default", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["inputs"]["nodes"] == 3


def test_negative_request_in_a_workload_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "negative.yaml"
    bad.write_text(
        "kind: Workload\npods:\n  - name: ok\n    spec: {containers: [{name: c}]}\n"
        "  - name: minus\n    count: 3\n    spec:\n      containers:\n        - {name: a}\n        - name: b\n"
        '          resources: {requests: {cpu: "-1"}}\n'
    )
    code, out, err = _run("--workload", str(bad))
    assert code != 0 and out == "" and "Traceback" not in err
    want = f"{bad}: pods[1].spec.containers[1].resources.requests.cpu: quantity '-1' must be greater than or equal to 0"
    assert want in err and err.count("must be greater than or equal to 0") == 1

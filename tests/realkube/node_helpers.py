"""Helpers of the real-node tests: the numaplane CLI as a subprocess, rendered objects, the NRT CRD."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from numaplane_harness.containerd import terminate_process
from numaplane_harness.kubecluster import ApiStatus, ControlPlane

REPO = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-c", "import sys; from numaplane.cli import main; sys.exit(main())")
NRT_PATH = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"


def render(*args: str) -> list[dict[str, Any]]:
    """The documents ``numaplane render`` prints."""
    out = subprocess.run([*CLI, "render", *args], capture_output=True, text=True, check=True, cwd=REPO).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def ensure_nrt_crd(cp: ControlPlane) -> None:
    """Create the NRT CRD exactly as ``numaplane render`` prints it; wait until it is served."""
    crds = [
        d
        for d in render()
        if d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"].startswith("noderesourcetopologies.")
    ]
    assert crds, "numaplane render printed no NodeResourceTopology CRD"
    got = cp.kubectl(
        "apply", "--server-side", "--field-manager=numaplane-test", "-f", "-", stdin=yaml.safe_dump_all(crds)
    )
    assert got.returncode == 0, got.stderr
    name = crds[0]["metadata"]["name"]
    waited = cp.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr
    cp.wait_for("NRT resource served", lambda: cp.request("GET", NRT_PATH) is not None, timeout=30)


def get_nrt(cp: ControlPlane, name: str) -> dict[str, Any] | None:
    try:
        return cp.request("GET", f"{NRT_PATH}/{name}")
    except ApiStatus as exc:
        if exc.code == 404:
            return None
        raise


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@contextlib.contextmanager
def numaplane(
    args: Sequence[str], log: Path, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``numaplane <args>`` in the background (output to ``log``, ``env`` added); stop it afterwards."""
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [*CLI, *args], stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, **(env or {})}
        )
    try:
        yield process
    finally:
        terminate_process(process, 15)


def wait_http_ready(process: subprocess.Popen[bytes], port: int, log: Path, timeout: float = 60) -> dict[str, Any]:
    """Until ``/readyz`` on ``port`` answers 200; fails with the log if the process exits."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise AssertionError(f"exited with {process.returncode}:\n{log.read_text(errors='replace')[-4000:]}")
        with contextlib.suppress(OSError):
            status, body = http_get(port, "/readyz")
            if status == 200:
                return dict(json.loads(body))
        if time.monotonic() > deadline:
            raise AssertionError(f"not ready in {timeout} s:\n{log.read_text(errors='replace')[-4000:]}")
        time.sleep(0.1)


def log_lines(log: Path) -> list[str]:
    return log.read_text(errors="replace").splitlines() if log.exists() else []

"""Generate (or ``--check``) the Pod schema shipped as data, from a real kube-apiserver's OpenAPI v3.

The schema is the API server's own: the harness starts the real kube-apiserver of ``../shared/k8s``
(``numaplane_harness.kubecluster``), this reads ``/openapi/v3/api/v1``, keeps
``io.k8s.api.core.v1.Pod`` and every component it references (transitively), drops the prose
(``description``) and writes ``src/numaplane/resources/data/pod-openapi.json`` — the data
:mod:`numaplane.resources.podschema` validates user manifests against (as ``kubectl
--validate=strict``).

    python scripts/gen_pod_schema.py            # write the file
    python scripts/gen_pod_schema.py --check    # exit 1 when the file differs from the API server's
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "numaplane" / "resources" / "data" / "pod-openapi.json"
POD = "io.k8s.api.core.v1.Pod"
_REF = "#/components/schemas/"
_DROPPED = ("description",)


def _strip(node: Any, refs: set[str]) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED and isinstance(value, str):
                continue
            if key == "$ref" and isinstance(value, str) and value.startswith(_REF):
                refs.add(value.removeprefix(_REF))
            out[key] = _strip(value, refs)
        return out
    if isinstance(node, list):
        return [_strip(v, refs) for v in node]
    return node


def trim(document: dict[str, Any], root: str = POD) -> dict[str, Any]:
    """``root`` and every schema it references, descriptions dropped, keys sorted."""
    components: dict[str, Any] = document["components"]["schemas"]
    kept: dict[str, Any] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        refs: set[str] = set()
        kept[name] = _strip(components[name], refs)
        todo.extend(sorted(refs - kept.keys()))
    return {"root": root, "components": {"schemas": dict(sorted(kept.items()))}}


def render(trimmed: dict[str, Any], version: str) -> str:
    return json.dumps({"kubernetesVersion": version, **trimmed}, indent=1, sort_keys=True) + "\n"


def fetch() -> str:
    sys.path.insert(0, str(ROOT / "harness"))
    from numaplane_harness.kubecluster import run_control_plane

    with run_control_plane(with_controller_manager=False) as plane:
        version = plane.request("GET", "/version")["gitVersion"]
        document = plane.request("GET", "/openapi/v3/api/v1")
    return render(trim(document), version)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the API server's, write nothing")
    args = parser.parse_args()
    text = fetch()
    if args.check:
        if not OUT.is_file() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} differs from the API server's Pod schema: run scripts/gen_pod_schema.py")
            return 1
        print(f"{OUT.relative_to(ROOT)}: up to date")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``NodeResourcePolicy.status.nodes`` while a DaemonSet replaces an agent pod (issue 23 item 5's run).

Seen on the real API server during ``numaplane e2e --serial`` (agent restart, then policy change): the
old agent pod (being deleted) and its replacement were both on the node, the operator wrote two
entries for it and the API server refused the whole status (``status.nodes[1]: Duplicate value``:
``name`` is the list's map key), so the policy's status stood still until the old pod was gone.
"""

from __future__ import annotations

from typing import Any

from numaplane.operator.status import POLICY_CONDITION, policy_nodes


def _agent(name: str, node: str, created: str, revision: str, **meta: Any) -> dict[str, Any]:
    cond = {"type": POLICY_CONDITION, "status": "True", "reason": "Applied", "message": f"revision {revision}"}
    return {
        "metadata": {"name": name, "creationTimestamp": created, **meta},
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "conditions": [cond]},
    }


def test_one_entry_per_node_from_the_pod_that_speaks_for_it() -> None:
    old = _agent("a-old", "n1", "2026-01-01T00:00:00Z", "r1", deletionTimestamp="2026-01-01T00:05:00Z")
    new = _agent("a-new", "n1", "2026-01-01T00:05:01Z", "r2")
    other = _agent("b", "n2", "2026-01-01T00:00:00Z", "r2")
    for pods in ([old, new, other], [new, old, other], [other, new, old]):
        nodes = policy_nodes(pods, "r2")
        assert [n["name"] for n in nodes] == ["n1", "n2"]
        assert nodes[0]["revision"] == "r2" and nodes[0]["state"] == "Applied"
    ended = _agent("a-ended", "n1", "2026-01-01T00:09:00Z", "r1")
    ended["status"]["phase"] = "Failed"
    assert policy_nodes([new, ended], "r2")[0]["revision"] == "r2"  # an ended pod does not speak for its node

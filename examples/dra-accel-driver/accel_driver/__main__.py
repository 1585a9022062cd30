"""``python -m accel_driver``: run the example DRA driver's kubelet plugin on one node.

Exit status: 0 on SIGTERM/SIGINT, 2 for a bad option or device inventory (one line, no traceback), 1 when
the checkpoint cannot be read or the API refuses the ResourceSlice.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from accel_driver.server import KubeletPlugin, resource_slice
from accel_driver.state import DRIVER_NAME, CheckpointError, DriverConfigError, DriverState, parse_devices

log = logging.getLogger("accel_driver")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="accel_driver", description=f"example DRA driver {DRIVER_NAME} (kubelet plugin)")
    p.add_argument("--node-name", required=True, help="this node's name (the ResourceSlice's nodeName and pool)")
    p.add_argument(
        "--devices", required=True, help="the node's accelerators: <name>=<NUMA node>,… e.g. accel-0=0,accel-1=1"
    )
    p.add_argument("--kubelet-root-dir", type=Path, default=Path("/var/lib/kubelet"), help="the kubelet's --root-dir")
    p.add_argument("--state-dir", type=Path, default=Path(f"/var/lib/{DRIVER_NAME}"), help="checkpoint folder")
    p.add_argument("--cdi-dir", type=Path, default=Path("/var/run/cdi"), help="a CDI spec folder of the runtime")
    p.add_argument("--kubeconfig", type=Path, help="API credentials (default: in-cluster)")
    p.add_argument("--resync-seconds", type=float, default=10.0, help="how often the ResourceSlice is checked")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    logging.basicConfig(level=ns.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpx2", "httpcore"):  # one line per API request otherwise
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    try:
        inventory = parse_devices(ns.devices)
        state = DriverState(
            node=ns.node_name,
            inventory=inventory,
            checkpoint=ns.state_dir / "checkpoint.json",
            cdi_dir=ns.cdi_dir,
        )
    except DriverConfigError as exc:
        print(f"accel_driver: {exc}", file=sys.stderr)
        return 2
    except CheckpointError as exc:
        print(f"accel_driver: {exc}", file=sys.stderr)
        return 1

    from lightkube import ApiError, Client, KubeConfig
    from lightkube.resources.core_v1 import Node
    from lightkube.resources.resource_v1 import ResourceClaim, ResourceSlice

    client = Client(config=KubeConfig.from_file(ns.kubeconfig)) if ns.kubeconfig else Client()

    def read_claim(namespace: str, name: str) -> dict[str, Any] | None:
        try:
            claim: dict[str, Any] = client.get(ResourceClaim, name, namespace=namespace).to_dict()
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise
        return claim

    def publish(force: bool) -> None:
        """Apply the node's ResourceSlice (server-side apply, idempotent); unless ``force``, only when it is
        missing (the kubelet deletes a node's slices of drivers it does not see registered)."""
        name = f"{ns.node_name}-{DRIVER_NAME}"
        if not force:
            try:
                client.get(ResourceSlice, name)
                return
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
        node_uid = client.get(Node, ns.node_name).metadata.uid or ""
        doc = resource_slice(ns.node_name, node_uid, state.pool, inventory)
        client.apply(ResourceSlice.from_dict(doc), field_manager=DRIVER_NAME, force=True)
        log.info("published ResourceSlice %s: %s", name, {d.name: d.numa_node for d in inventory})

    try:
        publish(True)
    except ApiError as exc:
        print(
            f"accel_driver: cannot publish the ResourceSlice of node {ns.node_name}: {exc.status.message}",
            file=sys.stderr,
        )
        return 1

    plugin = KubeletPlugin(
        state,
        read_claim,
        registry_dir=ns.kubelet_root_dir / "plugins_registry",
        plugins_dir=ns.kubelet_root_dir / "plugins",
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: (stop.set(), plugin.registration.changed.set()))
    try:
        plugin.start()
    except OSError as exc:
        print(f"accel_driver: {exc}", file=sys.stderr)
        return 1
    log.info(
        "serving: registration %s, DRA %s; %d claims prepared from the checkpoint",
        plugin.registration_socket,
        plugin.dra_socket,
        len(state.claims),
    )
    # re-publish when the slice went (kubelet restart, node re-created), every --resync-seconds and at once
    # after each registration
    while not stop.is_set():
        plugin.registration.changed.wait(ns.resync_seconds)
        plugin.registration.changed.clear()
        if stop.is_set():
            break
        try:
            publish(False)
        except Exception as exc:  # the API is down: try again at the next round
            log.warning("ResourceSlice check failed: %s", exc)
    plugin.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

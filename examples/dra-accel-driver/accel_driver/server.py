"""The driver's kubelet-facing gRPC services and its ResourceSlice: registration, DRAPlugin v1, publication.

Sockets (both plain unix sockets, removed and re-created at start, removed at stop):

* ``<registry dir>/accel.example.com-reg.sock`` serves ``pluginregistration.Registration``: the kubelet's
  plugin watcher finds it (inotify, or its scan at its own start: so a restarted kubelet finds the driver
  again) and calls ``GetInfo`` (type ``DRAPlugin``, name ``accel.example.com``, the DRA endpoint, service
  ``v1.DRAPlugin``), then ``NotifyRegistrationStatus``;
* ``<plugins dir>/accel.example.com/dra.sock`` serves ``k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin``.

The claims' allocations are read from the API (``ResourceClaim`` by namespace and name) only for claims not
prepared yet; everything else is the checkpointed :class:`~accel_driver.state.DriverState`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from accel_driver.kubeletapi.dra.v1 import api_pb2 as dra_pb2
from accel_driver.kubeletapi.dra.v1 import api_pb2_grpc as dra_grpc
from accel_driver.kubeletapi.pluginregistration.v1 import api_pb2 as reg_pb2
from accel_driver.kubeletapi.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from accel_driver.state import DRIVER_NAME, NUMA_ATTRIBUTE, AccelDevice, DriverState, PrepareError

log = logging.getLogger("accel_driver")

#: the DRA service version this plugin serves, as the kubelet's registration handler names it
DRA_SERVICE = "v1.DRAPlugin"
PLUGIN_TYPE = "DRAPlugin"

#: reads one ResourceClaim as a dict: ``(namespace, name) -> claim or None when not found``
ClaimReader = Callable[[str, str], Mapping[str, Any] | None]


class DRAService(dra_grpc.DRAPluginServicer):
    """NodePrepareResources/NodeUnprepareResources over :class:`DriverState`; errors are per claim."""

    def __init__(self, state: DriverState, read_claim: ClaimReader) -> None:
        self.state = state
        self.read_claim = read_claim

    def NodePrepareResources(
        self, request: dra_pb2.NodePrepareResourcesRequest, context: grpc.ServicerContext
    ) -> dra_pb2.NodePrepareResourcesResponse:
        answer = dra_pb2.NodePrepareResourcesResponse()
        for claim in request.claims:
            out = answer.claims[claim.uid]
            try:
                prepared = self.state.claims.get(claim.uid)
                api = None if prepared is not None or not claim.name else self.read_claim(claim.namespace, claim.name)
                done = self.state.prepare(claim.uid, claim.namespace, claim.name, api)
            except PrepareError as exc:
                log.warning("prepare failed: %s", exc)
                out.error = str(exc)
                continue
            except Exception as exc:  # the API or the disk: this claim fails, the kubelet retries
                log.exception("prepare of claim %s/%s failed", claim.namespace, claim.name)
                out.error = f"claim {claim.namespace}/{claim.name}: {type(exc).__name__}: {exc}"
                continue
            for device in done.devices:
                out.devices.add(
                    request_names=list(device.request_names),
                    pool_name=device.pool,
                    device_name=device.device,
                    cdi_device_ids=list(device.cdi_device_ids),
                )
            log.info("prepared claim %s/%s: %s", claim.namespace, claim.name, [d.device for d in done.devices])
        return answer

    def NodeUnprepareResources(
        self, request: dra_pb2.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> dra_pb2.NodeUnprepareResourcesResponse:
        answer = dra_pb2.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            out = answer.claims[claim.uid]
            try:
                gone = self.state.unprepare(claim.uid)
            except PrepareError as exc:
                out.error = str(exc)
                continue
            except OSError as exc:
                log.exception("unprepare of claim %s/%s failed", claim.namespace, claim.name)
                out.error = f"claim {claim.namespace}/{claim.name}: {exc}"
                continue
            log.info("unprepared claim %s/%s%s", claim.namespace, claim.name, "" if gone else " (was not prepared)")
        return answer


class RegistrationService(reg_grpc.RegistrationServicer):
    """What the kubelet's plugin watcher asks; records the kubelet's verdict in :attr:`registered`."""

    def __init__(self, endpoint: Path) -> None:
        self.endpoint = endpoint
        self.registered = threading.Event()
        #: set at every registration notice (the driver re-checks its ResourceSlice then)
        self.changed = threading.Event()
        self.last_error = ""

    def GetInfo(self, request: reg_pb2.InfoRequest, context: grpc.ServicerContext) -> reg_pb2.PluginInfo:
        return reg_pb2.PluginInfo(
            type=PLUGIN_TYPE, name=DRIVER_NAME, endpoint=str(self.endpoint), supported_versions=[DRA_SERVICE]
        )

    def NotifyRegistrationStatus(
        self, request: reg_pb2.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg_pb2.RegistrationStatusResponse:
        if request.plugin_registered:
            self.last_error = ""
            self.registered.set()
            log.info("registered with the kubelet")
        else:
            self.last_error = request.error
            self.registered.clear()
            log.error("the kubelet refused the registration: %s", request.error)
        self.changed.set()
        return reg_pb2.RegistrationStatusResponse()


class KubeletPlugin:
    """Both gRPC servers, bound to their sockets. ``start`` binds the DRA socket before the registration
    socket (the kubelet may call the endpoint as soon as it sees the registration socket)."""

    def __init__(self, state: DriverState, read_claim: ClaimReader, *, registry_dir: Path, plugins_dir: Path) -> None:
        self.dra_socket = plugins_dir / DRIVER_NAME / "dra.sock"
        self.registration_socket = registry_dir / f"{DRIVER_NAME}-reg.sock"
        self.dra = DRAService(state, read_claim)
        self.registration = RegistrationService(self.dra_socket)
        self._servers: list[grpc.Server] = []

    def start(self) -> None:
        for socket, add in (
            (self.dra_socket, lambda s: dra_grpc.add_DRAPluginServicer_to_server(self.dra, s)),
            (self.registration_socket, lambda s: reg_grpc.add_RegistrationServicer_to_server(self.registration, s)),
        ):
            socket.parent.mkdir(parents=True, exist_ok=True)
            socket.unlink(missing_ok=True)  # a previous instance's socket: listen anew under the same name
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            add(server)
            if server.add_insecure_port(f"unix://{socket}") == 0:
                raise OSError(f"cannot listen on {socket}")
            server.start()
            self._servers.append(server)

    def stop(self) -> None:
        # the registration socket first: the kubelet unregisters the plugin when it goes
        for server in reversed(self._servers):
            server.stop(grace=1).wait()
        self._servers.clear()
        self.registration_socket.unlink(missing_ok=True)
        self.dra_socket.unlink(missing_ok=True)


def resource_slice(node: str, node_uid: str, pool: str, devices: Sequence[AccelDevice]) -> dict[str, Any]:
    """The node's one ResourceSlice (pool ``pool``, generation 1, one slice): every device with its NUMA
    node (``resource.kubernetes.io/numaNode``) and model; owned by the Node so it goes with it."""
    meta: dict[str, Any] = {"name": f"{node}-{DRIVER_NAME}"}
    if node_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": meta,
        "spec": {
            "driver": DRIVER_NAME,
            "nodeName": node,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": d.name,
                    "attributes": {
                        NUMA_ATTRIBUTE: {"int": d.numa_node},
                        "model": {"string": "example-accel"},
                    },
                }
                for d in devices
            ],
        },
    }

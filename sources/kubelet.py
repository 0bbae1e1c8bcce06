"""Kubernetes pod labels for the exporter: which pod and container holds each GPU, from the kubelet.

The kubelet's pod-resources API (gRPC on ``/var/lib/kubelet/pod-resources/kubelet.sock``,
``PodResourcesLister.List``) says which devices the device plugin gave each container. dcgm-exporter
reads it to add ``pod``, ``namespace`` and ``container`` labels to its series; gpuscope does the same on
its DCGM-compatible series (``agent --prometheus --kubelet-socket PATH``), so dashboards and alerts that
group by pod work unchanged, and adds ``gpuscope_kubernetes_gpu_pod_info`` with every container that
holds a GPU (a time-sliced GPU has several; the DCGM series can name only one).

Why the pieces are shaped as they are:

* The mapping is fetched off the scrape path, every ``refresh_s`` (15 s) with a timeout, by a daemon
  thread; a scrape reads the last mapping (a reference). dcgm-exporter calls ``List`` on every scrape.
* An unreachable kubelet, a timeout or a garbage answer is one warning (again only after it recovered)
  and series without pod labels until it answers: stale labels would credit a GPU to a pod that left.
* The messages are built with protobuf's descriptor API from :data:`_MESSAGES`, a transcription of the
  published ``api.proto`` (a copy with its licence is ``sources/podresources_v1.proto``; a test compiles it
  with grpcio-tools and checks the two descriptors are equal). Generated ``_pb2`` modules would pin the
  protobuf runtime to the release that generated them; this works with any protobuf ≥ 4.25.
* ``grpcio`` and ``protobuf`` are the optional extra ``gpuscope-inference[kubernetes]``, imported only here and
  only when ``--kubelet-socket`` is given.

Device ids are the device plugin's (see :func:`device_target`): NVIDIA's plugin gives GPU UUIDs
(``GPU-…``; ``GPU-…::N`` for a time-sliced replica; ``MIG-…`` for a MIG device, whose GPU NVML tells:
:func:`mig_parents`), GKE's gives device names
(``nvidia0``, ``nvidia0/gi1``, ``nvidia0/vgpu2``), matched by the ``device`` label as dcgm-exporter does.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuscope.core.errors import SHOWN, GpuscopeError, one_line
from gpuscope.core.exposition import escape_help, labels
from gpuscope.core.model import DeviceInfo
from gpuscope.core.text import clean

log = logging.getLogger(__name__)

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
REFRESH_S = 15.0  # how often the mapping is fetched
TIMEOUT_S = 5.0  # one List call, connection included
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # a node with many pods answers more than gRPC's 4 MiB default (as dcgm-exporter)
LIST_METHOD = "/v1.PodResourcesLister/List"
INSTALL_HINT = "--kubelet-socket needs gRPC: pip install 'gpuscope-inference[kubernetes]'"


class KubeletError(GpuscopeError):
    """A ``--kubelet-socket`` that cannot be used (missing, not a socket, gRPC not installed)."""


@dataclass(frozen=True, slots=True, order=True)
class PodRef:
    """A container that holds a GPU."""

    namespace: str
    pod: str
    container: str


# ---- which GPU a device id names ------------------------------------------------------------------

_GKE = re.compile(r"nvidia(\d{1,4})(?:/gi\d+)?(?:/vgpu\d+)?")


def is_gpu_resource(name: str) -> bool:
    """The extended resources NVIDIA's and GKE's device plugins advertise: ``nvidia.com/gpu``, its
    time-sliced rename ``nvidia.com/gpu.shared`` and the MIG profiles ``nvidia.com/mig-<profile>``."""
    return name in ("nvidia.com/gpu", "nvidia.com/gpu.shared") or name.startswith("nvidia.com/mig-")


def device_target(device_id: str) -> str | int:
    """The GPU a device id names: its UUID (``str``) or its index (``int``, from a GKE device name).

    ``GPU-x::2`` (NVIDIA's plugin, a time-sliced replica) → ``GPU-x``; ``MIG-GPU-x/1/0`` (a MIG device
    before driver R470) → ``GPU-x``; ``nvidia3``, ``nvidia3/gi1``, ``nvidia3/vgpu0`` (GKE) → 3; anything
    else, e.g. ``MIG-<uuid>`` (whose parent GPU only NVML knows: :func:`mig_parents`), is returned as it is.
    """
    if device_id.startswith("MIG-GPU-"):
        return device_id[4:].split("/", 1)[0]
    m = _GKE.fullmatch(device_id)
    if m:
        return int(m.group(1))
    return device_id.split("::", 1)[0] if "::" in device_id else device_id


Entry = tuple[str, str, str, str, Sequence[str]]  # namespace, pod, container, resource name, device ids


def assign(entries: Iterable[Entry], devices: Sequence[DeviceInfo],
           mig: Mapping[str, int] | None = None) -> dict[int, tuple[PodRef, ...]]:
    """GPU index → the containers that hold it (sorted, no repeats), from ``List``'s entries; ``mig`` maps
    MIG device UUIDs to their GPU's index (:func:`mig_parents`). Devices of other resources and ids that
    name none of ``devices`` are left out."""
    by_uuid = {**(mig or {}), **{d.uuid: d.index for d in devices}}
    indexes = {d.index for d in devices}
    held: dict[int, set[PodRef]] = {}
    for namespace, pod, container, resource, ids in entries:
        if not is_gpu_resource(resource):
            continue
        ref = PodRef(namespace, pod, container)
        for dev in ids:
            t = device_target(dev)
            index = t if isinstance(t, int) and t in indexes else by_uuid.get(t) if isinstance(t, str) else None
            if index is not None:
                held.setdefault(index, set()).add(ref)
    return {i: tuple(sorted(refs)) for i, refs in sorted(held.items())}


def mig_parents(nvml: Any, devices: Sequence[DeviceInfo]) -> dict[str, int]:
    """MIG device UUID (``MIG-…``, what NVIDIA's device plugin gives a container for ``nvidia.com/mig-*``)
    → the index of the GPU it is part of, asked of NVML (``nvml``: pynvml or the simulated one) for the
    GPUs in MIG mode; read once, at start. A GPU or slot NVML does not answer for is left out."""
    out: dict[str, int] = {}
    errors = (getattr(nvml, "NVMLError", Exception), AttributeError, TypeError, ValueError)
    for d in devices:
        if not d.mig_instances:
            continue
        try:
            h = nvml.nvmlDeviceGetHandleByIndex(d.index)
            slots = int(nvml.nvmlDeviceGetMaxMigDeviceCount(h))
        except errors:
            continue
        for k in range(min(slots, 64)):
            try:
                uuid = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, k))
            except errors:  # NotFound: an empty slot
                continue
            out[uuid.decode() if isinstance(uuid, bytes) else str(uuid)] = d.index
    return out


def entries_of(response: Any) -> list[Entry]:
    """A ``ListPodResourcesResponse`` message → :data:`Entry` rows."""
    return [(p.namespace, p.name, c.name, d.resource_name, tuple(d.device_ids))
            for p in response.pod_resources for c in p.containers for d in c.devices]


# ---- the exposition's part -------------------------------------------------------------------------

INFO_HELP = ("A container that holds the GPU, from the kubelet's pod-resources API (a time-sliced GPU has "
             "several; the DCGM series carry the first of them).")


def with_pod(label_text: str, ref: PodRef) -> str:
    """A ``{…}`` label set with dcgm-exporter's pod labels added, in its order (container, namespace, pod)."""
    return label_text[:-1] + "," + labels([("container", ref.container), ("namespace", ref.namespace),
                                           ("pod", ref.pod)])[1:]


class PodLabels:
    """What the exporter asks: DCGM label sets with pod labels (one per name set the exporter writes), and
    the info family; each is rebuilt only when the mapping changes (a new dict from :class:`PodMapper`)."""

    def __init__(self, current: Callable[[], Mapping[int, Sequence[PodRef]]]):
        self.current = current
        self._labels: dict[int, tuple[Mapping[int, Sequence[PodRef]], dict[int, str]]] = {}  # id(base) →
        self._info: tuple[Mapping[int, Sequence[PodRef]] | None, str] = (None, "")

    def dcgm_labels(self, base: Mapping[int, str], devs: Mapping[int, DeviceInfo]) -> dict[int, str]:
        """``base`` (GPU index → DCGM label set) with pod labels on the GPUs a container holds."""
        m = self.current()
        seen = self._labels.get(id(base))
        if seen is None or seen[0] is not m:
            seen = self._labels[id(base)] = (m, {i: with_pod(lab, m[i][0]) if m.get(i) else lab
                                                  for i, lab in base.items()})
        return seen[1]

    def info(self, devs: Mapping[int, DeviceInfo]) -> str:
        """The ``gpuscope_kubernetes_gpu_pod_info`` family ('' when no container holds a GPU)."""
        m = self.current()
        if self._info[0] is not m:
            name = "gpuscope_kubernetes_gpu_pod_info"
            rows = [f"{name}{labels([('gpu', i), ('uuid', devs[i].uuid), ('namespace', r.namespace), ('pod', r.pod), ('container', r.container)])} 1\n"  # noqa: E501
                    for i, refs in m.items() if i in devs for r in refs]
            self._info = (m, f"# HELP {name} {escape_help(INFO_HELP)}\n# TYPE {name} gauge\n{''.join(rows)}" if rows else "")
        return self._info[1]


# ---- the gRPC client -------------------------------------------------------------------------------

# api.proto's messages: name → fields (name, number, type, message type or None, repeated)
_S, _I64, _U64, _MSG = 9, 3, 4, 11  # FieldDescriptorProto.Type: string, int64, uint64, message
_MESSAGES: tuple[tuple[str, tuple[tuple[str, int, int, str | None, bool], ...]], ...] = (
    ("AllocatableResourcesRequest", ()),
    ("AllocatableResourcesResponse", (("devices", 1, _MSG, "ContainerDevices", True), ("cpu_ids", 2, _I64, None, True),
                                      ("memory", 3, _MSG, "ContainerMemory", True))),
    ("ListPodResourcesRequest", ()),
    ("ListPodResourcesResponse", (("pod_resources", 1, _MSG, "PodResources", True),)),
    ("PodResources", (("name", 1, _S, None, False), ("namespace", 2, _S, None, False),
                      ("containers", 3, _MSG, "ContainerResources", True))),
    ("ContainerResources", (("name", 1, _S, None, False), ("devices", 2, _MSG, "ContainerDevices", True),
                            ("cpu_ids", 3, _I64, None, True), ("memory", 4, _MSG, "ContainerMemory", True),
                            ("dynamic_resources", 5, _MSG, "DynamicResource", True))),
    ("ContainerMemory", (("memory_type", 1, _S, None, False), ("size", 2, _U64, None, False),
                         ("topology", 3, _MSG, "TopologyInfo", False))),
    ("ContainerDevices", (("resource_name", 1, _S, None, False), ("device_ids", 2, _S, None, True),
                          ("topology", 3, _MSG, "TopologyInfo", False))),
    ("TopologyInfo", (("nodes", 1, _MSG, "NUMANode", True),)),
    ("NUMANode", (("ID", 1, _I64, None, False),)),
    ("DynamicResource", (("claim_name", 2, _S, None, False), ("claim_namespace", 3, _S, None, False),
                         ("claim_resources", 4, _MSG, "ClaimResource", True))),
    ("ClaimResource", (("cdi_devices", 1, _MSG, "CDIDevice", True), ("driver_name", 2, _S, None, False),
                       ("pool_name", 3, _S, None, False), ("device_name", 4, _S, None, False))),
    ("CDIDevice", (("name", 1, _S, None, False),)),
    ("GetPodResourcesRequest", (("pod_name", 1, _S, None, False), ("pod_namespace", 2, _S, None, False))),
    ("GetPodResourcesResponse", (("pod_resources", 1, _MSG, "PodResources", False),)),
)
_METHODS = (("List", "ListPodResourcesRequest", "ListPodResourcesResponse"),
            ("GetAllocatableResources", "AllocatableResourcesRequest", "AllocatableResourcesResponse"),
            ("Get", "GetPodResourcesRequest", "GetPodResourcesResponse"))


def file_descriptor() -> Any:
    """api.proto as a ``FileDescriptorProto`` (package ``v1``, service ``PodResourcesLister``)."""
    from google.protobuf import descriptor_pb2

    f = descriptor_pb2.FileDescriptorProto(name="podresources_v1.proto", package="v1", syntax="proto3")
    f.options.go_package = "k8s.io/kubelet/pkg/apis/podresources/v1"
    for name, fields in _MESSAGES:
        m = f.message_type.add(name=name)
        for fname, number, typ, ref, repeated in fields:
            fd = m.field.add(name=fname, number=number, type=typ, label=3 if repeated else 1,
                             json_name=fname if fname == "ID" else re.sub(r"_(\w)", lambda x: x.group(1).upper(), fname))
            if ref is not None:
                fd.type_name = f".v1.{ref}"
    svc = f.service.add(name="PodResourcesLister")
    for name, req, resp in _METHODS:
        svc.method.add(name=name, input_type=f".v1.{req}", output_type=f".v1.{resp}").options.SetInParent()  # `{}`
    return f


def messages() -> dict[str, Any]:
    """Message classes of api.proto, from a private descriptor pool (no clash with another copy)."""
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    fd = pool.Add(file_descriptor())
    return {name: message_factory.GetMessageClass(fd.message_types_by_name[name]) for name, _ in _MESSAGES}


def check_socket(path: str) -> str:
    """``path`` if it is a Unix socket and gRPC is installed; else a :class:`KubeletError` (one line)."""
    shown = clean(path, 200)
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        raise KubeletError(f"--kubelet-socket {shown}: {getattr(e, 'strerror', None) or e} (mount the host's "
                           "/var/lib/kubelet/pod-resources into the container)") from None
    if not stat.S_ISSOCK(mode):
        raise KubeletError(f"--kubelet-socket {shown}: not a Unix socket")
    try:
        import google.protobuf  # noqa: F401
        import grpc  # noqa: F401
    except ImportError:
        raise KubeletError(INSTALL_HINT) from None
    return path


class PodMapper:
    """Fetches the GPU → containers mapping from the kubelet every ``refresh_s`` in a daemon thread.

    :meth:`current` is the last mapping (an empty dict until the first answer, or after a failure);
    ``note`` is told, once, when the kubelet stops answering and when it answers again.
    """

    def __init__(self, path: str, devices: Sequence[DeviceInfo], *, refresh_s: float = REFRESH_S,
                 timeout_s: float = TIMEOUT_S, note: Callable[[str], object] = lambda s: None,
                 mig: Mapping[str, int] | None = None):
        import grpc

        self.path = path
        self.devices = tuple(devices)
        self.mig = dict(mig or {})  # MIG device UUID → GPU index (mig_parents)
        self.refresh_s = refresh_s
        self.timeout_s = timeout_s
        self.note = note
        self.refreshes = 0
        self.failures = 0
        self.last_error: str | None = None
        self._mapping: dict[int, tuple[PodRef, ...]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        msgs = messages()
        self._request = msgs["ListPodResourcesRequest"]
        self._channel = grpc.insecure_channel(f"unix:{os.path.abspath(path)}", options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
        self._list = self._channel.unary_unary(LIST_METHOD, request_serializer=lambda m: m.SerializeToString(),
                                               response_deserializer=msgs["ListPodResourcesResponse"].FromString)

    def current(self) -> Mapping[int, tuple[PodRef, ...]]:
        return self._mapping

    def refresh(self) -> bool:
        """One ``List`` call; True when it answered. Never raises (a failure is noted and counted)."""
        try:
            response = self._list(self._request(), timeout=self.timeout_s)
            mapping = assign(entries_of(response), self.devices, self.mig)
        except Exception as e:  # noqa: BLE001 - any failure of the call or the answer: no pod labels, go on
            self.failures += 1
            self._mapping = {}
            first = self.last_error is None
            self.last_error = clean(_rpc_text(e), 200)
            if first:  # shown once (the note); the log file has each failure
                self.note(f"kubelet {self.path} not answering ({self.last_error}); series without pod labels "
                          f"until it does (retrying every {self.refresh_s:g} s)")
            log.log(logging.WARNING if first else logging.INFO, "kubelet pod-resources List failed: %s",
                    self.last_error, extra=SHOWN if first else None)
            return False
        self._mapping = mapping
        self.refreshes += 1
        if self.last_error is not None:
            self.note(f"kubelet {self.path} answering again: {len(mapping)} GPUs held by pods")
            self.last_error = None
        return True

    def start(self) -> PodMapper:
        """One refresh now (so the first scrape has the labels), then every ``refresh_s`` in a thread."""
        self.refresh()
        self._thread = threading.Thread(target=self._run, name="gpuscope-kubelet", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.refresh_s):
            self.refresh()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + 1)
        self._channel.close()


def _rpc_text(e: BaseException) -> str:
    """A gRPC error as its status and the first line of its details (``UNAVAILABLE: failed to connect…``);
    any other exception as :func:`one_line` gives it."""
    code, details = getattr(e, "code", None), getattr(e, "details", None)
    if not (callable(code) and callable(details)):
        return one_line(e)
    status = getattr(code(), "name", None) or type(e).__name__
    lines = (details() or "").strip().splitlines()
    return f"{status}: {lines[0]}" if lines else status

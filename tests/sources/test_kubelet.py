"""Kubernetes pod labels (sources/kubelet.py): device ids to GPUs as tables, the descriptor against protoc's
compile of the published api.proto, and a real gRPC server on a Unix socket (the kubelet's service, from
stubs grpcio-tools generates here from that .proto, independent of gpuscope's descriptor) feeding the
exporter, whose text prometheus_client's parser reads. Every GPU is simulated (SIMULATED H200s)."""

from __future__ import annotations

import importlib
import logging
import os
import re
import socket
import subprocess
import sys
import threading
from concurrent import futures
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2
from helpers import run_frames, sim_source, wait_for
from prometheus_client.parser import text_string_to_metric_families

from gpuscope.core.model import DeviceInfo
from gpuscope.outputs.prometheus import Renderer
from gpuscope.sources.kubelet import (
    DEFAULT_SOCKET,
    INSTALL_HINT,
    KubeletError,
    PodLabels,
    PodMapper,
    PodRef,
    assign,
    check_socket,
    device_target,
    file_descriptor,
    is_gpu_resource,
    mig_parents,
)

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "sources" / "podresources_v1.proto"
DEVS = [DeviceInfo(index=i, name="NVIDIA H200", uuid=f"GPU-{i:08x}-aaaa-bbbb-cccc-000000000000", bus_id=f"0000:{i:02x}:00.0")
        for i in range(4)]
U = [d.uuid for d in DEVS]


# ---- pure functions, as tables ----

@pytest.mark.parametrize("device_id,want", [
    (U[1], U[1]),  # NVIDIA device plugin, whole GPU
    (f"{U[2]}::3", U[2]),  # time-sliced replica
    (f"MIG-{U[3]}/1/0", U[3]),  # MIG device before R470: the parent's UUID inside
    ("MIG-5a1b2c3d-0000-1111-2222-333344445555", "MIG-5a1b2c3d-0000-1111-2222-333344445555"),  # parent unknown
    ("nvidia0", 0), ("nvidia7/gi2", 7), ("nvidia1/vgpu3", 1), ("nvidia2/gi1/vgpu0", 2),  # GKE device names
    ("nvidia", "nvidia"), ("nvidiaX", "nvidiaX"), ("nvidia1/ci0", "nvidia1/ci0"), ("", ""),
])
def test_device_target(device_id, want):
    assert device_target(device_id) == want


@pytest.mark.parametrize("name,gpu", [
    ("nvidia.com/gpu", True), ("nvidia.com/gpu.shared", True), ("nvidia.com/mig-1g.10gb", True),
    ("nvidia.com/mig-3g.40gb", True), ("nvidia.com/gpus", False), ("amd.com/gpu", False), ("cpu", False), ("", False),
])
def test_is_gpu_resource(name, gpu):
    assert is_gpu_resource(name) is gpu


def _ref(n: str) -> PodRef:
    return PodRef("ns", n, "c")


@pytest.mark.parametrize("entries,want", [
    ([], {}),
    ([("ns", "a", "c", "nvidia.com/gpu", [U[0], U[3]])], {0: (_ref("a"),), 3: (_ref("a"),)}),
    ([("ns", "a", "c", "nvidia.com/gpu", ["nvidia1"])], {1: (_ref("a"),)}),
    ([("ns", "a", "c", "nvidia.com/gpu", ["nvidia9"])], {}),  # no GPU 9 here
    ([("ns", "a", "c", "example.com/fpga", [U[0]])], {}),  # another resource naming a GPU's UUID: not ours
    ([("ns", "a", "c", "nvidia.com/gpu", ["GPU-unknown"])], {}),
    # time-slicing: two pods on GPU 2, sorted; the same pod twice once
    ([("ns", "b", "c", "nvidia.com/gpu", [f"{U[2]}::1"]), ("ns", "a", "c", "nvidia.com/gpu", [f"{U[2]}::0"]),
      ("ns", "a", "c", "nvidia.com/gpu", [f"{U[2]}::2"])], {2: (_ref("a"), _ref("b"))}),
    ([("ns", "a", "c", "nvidia.com/mig-1g.18gb", [f"MIG-{U[1]}/7/0"])], {1: (_ref("a"),)}),
])
def test_assign(entries, want):
    assert assign(entries, DEVS) == want


# ---- the descriptor is the published .proto's ----

def test_descriptor_equals_protoc_compile_of_the_proto(tmp_path):
    from grpc_tools import protoc

    out = tmp_path / "ds.pb"
    assert protoc.main(["protoc", f"-I{PROTO.parent}", f"--descriptor_set_out={out}", str(PROTO)]) == 0
    (theirs,) = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    assert file_descriptor() == theirs


# ---- a real gRPC server that implements the proto ----

@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> tuple[ModuleType, ModuleType]:
    """``podresources_v1_pb2`` and ``_pb2_grpc``, generated from the .proto by grpcio-tools."""
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("stubs")
    assert protoc.main(["protoc", f"-I{PROTO.parent}", f"--python_out={out}", f"--grpc_python_out={out}", str(PROTO)]) == 0
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module("podresources_v1_pb2"), importlib.import_module("podresources_v1_pb2_grpc")
    finally:
        sys.path.remove(str(out))


class Kubelet:
    """A pod-resources server on a Unix socket: ``pods`` is what List answers ([(ns, pod, [(container,
    resource, [ids])])]); ``garbage`` bytes, when set, are answered instead of a message."""

    def __init__(self, stubs: tuple[ModuleType, ModuleType], path: Path):
        pb2, pb2_grpc = stubs
        self.pb2 = pb2
        self.path = path
        self.pods: list[tuple[str, str, list[tuple[str, str, list[str]]]]] = []
        self.garbage: bytes | None = None
        self.calls = 0
        outer = self

        class Lister(pb2_grpc.PodResourcesListerServicer):  # type: ignore[name-defined,misc]
            def List(self, request: Any, context: Any) -> Any:  # noqa: N802
                outer.calls += 1
                return outer.response()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb2_grpc.add_PodResourcesListerServicer_to_server(Lister(), self.server)
        assert self.server.add_insecure_port(f"unix:{path}") == 1
        self.server.start()

    def response(self) -> Any:
        pb2 = self.pb2
        return pb2.ListPodResourcesResponse(pod_resources=[
            pb2.PodResources(namespace=ns, name=pod, containers=[
                pb2.ContainerResources(name=c, devices=[pb2.ContainerDevices(resource_name=res, device_ids=ids)],
                                       cpu_ids=[1, 2])
                for c, res, ids in containers])
            for ns, pod, containers in self.pods])

    def stop(self) -> None:
        self.server.stop(None)


class GarbageKubelet:
    """A gRPC server on a Unix socket whose List answers bytes that are not a ListPodResourcesResponse."""

    def __init__(self, path: Path, data: bytes):
        handler = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
            "List": grpc.unary_unary_rpc_method_handler(lambda req, ctx: data, request_deserializer=None,
                                                        response_serializer=None)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
        assert self.server.add_insecure_port(f"unix:{path}") == 1
        self.server.start()

    def stop(self) -> None:
        self.server.stop(None)


@pytest.fixture
def kubelet(stubs, tmp_path):
    k = Kubelet(stubs, tmp_path / "kubelet.sock")
    yield k
    k.stop()


def scrape(renderer: Renderer, frame: Any) -> dict[str, list[dict[str, str]]]:
    """prometheus_client's reading of one render: sample name → label sets."""
    out: dict[str, list[dict[str, str]]] = {}
    for fam in text_string_to_metric_families(renderer.render(frame)):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s.labels)
    return out


def test_pod_labels_on_the_right_simulated_gpu(kubelet):
    src = sim_source("h200-nvswitch-8", at=20.0)
    try:
        inv = src.inventory
        (frame,) = run_frames(src, 20.0, 20.0)
    finally:
        src.close()
    u = [d.uuid for d in inv.devices]
    kubelet.pods = [
        ("serving", "vllm-0", [("engine", "nvidia.com/gpu", [u[2], u[5]]), ("sidecar", "cpu", ["0"])]),
        ("batch", "train-1", [("trainer", "nvidia.com/gpu", ["nvidia7"])]),
        ("shared", "a", [("x", "nvidia.com/gpu", [f"{u[0]}::1"])]),
        ("shared", "b", [("y", "nvidia.com/gpu", [f"{u[0]}::0"])]),
    ]
    notes: list[str] = []
    mapper = PodMapper(str(kubelet.path), inv.devices, refresh_s=3600, note=notes.append).start()
    try:
        assert mapper.refreshes == 1 and kubelet.calls == 1 and not notes
        r = Renderer(inv, pods=PodLabels(mapper.current))
        got = scrape(r, frame)
        by_gpu = {lab["gpu"]: lab for lab in got["DCGM_FI_DEV_GPU_TEMP"]}
        assert len(by_gpu) == 8
        want = {"2": ("serving", "vllm-0", "engine"), "5": ("serving", "vllm-0", "engine"),
                "7": ("batch", "train-1", "trainer"), "0": ("shared", "a", "x")}
        for g, lab in by_gpu.items():
            assert lab["UUID"] == u[int(g)]
            if g in want:
                assert (lab["namespace"], lab["pod"], lab["container"]) == want[g]
            else:
                assert not {"namespace", "pod", "container"} & set(lab), lab
        # the same labels on every DCGM family, none on gpuscope's own
        for name, sets in got.items():
            for lab in sets:
                if name.startswith("DCGM_") and lab.get("gpu") == "7":
                    assert lab.get("pod") == "train-1", name
                elif not name.startswith("DCGM_") and name != "gpuscope_kubernetes_gpu_pod_info":
                    assert "pod" not in lab, name
        info = {(lab["gpu"], lab["uuid"], lab["namespace"], lab["pod"], lab["container"])
                for lab in got["gpuscope_kubernetes_gpu_pod_info"]}
        assert info == {("2", u[2], "serving", "vllm-0", "engine"), ("5", u[5], "serving", "vllm-0", "engine"),
                        ("7", u[7], "batch", "train-1", "trainer"), ("0", u[0], "shared", "a", "x"),
                        ("0", u[0], "shared", "b", "y")}
        # the pod leaves: the next refresh takes its labels away
        kubelet.pods = kubelet.pods[1:2]
        assert mapper.refresh()
        got = scrape(r, frame)
        assert {lab["gpu"] for lab in got["DCGM_FI_DEV_GPU_TEMP"] if "pod" in lab} == {"7"}
    finally:
        mapper.stop()


@pytest.mark.parametrize("names", ["4.9", "both"])
def test_pod_labels_on_every_dcgm_name_set(kubelet, names):
    """--dcgm-names 4.9 and both: the renamed series (their own label set) carry the pod labels too."""
    frame, inv = _frame_and_inv()
    kubelet.pods = [("ns", "p", [("c", "nvidia.com/gpu", [inv.devices[2].uuid])])]
    mapper = PodMapper(str(kubelet.path), inv.devices, refresh_s=3600).start()
    try:
        got = scrape(Renderer(inv, dcgm_names=names, pods=PodLabels(mapper.current)), frame)
    finally:
        mapper.stop()
    dcgm = {name: sets for name, sets in got.items() if name.startswith("DCGM_")}
    assert dcgm
    for name, sets in dcgm.items():
        for lab in sets:
            assert (lab.get("pod"), lab.get("namespace"), lab.get("container")) == (
                ("p", "ns", "c") if lab["gpu"] == "2" else (None, None, None)), (name, lab)


def test_mig_devices_label_their_gpu(kubelet):
    """NVIDIA's device plugin gives a MIG device's own UUID (MIG-…); NVML says which GPU it is part of
    (simulated h100-mig: GPU0 split into 3 MIG devices, GPU1 whole)."""
    src = sim_source("h100-mig", at=20.0)
    try:
        inv = src.inventory
        (frame,) = run_frames(src, 20.0, 20.0)
        mig = mig_parents(src.nvml, inv.devices)
    finally:
        src.close()
    assert len(mig) == 3 and set(mig.values()) == {0} and all(u.startswith("MIG-") for u in mig)
    assert not set(mig) & {d.uuid for d in inv.devices}
    a, b, _c = sorted(mig)
    kubelet.pods = [("llm", "small-1", [("engine", "nvidia.com/mig-2g.20gb", [a])]),
                    ("llm", "small-2", [("engine", "nvidia.com/mig-2g.20gb", [b])]),
                    ("llm", "big", [("engine", "nvidia.com/gpu", [inv.devices[1].uuid])])]
    mapper = PodMapper(str(kubelet.path), inv.devices, refresh_s=3600, mig=mig).start()
    try:
        got = scrape(Renderer(inv, pods=PodLabels(mapper.current)), frame)
    finally:
        mapper.stop()
    assert {(s["gpu"], s["pod"]) for s in got["gpuscope_kubernetes_gpu_pod_info"]} == {
        ("0", "small-1"), ("0", "small-2"), ("1", "big")}
    assert {s["gpu"]: s.get("pod") for s in got["DCGM_FI_DEV_FB_USED"]} == {"0": "small-1", "1": "big"}
    # without NVML's answer the MIG devices name no GPU
    assert assign([("llm", "small-1", "engine", "nvidia.com/mig-2g.20gb", [a])], inv.devices) == {}


def test_mig_parents_without_an_answer_is_empty():
    from dataclasses import replace

    migged = [replace(d, mig_instances=2) for d in DEVS]
    assert mig_parents(None, migged) == {}  # no NVML
    assert mig_parents(object(), migged) == {}  # one without the calls
    assert mig_parents(None, DEVS) == {}  # no GPU in MIG mode: NVML is not asked


def _frame_and_inv() -> tuple[Any, Any]:
    src = sim_source("mixed-4", at=20.0)
    try:
        return run_frames(src, 20.0, 20.0)[0], src.inventory
    finally:
        src.close()


def test_a_kubelet_that_goes_away_is_one_note_and_no_pod_labels_then_back(stubs, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="gpuscope")
    frame, inv = _frame_and_inv()
    path = tmp_path / "kubelet.sock"
    k = Kubelet(stubs, path)
    k.pods = [("ns", "p", [("c", "nvidia.com/gpu", [inv.devices[1].uuid])])]
    notes: list[str] = []
    mapper = PodMapper(str(path), inv.devices, refresh_s=3600, timeout_s=1.0, note=notes.append).start()
    r = Renderer(inv, pods=PodLabels(mapper.current))
    try:
        assert any("pod" in lab for lab in scrape(r, frame)["DCGM_FI_DEV_GPU_TEMP"])
        k.stop()
        assert not mapper.refresh() and not mapper.refresh()
        assert len(notes) == 1 and "not answering" in notes[0] and "UNAVAILABLE" in notes[0], notes
        # one warning, marked as shown (the note said it: cli/logs keeps it off stderr); the next at INFO
        warned = [r for r in caplog.records if r.name == "gpuscope.sources.kubelet"]
        assert [(r.levelno, getattr(r, "shown", False)) for r in warned] == [(logging.WARNING, True), (logging.INFO, False)]
        got = scrape(r, frame)
        assert not any("pod" in lab for lab in got["DCGM_FI_DEV_GPU_TEMP"])
        assert "gpuscope_kubernetes_gpu_pod_info" not in got
        k = Kubelet(stubs, path)  # the kubelet restarts (a new socket at the same path)
        k.pods = [("ns", "p", [("c", "nvidia.com/gpu", [inv.devices[1].uuid])])]
        assert wait_for(mapper.refresh, timeout=10, what="the mapper to reconnect")
        assert len(notes) == 2 and "answering again: 1 GPUs" in notes[1]
        assert [lab["gpu"] for lab in scrape(r, frame)["DCGM_FI_DEV_GPU_TEMP"] if "pod" in lab] == ["1"]
    finally:
        mapper.stop()
        k.stop()


@pytest.mark.parametrize("data,decodes", [
    (b"\xff\xff\xff", False), (b"\x08" * 7, False),  # not the wire format
    (b"\x0a\x05\x12\x03abc", True),  # a pod with a namespace "abc" and no containers: decodes, names no GPU
])
def test_a_garbage_answer_is_a_note_not_a_crash(tmp_path, data, decodes):
    _frame, inv = _frame_and_inv()
    k = GarbageKubelet(tmp_path / "kubelet.sock", data)
    notes: list[str] = []
    try:
        mapper = PodMapper(str(tmp_path / "kubelet.sock"), inv.devices, timeout_s=2.0, note=notes.append)
        ok = mapper.refresh()
        mapper.stop()
    finally:
        k.stop()
    assert ok is decodes and mapper.current() == {}
    if not decodes:
        assert len(notes) == 1 and "not answering (INTERNAL: Exception deserializing response" in notes[0], notes


def test_a_socket_nobody_answers_on_times_out(tmp_path):
    """A Unix socket that accepts and never speaks HTTP/2: the call ends at its timeout."""
    _frame, inv = _frame_and_inv()
    path = tmp_path / "kubelet.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(4)
    conns: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    notes: list[str] = []
    try:
        mapper = PodMapper(str(path), inv.devices, timeout_s=0.5, note=notes.append)
        assert not mapper.refresh()
        mapper.stop()
        assert len(notes) == 1 and ("DEADLINE_EXCEEDED" in notes[0] or "UNAVAILABLE" in notes[0]), notes
    finally:
        stop.set()
        t.join()
        for c in conns:
            c.close()
        srv.close()


# ---- start-up checks: one line ----

def test_check_socket(tmp_path, monkeypatch):
    with pytest.raises(KubeletError, match=r"^--kubelet-socket .*/nope: No such file or directory \(mount the host's"):
        check_socket(str(tmp_path / "nope"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(KubeletError, match="not a Unix socket"):
        check_socket(str(tmp_path / "file"))
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "k.sock"))
    try:
        assert check_socket(str(tmp_path / "k.sock")) == str(tmp_path / "k.sock")
        monkeypatch.setitem(sys.modules, "grpc", None)  # as if gpuscope-inference[kubernetes] were not installed
        with pytest.raises(KubeletError, match=re.escape(INSTALL_HINT)):
            check_socket(str(tmp_path / "k.sock"))
    finally:
        s.close()


def test_kubelet_socket_alone_takes_the_kubelets_path():
    from gpuscope.cli.main import build_parser

    ns = build_parser(["agent"])["agent"].parse_args(["--prometheus", "0", "--kubelet-socket"])
    assert ns.kubelet_socket == DEFAULT_SOCKET == "/var/lib/kubelet/pod-resources/kubelet.sock"


def _gpuscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("args,msg", [
    (["--prometheus", "0", "--kubelet-socket", "/nonexistent/kubelet.sock"],
     "gpuscope: error: --kubelet-socket /nonexistent/kubelet.sock: No such file or directory"),
    (["--broker", "mqtt://127.0.0.1:1", "--kubelet-socket", "/x"], "--kubelet-socket needs --prometheus"),
])
def test_agent_kubelet_flag_errors_are_one_line(args, msg):
    p = _gpuscope("agent", "--simulate", "mixed-4", *args)
    assert p.returncode == 2 and msg in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_agent_serves_pod_labels_from_a_real_kubelet_socket(kubelet):
    """The agent command, end to end: a simulated 8-GPU host, the kubelet's socket, a scrape."""
    import urllib.request

    from helpers import free_port

    src = sim_source("h200-nvswitch-8")
    u = [d.uuid for d in src.inventory.devices]
    src.close()
    kubelet.pods = [("serving", "vllm-0", [("engine", "nvidia.com/gpu", [u[3]])])]
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "gpuscope", "agent", "--simulate", "h200-nvswitch-8", "--prometheus",
                          f"127.0.0.1:{port}", "--kubelet-socket", str(kubelet.path)], stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "NODE_NAME": "gpu-node-7"})
    try:
        assert p.stderr is not None
        first = p.stderr.readline()
        assert f"with pod labels from {kubelet.path}" in first, first

        def labelled() -> list[dict[str, str]]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                text = resp.read().decode()
            fams = {f.name: f for f in text_string_to_metric_families(text)}
            return [s.labels for s in fams["DCGM_FI_DEV_GPU_TEMP"].samples] if "DCGM_FI_DEV_GPU_TEMP" in fams else []

        sets = wait_for(labelled, timeout=30, what="a scrape with GPU series")
        assert [(s["gpu"], s.get("pod"), s.get("namespace"), s.get("container")) for s in sets if "pod" in s] == [
            ("3", "vllm-0", "serving", "engine")]
        assert {s["hostname"] for s in sets} == {"gpu-node-7"}  # the node (downward API), not the pod's host name
    finally:
        p.terminate()
        p.communicate(timeout=15)
    assert kubelet.calls >= 1


@pytest.mark.slow
def test_agent_with_a_dead_kubelet_says_so_once_and_serves_without_pod_labels(tmp_path):
    """A socket file nobody listens on (a kubelet that died): one line on stderr, then the series as usual."""
    import urllib.request

    from helpers import free_port

    path = tmp_path / "kubelet.sock"
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))  # bound, never listening: connections are refused
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "gpuscope", "agent", "--simulate", "mixed-4", "--prometheus",
                          f"127.0.0.1:{port}", "--kubelet-socket", str(path)], stderr=subprocess.PIPE, text=True)
    try:
        assert p.stderr is not None
        note, started = p.stderr.readline(), p.stderr.readline()
        assert note.startswith(f"gpuscope agent: kubelet {path} not answering (UNAVAILABLE") and "until it does" in note
        assert "serving http://" in started, started

        def series() -> list[dict[str, str]]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                fams = {f.name: f for f in text_string_to_metric_families(resp.read().decode())}
            return [s.labels for s in fams["DCGM_FI_DEV_GPU_TEMP"].samples] if "DCGM_FI_DEV_GPU_TEMP" in fams else []

        sets = wait_for(series, timeout=30, what="GPU series")
        assert sets and not any("pod" in s for s in sets)
    finally:
        p.terminate()
        _out, err = p.communicate(timeout=15)
        dead.close()
    assert p.returncode == 0 and "Traceback" not in err and "not answering" not in err, err

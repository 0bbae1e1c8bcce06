"""Fuzz the kubelet's answers (sources/kubelet.py): whatever comes back on the pod-resources socket, the
agent notes one line or labels GPUs, and the exporter's text still parses; never a traceback.

Two inputs: arbitrary bytes answered by a real gRPC server on a Unix socket (the wire), and well-formed
answers with hostile names and device ids (the mapping and the label values)."""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc
import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from gpuscope.core.model import DeviceInfo, Frame, GpuReading, Inventory
from gpuscope.core.text import clean
from gpuscope.outputs.prometheus import Renderer
from gpuscope.sources.kubelet import (
    KubeletError,
    PodLabels,
    PodMapper,
    assign,
    check_socket,
    entries_of,
    messages,
)

DEVS = tuple(DeviceInfo(index=i, name="SIMULATED GPU", uuid=f"GPU-{i:08x}-0000-4000-8000-000000000000",
                        bus_id=f"0000:{i:02x}:00.0") for i in range(4))
INV = Inventory(host="fuzz", devices=DEVS, pairs=(), source="simulated", simulated=True)
FRAME = Frame(t=0.0, gpus=tuple(GpuReading(index=d.index, temp_gpu_c=40) for d in DEVS))
MSG = messages()
CURRENT: list[Any] = [{}]  # the mapping RENDERER's pod labels read (one renderer: building one per example is slow)
RENDERER = Renderer(INV, pods=PodLabels(lambda: CURRENT[0]))


def fuzz(n: int) -> settings:
    return settings(derandomize=True, deadline=None, database=None, max_examples=examples(n),
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def parses(renderer: Renderer) -> list[Any]:
    return [s for fam in text_string_to_metric_families(renderer.render(FRAME)) for s in fam.samples]


@pytest.fixture(scope="module")
def garbage_server(tmp_path_factory):
    """A gRPC server whose List answers ``box[0]`` as the raw response bytes."""
    box = [b""]
    path = tmp_path_factory.mktemp("kubelet") / "kubelet.sock"
    handler = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
        "List": grpc.unary_unary_rpc_method_handler(lambda req, ctx: box[0])})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
    assert server.add_insecure_port(f"unix:{path}") == 1
    server.start()
    yield path, box
    server.stop(None)


@fuzz(150)
@given(data=st.binary(max_size=300) | st.sampled_from([b"\x0a\x80\x80\x80\x80\x10", b"\x0a\x02\x1a\x00" * 40]))
def test_any_bytes_on_the_socket_are_a_note_or_a_mapping(garbage_server, data):
    path, box = garbage_server
    box[0] = data
    notes: list[str] = []
    mapper = PodMapper(str(path), DEVS, timeout_s=5.0, note=notes.append)
    try:
        ok = mapper.refresh()
    finally:
        mapper.stop()
    assert ok or (len(notes) == 1 and "\n" not in notes[0] and "\x1b" not in notes[0])
    assert set(mapper.current()) <= {d.index for d in DEVS}
    CURRENT[0] = mapper.current()
    parses(RENDERER)


hostile = st.text(max_size=20) | st.sampled_from(["\x1b[2J", "a\"b\\c", "\n", "\u202e", "", "x" * 300])
device_ids = st.lists(st.sampled_from([d.uuid for d in DEVS]).flatmap(
    lambda u: st.sampled_from([u, f"{u}::3", f"MIG-{u}/1/0", f"MIG-{u}"]))
    | st.sampled_from(["nvidia0", "nvidia3/gi1", "nvidia2/vgpu1", "nvidia99", "nvidia-1"]) | hostile, max_size=4)
resources = st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared", "cpu"]) | hostile
pods = st.lists(st.tuples(hostile, hostile, st.lists(st.tuples(hostile, resources, device_ids), max_size=3)), max_size=5)


@fuzz(200)
@given(spec=pods)
def test_hostile_answers_label_gpus_and_the_text_still_parses(spec):
    msg = MSG["ListPodResourcesResponse"](pod_resources=[
        MSG["PodResources"](namespace=ns, name=pod, containers=[
            MSG["ContainerResources"](name=c, devices=[MSG["ContainerDevices"](resource_name=r, device_ids=ids)])
            for c, r, ids in containers]) for ns, pod, containers in spec])
    wire = MSG["ListPodResourcesResponse"].FromString(msg.SerializeToString())
    mapping = assign(entries_of(wire), DEVS)
    CURRENT[0] = mapping
    samples = parses(RENDERER)
    for s in samples:
        if s.name == "DCGM_FI_DEV_GPU_TEMP" and int(s.labels["gpu"]) in mapping:
            first = mapping[int(s.labels["gpu"])][0]
            assert (s.labels["namespace"], s.labels["pod"], s.labels["container"]) == (
                clean(first.namespace, 256), clean(first.pod, 256), clean(first.container, 256))
        elif s.name == "DCGM_FI_DEV_GPU_TEMP":
            assert "pod" not in s.labels


@fuzz(100)
@given(path=st.text(max_size=40) | st.sampled_from(["", "/", "/dev/null", "/proc/self", "\x00", "a\x1b[2Jb", "/tmp/" + "x" * 300]))
def test_any_kubelet_socket_path_is_a_one_line_error(path):
    with pytest.raises(KubeletError) as e:
        check_socket(path)
    assert "\n" not in str(e.value) and "\x1b" not in str(e.value)

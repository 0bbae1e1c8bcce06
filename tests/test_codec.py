from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.core.codec import (
    CodecError,
    frame_from_dict,
    frame_to_dict,
    from_dict,
    inventory_from_dict,
    inventory_to_dict,
    to_dict,
)
from gpuscope.core.model import (
    DeviceInfo,
    EndpointReading,
    Event,
    Frame,
    GpuReading,
    Inventory,
    PairLink,
    ProcessInfo,
)

# floats that survive the codec's rounding exactly (3 decimals, or whole numbers from 1000 up)
small = st.integers(-10**6, 10**6).map(lambda k: k / 8)
nice_float = st.one_of(st.integers(0, 10**12).map(float), small.filter(lambda x: abs(x) < 1000))
opt = lambda s: st.none() | s  # noqa: E731

readings = st.builds(
    GpuReading, index=st.integers(0, 7), lost=st.booleans(), util_gpu_pct=opt(nice_float), power_w=opt(nice_float),
    sm_clock_mhz=opt(st.integers(0, 3000)), pcie_gen=opt(st.integers(1, 6)), pcie_width=opt(st.sampled_from([1, 8, 16])),
    pcie_rx_bytes_per_s=opt(nice_float), nvlink_tx_bytes_per_s=opt(nice_float), temp_mem_c=opt(nice_float),
    clock_event_reasons=opt(st.integers(0, 0x3FF)), pcie_replay_count=opt(st.integers(0, 2**40)),
    processes=opt(st.lists(st.builds(ProcessInfo, pid=st.integers(1, 2**22), used_memory_bytes=opt(st.integers(0, 2**40)),
                                     name=opt(st.text(max_size=10))), max_size=3).map(tuple)),
)
endpoints = st.builds(EndpointReading, url=st.text(min_size=1, max_size=20), kind=opt(st.sampled_from(["vllm", "sglang"])),
                      gen_tokens_per_s=opt(nice_float), up=st.booleans(), error=opt(st.text(max_size=20)))
events = st.builds(Event, t=st.integers(0, 2 * 10**9).map(lambda x: x / 1000), kind=st.sampled_from(["marker", "gpu_lost"]),
                   text=st.text(max_size=30), data=st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))
frames = st.builds(Frame, t=st.integers(0, 2 * 10**12).map(lambda x: x / 1000), gpus=st.lists(readings, max_size=4).map(tuple),
                   endpoints=st.lists(endpoints, max_size=2).map(tuple), events=st.lists(events, max_size=2).map(tuple))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(frames)
def test_frame_round_trip(frame):
    d = frame_to_dict(frame)
    text = json.dumps(d)  # JSON-ready
    assert frame_from_dict(json.loads(text)) == frame


devices = st.builds(DeviceInfo, index=st.integers(0, 7), name=st.text(max_size=20), uuid=st.text(max_size=40),
                    bus_id=st.text(max_size=16), numa_node=opt(st.integers(0, 7)), power_limit_w=opt(nice_float),
                    nvlinks_active=st.integers(0, 18), gpm_supported=st.booleans())
inventories = st.builds(Inventory, host=st.text(max_size=10), devices=st.lists(devices, max_size=3).map(tuple),
                        pairs=st.lists(st.builds(PairLink, a=st.integers(0, 3), b=st.integers(4, 7),
                                                 pcie_path=st.sampled_from(["PIX", "SYS"]), nvlinks=st.integers(0, 18)),
                                       max_size=3).map(tuple), simulated=st.booleans(), scenario=opt(st.text(max_size=8)))


@settings(max_examples=100, deadline=None)
@given(inventories)
def test_inventory_round_trip(inv):
    assert inventory_from_dict(json.loads(json.dumps(inventory_to_dict(inv)))) == inv


def test_none_is_omitted_never_zero():
    d = frame_to_dict(Frame(t=1.0, gpus=(GpuReading(index=0, util_gpu_pct=0.0),)))
    assert d["gpus"][0] == {"index": 0, "util_gpu_pct": 0}
    back = frame_from_dict(d).gpus[0]
    assert back.util_gpu_pct == 0.0 and back.power_w is None


@pytest.mark.parametrize("bad,where", [
    ({"t": "x", "gpus": []}, "frame.t"),
    ({"gpus": []}, "missing field t"),
    ({"t": 1, "gpus": [{"index": "0"}]}, "frame.gpus[0].index"),
    ({"t": 1, "gpus": [{"index": 0, "lost": 1}]}, "frame.gpus[0].lost"),
    ({"t": 1, "gpus": {"index": 0}}, "frame.gpus"),
    ({"t": 1, "gpus": [], "events": [{"t": 1, "kind": 3}]}, "frame.events[0].kind"),
    ([1, 2], "expected an object"),
    ({"t": 1, "gpus": [{"index": 0, "power_w": True}]}, "frame.gpus[0].power_w"),
])
def test_bad_input_names_the_field(bad, where):
    with pytest.raises(CodecError, match=where.replace("[", r"\[").replace("]", r"\]")):
        frame_from_dict(bad)


def test_unknown_fields_from_newer_writers_are_ignored():
    f = frame_from_dict({"t": 2, "gpus": [{"index": 0, "future_metric": 5}], "new_key": 1})
    assert f.gpus[0].index == 0


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4)))
def test_garbage_never_crashes_the_decoder(garbage):
    try:
        frame_from_dict(garbage)
    except CodecError:
        pass


def test_to_dict_rounds_floats_compactly():
    assert to_dict(GpuReading(index=0, power_w=123.456789))["power_w"] == 123.457
    assert to_dict(GpuReading(index=0, pcie_rx_bytes_per_s=3.9e9 + 0.4))["pcie_rx_bytes_per_s"] == 3_900_000_000
    assert from_dict(GpuReading, {"index": 1}).index == 1

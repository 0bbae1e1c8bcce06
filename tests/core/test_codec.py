from __future__ import annotations

import dataclasses
import json

import pytest
from helpers import examples
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

# floats that survive the codec's rounding exactly (4 significant digits, or whole numbers from 1000 up)
small = st.tuples(st.integers(-9999, 9999), st.integers(0, 6)).map(lambda ke: ke[0] / 10 ** ke[1])
nice_float = st.one_of(st.integers(0, 10**12).map(float), small.filter(lambda x: abs(x) < 1000))
opt = lambda s: st.none() | s  # noqa: E731
# values inside the validation gate's physical ranges (out-of-range values are dropped: tests/e2e/test_damage.py)
pct = st.integers(0, 1000).map(lambda k: k / 10)  # 4 significant digits survive the codec
watts = st.integers(0, 9999).map(lambda k: k / 10)
rate = st.integers(0, 10**12).map(float)
safe_text = lambda n: st.text(st.characters(blacklist_categories=("Cc", "Cf", "Cs")), max_size=n)  # noqa: E731

readings = st.builds(
    GpuReading, index=st.integers(0, 7), lost=st.booleans(), util_gpu_pct=opt(pct), power_w=opt(watts),
    sm_clock_mhz=opt(st.integers(0, 3000)), pcie_gen=opt(st.integers(1, 6)), pcie_width=opt(st.sampled_from([1, 8, 16])),
    pcie_rx_bytes_per_s=opt(rate), nvlink_tx_bytes_per_s=opt(rate), temp_mem_c=opt(pct),
    clock_event_reasons=opt(st.integers(0, 0x3FF)), pcie_replay_count=opt(st.integers(0, 2**40)),
    processes=opt(st.lists(st.builds(ProcessInfo, pid=st.integers(1, 2**22), used_memory_bytes=opt(st.integers(0, 2**40)),
                                     name=opt(safe_text(10)), user=opt(safe_text(8)), command=opt(safe_text(40)),
                                     sm_pct=opt(pct), mem_pct=opt(pct), kind=st.sampled_from(["C", "G", "C+G"])),
                           max_size=3).map(tuple)),
)
endpoints = st.builds(EndpointReading, url=safe_text(20).filter(bool), kind=opt(st.sampled_from(["vllm", "sglang"])),
                      gen_tokens_per_s=opt(small.filter(lambda x: 0 <= x < 1000)), up=st.booleans(), error=opt(safe_text(20)))
events = st.builds(Event, t=st.integers(0, 2 * 10**9).map(lambda x: x / 1000), kind=st.sampled_from(["marker", "gpu_lost"]),
                   text=safe_text(30), data=st.dictionaries(safe_text(5), st.integers(), max_size=3))
frames = st.builds(Frame, t=st.integers(0, 2 * 10**12).map(lambda x: x / 1000), gpus=st.lists(readings, max_size=4, unique_by=lambda g: g.index).map(tuple),
                   endpoints=st.lists(endpoints, max_size=2).map(tuple), events=st.lists(events, max_size=2).map(tuple))


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None)
@given(frames)
def test_frame_round_trip(frame):
    d = frame_to_dict(frame)
    text = json.dumps(d)  # JSON-ready
    assert frame_from_dict(json.loads(text)) == frame


devices = st.builds(DeviceInfo, index=st.integers(0, 7), name=safe_text(20), uuid=safe_text(40),
                    bus_id=safe_text(16), numa_node=opt(st.integers(0, 7)), power_limit_w=opt(watts),
                    nvlinks_active=st.integers(0, 18), gpm_supported=st.booleans())
def _numbered(devs: list[DeviceInfo]) -> tuple[DeviceInfo, ...]:
    return tuple(dataclasses.replace(d, index=i) for i, d in enumerate(devs))  # the gate wants 0…n−1


inventories = st.builds(Inventory, host=safe_text(10).filter(bool),
                        devices=st.lists(devices, min_size=1, max_size=8).map(_numbered),
                        pairs=st.lists(st.builds(PairLink, a=st.integers(0, 3), b=st.integers(4, 7),
                                                 pcie_path=st.sampled_from(["PIX", "SYS"]), nvlinks=st.integers(0, 18)),
                                       max_size=3, unique_by=lambda p: (p.a, p.b)).map(tuple),
                        simulated=st.booleans(), scenario=opt(safe_text(8)))


@settings(max_examples=examples(100), deadline=None)
@given(inventories)
def test_inventory_round_trip(inv):
    n = len(inv.devices)
    inv = dataclasses.replace(inv, pairs=tuple(p for p in inv.pairs if p.b < n))
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
@settings(max_examples=examples(300), deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4)))
def test_garbage_never_crashes_the_decoder(garbage):
    try:
        frame_from_dict(garbage)
    except CodecError:
        pass


def test_to_dict_rounds_floats_compactly():
    assert to_dict(GpuReading(index=0, power_w=123.456789))["power_w"] == 123.5  # 4 significant digits
    assert to_dict(EndpointReading(url="u", itl_mean_s=0.00371249))["itl_mean_s"] == 0.003712
    assert to_dict(GpuReading(index=0, pcie_rx_bytes_per_s=3.9e9 + 0.4))["pcie_rx_bytes_per_s"] == 3_900_000_000
    assert from_dict(GpuReading, {"index": 1}).index == 1

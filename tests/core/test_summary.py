"""The per-host summary (core/summary.py): the serving groups it carries to the fleet row."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from helpers import run_frames, sim_source

from gpuscope.core.groups import group_brief, short_gpus
from gpuscope.core.model import ServingGroup
from gpuscope.core.summary import SCHEMA, SummaryError, summarise, summary_from_dict, summary_to_dict


@pytest.mark.parametrize("gpus, want", [((0, 1), "GPU0+1"), ((2, 3, 4, 5), "GPU2–5"), ((0, 2, 5), "GPU0+2+5"),
                                        ((3,), "GPU3"), ((), "no GPU")])
def test_short_gpus(gpus, want):
    assert short_gpus(gpus) == want


@pytest.mark.parametrize("g, want", [
    (ServingGroup("vLLM", tp=2, gpus=(0, 1)), "vLLM TP=2 GPU0+1"),
    (ServingGroup("SGLang", tp=4, pp=2, gpus=tuple(range(8))), "SGLang TP=4 PP=2 GPU0–7"),
    (ServingGroup("python train.py", gpus=(2, 3, 4, 5)), "python train.py GPU2–5"),
])
def test_group_brief(g, want):
    assert group_brief(g) == want


def test_summary_carries_the_groups_and_reads_back():
    """A host running vLLM TP=2 on GPU0+GPU1 (and a trainer): the agent's summary says so, and a viewer reads
    it back from the wire."""
    src = sim_source("a6000-tp2-pcie-gen1")
    try:
        frames = run_frames(src, 0.0, 3.0)
    finally:
        src.close()
    groups = (ServingGroup("vLLM", kind="vllm", port=8000, tp=2, gpus=(0, 1)), ServingGroup("python train.py", gpus=(2,)))
    s = summarise(src.inventory, replace(frames[-1], groups=groups), seq=1)
    assert s.groups == ("vLLM TP=2 GPU0+1", "python train.py GPU2")
    wire = json.loads(json.dumps(summary_to_dict(s)))
    assert wire["groups"] == list(s.groups)
    assert summary_from_dict(wire).groups == s.groups


def test_summary_of_an_older_agent_without_groups_reads():
    d = {"schema": SCHEMA, "host": "old", "t": 1.0}
    assert summary_from_dict(d).groups == ()
    assert "groups" not in summary_to_dict(summary_from_dict(d))


@pytest.mark.parametrize("bad", [{"groups": "vLLM"}, {"groups": [3]}])
def test_summary_groups_of_the_wrong_shape_are_refused(bad):
    with pytest.raises(SummaryError):
        summary_from_dict({"schema": SCHEMA, "host": "h", "t": 1.0, **bad})


def test_summary_groups_are_bounded():
    d = {"schema": SCHEMA, "host": "h", "t": 1.0, "groups": ["x" * 500] * 50}
    s = summary_from_dict(d)
    assert len(s.groups) == 8 and all(len(g) <= 48 for g in s.groups)

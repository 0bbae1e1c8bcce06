"""Simulated servers: a scenario's [[servers]] give endpoint readings and serving groups, labelled simulated."""

from __future__ import annotations

import pytest

from gpuscope.core.findings import evaluate
from gpuscope.core.group_paths import group_line
from gpuscope.sources import scenario as scenario_mod
from gpuscope.sources.groups import WithGroups, with_groups
from gpuscope.sources.live import open_source
from gpuscope.sources.scenario import ScenarioError


def _sample(name: str, at: float):
    src = with_groups(open_source(name, virtual_at=at), name)
    try:
        assert isinstance(src, WithGroups)
        return src.inventory, src.sample()
    finally:
        src.close()


def test_design_story_group_tok_s_and_path():
    inv, f = _sample("a6000-tp2-pcie-gen1", 30.0)
    (g,) = f.groups
    assert g.simulated and (g.server, g.port, g.tp, g.gpus, g.pids) == ("vLLM", 8000, 2, (0, 1), (2811, 2812))
    assert group_line(g, inv, f) == "vLLM :8000 gemma-2-27b-it · TP=2 on GPU0+GPU1 · SYS, Gen1×16"
    (e,) = f.endpoints
    assert e.url == "http://localhost:8000" and 50 < (e.gen_tokens_per_s or 0) < 60
    cands = evaluate(inv, [f])
    msgs = [c.message for c in cands if c.rule == "group_path"]
    assert msgs and msgs[0].startswith("vLLM's TP=2 all-reduce crosses NUMA (SYS), no NVLink: at most 4.0 GB/s")
    assert not [c for c in cands if c.rule == "slow_path"]


def test_design_story_idle_phase_has_no_tokens():
    _inv, f = _sample("a6000-tp2-pcie-gen1", 2.0)
    assert f.endpoints[0].gen_tokens_per_s == 0.0


def test_mixed_4_two_groups_and_a_notebook():
    inv, f = _sample("mixed-4", 10.0)
    lines = [group_line(g, inv, f) for g in f.groups]
    assert lines[0].startswith("vLLM :8000 Qwen2.5-32B-Instruct · TP=2 on GPU0+GPU1 · NV4")
    assert lines[1].startswith("vLLM :8001 Mistral-Small-24B-Instruct-2501 · TP=2 on GPU2+GPU3 · NV4")
    assert lines[2].startswith("python3 -m ipykernel_launcher: GPU3")
    assert not [c for c in evaluate(inv, [f]) if c.rule == "group_path"]  # both on NVLink


BASE = """
name = "t"
[[gpus]]
count = 2
[[phases]]
name = "a"
duration_s = 5
[[processes]]
gpus = [0, 1]
pid = 10
command = "python3 -m vllm.entrypoints.openai.api_server"
"""


@pytest.mark.parametrize("server,err", [
    ('kind = "nope"\nport = 1\ngpus = [0]', "servers[0].kind"),
    ('port = 0\ngpus = [0]', "servers[0].port"),
    ('port = 80\ngpus = [5]', "servers[0].gpus"),
    ('port = 80\ngpus = [0]\ntp = 0', "servers[0].tp"),
    ('port = 80\ngpus = [0]\ntok_s = [1, 2]', "servers[0].tok_s"),
    ('port = 80\ngpus = [0]\ntp = 2', "servers[0].tp: tp × pp = 2 is more than its 1 GPU"),
    ('port = 80\ngpus = [0]\nrunning = [-1]', "servers[0].running"),
    ('port = 80\ngpus = [0]\nitl_ms = ["x"]', "servers[0].itl_ms"),
    ('port = 80\ngpus = [0]\nspeed = 3', "servers[0].speed"),
    ('port = 80\ngpus = [0]\npids = []', "servers[0].pids"),
])
def test_server_errors_name_the_field(tmp_path, server, err):
    p = tmp_path / "s.toml"
    p.write_text(BASE + "[[servers]]\n" + server + "\n")
    with pytest.raises(ScenarioError, match=err.replace("[", r"\[").replace("]", r"\]")):
        scenario_mod.load(str(p))


def test_every_shipped_scenario_still_loads():
    for name in scenario_mod.shipped():
        scenario_mod.load(name)


# ------------------------------------------------------------------ tok/s over a trailing window, as a poller reads it
PHASED = """
name = "phased"
noise = 0
[[gpus]]
count = 1
[[phases]]
name = "idle"
duration_s = 10
[[phases]]
name = "decode"
duration_s = 60
[[processes]]
gpus = [0]
pid = 10
command = "python3 -m vllm.entrypoints.openai.api_server"
[[servers]]
kind = "vllm"
port = 8000
gpus = [0]
tok_s = [0, 100]
"""


@pytest.fixture
def phased(tmp_path):
    p = tmp_path / "phased.toml"
    p.write_text(PHASED)
    return str(p)


@pytest.mark.parametrize("t,tok_s,window_s,running", [
    (0.0, 0.0, None, 0.0),  # the very start: the instant's
    (5.0, 0.0, 5.0, 0.0),  # since the start, while shorter than the window
    (10.0, 0.0, 10.0, 8.0),  # the decode phase has just begun: none of it in the window yet
    (12.5, 25.0, 10.0, 8.0),  # a quarter of the window in it
    (15.0, 50.0, 10.0, 8.0),
    (19.0, 90.0, 10.0, 8.0),
    (20.0, 100.0, 10.0, 8.0),  # the whole window in it
    (40.0, 100.0, 10.0, 8.0),
])
def test_a_simulated_server_reports_its_rate_over_a_trailing_window(phased, t, tok_s, window_s, running):
    """The simulated tok/s is a rate over the last 10 s (the mean of the phase's instant rate), not the phase's
    instant rate with a 10 s window claimed: a reading tells of its window's middle, as a real one does."""
    from gpuscope.sources.simservers import SimServers

    src = open_source(phased, virtual_at=t)
    try:
        servers = SimServers.for_source(src)
        assert servers is not None
        (e,) = servers.readings(t)
    finally:
        src.close()
    assert e.gen_tokens_per_s == pytest.approx(tok_s, abs=0.05)
    assert e.rate_window_s == window_s and e.requests_running == running


def test_a_marker_at_a_phase_change_credits_the_new_phase_to_its_own_span(phased, tmp_path):
    """Recorded at 1 Hz with a marker where decoding starts (t = 10 s): the span before it gets at most the
    window's blur of the new phase (with instant rates claimed over 10 s it got 5 s of it: 33 tok/s), the
    span after it the decode rate (less the ramp of its first window)."""
    from helpers import run_frames, sim_source

    from gpuscope.core.session import Session
    from gpuscope.core.stats import summarize_by_marker
    from gpuscope.outputs.recorder import Recorder
    from gpuscope.sources.recording import open_recording

    path = tmp_path / "r.jsonl.gz"
    src = with_groups(sim_source(phased), phased)  # the scenario's servers, as `record --simulate` has them
    s = Session(src.inventory, interval_s=1.0)
    s.start_recording(Recorder(str(path), src.inventory, command=["test"], interval_s=1.0, fsync=False))
    for k, f in enumerate(run_frames(src, 0, 39)):  # a frame a second from t = 0
        if k == 10:
            s.add_marker("decode", t=f.t)
        s.ingest(f)
    s.stop_recording()
    src.close()
    spans = summarize_by_marker(open_recording(str(path)))["spans"]
    assert [sp["label"] for sp in spans][-1] == "decode", spans
    before, after = (sp["endpoints"][0]["gen_tokens_per_s"] for sp in spans)
    assert before < 10 and after > 85, (before, after)

"""Command wiring end to end: `gpuscope demo`, `gpuscope replay FILE` and `gpuscope --broker URL` (pick a
host in the fleet screen) from cli.main into the TUI in a real terminal (tmux), and the inference panel
with real endpoint readings."""

from __future__ import annotations

import re
import threading

import pytest
from helpers import (
    FIXTURES,
    Tmux,
    gpuscope_cmd,
    needs_mosquitto,
    needs_tmux,
    run_frames,
    sim_source,
    wait_for,
)

from gpuscope.core.session import Session
from gpuscope.outputs.recorder import Recorder


@pytest.mark.slow
@needs_tmux
def test_demo_command_replays_the_bundled_recording():
    with Tmux(f"{gpuscope_cmd()} demo") as t:
        t.wait_screen("REPLAY", "h200-2gpu-load-phases.jsonl.gz (real recording)", "GPU0 H200", "GPU1 H200")

        def position() -> int | None:
            m = re.search(r"▶ +1× +(?:(\d+)m)?(\d+)s/", t.screen())
            return int(m.group(1) or 0) * 60 + int(m.group(2)) if m else None

        first = wait_for(position, 30, "the replay position")
        wait_for(lambda: (position() or 0) > first, 30, "the replay to play on")
        t.keys("q")
        t.wait_screen("EXITED 0", timeout=30)


@pytest.mark.slow
@needs_tmux
def test_replay_command_opens_a_file(tmp_path):
    path = tmp_path / "tp2.jsonl.gz"
    src = sim_source("a6000-tp2-pcie-gen1")
    s = Session(src.inventory)
    s.start_recording(Recorder(str(path), src.inventory))
    for f in run_frames(src, 0, 30):
        s.ingest(f)
    s.stop_recording()
    with Tmux(f"{gpuscope_cmd()} replay {path} --speed 4") as t:
        t.wait_screen("REPLAY", "tp2.jsonl.gz (SIMULATED recording)", "GPU0 RTX A6000", "Gen1×16")
        t.keys("q")
        t.wait_screen("EXITED 0", timeout=30)


@pytest.mark.slow
@needs_tmux
def test_replay_of_a_missing_file_is_one_line(tmp_path):
    with Tmux(f"{gpuscope_cmd()} replay {tmp_path / 'nope.jsonl.gz'}") as t:
        screen = t.wait_screen("EXITED 1", timeout=30)
        assert "gpuscope: error:" in screen and "no such file" in screen and "Traceback" not in screen


@pytest.mark.slow
@needs_tmux
@needs_mosquitto
def test_fleet_screen_picks_a_host_and_opens_its_full_view(broker):
    """Two agents (in-process publishers) on a real Mosquitto; `gpuscope --broker URL` lists them worst
    first; down + enter opens the second host's REMOTE view; esc (and q) go back to the fleet, q there quits."""
    from gpuscope.outputs.mqtt_publish import Publisher
    from gpuscope.sources.mqtt import parse_broker

    cfg = parse_broker(broker.url, env={})
    stop = threading.Event()
    pubs, threads = [], []
    for scenario in ("a6000-tp2-pcie-gen1", "power-capped"):
        src = sim_source(scenario)
        session = Session(src.inventory)
        pub = Publisher(cfg, src.inventory).start()
        pubs.append(pub)
        for f in run_frames(src, 0, 20):  # findings raised on the way travel in the frames
            pub.publish_frame(session.ingest(f))

        def keep_publishing(src=src, session=session, pub=pub) -> None:
            t = 21.0
            while not stop.wait(0.5):
                pub.publish_frame(session.ingest(run_frames(src, t, t)[0]))
                t += 1

        threads.append(threading.Thread(target=keep_publishing, daemon=True))
    for th in threads:
        th.start()
    try:
        with Tmux(f"{gpuscope_cmd()} --broker {broker.url}") as t:
            screen = t.wait_screen("FLEET", "sim-a6000-tp2", "sim-powercap", "connected")
            rows = [line for line in screen.splitlines() if "sim-" in line]
            assert "sim-a6000-tp2" in rows[0] and "sim-powercap" in rows[1], screen  # critical PCIe first
            t.keys("Down")
            t.keys("Enter")
            t.wait_screen("REMOTE", "GPU0 L40S", "GPU1 L40S", "q back to fleet")
            t.keys("Escape")  # esc goes back too
            t.wait_screen("FLEET", "sim-a6000-tp2")
            t.keys("Enter")
            t.wait_screen("REMOTE", "GPU0 L40S", "GPU1 L40S")
            t.keys("q")
            t.wait_screen("FLEET", "sim-a6000-tp2")
            t.keys("q")
            t.wait_screen("EXITED 0", timeout=30)
    finally:
        stop.set()
        for th in threads:
            th.join(5)
        for pub in pubs:
            pub.stop()


async def test_inference_panel_shows_real_endpoint_readings():
    """The inference panel with readings from the endpoint tracker over a real vLLM capture."""

    from gpuscope.core.model import EndpointReading
    from gpuscope.sources.endpoint import EndpointTracker
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.widgets.inference_panel import InferencePanel

    text = (FIXTURES / "inference" / "vllm_v1.txt").read_text()
    tr = EndpointTracker(url="http://gpu1:8000")
    tr.feed(0.0, text)
    tr.feed(10.0, re.sub(r"^(vllm:generation_tokens_total\{[^}]*\}) ([0-9.e+]+)$",
                         lambda m: f"{m.group(1)} {float(m.group(2)) + 5000}", text, flags=re.M))
    up = tr.reading("meta-llama/Llama-3.1-8B-Instruct")  # the capture serves two models
    assert up.kind == "vllm" and up.gen_tokens_per_s == pytest.approx(500.0) and up.requests_running == 8
    down = EndpointTracker(url="http://gpu2:8000")
    down.failed(1_800_000_000.0, "connection refused")
    src = sim_source("healthy-gen4")
    session = Session(src.inventory, interval_s=1.0)
    from dataclasses import replace

    for f in run_frames(src, 0, 20):
        session.ingest(replace(f, endpoints=(up, down.reading())))
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0, compact=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        text_out = str(app.query_one(InferencePanel).render())
    assert "500 tok/s" in text_out
    # each block names its server (host:port, never credentials), then the model
    assert re.search(r"vllm +gpu1:8000 meta-llama/Llama-3\.1-8B", text_out), text_out
    assert "gen 500" in text_out and "run 8" in text_out
    # the error is cut to fit 80 columns (whole text in the log and in `summary`)
    assert "gpu2:8000" in text_out and "unreachable since" in text_out and "(connection" in text_out
    assert isinstance(up, EndpointReading)

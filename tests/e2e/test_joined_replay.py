"""`gpuscope replay` of a file that joins two machines' recordings, in a real terminal (tmux): it plays the
first part and says so on screen (and on stderr, which stays after the replay); `--part 2` plays the other."""

from __future__ import annotations

import pytest
from helpers import Tmux, gpuscope_cmd, needs_tmux, record_sim


@pytest.mark.slow
@needs_tmux
def test_replay_of_a_joined_file_plays_part_1_and_says_how_to_pick(tmp_path):
    l40s = record_sim(tmp_path / "l40s.jsonl.gz", "power-capped", 12)
    a6000 = record_sim(tmp_path / "a6000.jsonl.gz", "a6000-tp2-pcie-gen1", 8)
    both = tmp_path / "both.jsonl.gz"
    both.write_bytes(l40s.read_bytes() + a6000.read_bytes())
    with Tmux(f"{gpuscope_cmd()} replay {both}", size=(160, 40)) as t:
        screen = t.wait_screen("REPLAY", "part 1 of 2", "playing part 1 of 2: a second recording starts at frame 12",
                               "GPU0 L40S")
        assert "RTX A6000" not in screen.split("playing part 1 of 2")[0]
        t.keys("q")
        screen = t.wait_screen("EXITED 0", timeout=30)
        assert f"`gpuscope replay --part 2 {both}` plays the other" in screen.replace("\n", "")
    with Tmux(f"{gpuscope_cmd()} replay --part 2 {both}", size=(160, 40)) as t:
        t.wait_screen("REPLAY", "part 2 of 2", "GPU0 RTX A6000")
        t.keys("q")
        t.wait_screen("EXITED 0", timeout=30)
    with Tmux(f"{gpuscope_cmd()} replay --part 3 {both}") as t:
        screen = t.wait_screen("EXITED 1", timeout=30)
        assert "gpuscope: error:" in screen and "has 2 parts: no part 3" in screen and "Traceback" not in screen


def test_replay_of_a_recording_joined_to_itself_says_the_parts_overlap(tmp_path):
    """`cat a a`: replay plays part 1 and says why the second is apart (its line, on screen and on stderr)."""
    from gpuscope.sources.recording import open_recording
    from gpuscope.tui.run import parts_line

    a = record_sim(tmp_path / "a.jsonl.gz", "a6000-tp2-pcie-gen1", 8)
    twice = tmp_path / "twice.jsonl.gz"
    twice.write_bytes(a.read_bytes() * 2)
    assert parts_line(open_recording(twice)) == (
        "playing part 1 of 2: part 2 overlaps part 1 in time (a second recording starts at frame 8, 7s before part "
        f"1's last frame; same machine and GPUs): kept apart; `gpuscope replay --part 2 {twice}` plays the other")

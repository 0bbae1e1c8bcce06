"""From the command line's choices to a running main screen: ``gpuscope`` (live) and ``gpuscope replay`` /
``demo``. ``cli/main.py`` hands over here with plain values once the options are built (``gpuscope --broker``:
tui/fleet.py); the screen never imports the command line."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from gpuscope.core.errors import GpuscopeError
from gpuscope.core.session import Session
from gpuscope.core.text import clean
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.base import check_terminal, run_app
from gpuscope.tui.feeders import LiveFeeder, ReplayFeeder


def run_live(open_source: Callable[[], tuple[Any, float]], *, record: str | None = None, force: bool = False,
             history: str = "1m", compact: bool = False) -> int:
    """The live view of the source ``open_source()`` opens (it returns the source and its interval in seconds).
    Refused, in this order: without a terminal, with ``--record FILE`` that exists (without ``--force``), then
    whatever ``open_source`` refuses (source flags that do not go together)."""
    check_terminal()
    if record and not force and os.path.lexists(record):
        raise GpuscopeError(f"{record} exists; refusing to overwrite it (use --force)")
    src, interval = open_source()
    session = Session(src.inventory, interval_s=interval)
    app = GpuscopeApp(session, None, label=src.label, interval_s=interval, window=history,
                      compact=True if compact else None, record_path=record)
    app.recording.force = force
    read_on_demand(src, session, app)
    app.feeder = LiveFeeder(src, session, interval, app.notify_update)
    run_app(app)
    rec_err = session.record_error
    if rec_err:
        sys.stderr.write(f"gpuscope: {rec_err}\n")
    return 0


def read_on_demand(src: Any, session: Session, app: GpuscopeApp) -> None:
    """The live screen's source reads the energy counter only while the session records (the screen shows it
    nowhere) and the per-process utilisation only while it records, shows the processes panel or a GPU's detail
    view (which list SM %): the two costliest NVML reads, ~0.3 ms of CPU a second a GPU between them on H200
    (docs/performance.md). Asked on the sampler's thread: plain attributes the UI thread sets, no widget."""
    demand = getattr(src, "read_on_demand", None)
    if demand is None:
        return

    def recording() -> bool:
        return session.recorder is not None

    def figures_shown() -> bool:
        return recording() or app.processes_shown or app.details_open > 0

    demand(energy_wanted=recording, process_util_wanted=figures_shown)


def demo_path() -> Path:
    """The recording that ships with gpuscope (``gpuscope demo``)."""
    base = resources.files("gpuscope.recordings")
    names = sorted(str(p) for p in base.iterdir() if str(p).endswith(".jsonl.gz"))
    if not names:
        raise GpuscopeError("the bundled demo recording is missing from this installation")
    return Path(names[0])


def damage_line(problems: list[str]) -> str:
    """The message line a replay opens with when its file was damaged or cut off ("" when whole)."""
    if not problems:
        return ""
    more = f" (+{len(problems) - 1} more: gpuscope summary)" if len(problems) > 1 else ""
    return clean(f"damaged or incomplete recording: {problems[0]}{more}", 300)


def parts_line(whole: Any) -> str:
    """The replay's message line for a file that joins recordings of different machines (it plays the
    first): ``playing part 1 of 2; a second recording starts at frame 31 (different machine: …); gpuscope
    replay --part 2 FILE plays it``."""
    n = len(whole.parts)
    which = "--part 2" if n == 2 else f"--part N (2–{n})"
    why = "; ".join(p.note for p in whole.parts[1:])
    return clean(f"playing part 1 of {n}: {why}; `gpuscope replay {which} {whole.path}` plays the other", 400)


def run_replay(file: str | None, *, part: int | None = None, speed: float = 1.0, compact: bool = False) -> int:
    """Replay ``file`` (None: the demo) at ``speed`` (``part``: that part of a joined file). The file is opened
    first (its errors come before the terminal check)."""
    from gpuscope.sources.recording import open_or_fail

    path = file or demo_path()
    whole = open_or_fail(path, mixed=True)
    # a file joining recordings of different machines plays its first part (or --part N), and says so on screen
    rec = whole.part(part or 1)
    check_terminal()
    interval = float(rec.header.get("interval_s") or 1.0)
    session = Session(rec.inventory, interval_s=interval, history_s=3600.0)
    note = "SIMULATED recording" if rec.simulated else "real recording"
    if rec.problems:
        note += " — " + "; ".join(rec.problems)
    if whole.mixed:
        note += f" — part {part or 1} of {len(whole.parts)}"
    app = GpuscopeApp(session, None, label="REPLAY", interval_s=interval, compact=True if compact else None,
                      origin_note=f"{Path(path).name} ({note})", origin_name=Path(path).name)
    app.feeder = ReplayFeeder(rec, session, app.notify_update, speed=speed, window_s=lambda: app.window_s)
    app.message_line = damage_line(rec.problems)  # on screen, not only in the header's note (cut when narrow)
    if whole.mixed and part is None:  # on screen, and on stderr (it stays there after the replay ends)
        sys.stderr.write(f"gpuscope: note: {parts_line(whole)}\n")
        app.message_line = parts_line(whole) + (f"  {app.message_line}" if app.message_line else "")
    elif rec.notes and not app.message_line:
        app.message_line = clean("; ".join(rec.notes), 300)
    run_app(app)
    return 0

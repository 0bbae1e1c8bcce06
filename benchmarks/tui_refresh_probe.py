"""One run of the live screen's per-refresh work, in process and deterministic (used by
bench_tui_cost.py --inprocess; run with the gpuscope to measure on PYTHONPATH).

    python benchmarks/tui_refresh_probe.py SCENARIO COLSxROWS [WARM_FRAMES] [MEASURED_FRAMES]

Simulated GPUs on a virtual clock: WARM_FRAMES 1 s frames fill the history (the graphs' window), then
each measured frame is ingested, the screen refreshed (``refresh_view``), Textual's compositor run and
the partial update turned into the terminal's bytes (as a terminal driver would, headless here), waiting
for the update as the live app does (not with Pilot.pause: its waits on every widget cost CPU the app does not).
Prints one JSON line: main-thread CPU ms per refresh (``thread_time``), bytes per refresh.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time


def main() -> None:
    scenario, size = sys.argv[1], sys.argv[2]
    warm = int(sys.argv[3]) if len(sys.argv) > 3 else 70
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 120
    cols, rows = (int(x) for x in size.split("x"))
    from textual._compositor import CompositorUpdate
    from textual.app import App

    from gpuscope.core.session import Session
    from gpuscope.sources.live import open_source
    from gpuscope.tui.app import GpuscopeApp

    src = open_source(scenario, virtual_at=0.0, pcie_block_s=0.0, wall0=1_800_000_000.0)
    session = Session(src.inventory, interval_s=1.0)
    t = 0.0

    def ingest_next() -> None:
        nonlocal t
        src.nvml.clock.now = t
        session.ingest(src.sample())
        t += 1.0

    for _ in range(warm):
        ingest_next()
    written = [0]
    display = App._display

    shown = asyncio.Event()  # set when an update went to the (headless) terminal

    def headless_display(self: App, screen: object, renderable: object) -> None:  # what a terminal would get
        if isinstance(renderable, CompositorUpdate):
            written[0] += len(renderable.render_segments(self.console).encode())
        display(self, screen, renderable)  # type: ignore[arg-type]
        shown.set()

    async def screen_updated() -> None:
        """Until the refresh reached the terminal, as in the live app (the screen's update timer, then idle);
        not Pilot.pause, which also waits on every widget's message queue (CPU the app does not spend)."""
        try:
            await asyncio.wait_for(shown.wait(), 0.2)
        except asyncio.TimeoutError:
            pass  # nothing changed on the screen
        for _ in range(3):
            await asyncio.sleep(0)

    App._display = headless_display  # type: ignore[method-assign]
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)

    def graphs_due() -> None:  # a 1 s interval: every refresh redraws the graphs
        redraw = getattr(app, "redraw", None)  # tui/redraw.py's scheduler; a checkout before it: the App's own
        if redraw is not None:
            redraw.last_graph = 0.0
        else:
            app._last_graph = 0.0

    async def run() -> dict[str, float]:
        async with app.run_test(size=(cols, rows)) as pilot:
            for _ in range(5):
                await pilot.pause()
            for _ in range(3):  # the graphs' caches, the first layout
                ingest_next()
                graphs_due()
                app.refresh_view()
                await pilot.pause()
            written[0] = 0
            cpu = 0.0
            for _ in range(n):
                ingest_next()  # not timed: the sampler's work (another thread in the app)
                c0 = time.thread_time()
                graphs_due()
                shown.clear()
                app.refresh_view()
                await screen_updated()  # the screen's update: compositor, partial update, bytes
                cpu += time.thread_time() - c0
            return {"cpu_ms_per_refresh": 1000 * cpu / n, "bytes_per_refresh": written[0] / n}

    print(json.dumps(asyncio.run(run())))


if __name__ == "__main__":
    main()

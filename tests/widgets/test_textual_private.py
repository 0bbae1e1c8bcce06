"""widgets/textual_private.py applies Textual's private paths only on the Textual it was written for and
while not switched off; otherwise every caller takes Textual's public path."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope.widgets import textual_private
from gpuscope.widgets.textual_pin import SWITCH, WRITTEN_FOR, applies

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("version, environ, expected", [
    (WRITTEN_FOR, {}, True),
    (WRITTEN_FOR, {SWITCH: "1"}, True),
    (WRITTEN_FOR, {SWITCH: "0"}, False),
    (WRITTEN_FOR, {SWITCH: " OFF "}, False),
    (WRITTEN_FOR, {SWITCH: "false"}, False),
    (WRITTEN_FOR, {SWITCH: "no"}, False),
    ("8.2.9", {}, False),  # any other Textual, newer or older: public paths only
    ("8.2", {}, False),
    ("9.0.0", {SWITCH: "1"}, False),
    ("", {}, False),
])
def test_applies(version: str, environ: dict[str, str], expected: bool) -> None:
    assert applies(version, environ) is expected


def test_written_for_the_pinned_textual() -> None:
    """Moving the pin means checking the private paths against the new Textual, then moving WRITTEN_FOR."""
    pin = re.search(r'"textual==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert pin and pin.group(1) == WRITTEN_FOR


def test_active_in_this_process_follows_the_switch() -> None:
    assert textual_private.ACTIVE is applies(textual_private.textual_version(), os.environ)


SWITCHED_OFF = """
import asyncio
from textual._compositor import ChopsUpdate
from textual.app import App
from textual.drivers.linux_driver import LinuxDriver

from gpuscope.widgets import textual_private as tp
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.fleet_app import FleetApp
from gpuscope.widgets.lines import LineWidget

assert not tp.ACTIVE and tp.MATCHES
assert tp.install() is False
assert ChopsUpdate.render_segments is tp.TEXTUAL_RENDER_SEGMENTS
for cls in (GpuscopeApp, FleetApp):
    for name in ("_display", "_handle_exception", "_fatal_error"):
        assert getattr(cls, name) is getattr(App, name), (cls, name)
assert tp.driver_for(LinuxDriver) is LinuxDriver
tp.release_style_caches()  # nothing to do


class Probe(App[None]):
    def compose(self):
        yield LineWidget()


async def main() -> None:
    app = Probe()
    async with app.run_test(size=(30, 5)) as pilot:
        w = app.query_one(LineWidget)
        from rich.text import Text
        w.set_lines([Text("hello")])
        await pilot.pause()
        assert "hello" in "".join(s.text for s in w.render_lines(w.region.reset_offset)[0])
        w.set_lines([Text("bye  ")])
        await pilot.pause()
        assert "bye" in "".join(s.text for s in w.render_lines(w.region.reset_offset)[0])
    print("PUBLIC PATHS")

asyncio.run(main())
"""


def test_switched_off_every_caller_takes_textuals_public_path() -> None:
    if not textual_private.MATCHES:
        pytest.skip("another Textual: the public paths are the only ones (the whole suite runs on them)")
    env = {**os.environ, SWITCH: "0"}
    out = subprocess.run([sys.executable, "-c", SWITCHED_OFF], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and "PUBLIC PATHS" in out.stdout, out.stderr[-3000:]


@pytest.mark.parametrize("crash, code, raised", [
    (None, 0, None),
    (ValueError("ui boom"), 1, ValueError),  # kept by HookedApp (switched on): main logs it, one line
    (None, 1, RuntimeError),  # Textual's own handling (switched off) printed it: still an error exit
])
def test_run_app_raises_what_ended_the_app(crash, code, raised) -> None:
    from types import SimpleNamespace

    from gpuscope.tui.base import run_app

    app = SimpleNamespace(run=lambda: None, crash=crash, return_code=code)
    if raised is None:
        run_app(app)  # type: ignore[arg-type]
    else:
        with pytest.raises(raised):
            run_app(app)  # type: ignore[arg-type]

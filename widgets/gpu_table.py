"""The compact GPU panel: one line per GPU (fits 8 GPUs at 80×24)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gpuscope.core.history import resample
from gpuscope.core.topology import best_link, pcie_capacity_bytes_per_s
from gpuscope.core.view import ViewState
from gpuscope.core.vocab import LINK_LEVEL, link_label, link_state, reading_busy
from gpuscope.widgets.style import (
    DIM,
    LEVEL_STYLE,
    OK,
    WARN,
    bar,
    fmt_gb,
    level_style,
    set_content,
    short_name,
    sparkline,
)


class GpuTable(Static):
    DEFAULT_CSS = "GpuTable { height: auto; padding: 0 1; }"

    def show(self, v: ViewState) -> None:
        width = max(60, self.size.width - 2 if self.size.width else 78)
        graphw = max(0, width - 74)
        head = Text(f"{'GPU':<12}{'util':>5} {'':8} {'SM MHz':>6} {'W':>8} {'°C':>3} {'link':<9}"
                    f"{'RX GB/s':>8}{'TX':>5}{'NV':>6}", style="bold")
        lines = [head]
        for dev in v.inventory.devices:
            r = v.frame.gpus[dev.index] if v.frame and dev.index < len(v.frame.gpus) else None
            t = Text(f"{dev.index:<2}{short_name(dev.name)[:9]:<10}")
            if r is None:
                t.append("waiting…", style=DIM)
            elif r.lost:
                t.append("LOST: fell off the bus", style="bold red")
            else:
                util = r.util_gpu_pct
                t.append(f"{util:4.0f}%" if util is not None else "   – ", style="bold")
                t.append(" ")
                t.append_text(bar(util, 100, 8, style=OK))
                t.append(f" {r.sm_clock_mhz or 0:>6}")
                plimit = r.power_limit_w or dev.power_limit_w or 0
                pw = r.power_w
                t.append(f" {pw or 0:>3.0f}/{plimit:<4.0f}", style=level_style((pw or 0) / plimit if plimit else None))
                t.append(f" {r.temp_gpu_c or 0:>3.0f}")
                bg, bw = best_link(dev)
                cap = pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)
                state = link_state(r.pcie_gen, r.pcie_width, bg, bw, reading_busy(r, cap))
                link = link_label(r.pcie_gen, r.pcie_width, short=True) + ("" if state == "at_max" else "▼")
                t.append(f" {link:<8}", style=LEVEL_STYLE[LINK_LEVEL[state]])
                rx, tx = r.pcie_rx_bytes_per_s, r.pcie_tx_bytes_per_s
                t.append(f"{fmt_gb(rx):>8}", style=level_style(rx / cap if rx is not None and cap else None))
                t.append(f"{fmt_gb(tx):>5}", style=level_style(tx / cap if tx is not None and cap else None))
                nv = max([x for x in (r.nvlink_rx_bytes_per_s, r.nvlink_tx_bytes_per_s) if x is not None], default=None)
                t.append(f"{fmt_gb(nv) if dev.nvlinks_active else '–':>6}")
                if r.clock_events and set(r.clock_events) - {"gpu_idle"}:
                    t.append(" !", style=WARN)
                if graphw >= 8:
                    times, vals = v.history.window("util", dev.index, v.window_s, v.now or None)
                    t.append(" " + sparkline(resample(times, vals, v.now or 0, v.window_s, graphw - 1), 100), style=OK)
            lines.append(t)
        set_content(self, Text("\n").join(lines))

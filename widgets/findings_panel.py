"""The findings panel: active findings, severity first, with their numbers and how long they held."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.containers import Lines
from rich.text import Text

from gpuscope.core.findings import Finding, finding_line
from gpuscope.core.text import clean
from gpuscope.core.view import ViewState
from gpuscope.core.vocab import SEVERITIES
from gpuscope.widgets.fit import fit_words
from gpuscope.widgets.lines import LineWidget
from gpuscope.widgets.style import DIM, OK, SEV_MARK, SEV_STYLE


class FindingsPanel(LineWidget):
    """One line per finding (the focused panel: full text, wrapped), drawn line by line
    (widgets/lines.py): a finding whose text changed repaints its own line only."""

    DEFAULT_CSS = """
    FindingsPanel { height: auto; border: round $primary-darken-2; padding: 0 1; }
    FindingsPanel:focus { border: round $accent; overflow-y: auto; }
    """

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.can_focus = True
        self.border_title = "Findings"
        self.budget = 8  # lines the layout gives this panel (one finding a line, the last may be "+k more")
        self._key: tuple[object, ...] | None = None  # what the lines shown were drawn from

    def show(self, v: ViewState) -> None:
        fs = v.findings
        if not fs:
            self._show_none()
            return
        sub = severity_counts(fs)
        if self.border_subtitle != sub:
            self.border_subtitle = sub
        full = self.has_focus  # focused: every finding, full text (wrapped); else one line each
        width = max(20, self.size.width or 76)  # the content area (inside border and padding)
        budget = max(1, self.budget)
        limit = len(fs) if full or len(fs) <= budget else budget - 1
        # the lines depend on these only: when they read the same as last time, nothing is built again
        shown = [(f.id, f.severity, finding_line(f, v.now)) for f in fs[:max(1, limit)]]
        key = (shown, len(fs), limit, full, width, self.size.width)
        if key == self._key:
            return
        self._key = key
        # limit 0: one line for several findings: the worst, and how many more
        more = Text(f"  +{len(fs) - 1} more — f", style=DIM) if limit == 0 else None
        limit = max(1, limit)
        lines: list[Text] = []
        for f, (_id, _sev, (text, state)) in zip(fs[:limit], shown):
            t = finding_text(f, text, state)
            if more is not None:
                t = fit_words(t, width - more.cell_len)
                t.append_text(more)
            lines.extend(self._rows(t, full, width))
        if len(fs) > limit and more is None:
            lines.append(Text(f"+{len(fs) - limit} more — f: all findings", style=DIM))
        self.set_lines(lines)

    def _rows(self, t: Text, full: bool, width: int) -> list[Text] | Lines:
        """A finding's screen rows: focused (``full``), its prose wrapped between words; else one row."""
        if full:
            wrap_w = self.size.width or width
            return t.wrap(self.app.console, wrap_w) if t.cell_len > wrap_w else [t]
        return [fit_words(t, width)]

    def _show_none(self) -> None:
        """No finding: one line saying so, no counts."""
        if self.border_subtitle:
            self.border_subtitle = ""
        self._key = None
        self.set_lines([Text("✔ nothing limits this server that gpuscope can see", style=OK)])


def severity_counts(fs: Sequence[Finding]) -> str:
    """How many findings of each severity there are, worst first (``1 critical 2 warning``)."""
    counts = {s: sum(1 for f in fs if f.severity == s) for s in SEVERITIES}
    return " ".join(f"{n} {s}" for s, n in counts.items() if n)


def finding_text(f: Finding, text: str, state: str) -> Text:
    """One finding's line from its ``text`` and ``state`` (:func:`finding_line`), before fitting: its mark and
    message in its severity's colour (the bottleneck in cyan), then how long it has held, dim; a clearing one
    all dim (its numbers are the last ones seen)."""
    t = Text()
    text = clean(text, 400)  # finding texts can come from recordings and brokers
    message, _sep, when = text.rpartition("  · ") if state == "active" else (text, "", "")
    if state == "clearing":
        t.append(("» " if f.id == "bottleneck" else SEV_MARK[f.severity] + " ") + message, style=DIM)
    elif f.id == "bottleneck":
        t.append("» ", style="bold cyan")
        t.append(message, style="bold cyan")
    else:
        t.append(SEV_MARK[f.severity] + " ", style=SEV_STYLE[f.severity])
        t.append(message, style="" if f.severity != "info" else DIM)
    if when:
        t.append(f"  {when}", style=DIM)
    return t


def findings_text(v: ViewState) -> Text:
    """Every active finding with its full text (evidence and since, or clearing), for the findings screen."""
    if not v.findings:
        return Text("✔ nothing limits this server that gpuscope can see", style=OK)
    out = Text("Findings", style="bold")
    out.append("  (esc closes; ↑↓ scroll)\n", style=DIM)
    for f in v.findings:
        text, state = finding_line(f, v.now)
        out.append("\n" + SEV_MARK[f.severity] + " ", style=SEV_STYLE[f.severity] if state == "active" else DIM)
        out.append(text + "\n", style="" if state == "active" else DIM)
    return out



"""The main screen's panel sizes: who gets how many rows, applied to the widgets.

:func:`gpuscope.tui.layout.plan_layout` decides (a pure function of the terminal size and what there is to
show); :class:`LayoutController` gathers its inputs from the App (the view, the focus, the toggles), applies
the plan to the widgets, and says when what a redraw found no longer fits the plan (findings, the note line
or processes came or went), so the rows are shared out again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.containers import Grid

from gpuscope.core.view import ViewState
from gpuscope.tui.layout import Plan, plan_layout
from gpuscope.widgets.findings_panel import FindingsPanel
from gpuscope.widgets.inference_panel import InferencePanel
from gpuscope.widgets.keybar import KeyBar
from gpuscope.widgets.processes_panel import ProcessesPanel, lines_wanted
from gpuscope.widgets.topology_panel import (
    TopologyPanel,
    legend_lines,
    link_key,
    matrix_columns,
    topology_lines,
)

if TYPE_CHECKING:
    from gpuscope.core.model import Frame
    from gpuscope.tui.main_base import MainBase

TOPOLOGY_FORMS = ("matrix", "pairs")  # the topology panel's forms, best first (Plan.topology indexes them)


class LayoutController:
    """Shares the main screen's rows out (tui/layout.py: GPUs first, then findings, topology, graphs) and
    remembers what the plan was made for."""

    def __init__(self, app: MainBase):
        self.app = app
        self.legend_off = False  # the topology legend hidden with `a` (else shown where rows are left)
        self.plan: Plan | None = None
        self.n_findings = -1  # findings at the last layout
        self.procs_want = 0  # lines the processes panel wanted at the last layout
        self.inference_want = 0  # lines the inference panel wanted at the last layout (0: no endpoint)
        self.important = False  # the note line (a message or an error) was shown at the last layout
        self.redraw_queued = False  # a redraw at the panels' new sizes is queued (relayout)
        self.topo_key: tuple[object, ...] | None = None  # what the topology panel's lines were counted for
        self.topo_need: tuple[int, ...] = ()  # the lines each of its forms needed at the last layout

    def apply(self) -> None:
        """Share the rows out and size the widgets accordingly (no redraw)."""
        app = self.app
        w, h = app.size.width, app.size.height
        if not w or not h:
            return
        v = app.build_view(False)
        devices = app.session.inventory.devices
        n = len(devices)
        topo = app.query_one(TopologyPanel)
        cw = w - 4
        need = self.topology_need(v, cw)
        self.topo_key, self.topo_need = (link_key(v), v.probe), need
        has_eps = bool(v.frame and v.frame.endpoints)
        inference = app.query_one(InferencePanel)
        self.inference_want = inference.lines_wanted(v, w - 4) if has_eps else 0  # inside border and padding
        chrome = 2 + (1 if app.replay else 0)
        important = bool(app.message_line or getattr(app.feeder, "error", None))  # a message or an error
        chrome += 1 if important else 0  # the note line
        self.important = important
        findings = app.query_one(FindingsPanel)
        any_nvlink = any(d.nvlinks_active for d in devices)
        self.procs_want = lines_wanted(v.frame) if app.show_processes else 0
        plan = plan_layout(w, h, n, len(v.findings), topo_lines=need, chrome=chrome, compact=app.compact,
                           panel_rows=11 if any_nvlink else 9, findings_focused=findings.has_focus,
                           topo_focused=topo.has_focus, legend_lines=len(legend_lines(cw)),
                           procs_lines=self.procs_want, inference_lines=self.inference_want)
        inference.budget = plan.inference_lines or None
        procs = app.query_one(ProcessesPanel)
        procs.display = plan.procs_lines > 0
        procs.budget = plan.procs_lines
        self.plan = plan
        self.n_findings = len(v.findings)
        app.query_one("#table").display = plan.compact
        grid = app.query_one("#grid", Grid)
        grid.display = not plan.compact
        grid.styles.grid_size_columns = plan.cols
        fits = plan.compact is False and app.compact is None
        grid.set_class(fits, "fill")
        findings.display = plan.findings_lines > 0
        findings.budget = plan.findings_lines
        # every panel keeps to the rows the plan gave it, so a line longer than planned (a wrapped line, a
        # panel that grew before the next layout) is cut in its own panel, never taken from a GPU's row
        findings.styles.max_height = plan.findings_rows or None
        inference.styles.max_height = plan.inference_lines + 2
        procs.styles.max_height = plan.procs_rows or None
        bottom = app.query_one("#bottom")
        bottom.display = plan.topology >= 0
        bottom.styles.max_height = plan.topology_rows or None
        self._topology_hint(hidden=plan.topology < 0 and any(need))
        if plan.topology >= 0:
            topo.form = TOPOLOGY_FORMS[plan.topology]
            topo.legend = plan.legend and not self.legend_off
        content_w = max((ln.cell_len for ln in topology_lines(v, cw, legend_on=topo.legend, form=topo.form)), default=0)
        topo.avail_width = cw
        topo.styles.width = content_w + 4
        side_w = w - (content_w + 4)
        app.query_one("#side").display = side_w >= 24
        app.query_one("#note").display = important  # a message or error gets a whole line: never cut narrow

    @staticmethod
    def topology_need(v: ViewState, cw: int) -> tuple[int, ...]:
        """Lines each form of the topology panel needs in ``cw`` cells (0: that form cannot be drawn)."""
        n = len(v.inventory.devices)
        if not n:
            return (0, 0)
        return tuple(len(topology_lines(v, cw, form=f)) if (f == "pairs" or matrix_columns(n, cw) is not None)
                     and n >= 2 else 0 for f in TOPOLOGY_FORMS)

    def topology_changed(self, v: ViewState) -> bool:
        """The topology panel's lines came or went since the last layout (a link left its max, a serving
        group or a link probe came, a seek in a replay to before or after a recorded probe): looked at only
        when what the lines depend on changed."""
        key = (link_key(v), v.probe)
        if key == self.topo_key:
            return False
        self.topo_key = key
        return self.topology_need(v, self.app.size.width - 4) != self.topo_need

    def _topology_hint(self, hidden: bool) -> None:
        """The footer's ``t topology`` comes right after ``? help`` and ``q quit`` while the topology panel has
        no room (the GPUs' rows come first): the screen says where the topology went and which key tells."""
        hints = self.app._hints()
        if hidden:
            t = next((h for h in hints if h[0] == "t"), None)
            if t is not None:
                hints.remove(t)
                hints.insert(2, t)
        keys = self.app.query_one(KeyBar)
        if keys.hints != hints:
            keys.set_hints(hints)

    def relayout(self) -> None:
        """Share the rows out again (a resize; inside a redraw: findings, a note line or processes came or
        went) and draw again once the panels have their new sizes, in the next layout pass: a redraw now
        draws at the old ones, and while paused no other redraw would come (a seek while paused left a
        blank row in every GPU panel)."""
        self.apply()
        if not self.redraw_queued:  # one redraw for any number of layout changes in this one
            self.redraw_queued = True
            self.app.call_after_refresh(self.app.call_after_refresh, self._redraw_at_new_sizes)

    def _redraw_at_new_sizes(self) -> None:
        self.redraw_queued = False
        self.app.refresh_view(True)

    def focus_moved(self) -> None:
        """Focus came or went: focusing the findings panel gives it spare rows (full text); the topology
        panel, its legend. Laid out once the focus has moved, then redrawn (main screen only)."""
        app = self.app
        if app.screen_stack and app.screen is app.screen_stack[0]:
            app.call_after_refresh(self.apply)
            app.call_after_refresh(app.refresh_view, True)

    def outdated(self, v: ViewState, important: bool) -> bool:
        """Whether what a redraw is about to show no longer fits the plan: the number of findings lines,
        the note line (``important``: a message or an error is shown), with the processes panel on, the
        lines its processes want, or the topology panel's lines."""
        return (len(v.findings) != self.n_findings or important != self.important
                or self.procs_changed(v.frame) or self.topology_changed(v))

    def procs_changed(self, frame: Frame | None) -> bool:
        """With the processes panel on: its processes came or went since the last layout."""
        return self.app.show_processes and lines_wanted(frame) != self.procs_want

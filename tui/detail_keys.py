"""The GPU keys of the main screen: the next GPU panel (g), a GPU's detail view (d, enter, the digits, a click)."""

from __future__ import annotations

from gpuscope.tui.main_base import MainBase
from gpuscope.tui.screens import GpuDetailScreen
from gpuscope.widgets.gpu_panel import GpuPanel


class DetailKeys(MainBase):
    """Focus a GPU panel, open and close GPU detail views."""

    def action_focus_gpu(self) -> None:
        panels = list(self.query(GpuPanel))
        if not panels or not self.query_one("#grid").display:
            return
        cur = self.focused
        k = panels.index(cur) + 1 if cur in panels else 0
        panels[k % len(panels)].focus()

    def action_detail(self) -> None:
        if isinstance(self.screen, GpuDetailScreen):
            self.pop_screen()
        else:
            self.push_screen(GpuDetailScreen(self.focused.index if isinstance(self.focused, GpuPanel) else 0))
            self.call_after_refresh(self.refresh_view, True)

    def open_detail(self, i: int) -> None:
        """Show GPU ``i``'s detail view (replacing another GPU's)."""
        if isinstance(self.screen, GpuDetailScreen):
            self.pop_screen()
        self.push_screen(GpuDetailScreen(i))
        self.call_after_refresh(self.refresh_view, True)

    def action_detail_of(self, i: int) -> None:
        """A digit key: GPU ``i``'s detail view (from the main screen or another GPU's detail; a modal
        screen such as the help or a marker's label takes the keys itself)."""
        self.open_detail(i)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A digit key without its GPU does nothing (the key goes on as if unbound)."""
        if action == "detail_of":
            i = parameters[0] if parameters else -1
            return isinstance(i, int) and 0 <= i < len(self.session.inventory.devices)
        return super().check_action(action, parameters)

    def on_gpu_panel_opened(self, msg: GpuPanel.Opened) -> None:
        """A click on a GPU panel opens its detail view (mouse, where natural)."""
        if not isinstance(self.screen, GpuDetailScreen):
            self.push_screen(GpuDetailScreen(msg.index))
            self.call_after_refresh(self.refresh_view, True)


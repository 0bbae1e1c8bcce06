"""The palette's "Probe links" on the main screen: the plan on a worker thread, a confirmation modal (asked
again when other processes use the GPUs), then the run; the steps come back as :class:`ProbeKeys.ProbeStep`
messages. The probe itself is tui/probe_controller.py's :class:`LinkProbe`, made on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from gpuscope.tui.main_base import MainBase
from gpuscope.tui.screens import ConfirmScreen

if TYPE_CHECKING:
    from gpuscope.tui.probe_controller import LinkProbe, ProbePrep


class ProbeKeys(MainBase):
    """The link probe's action and its steps."""

    _link_probe: LinkProbe | None = None  # made on the first probe: the live screen loads no probe code

    class ProbeStep(Message):
        """A step of the link probe ended on its worker thread: ``stage`` prepare or measure."""

        def __init__(self, stage: str, value: object, error: str | None):
            super().__init__()
            self.stage = stage
            self.value = value
            self.error = error

    def action_probe_links(self) -> None:
        """The plan first (on a worker: CUDA is loaded there), then a modal."""
        self.probe_group_links(None)

    def probe_group_links(self, group: str | None) -> None:
        """The palette's "Probe the links of <group>" (``group``: its label; None: every GPU): the same plan as
        ``gpuscope probe --group``, the same modal and run as "Probe links"."""
        probe = self.link_probe
        if (why := probe.refusal(self.replay)) is not None:
            self.say(why)
            return
        probe.start("prepare", lambda _stop: probe.prepare(group),
                    lambda value, error: self.post_message(self.ProbeStep("prepare", value, error)))
        self.say(f"link probe{f' of {group}' if group else ''}: preparing the plan…")

    @property
    def link_probe(self) -> LinkProbe:
        """The palette's link probe (tui/probe_controller.py), made on first use."""
        if self._link_probe is None:
            from gpuscope.tui.probe_controller import LinkProbe

            self._link_probe = LinkProbe(self.session,
                                         lambda: getattr(getattr(self.feeder, "source", None), "nvml", None))
        return self._link_probe

    @link_probe.setter
    def link_probe(self, probe: LinkProbe) -> None:
        self._link_probe = probe

    def on_probe_keys_probe_step(self, msg: ProbeStep) -> None:
        from gpuscope.core.probe import ProbeResult
        from gpuscope.tui.probe_controller import ProbePrep

        if msg.error is not None:
            self.say(f"link probe: {msg.error}")
        elif msg.stage == "prepare" and isinstance(msg.value, ProbePrep):
            prep = msg.value
            self.say("link probe: waiting for confirmation (enter: run, esc: cancel)")
            self.push_screen(ConfirmScreen(prep.lines(), "run the probe"), lambda ok: self._probe_confirmed(prep, ok))
        elif msg.stage == "measure" and isinstance(msg.value, ProbeResult):
            self.message_line = self.link_probe.finished(msg.value)
            self.layout_control.relayout()  # the topology panel gained lines, findings came
            self.refresh_view(force=True)

    def _probe_confirmed(self, prep: ProbePrep, ok: bool | None) -> None:
        if not ok:
            self.say("link probe cancelled")
            return
        if prep.busy:  # others use the GPUs: asked again, in their words
            busy = prep.busy_text()
            self.push_screen(ConfirmScreen([f"Other processes use the GPUs ({busy}).",
                                            "The probe adds load to them while it runs. Probe anyway?"],
                                           "probe anyway", title="Link probe: GPUs in use"),
                             lambda again: self._probe_run(prep) if again else self.say(
                                 f"not probed: other processes use the GPUs ({busy})"))
            return
        self._probe_run(prep)

    def _probe_run(self, prep: ProbePrep) -> None:
        probe = self.link_probe
        if probe.running:
            self.say("a link probe is running already")
            return
        probe.start("measure", lambda stop: probe.measure(prep, stop),
                    lambda value, error: self.post_message(self.ProbeStep("measure", value, error)))
        what = "SIMULATED link probe" if prep.scenario else "link probe (adds load)"
        self.say(f"{what} running: about {max(1, round(prep.plan.seconds))} s")

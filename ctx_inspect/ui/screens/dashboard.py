"""The dashboard view: zone gauge, counters, timeline, and the replay cursor over steps."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import Static

from ctx_inspect.ui.screens.base import SessionScreen
from ctx_inspect.ui.state import SessionState
from ctx_inspect.ui.widgets.counters_panel import CountersPanel
from ctx_inspect.ui.widgets.timeline_view import TimelineView
from ctx_inspect.ui.widgets.zone_gauge import ZoneGauge

MARKER_KINDS = ("compaction", "final_turn", "dropped", "prune", "reset", "rejected")
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # steps per second


class DashboardScreen(SessionScreen):
    BINDINGS = [
        Binding("comma", "step(-1)", "Step back"),
        Binding("full_stop", "step(1)", "Step on"),
        Binding("shift+comma", "marker(-1)", "Prev event", show=False),
        Binding("less_than_sign", "marker(-1)", "Prev event"),
        Binding("greater_than_sign", "marker(1)", "Next event"),
        Binding("k", "cycle_kind", "Event kind"),
        Binding("space", "play", "Play/pause"),
        Binding("plus", "speed(1)", "Faster", show=False),
        Binding("minus", "speed(-1)", "Slower", show=False),
        Binding("g", "live_end", "Live end", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.marker_kind = MARKER_KINDS[0]
        self.speed_index = 2
        self._player: Timer | None = None

    def compose_body(self) -> ComposeResult:
        yield ZoneGauge(id="gauge")
        with Horizontal(id="panels"):
            yield CountersPanel(id="counters")
            yield Static(id="step-info")
        yield TimelineView(id="timeline")

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.query_one(TimelineView).focus()

    def refresh_body(self, state: SessionState) -> None:
        step = state.step()
        gauge = state.gauge(step)
        self.query_one(ZoneGauge).update_gauge(**gauge)
        self.query_one(CountersPanel).update_counters(state.counters(step))
        timeline = self.query_one(TimelineView)
        points = state.points()
        timeline.set_points(
            points, window=gauge["window"], warning=gauge["warning"], threshold=gauge["threshold"]
        )
        timeline.cursor = step
        self.query_one("#step-info", Static).update(self._step_info(state, step))

    def _step_info(self, state: SessionState, step: int | None) -> Text:
        text = Text()
        total = state.step_count()
        if step is None:
            text.append("no requests yet")
            return text
        text.append(f"step {step} of {total}", style="bold")
        if state.follow is not None and state.cursor is None:
            text.append("  (live end)")
        current = state.state_at(step)
        if current is not None:
            text.append(f"\n{current.tokens:,} tokens, {current.describe()}")
            if current.peak > current.tokens:
                text.append(f", peak {current.peak:,} before management")
            noun = "message" if current.messages == 1 else "messages"
            text.append(f"\n{current.messages:,} {noun} in context")
            events = [
                name
                for name, count in (
                    ("compaction", current.compactions),
                    ("prune", current.prunes),
                    ("dropped tool output", current.dropped),
                )
                if count
            ]
            if current.final_turn:
                events.append("forced final turn")
            if events:
                text.append("\n" + ", ".join(events))
        playing = "playing" if self._player is not None else "paused"
        text.append(f"\n\nevent kind for < >: {self.marker_kind.replace('_', ' ')} (k)")
        text.append(f"\nreplay: {playing} at {SPEEDS[self.speed_index]:g} steps/s (space, + -)")
        return text

    # -- the cursor ------------------------------------------------------------------------

    def on_timeline_view_cursor_moved(self, message: TimelineView.CursorMoved) -> None:
        state = self.inspector.state
        if state is not None:
            state.move(message.step)
            self.inspector.changed()

    def _move_to(self, step: int | None) -> None:
        state = self.inspector.state
        if state is None:
            return
        state.move(step)
        self.inspector.changed()

    def action_step(self, delta: int) -> None:
        state = self.inspector.state
        current = state.step() if state is not None else None
        if current is not None:
            self._move_to(max(1, current + delta))

    def action_marker(self, direction: int) -> None:
        found = self.query_one(TimelineView).next_marker(self.marker_kind, direction)
        if found is None:
            self.notify(
                f"no {self.marker_kind.replace('_', ' ')} "
                f"{'after' if direction > 0 else 'before'} this step",
                timeout=2,
            )
            return
        self._move_to(found)

    def action_cycle_kind(self) -> None:
        index = MARKER_KINDS.index(self.marker_kind)
        self.marker_kind = MARKER_KINDS[(index + 1) % len(MARKER_KINDS)]
        self.inspector.changed()

    def action_live_end(self) -> None:
        self._move_to(None)

    def action_speed(self, delta: int) -> None:
        self.speed_index = max(0, min(len(SPEEDS) - 1, self.speed_index + delta))
        if self._player is not None:
            self._stop()
            self._start()
        self.inspector.changed()

    def action_play(self) -> None:
        if self._player is not None:
            self._stop()
        else:
            state = self.inspector.state
            if state is not None and state.step() == state.step_count():
                self._move_to(1)  # at the end: play from the start
            self._start()
        self.inspector.changed()

    def _start(self) -> None:
        self._player = self.set_interval(1 / SPEEDS[self.speed_index], self._tick)

    def _stop(self) -> None:
        if self._player is not None:
            self._player.stop()
            self._player = None

    def _tick(self) -> None:
        state = self.inspector.state
        if state is None:
            self._stop()
            return
        current = state.step() or 0
        if current >= state.step_count():
            self._stop()
            self.inspector.changed()
            return
        self._move_to(current + 1)

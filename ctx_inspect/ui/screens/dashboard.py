"""The dashboard view: zone gauge, counters, timeline, and the replay cursor over steps."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Static

from ctx_inspect.core.counters import Counters
from ctx_inspect.ui.screens.base import SessionScreen
from ctx_inspect.ui.state import SessionState
from ctx_inspect.ui.widgets.counters_panel import CountersPanel
from ctx_inspect.ui.widgets.timeline_view import TimelineView
from ctx_inspect.ui.widgets.zone_gauge import GaugeReading, ZoneGauge

MARKER_KINDS = ("compaction", "final_turn", "dropped", "prune", "reset", "rejected")
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # steps per second


class DashboardScreen(SessionScreen):
    """The gauge and the counters of the cursor's step (bound to ``gauge`` and ``counters``,
    made from the session at ``step``), the timeline (its cursor bound to ``step``), and the
    replay that moves the cursor on by itself."""

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

    gauge: reactive[GaugeReading] = reactive(GaugeReading, init=False)
    counters: reactive[Counters | None] = reactive(None, init=False)
    marker_kind: reactive[str] = reactive(MARKER_KINDS[0], init=False)
    speed_index: reactive[int] = reactive(2, init=False)
    playing: reactive[bool] = reactive(False, init=False)

    def __init__(self) -> None:
        super().__init__()
        self._player: Timer | None = None
        self._shown_at: tuple[tuple[int, int], int | None] | None = None  # (revision, step)

    def compose_body(self) -> ComposeResult:
        yield ZoneGauge(id="gauge").data_bind(reading=DashboardScreen.gauge)
        with Horizontal(id="panels"):
            yield CountersPanel(id="counters").data_bind(DashboardScreen.counters)
            yield Static(id="step-info")
        yield TimelineView(id="timeline").data_bind(cursor=DashboardScreen.step)

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.query_one(TimelineView).focus()

    # -- values from the session -----------------------------------------------------------

    def show_revision(self, state: SessionState) -> None:
        profile = state.profile
        self.query_one(TimelineView).set_points(
            state.points(),
            window=profile.context_window,
            warning=profile.warning_threshold(),
            threshold=profile.threshold(),
        )
        self._show_step(state)

    def watch_step(self) -> None:
        if self.shown is not None:
            self._show_step(self.shown)

    def _show_step(self, state: SessionState) -> None:
        """The values of the cursor's step (once per revision and step)."""
        step = state.step()
        if self._shown_at == (self.revision, step):
            return
        self._shown_at = (self.revision, step)
        self.gauge = GaugeReading(**state.gauge(step))
        self.counters = state.counters(step)
        self._show_step_info()

    def watch_marker_kind(self) -> None:
        self._show_step_info()

    def watch_speed_index(self) -> None:
        self._show_step_info()

    def watch_playing(self) -> None:
        self._show_step_info()

    def _show_step_info(self) -> None:
        state = self.shown
        if state is not None:
            self.query_one("#step-info", Static).update(self._step_info(state, state.step()))

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
        playing = "playing" if self.playing else "paused"
        text.append(f"\n\nevent kind for < >: {self.marker_kind.replace('_', ' ')} (k)")
        text.append(f"\nreplay: {playing} at {SPEEDS[self.speed_index]:g} steps/s (space, + -)")
        return text

    # -- the cursor ------------------------------------------------------------------------

    def on_timeline_view_cursor_moved(self, message: TimelineView.CursorMoved) -> None:
        self.move_cursor(message.step)

    def action_step(self, delta: int) -> None:
        state = self.shown
        current = state.step() if state is not None else None
        if current is not None:
            self.move_cursor(max(1, current + delta))

    def action_marker(self, direction: int) -> None:
        found = self.query_one(TimelineView).next_marker(self.marker_kind, direction)
        if found is None:
            self.notify(
                f"no {self.marker_kind.replace('_', ' ')} "
                f"{'after' if direction > 0 else 'before'} this step",
                timeout=2,
            )
            return
        self.move_cursor(found)

    def action_cycle_kind(self) -> None:
        index = MARKER_KINDS.index(self.marker_kind)
        self.marker_kind = MARKER_KINDS[(index + 1) % len(MARKER_KINDS)]

    def action_live_end(self) -> None:
        self.move_cursor(None)

    # -- the replay: the cursor moves on by itself -----------------------------------------

    def action_speed(self, delta: int) -> None:
        self.speed_index = max(0, min(len(SPEEDS) - 1, self.speed_index + delta))
        if self._player is not None:
            self._stop()
            self._start()

    def action_play(self) -> None:
        if self._player is not None:
            self._stop()
            return
        state = self.shown
        if state is not None and state.step() == state.step_count():
            self.move_cursor(1)  # at the end: play from the start
        self._start()

    def _start(self) -> None:
        self._player = self.set_interval(1 / SPEEDS[self.speed_index], self._tick)
        self.playing = True

    def _stop(self) -> None:
        if self._player is not None:
            self._player.stop()
            self._player = None
        self.playing = False

    def _tick(self) -> None:
        """One step on (a tick missed while the screen was busy is skipped, not queued)."""
        state = self.shown
        current = (state.step() or 0) if state is not None else 0
        if state is None or current >= state.step_count():
            self._stop()
            return
        self.move_cursor(current + 1)

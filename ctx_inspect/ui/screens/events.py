"""The events view: debug topics and log events, filtered by topic, with readable payloads."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input

from ctx_inspect.ui.screens.base import SessionScreen
from ctx_inspect.ui.state import SessionState
from ctx_inspect.ui.widgets.events_view import EventsView
from ctx_inspect.ui.widgets.message_detail import MessageDetail


class EventsScreen(SessionScreen):
    BINDINGS = [
        Binding("slash", "focus_filter", "Filter"),
        Binding("escape", "focus_list", "List", show=False),
    ]

    def compose_body(self) -> ComposeResult:
        yield Input(
            placeholder="/ to filter: text in topic or kind, or topic:context-guard/evaluate",
            id="filter",
        )
        yield EventsView(id="events")
        yield MessageDetail(id="payload")

    def show_revision(self, state: SessionState) -> None:
        indices = state.event_indices()
        self.query_one(EventsView).set_source(
            len(indices), state.event_row, version=state.version * 1000 + len(state.branches)
        )

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.query_one(EventsView).focus()

    def action_focus_filter(self) -> None:
        self.query_one(Input).focus()

    def action_focus_list(self) -> None:
        self.query_one(EventsView).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one(EventsView).set_filter(event.value)

    def on_events_view_row_highlighted(self, message: EventsView.RowHighlighted) -> None:
        state = self.shown
        if state is None:
            return
        event = state.session.event(message.index)
        payload = event.model_dump(mode="json", exclude_none=True, exclude={"span"})
        self.query_one(MessageDetail).show_payload(
            f"event {message.index} · step {state.session.step_at(message.index)} · {event.type}",
            payload,
        )

"""The messages view: every message with its cost and status at the cursor, and its content."""

from __future__ import annotations

from textual.app import ComposeResult

from inspector.ui.screens.base import SessionScreen
from inspector.ui.state import SessionState
from inspector.ui.widgets.message_detail import MessageDetail
from inspector.ui.widgets.messages_view import MessagesView


class MessagesScreen(SessionScreen):
    def compose_body(self) -> ComposeResult:
        yield MessagesView(id="messages")
        yield MessageDetail(id="detail")

    def refresh_body(self, state: SessionState) -> None:
        view = self.query_one(MessagesView)
        view.follow_tail = state.follow is not None and state.cursor is None

        view.set_source(
            state.session.message_count,
            state.row,
            version=state.version * 1000 + len(state.branches) * 7 + (state.step() or 0),
        )
        self._show(state, view.cursor)

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.query_one(MessagesView).focus()

    def on_messages_view_row_highlighted(self, message: MessagesView.RowHighlighted) -> None:
        state = self.inspector.state
        if state is not None:
            self._show(state, message.index)

    def _show(self, state: SessionState, index: int) -> None:
        detail = self.query_one(MessageDetail)
        session = state.session
        if not 0 <= index < session.message_count:
            detail.show(None)
            return
        record = session.record(index)
        tokens, origin = record.tokens()
        removed = f", removed at step {record.step_removed}" if record.step_removed else ""
        header = (
            f"#{index + 1}  {record.id}  {record.role.value} / {record.kind.value}  "
            f"{tokens:,} tokens ({origin.value})  added at step {record.step_added}"
            f"{removed}"
        )
        detail.show(session.body(index), header=header)

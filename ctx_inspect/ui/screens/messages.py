"""The messages view: every message with its cost and status at the cursor, and its content.

The content pane follows the cursor once it rests (``DETAIL_DELAY``): a held page-down paints
the table at every key and reads one message body, the last, not one per key.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.timer import Timer

from ctx_inspect.ui.screens.base import SessionScreen
from ctx_inspect.ui.state import SessionState
from ctx_inspect.ui.widgets.message_detail import MessageDetail
from ctx_inspect.ui.widgets.messages_view import MessagesView


class MessagesScreen(SessionScreen):
    DETAIL_DELAY: ClassVar[float] = 0.1  # seconds the cursor rests before the content follows

    def __init__(self) -> None:
        super().__init__()
        self._pending: Timer | None = None  # the content is to follow the cursor
        self._shown: tuple[object, int, str] | None = None  # (session, index, header) shown
        self._rows_at: tuple[tuple[int, int], int | None] | None = None  # (revision, step)

    def compose_body(self) -> ComposeResult:
        yield MessagesView(id="messages")
        yield MessageDetail(id="detail")

    def show_revision(self, state: SessionState) -> None:
        self._show_rows(state)

    def watch_step(self) -> None:
        if self.shown is not None:
            self._show_rows(self.shown)

    def _show_rows(self, state: SessionState) -> None:
        """The rows as they are at the cursor's step (their running totals and in-context
        flags depend on it), once per revision and step."""
        step = state.step()
        if self._rows_at == (self.revision, step):
            return
        self._rows_at = (self.revision, step)
        view = self.query_one(MessagesView)
        view.follow_tail = state.follow is not None and state.cursor is None
        view.set_source(
            state.session.message_count,
            state.row,
            version=state.version * 1000 + len(state.branches) * 7 + (step or 0),
        )
        if self._pending is None:
            self._show(state, view.cursor)

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.query_one(MessagesView).focus()

    def on_messages_view_row_highlighted(self, message: MessagesView.RowHighlighted) -> None:
        if self._pending is None:
            self._pending = self.set_timer(self.DETAIL_DELAY, self._follow_cursor)
        else:
            self._pending.reset()

    def _follow_cursor(self) -> None:
        self._pending = None
        state = self.shown
        index = self.query_one(MessagesView).cursor_index
        if state is not None and index is not None:
            self._show(state, index)

    def _show(self, state: SessionState, index: int) -> None:
        detail = self.query_one(MessageDetail)
        session = state.session
        if not 0 <= index < session.message_count:
            if self._shown != (session, -1, ""):
                self._shown = (session, -1, "")
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
        shown = (session, index, header)
        if shown != self._shown:  # a refresh while loading leaves the same message alone
            self._shown = shown
            detail.show(session.body(index), header=header)

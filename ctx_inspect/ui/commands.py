"""The command palette (ctrl+p): every action of the app, reachable by name.

The commands are generated from the bindings (the app's, each view's, and the screen the palette
was opened from), so a key added anywhere is a palette command too; a few commands have no key of
their own (a session or a theme by name). A session's title comes from its input (a file name,
a sub-agent id, a session title): the palette shows every title as plain text, never as markup,
its control characters visible.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.binding import Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.dom import DOMNode
from textual.fuzzy import Matcher
from textual.screen import Screen

from ctx_inspect.ui import plain

if TYPE_CHECKING:
    from ctx_inspect.ui.app import InspectorApp


@dataclass(frozen=True)
class PaletteCommand:
    """One palette entry: run ``action`` on ``target`` ("app", "screen" or a mode's name)."""

    title: str
    help: str
    action: str
    target: str = "app"


def bindings_of(node_class: type[DOMNode]) -> list[Binding]:
    """The bindings ctx-inspect's own classes in ``node_class``'s ancestry declare (Textual's
    built-in ones, such as focus cycling, are left out), compound keys expanded."""
    items: list[BindingType] = []
    for cls in reversed(node_class.__mro__):
        if cls.__module__.startswith("ctx_inspect."):
            items.extend(cls.__dict__.get("BINDINGS", []))
    return list(Binding.make_bindings(items))


def palette_commands(app: InspectorApp, screen: Screen[Any] | None = None) -> list[PaletteCommand]:
    """Every command: app bindings, each view's bindings, the calling screen's bindings, then
    one per open session and per theme. One entry per distinct action."""
    out: list[PaletteCommand] = []
    seen: set[tuple[str, str]] = set()

    def add(binding: Binding, target: str, where: str) -> None:
        if (target, binding.action) in seen:
            return
        seen.add((target, binding.action))
        key = app.get_key_display(binding)
        title = binding.description or binding.action
        out.append(PaletteCommand(f"{where}{title}", f"key {key}", binding.action, target))

    for binding in bindings_of(type(app)):
        add(binding, "app", "")
    for mode, screen_class in app.MODES.items():
        if isinstance(screen_class, type) and issubclass(screen_class, Screen):
            for binding in bindings_of(screen_class):
                add(binding, mode, f"{mode.capitalize()}: ")
    if screen is not None and type(screen) not in app.MODES.values():
        for binding in bindings_of(type(screen)):
            add(binding, "screen", "This screen: ")
    for index, state in enumerate(app.states):
        out.append(
            PaletteCommand(
                f"Session {index + 1}: {plain.one_line(state.name)}",
                "show this session",
                f"show_session({index})",
            )
        )
    for name in app.theme_names():
        out.append(PaletteCommand(f"Theme: {name}", "use this theme", f"use_theme({name!r})"))
    return out


def resolve(app: InspectorApp, command: PaletteCommand, screen: Screen[Any] | None) -> DOMNode:
    """The node an action runs on (for a view, the view's screen instance when it exists)."""
    if command.target == "app":
        return app
    if command.target == "screen":
        return screen if screen is not None else app.screen
    mode_class: object = app.MODES[command.target]
    views: list[Screen[Any]] = [s for s in app.screen_stack if type(s) is mode_class]
    return views[-1] if views else app.screen


async def run_command(
    app: InspectorApp, command: PaletteCommand, screen: Screen[Any] | None
) -> None:
    """Run ``command``; a view's command first switches to that view."""
    if command.target not in ("app", "screen") and app.current_mode != command.target:
        await app.switch_mode(command.target)
    await app.run_action(command.action, default_namespace=resolve(app, command, screen))


class InspectorCommands(Provider):
    """Every action of ctx-inspect, by the name of its key's description."""

    def _commands(self) -> list[tuple[PaletteCommand, Callable[[], Awaitable[None]]]]:
        from ctx_inspect.ui.app import InspectorApp

        app = self.app
        if not isinstance(app, InspectorApp):
            return []
        screen = self.screen
        return [
            (command, partial(run_command, app, command, screen))
            for command in palette_commands(app, screen)
        ]

    async def discover(self) -> Hits:
        for command, run in self._commands():
            yield DiscoveryHit(Content(command.title), run, command.title, command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command, run in self._commands():
            score = matcher.match(command.title)
            if score > 0:
                shown = highlighted(matcher, command.title)
                yield Hit(score, shown, run, command.title, command.help)


def highlighted(matcher: Matcher, title: str) -> Content:
    """``title`` as plain content with the letters ``matcher`` matched highlighted (Textual's
    own ``Matcher.highlight`` would read the title as markup)."""
    content = Content(title)
    _score, offsets = matcher.fuzzy_search.match(matcher.query, title)
    for offset in offsets:
        if not title[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content

"""netdata ai-agent (seed 002): its rich console log on stderr (``aiagent-console``).

``--telemetry-log-format console`` prints ``{SEV} {turn}.{subturn} {→|←} {LLM|MCP|RST|AGN|INT}
{agent}: {context} {message}``, whose figures are in the text only. What each record means is
``interpreter.py`` (shared with the logfmt format, ``reader_log``). A line with a severity
prefix but no valid header is a ``ParseIssue``; other text (an error's stack) is a ``LogLine``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ctx_inspect.agents.aiagent.interpreter import Interpreter
from ctx_inspect.agents.aiagent.log_guard import Record
from ctx_inspect.agents.aiagent.merge import merge
from ctx_inspect.core.model import Event, LogLine, SourceSpan
from ctx_inspect.formats.base import LineParser, decode_text
from ctx_inspect.formats.jsinspect import strip_ansi
from ctx_inspect.formats.registry import FormatSpec, Head, register

_CONSOLE = re.compile(
    r"^(VRB|WRN|ERR|FIN|THK|TRC) (\d+(?:\.\d+)*\S*) ([→←]) (LLM|MCP|RST|AGN|INT) (\S+?):(?: (.*))?$"
)
_SEV_PREFIX = re.compile(r"^(?:VRB|WRN|ERR|FIN|THK|TRC) ")
_TURN = re.compile(r"^(\d+)")


class AiAgentConsoleParser(LineParser):
    """ai-agent's rich console log (``--telemetry-log-format console``)."""

    format_name = "aiagent-console"

    def __init__(self, source: int = 0, path: str = "") -> None:
        super().__init__(source, path)
        self._meaning = Interpreter()

    def end_of_input(self) -> Iterable[Event]:
        return self._meaning.flush()

    def parse_line(self, line: bytes, span: SourceSpan) -> Iterable[Event]:
        out: list[Event] = []
        clean = strip_ansi(decode_text(line, self, span, out)).rstrip()
        m = _CONSOLE.match(clean)
        if m is None:
            out.extend(self._meaning.flush())
            if _SEV_PREFIX.match(clean):
                out.append(self.issue(span, "console record without a valid header", line))
            else:  # stack lines of an error, other text
                out.append(LogLine(text=clean, span=span))
            return out
        sev, turn_path, arrow, kind, agent, rest = m.groups()
        rest = rest or ""
        provider = model = None
        message = rest
        if kind == "LLM" and arrow == "→":
            head, _, tail = rest.partition(" ")
            if "/" in head:
                message = tail
                if not head.startswith("agent/"):  # agent/<event>: an internal record
                    provider, _, model = head.partition("/")
        turn = _TURN.match(turn_path)
        rec = Record(
            message=message,
            span=span,
            text=rest,
            level=sev.lower(),
            turn=int(turn.group(1)) if turn else None,
            remote=f"{provider}:{model}" if provider else None,
            provider=provider,
            model=model,
            agent_path=agent,
        )
        out.extend(self._meaning.events(rec))
        return out


def sniff_console(head: Head) -> float:
    lines = [strip_ansi(line) for line in head.lines[:200]]
    if not lines:
        return 0.0
    hits = sum(1 for line in lines if _CONSOLE.match(line))
    if hits and hits * 2 >= len(lines):
        return 0.9
    return 0.0


CONSOLE_SPEC = register(
    FormatSpec(
        name="aiagent-console",
        description="netdata ai-agent rich console log (--telemetry-log-format console)",
        reads="stderr of ai-agent with the console log format (*.log)",
        parser=AiAgentConsoleParser,
        sniff=sniff_console,
        default_profile="aiagent",
        stream_merge=merge,
    )
)

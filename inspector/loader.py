"""From a path on disk to a session: detect the format, read it in chunks, feed the session.

This is where sources, formats and the session meet. Inputs are opened read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inspector.core.model import Message, SourceSpan
from inspector.core.profiles import Profile
from inspector.core.session import Session
from inspector.core.tokens import ENCODINGS, TokenCounter, encoding_for_model, get_counter
from inspector.errors import InputError
from inspector.formats.base import Parser
from inspector.formats.registry import FormatSpec, detect, get_format, looks_binary, read_head
from inspector.sources.reader import iter_chunks, read_span

BATCH_EVENTS = 4096


@dataclass
class LoadedSession:
    session: Session
    path: Path
    format: FormatSpec
    profile: Profile
    counter: TokenCounter
    parser: Parser

    @property
    def tokenizer_label(self) -> str:
        return self.counter.info.label


def resolve_format(path: Path, format_name: str | None) -> FormatSpec:
    """The format to read ``path`` with: forced by name, or detected from its head."""
    if path.is_dir():
        raise InputError("cannot read a folder here", f"{path} is a folder; name a file")
    head = read_head(path)
    if format_name:
        if looks_binary(head.data):
            raise InputError("binary file", f"{path} is not a text log or transcript")
        return get_format(format_name)
    return detect(path, head)


def counter_for(profile: Profile, model: str | None = None) -> TokenCounter:
    """The exact counter for a profile: its configured encoding (or model), else by model."""
    wanted = profile.counter_encoding()
    if wanted in ENCODINGS:
        return get_counter(wanted)
    return get_counter(encoding_for_model(wanted or model))


def load_session(
    path: Path,
    profile: Profile,
    *,
    format_spec: FormatSpec,
    count_exact: bool = True,
    counter: TokenCounter | None = None,
) -> LoadedSession:
    """Read a whole saved input into a new session."""
    counter = counter or counter_for(profile)
    parser = format_spec.make_parser(0, str(path))

    def read_back(span: SourceSpan) -> list[Message]:
        return parser.messages_at(read_span(path, span.offset, span.length), span)

    session = Session(
        estimator=lambda message: profile.estimate(message, counter),
        counter=counter,
        count_exact=count_exact and counter.info.exact,
        body_reader=read_back,
    )
    session.add_source(str(path), format_spec.name)
    try:
        for chunk in iter_chunks(path):
            events = parser.feed(chunk)
            if events:
                session.append(events)
        session.append(parser.finish())
    except OSError as exc:
        raise InputError("cannot read file", f"{path}: {exc.strerror or exc}") from None
    return LoadedSession(session, path, format_spec, profile, counter, parser)

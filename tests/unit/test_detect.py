"""Format detection: our fixtures, empty/binary/missing/unknown inputs, and the real samples."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctx_inspect.core.model import MessageAdded, ParseIssue, RequestSent, Role
from ctx_inspect.errors import InputError
from ctx_inspect.formats import registry

DATA = Path(__file__).parents[1] / "data"
OURS = ("native", "openai-chat", "anthropic-messages")


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("openai_chat/typical.json", "openai-chat"),
        ("openai_chat/request_body.json", "openai-chat"),
        ("openai_chat/trajectory.traj.json", "openai-chat"),
        ("openai_chat/parts.json", "openai-chat"),
        ("openai_chat/messages.jsonl", "openai-chat"),
        ("openai_chat/conversations.jsonl", "openai-chat"),
        ("openai_chat/truncated.jsonl", "openai-chat"),
        ("openai_chat/malformed.jsonl", "openai-chat"),
        ("openai_chat/invalid_utf8.jsonl", "openai-chat"),
        ("anthropic_messages/request_body.json", "anthropic-messages"),
        ("anthropic_messages/blocks.json", "anthropic-messages"),
        ("anthropic_messages/responses.jsonl", "anthropic-messages"),
        ("anthropic_messages/conversations.jsonl", "anthropic-messages"),
        ("anthropic_messages/truncated.jsonl", "anthropic-messages"),
        ("anthropic_messages/malformed.jsonl", "anthropic-messages"),
        ("anthropic_messages/invalid_utf8.jsonl", "anthropic-messages"),
        ("native/typical.jsonl", "native"),
        ("native/no_header.jsonl", "native"),
        ("native/newer_version.jsonl", "native"),
        ("native/malformed.jsonl", "native"),
        ("native/truncated.jsonl", "native"),
    ],
)
def test_detects_each_fixture(fixture: str, expected: str) -> None:
    assert registry.detect(DATA / fixture).name == expected


def test_registered_formats() -> None:
    specs = {spec.name: spec for spec in registry.all_formats()}
    for name in OURS:
        spec = specs[name]
        assert spec.default_profile == "generic"
        assert spec.description and "\n" not in spec.description
        assert spec.reads
        assert spec.make_parser().format_name == name
        assert registry.get_format(name) is spec


@pytest.mark.parametrize("name", ["empty.jsonl", "empty.json", "empty", "blank.jsonl"])
def test_empty_file_is_valid(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"\n  \n" if name.startswith("blank") else b"")
    spec = registry.detect(path)
    parser = spec.make_parser(0, str(path))
    assert [*parser.feed(path.read_bytes()), *parser.finish()] == []


def test_plain_text_is_an_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("just some notes\nnothing to see here\n")
    with pytest.raises(InputError) as err:
        registry.detect(path)
    assert err.value.title == "unknown format"
    assert "closest" not in err.value.message
    assert "--format" in err.value.message


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "image.jsonl"
    path.write_bytes(bytes(range(256)) * 40)
    with pytest.raises(InputError) as err:
        registry.detect(path)
    assert err.value.title == "binary file"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        registry.detect(tmp_path / "nowhere.json")
    assert err.value.title == "file not found"


def test_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        registry.detect(tmp_path)


@pytest.mark.parametrize(
    "value",
    [
        {"foo": 1, "bar": [1, 2]},
        [{"source": "user", "message": "hi"}],
        {"messages": "not a list"},
    ],
)
def test_json_of_unknown_shape_names_the_closest_candidates(tmp_path: Path, value: object) -> None:
    path = tmp_path / "thing.json"
    path.write_text(json.dumps(value))
    with pytest.raises(InputError) as err:
        registry.detect(path)
    assert err.value.title == "unknown format"
    assert "closest: " in err.value.message
    assert "openai-chat" in err.value.message


def test_plain_message_arrays_go_to_openai_chat(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]))
    assert registry.detect(path).name == "openai-chat"


def test_formats_import_no_ui_libraries() -> None:
    code = (
        "import sys\n"
        "from ctx_inspect.formats import registry\n"
        "registry.all_formats()\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == ""


# -- the real samples ----------------------------------------------------------------------


@pytest.mark.corpus
def test_mini_swe_agent_trajectories(corpus: Path) -> None:
    files = sorted((corpus / "chat-messages-openai").glob("*.traj.json"))
    assert files, "no mini-swe-agent samples in the corpus"
    for path in files:
        spec = registry.detect(path)
        assert spec.name == "openai-chat", path.name
        parser = spec.make_parser(0, str(path))
        events = [*parser.feed(path.read_bytes()), *parser.finish()]
        assert not [e for e in events if isinstance(e, ParseIssue)], path.name
        raw = json.loads(path.read_bytes())
        added = [e for e in events if isinstance(e, MessageAdded)]
        assert [m.message.role.value for m in added] == [m["role"] for m in raw]
        assistants = sum(1 for m in added if m.message.role is Role.ASSISTANT)
        assert sum(1 for e in events if isinstance(e, RequestSent)) == assistants
        assert [m.message.text for m in added if m.message.text] == [
            m["content"] for m in raw if m["content"]
        ]


@pytest.mark.corpus
def test_other_agents_files_are_not_claimed(corpus: Path) -> None:
    """Our sniffers stay below the threshold on every other real sample (they belong elsewhere)."""
    others = [
        p
        for folder in ("claude-code", "codex", "openhands", "swe-agent", "aider", "realruns")
        for p in sorted((corpus / folder).rglob("*"))
        if p.is_file() and not p.name.endswith(("PROVENANCE.md", "README.md"))
    ]
    assert others
    specs = [registry.get_format(name) for name in OURS]
    for path in others:
        head = registry.read_head(path)
        for spec in specs:
            assert spec.sniff(head) < registry.MIN_CONFIDENCE, (spec.name, path.name)

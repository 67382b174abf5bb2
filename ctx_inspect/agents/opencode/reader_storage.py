"""OpenCode's JSON storage folder (before v1.2): every session, read file by file.

``storage/session/<project>/<id>.json``, ``storage/message/<session>/<id>.json`` and
``storage/part/<message>/<id>.json`` hold the same JSON as the database's rows; each session is
one ``SnapshotSession``, converted by ``convert_session`` (see ``convert``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctx_inspect.agents.opencode.convert import convert_session, session_fields
from ctx_inspect.agents.opencode.records import (
    REQUIRED_TABLES,
    OcMessage,
    epoch_ms,
    load_json_value,
)
from ctx_inspect.core.model import Event
from ctx_inspect.formats.chat_common import as_int, type_name
from ctx_inspect.formats.registry import FormatSpec, Head, SnapshotSession, register
from ctx_inspect.formats.sqlite import db_issue


def storage_root(path: Path) -> Path | None:
    """The folder with ``session/``, ``message/`` and ``part/``: ``path`` or its ``storage/``."""
    for candidate in (path, path / "storage"):
        if all((candidate / name).is_dir() for name in REQUIRED_TABLES):
            return candidate
    return None


def _load_file(file: Path, issues: list[Event]) -> dict[str, Any] | None:
    try:
        raw = file.read_bytes()
    except OSError as exc:
        issues.append(db_issue(file, f"cannot read {file.name}: {exc.strerror or exc}"))
        return None
    value = load_json_value(raw, file.name, file, issues)
    if value is None:
        return None
    if not isinstance(value, dict):
        issues.append(db_issue(file, f"{file.name}: a JSON {type_name(value)}, not an object"))
        return None
    return value


def read_storage(path: Path) -> list[SnapshotSession]:
    """Every session of a legacy ``storage/`` folder (read only, file by file)."""
    path = Path(path)
    root = storage_root(path)
    if root is None:
        reason = "no session/, message/ and part/ folders: not OpenCode's storage folder"
        return [SnapshotSession(path.name, [db_issue(path, reason)])]
    issues: list[Event] = []
    sessions: dict[str, dict[str, Any]] = {}
    for file in sorted((root / "session").glob("*/*.json")):
        value = _load_file(file, issues)
        if value is None:
            continue
        fields = session_fields({**value, "data": None}, file, issues)
        sessions[str(fields["id"] or file.stem)] = {**fields, "id": fields["id"] or file.stem}
    for folder in sorted((root / "message").iterdir()):
        if folder.is_dir() and folder.name not in sessions:
            sessions[folder.name] = {"id": folder.name, "title": f"{folder.name} (no session file)"}
    ordered = sorted(sessions.values(), key=lambda s: (as_int(s.get("time_created")), str(s["id"])))
    out: list[SnapshotSession] = []
    for index, fields in enumerate(ordered):
        session_issues = issues if index == 0 else []
        messages = _storage_messages(root, str(fields["id"]), session_issues)
        out.append(convert_session(root, fields, messages, session_issues))
    if not out:
        out.append(SnapshotSession(root.name, issues))
    return out


def _storage_messages(root: Path, session_id: str, issues: list[Event]) -> list[OcMessage]:
    messages: list[OcMessage] = []
    for file in sorted((root / "message" / session_id).glob("*.json")):
        info = _load_file(file, issues)
        if info is None:
            continue
        message = OcMessage(info={**info, "id": str(info.get("id") or file.stem)})
        for part_file in sorted((root / "part" / message.info["id"]).glob("*.json")):
            part = _load_file(part_file, issues)
            if part is not None:
                message.parts.append({**part, "id": str(part.get("id") or part_file.stem)})
        message.parts.sort(key=lambda p: str(p["id"]))
        messages.append(message)
    messages.sort(key=lambda m: (epoch_ms(m.info.get("time")) or 0, str(m.info["id"])))
    return messages


def sniff_storage(head: Head) -> float:
    if not head.is_dir:
        return 0.0
    root = storage_root(head.path)
    if root is None:
        return 0.0
    has_json = any(True for _ in (root / "message").glob("*/*.json"))
    return 0.95 if has_json or any(True for _ in (root / "session").glob("*/*.json")) else 0.6


STORAGE_SPEC = register(
    FormatSpec(
        name="opencode-storage",
        description="OpenCode's JSON storage folder (before v1.2), every session",
        reads="~/.local/share/opencode/storage/ (session/, message/, part/ folders of *.json)",
        parser=None,
        sniff=sniff_storage,
        default_profile="opencode",
        snapshot=read_storage,
        folder=True,
    )
)

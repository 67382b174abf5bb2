"""The core, the readers and the headless commands never load the terminal UI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _loaded_after(code: str) -> set[str]:
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout
    return {name.split(".")[0] for name in json.loads(out.strip().splitlines()[-1])}


@pytest.mark.parametrize(
    "module",
    [
        "inspector.core.model",
        "inspector.core.session",
        "inspector.core.tokens",
        "inspector.core.profiles",
        "inspector.core.estimate",
        "inspector.core.stats",
        "inspector.formats.registry",
        "inspector.sources.reader",
        "inspector.sources.follow",
        "inspector.live",
        "inspector.commands",
        "inspector.core.replay",
        "inspector.core.explain",
        "inspector.loader",
        "inspector.safe_text",
    ],
)
def test_core_formats_and_sources_load_neither_textual_nor_rich(module: str) -> None:
    loaded = _loaded_after(
        f"import {module}\nimport inspector.formats.registry as r\nr.all_formats()"
    )
    assert "textual" not in loaded
    assert "rich" not in loaded


def test_importing_the_tokenizer_loads_no_encoding() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import inspector.core.tokens, sys; print('tiktoken_ext.openai_public' in sys.modules)",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert out == "False"


def test_stats_json_path_does_not_import_textual(tmp_path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    code = (
        "import sys\nfrom inspector.cli import main\n"
        f"rc = main(['stats', '--json', {str(path)!r}])\n"
        "print('TEXTUAL' if 'textual' in sys.modules else 'CLEAN', rc)"
    )
    out = (
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    assert out == "CLEAN 0"

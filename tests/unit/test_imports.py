"""The tokenizer loads no encoding at import, and the headless stats path never loads the
terminal UI (what is imported at run time; the static layers are import-linter's, see
test_layers.py)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_importing_the_tokenizer_loads_no_encoding() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import ctx_inspect.core.tokens, sys;"
            "print('tiktoken_ext.openai_public' in sys.modules)",
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
        "import sys\nfrom ctx_inspect.cli import main\n"
        f"rc = main(['stats', '--json', {str(path)!r}])\n"
        "print('TEXTUAL' if 'textual' in sys.modules else 'CLEAN', rc)"
    )
    out = (
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    assert out == "CLEAN 0"

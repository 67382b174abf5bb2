"""The layers hold: import-linter checks the contracts in pyproject.toml, and a contract that
is broken fails the check (shown on a small package of our own built in a temporary folder)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports(
    config: Path, cwd: Path, *, path: Path | None = None
) -> subprocess.CompletedProcess[str]:
    program = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if program is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = str(path)
    return subprocess.run(
        [program, "--no-cache", "--no-logo", str(config)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_contracts_in_pyproject_are_kept() -> None:
    result = _lint_imports(ROOT / "pyproject.toml", ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
    assert "kept" in result.stdout.lower()


def test_a_core_module_importing_the_ui_breaks_a_contract(tmp_path: Path) -> None:
    package = tmp_path / "layered"
    for name, body in {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/model.py": "from layered.ui import screen\n",
        "ui/__init__.py": "",
        "ui/screen.py": "VALUE = 1\n",
    }.items():
        target = package / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    config = tmp_path / "contracts.toml"
    config.write_text(
        textwrap.dedent(
            """
            [tool.importlinter]
            root_package = "layered"

            [[tool.importlinter.contracts]]
            name = "core knows no UI"
            type = "forbidden"
            source_modules = ["layered.core"]
            forbidden_modules = ["layered.ui"]
            """
        )
    )
    result = _lint_imports(config, tmp_path, path=tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "layered.core.model -> layered.ui" in result.stdout

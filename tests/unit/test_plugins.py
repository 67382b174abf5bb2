"""A third-party agent plugged in through the ``ctx_inspect.agents`` entry point works end to
end: listed by ``formats`` and ``profiles``, its log detected and read with its profile, and
replayed with its policy; a plug-in that fails to load is one warning line and
the rest keeps working. The plug-in (tests/plugin) sits on the path with its ``.dist-info``
folder, as an installed distribution does; each case runs in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[1] / "plugin"


def _run(args: list[str], *paths: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    return subprocess.run(
        [sys.executable, "-m", "ctx_inspect", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _log(tmp_path: Path) -> Path:
    lines: list[object] = [{"example": 1}]
    for turn in range(6):
        lines.append({"role": "user", "text": "question " * (40 + turn * 40)})
        lines.append({"call": 300 + turn * 300})
        lines.append({"role": "assistant", "text": "answer " * 20})
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_plugin_is_listed_with_the_built_in_agents() -> None:
    formats = _run(["formats", "--json"], PLUGIN)
    assert formats.returncode == 0, formats.stderr
    rows = {row["name"]: row for row in json.loads(formats.stdout)}
    assert rows["example-log"]["default_profile"] == "example"
    assert "claude-code" in rows  # the built-in readers are still there
    profiles = _run(["profiles", "--json"], PLUGIN)
    assert profiles.returncode == 0, profiles.stderr
    settings = {row["name"]: row for row in json.loads(profiles.stdout)}
    assert settings["example"]["context_window"] == 2_000
    assert settings["example"]["threshold"] == 1_600  # 80% of the window
    assert list(settings)[:2] == ["baseagent", "opencode"]  # built-in first, then plug-ins
    assert profiles.stderr == ""


def test_its_log_is_detected_read_and_replayed_with_its_policy(tmp_path: Path) -> None:
    log = _log(tmp_path)
    stats = _run(["stats", "--json", str(log)], PLUGIN)
    assert stats.returncode == 0, stats.stderr
    summary = json.loads(stats.stdout)
    assert summary["format"] == "example-log"
    assert summary["profile"] == "example"
    assert summary["threshold_tokens"] == 1_600
    assert summary["steps"] == 6
    assert (summary["peak_context_tokens"], summary["peak_context_source"]) == (1_800, "reported")
    assert [c["step"] for c in summary["zone_crossings"]] == [5, 6]
    replay = _run(["replay", "--json", str(log)], PLUGIN)
    assert replay.returncode == 0, replay.stderr
    result = json.loads(replay.stdout)
    assert result["profile"] == "example"
    compactions = result["compactions"]
    assert compactions and compactions[0]["step"] == 5
    assert compactions[0]["before_tokens"] >= 1_600  # the plug-in's threshold crossed
    roomy = _run(["replay", "--json", "--set", "context_window=100000", str(log)], PLUGIN)
    assert roomy.returncode == 0, roomy.stderr
    assert json.loads(roomy.stdout)["compactions"] == []


def test_a_plugin_that_fails_to_load_is_a_warning_and_the_rest_works(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    (broken / "ctx_inspect_broken-0.1.dist-info").mkdir(parents=True)
    (broken / "ctx_inspect_broken-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ctx-inspect-broken\nVersion: 0.1\n"
    )
    (broken / "ctx_inspect_broken-0.1.dist-info" / "entry_points.txt").write_text(
        "[ctx_inspect.agents]\nbroken = ctx_inspect_broken:AGENT\n"
    )
    (broken / "ctx_inspect_broken.py").write_text("raise RuntimeError('no such backend')\n")
    profiles = _run(["profiles", "--json"], PLUGIN, broken)
    assert profiles.returncode == 0
    names = [row["name"] for row in json.loads(profiles.stdout)]
    assert "example" in names and "broken" not in names
    warning = profiles.stderr.strip().splitlines()
    assert len(warning) == 1
    assert "broken" in warning[0] and "RuntimeError: no such backend" in warning[0]
    assert "Traceback" not in profiles.stderr
    asked = _run(["profiles", "--profile", "broken"], PLUGIN, broken)
    assert asked.returncode == 2
    assert "no such backend" in asked.stderr and "Traceback" not in asked.stderr

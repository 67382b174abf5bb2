"""Building a profile from --profile, a TOML file and --set: precedence and every error path."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctx_inspect.agents.aiagent.profile import AiAgentProfile
from ctx_inspect.agents.claude_code.profile import ClaudeCodeProfile
from ctx_inspect.app.config import build_profile, load_config_file, parse_set
from ctx_inspect.errors import ConfigError


def write(tmp_path: Path, text: str, name: str = "ctx.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- parse_set ---------------------------------------------------------------------------


def test_parse_set_reads_toml_values() -> None:
    assert parse_set(
        [
            "a=200_000",
            "b=0.75",
            "c=true",
            'd="quoted text"',
            'e=["skill", "read"]',
            "f=1.5e3",
            "g =  7 ",
        ]
    ) == {"a": 200_000, "b": 0.75, "c": True, "d": "quoted text", "e": ["skill", "read"],
          "f": 1500.0, "g": 7}  # fmt: skip


def test_parse_set_keeps_raw_strings() -> None:
    assert parse_set(["a=approximate", "b=x y", "c=", "d=tiktoken:cl100k_base"]) == {
        "a": "approximate",
        "b": "x y",
        "c": "",
        "d": "tiktoken:cl100k_base",
    }
    assert parse_set(["a=1=2"]) == {"a": "1=2"}
    assert parse_set(["a=1", "a=2"]) == {"a": 2}  # the last one wins


def test_parse_set_does_not_smuggle_extra_keys() -> None:
    assert parse_set(["a=1\nb = 2"]) == {"a": "1\nb = 2"}


@pytest.mark.parametrize("item", ["noequals", "=5", " =5", "a b=1", "1a=2", "a.b=1"])
def test_parse_set_bad_items(item: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_set([item])
    assert info.value.title == "Invalid --set"
    assert repr(item) in info.value.message


# -- load_config_file --------------------------------------------------------------------


def test_load_config_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'profile = "aiagent"\ncontext_window = 200_000\n')
    assert load_config_file(path) == {"profile": "aiagent", "context_window": 200_000}


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config_file(tmp_path / "nope.toml")
    assert info.value.title == "Configuration file not found"
    assert "nope.toml" in info.value.message


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Cannot read configuration file"):
        load_config_file(tmp_path)


def test_invalid_toml_reports_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'profile = "aiagent"\ncontext_window = \n')
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert info.value.title == "Invalid configuration file"
    assert "line 2" in info.value.message
    assert str(path) in info.value.message


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.toml"
    path.write_bytes(b'description = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config_file(path)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("profile = 3\n", "'profile' must be a string"),
        ('profile = "aiagnet"\n', r"did you mean aiagent"),
        ("profiles = 3\n", "'profiles' must be a table"),
        ("[profiles.codx]\nbaseline_tokens = 1\n", r"\[profiles\.codx\].*did you mean codex"),
        ("[profiles]\ncodex = 3\n", "profiles.codex must be a table"),
    ],
)
def test_bad_file_shapes(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_config_file(write(tmp_path, text))


# -- build_profile -----------------------------------------------------------------------

LAYERED = """
profile = "aiagent"
context_window = 200_000
buffer_tokens = 1_000
max_output_tokens = 10_000

[profiles.aiagent]
buffer_tokens = 2_000
max_output_tokens = 50_000

[profiles.baseagent]
output_reserve = 1
"""


def test_defaults_when_nothing_is_given() -> None:
    p = build_profile(None)
    assert p.name == "generic"
    assert build_profile(None, default="baseagent").name == "baseagent"
    assert build_profile("codex").threshold() == 244_800


def test_precedence_defaults_file_section_set(tmp_path: Path) -> None:
    path = write(tmp_path, LAYERED)
    p = build_profile(None, path)
    assert isinstance(p, AiAgentProfile)
    assert p.context_window == 200_000  # file top level over the default 131072
    assert p.buffer_tokens == 2_000  # [profiles.aiagent] over the top level
    assert p.max_output_tokens == 50_000
    assert p.tool_response_max_bytes == 12_288  # untouched default
    p = build_profile(None, path, ["buffer_tokens=8_192"])
    assert p.threshold() == 141_808  # --set over everything: 200000 − 8192 − 50000


def test_cli_profile_beats_the_files_choice(tmp_path: Path) -> None:
    path = write(tmp_path, 'profile = "aiagent"\n[profiles.baseagent]\noutput_reserve = 2_000\n')
    p = build_profile("baseagent", path)
    assert p.name == "baseagent"
    assert p.limit_parts().effective == 198_000
    assert build_profile(None, path).name == "aiagent"  # the file's choice over the default


def test_other_profiles_sections_are_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, "[profiles.baseagent]\noutput_reserve = 1\n")
    assert build_profile("aiagent", path).threshold() == 90_112


def test_unknown_profile_on_the_command_line() -> None:
    with pytest.raises(ConfigError) as info:
        build_profile("baseagnt")
    assert info.value.title == "Unknown profile"
    assert "did you mean baseagent" in info.value.message


def test_unknown_key_names_its_source(tmp_path: Path) -> None:
    path = write(tmp_path, "context_windw = 1\n")
    with pytest.raises(
        ConfigError, match=rf"no setting 'context_windw' \({path}\).*context_window"
    ):
        build_profile("aiagent", path)
    path = write(tmp_path, "[profiles.aiagent]\nbufer_tokens = 1\n", "b.toml")
    with pytest.raises(ConfigError, match=r"\[profiles\.aiagent\].*did you mean buffer_tokens"):
        build_profile("aiagent", path)
    with pytest.raises(ConfigError, match=r"no setting 'output_reserve' \(--set\)"):
        build_profile("aiagent", None, ["output_reserve=1"])


def test_a_key_for_another_profile_at_top_level_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "buffer_tokens = 1\n")
    with pytest.raises(ConfigError, match="baseagent has no setting 'buffer_tokens'"):
        build_profile("baseagent", path)


def test_wrong_type_from_set_names_key_and_type() -> None:
    with pytest.raises(ConfigError) as info:
        build_profile("aiagent", None, ["context_window=abc"])
    assert info.value.title == "Invalid profile setting"
    assert info.value.message == (
        "aiagent.context_window (--set): expected an integer, got string 'abc'"
    )
    with pytest.raises(ConfigError, match=r"expected an integer, got number 200000\.0"):
        build_profile("aiagent", None, ["context_window=2e5"])
    with pytest.raises(ConfigError, match="expected an integer, got string '200000'"):
        build_profile("aiagent", None, ['context_window="200000"'])
    with pytest.raises(ConfigError, match="expected true or false, got integer 1"):
        build_profile("opencode", None, ["prune=1"])


def test_wrong_type_from_file_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[profiles.aiagent]\nbuffer_tokens = "8k"\n')
    with pytest.raises(ConfigError, match=r"buffer_tokens \(.*\[profiles\.aiagent\]\): expected"):
        build_profile("aiagent", path)


def test_text_settings_read_set_values_as_written() -> None:
    p = build_profile("claude-code", None, ["version=2.0"])
    assert isinstance(p, ClaudeCodeProfile)
    assert p.version == "2.0"
    assert p.threshold() == 155_000
    assert build_profile("aiagent", None, ["tokenizer=tiktoken:o200k_base"]).uses_counter()
    assert build_profile("baseagent", None, ["name=1"]).name == "1"


def test_lists_and_floats_from_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'protected_tools = ["skill", "bash"]\nwarning_ratio = 1\n')
    p = build_profile("opencode", path)
    assert p.settings()["protected_tools"] == ("skill", "bash")
    assert p.warning_threshold() == p.threshold()


def test_agent_cannot_be_overridden(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'agent'"):
        build_profile("aiagent", write(tmp_path, 'agent = "codex"\n'))

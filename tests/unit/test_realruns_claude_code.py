"""Real runs of Claude Code 2.1.329 (``realruns/claude-code``): every figure of the data card,
read the way a user reads them (``stats --json``, ``replay --json``), and replay agreement 1.0
under the settings the card gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctx_inspect.app.config import build_profile
from ctx_inspect.app.loader import load_session, open_inputs
from ctx_inspect.cli import main
from ctx_inspect.core.model import Compacted, LogLine, MessageKind, UsageReported
from ctx_inspect.formats import registry
from tests.corpus import real_runs

SESSION_A = "fe211343-3d88-4257-8d02-f380eca45a0c"
SESSION_C = "4c715485-bfef-4632-9999-9eaa7e81e3b2"
SESSION_D = "05b05af2-7fb3-4a14-96d0-e3ed4acfed44"
AGENT_D = "ad69a0005ac155138"


def runs(corpus: Path) -> Path:
    folder = real_runs(corpus, "claude-code")
    if not folder.is_dir():
        pytest.skip(f"no Claude Code real runs at {folder}")
    return folder


def session_file(corpus: Path, run: str, project: str, session: str) -> Path:
    return runs(corpus) / run / "claude-config" / "projects" / project / f"{session}.jsonl"


def autocompact(corpus: Path) -> Path:
    return session_file(corpus, "autocompact-threshold", "-srv-ccwork-A", SESSION_A)


def manual(corpus: Path) -> Path:
    return session_file(corpus, "manual-compact-resume", "-srv-ccwork-C", SESSION_C)


def subagent_main(corpus: Path) -> Path:
    return session_file(corpus, "subagent-foreground", "-srv-ccwork-D", SESSION_D)


def subagent_file(corpus: Path) -> Path:
    folder = subagent_main(corpus).with_suffix("") / "subagents"
    return folder / f"agent-{AGENT_D}.jsonl"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    """Every session the command prints (one JSON object a line)."""
    assert main([*args, "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def one(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    (data,) = run_json(capsys, *args)
    return data


def compactions(data: dict[str, Any]) -> list[tuple[int, str, int, int | None]]:
    return [
        (c["step"], c["trigger"], c["before_tokens"], c["after_tokens"])
        for c in data["compactions"]
    ]


def requests(data: dict[str, Any]) -> list[int]:
    """The recorded size of every request, from a replay's curve (the live end, the build-up
    after the last request, is no request)."""
    return [point["recorded"] for point in data["curve"] if not point.get("live_end")]


def boundaries(path: Path) -> list[tuple[int, str, int | None, int | None]]:
    """(line, trigger, pre, post) of each compaction the reader finds."""
    spec = registry.detect(path)
    loaded = load_session(
        path, build_profile(None, default="claude-code"), format_spec=spec, count_exact=False
    )
    return [
        (e.span.line if e.span else -1, e.trigger, e.tokens_before, e.tokens_after)
        for _, e in loaded.session.events_of(Compacted)
        if isinstance(e, Compacted)
    ]


def log_lines(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each log line the reader finds."""
    spec = registry.detect(path)
    loaded = load_session(path, build_profile(None, default="claude-code"), format_spec=spec)
    return [
        (e.span.line if e.span else -1, e.text)
        for _, e in loaded.session.events_of(LogLine)
        if isinstance(e, LogLine)
    ]


def kinds_at(path: Path, lines: list[int]) -> list[MessageKind]:
    spec = registry.detect(path)
    loaded = load_session(
        path, build_profile(None, default="claude-code"), format_spec=spec, count_exact=False
    )
    by_line = {r.span.line: r.kind for r in loaded.session.records() if r.span is not None}
    return [by_line[line] for line in lines]


# -- autocompact-threshold: three threshold compactions at --autocompact 150000 ---------------


@pytest.mark.corpus
def test_autocompact_threshold_figures(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = autocompact(corpus)
    assert boundaries(path) == [
        (76, "auto", 123_610, 20_763),
        (129, "auto", 117_269, 8_878),
        (190, "auto", 119_358, 9_069),
    ]
    assert kinds_at(path, [79, 132, 193]) == [MessageKind.SUMMARY] * 3
    stats = one(capsys, "stats", str(path))
    assert stats["steps"] == 23
    assert compactions(stats) == [
        (9, "auto", 123_610, 20_763),
        (14, "auto", 117_269, 8_878),
        (20, "auto", 119_358, 9_069),
    ]
    # the largest figure of the run is the agent's own before its first compaction
    assert (stats["peak_context_tokens"], stats["peak_step"]) == (123_610, 9)
    assert stats["peak_context_source"] == "reported"
    assert stats["rejected_requests"] == []
    replayed = one(capsys, "replay", str(path), "--set", "autocompact_window=150000")
    sizes = requests(replayed)
    assert max(sizes) == 113_351 and sizes.index(113_351) + 1 == 19  # the largest request
    # after each boundary the first request falls to 33-46k (the tail kept verbatim)
    assert [sizes[8], sizes[13], sizes[19]] == [46_323, 33_606, 33_005]
    assert sizes[0] == 25_526 and sizes[-1] == 33_521


@pytest.mark.corpus
def test_autocompact_threshold_replays_at_the_recorded_window(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = autocompact(corpus)
    data = one(capsys, "replay", str(path), "--set", "autocompact_window=150000")
    # 150,000 − min(32,000, 20,000) − 13,000: the debug log's effectiveWindow=130000 less 13,000
    assert data["threshold_tokens"] == data["effective_limit"] == 117_000
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    assert data["undetermined"] == []
    assert [
        (d["step"], d["tokens_before"], d["tokens_after"]) for d in data["recorded_decisions"]
    ] == [
        (9, 123_610, 20_763),
        (14, 117_269, 8_878),
        (20, 119_358, 9_069),
    ]
    assert compactions(data) == [
        (9, "replay", 123_610, 20_763),
        (14, "replay", 117_269, 8_878),
        (20, "replay", 119_358, 9_069),
    ]
    assert all(point["tokens"] == point["recorded"] for point in data["curve"])
    assert [p["peak"] for p in data["curve"] if p["step"] in (9, 14, 20)] == [
        123_610,
        117_269,
        119_358,
    ]
    # given: no longer an assumption (the other setting no file records is unset)
    assert data["assumed_settings"] == {}


@pytest.mark.corpus
def test_autocompact_threshold_under_defaults_says_what_it_cannot_judge(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The session file shows neither the --autocompact value nor a refusal: under the default
    (no window: 2.1.329 compacts only after a refusal) the compactions cannot be judged."""
    data = one(capsys, "replay", str(autocompact(corpus)))
    assert data["threshold_tokens"] == 200_000  # no threshold: the provider's limit
    assert [u["step"] for u in data["undetermined"]] == [9, 14, 20]
    reason = data["undetermined"][0]["reason"]
    assert "no input given records the refusal" in reason and "123,610" in reason
    assert "--set autocompact_window=N" in reason
    # no Claude Code file records the window it was run with: the default is said to be assumed
    assert data["assumed_settings"] == {"autocompact_window": "auto"}
    stats = one(capsys, "stats", str(autocompact(corpus)))
    assert stats["assumed_settings"] == {"autocompact_window": "auto"}
    assert not [d for d in data["disagreements"] if d["recorded"]]


@pytest.mark.corpus
def test_autocompact_threshold_stream_json(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = runs(corpus) / "autocompact-threshold" / "stream-json.stdout.jsonl"
    assert [line for line, *_ in boundaries(stream)] == [24, 41, 57]
    logs = log_lines(stream)
    assert [line for line, text in logs if text.startswith("status")] == [22, 23, 39, 40, 55, 56]
    assert logs[-1] == (67, "result success, 26 turns")
    data = one(capsys, "stats", str(stream))
    assert data["format"] == "claude-code-stream"
    assert compactions(data) == [
        (9, "auto", 123_610, 20_763),
        (14, "auto", 117_269, 8_878),
        (20, "auto", 119_358, 9_069),
    ]
    assert data["context_window"] == 200_000
    assert data["context_window_source"] == "the result's modelUsage.contextWindow"


@pytest.mark.corpus
def test_autocompact_threshold_merged(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = autocompact(corpus)
    stream = runs(corpus) / "autocompact-threshold" / "stream-json.stdout.jsonl"
    alone = one(capsys, "stats", str(path))
    merged = one(capsys, "stats", "--merge", str(path), str(stream))
    assert merged["steps"] == alone["steps"] == 23
    assert compactions(merged) == compactions(alone)
    assert merged["final_context_tokens"] == alone["final_context_tokens"]
    replayed = one(
        capsys, "replay", "--merge", str(path), str(stream), "--set", "autocompact_window=150000"
    )
    assert replayed["agreement"] == 1.0 and replayed["disagreements"] == []
    assert max(requests(replayed)) == 113_351


# -- manual-compact-resume: two /compact across five invocations --------------------------------


@pytest.mark.corpus
def test_manual_compactions(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = manual(corpus)
    assert boundaries(path) == [(76, "manual", 106_080, 3_200), (169, "manual", 138_980, 3_252)]
    assert kinds_at(path, [77, 170]) == [MessageKind.SUMMARY] * 2
    assert kinds_at(path, [78, 79, 80]) == [
        MessageKind.ATTACHMENT,  # <local-command-caveat>, isMeta
        MessageKind.MESSAGE,  # <command-name>/compact</command-name>
        MessageKind.MESSAGE,  # <local-command-stdout>Compacted </local-command-stdout>
    ]
    assert kinds_at(path, [95, 188]) == [MessageKind.MESSAGE] * 2  # the new prompts
    stats = one(capsys, "stats", str(path))
    assert compactions(stats) == [(9, "manual", 106_080, 3_200), (17, "manual", 138_980, 3_252)]
    folder = runs(corpus) / "manual-compact-resume"
    for n in (2, 4):  # the /compact invocations: no turn of the agent's own
        assert log_lines(folder / f"stream-json.stdout.{n}.jsonl")[-1][1].endswith(", 0 turns")
    data = one(capsys, "replay", str(path))
    # the user's /compact, made again; nothing of the agent's own under the default settings
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    assert data["undetermined"] == []
    assert compactions(data) == [(9, "manual", 106_080, 3_200), (17, "manual", 138_980, 3_252)]
    assert all(point["tokens"] == point["recorded"] for point in data["curve"])


@pytest.mark.corpus
def test_manual_compactions_in_the_invocations_stdout(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = runs(corpus) / "manual-compact-resume"
    for n, figures in ((2, (106_080, 3_200)), (4, (138_980, 3_252))):
        stream = folder / f"stream-json.stdout.{n}.jsonl"
        assert boundaries(stream) == [(4, "manual", *figures)]
        data = one(capsys, "stats", str(stream))
        assert data["steps"] == 0  # num_turns 0: /compact sends no request of its own
        # the user's command is made again; the replay holds nothing of what it compacted
        # (the invocation's stdout starts with it), so its figures are the recorded ones
        replayed = one(capsys, "replay", str(stream))
        assert compactions(replayed) == [(1, "manual", *figures)]
        assert replayed["agreement"] == 1.0 and replayed["disagreements"] == []
    streams = [str(folder / f"stream-json.stdout.{n}.jsonl") for n in range(1, 6)]
    path = manual(corpus)
    merged = one(capsys, "stats", "--merge", str(path), *streams)
    alone = one(capsys, "stats", str(path))
    assert merged["steps"] == alone["steps"]
    assert compactions(merged) == compactions(alone)
    replayed = one(capsys, "replay", "--merge", str(path), *streams)
    assert replayed["agreement"] == 1.0 and replayed["disagreements"] == []


# -- subagent-foreground: a sub-agent in its own context window -------------------------------


@pytest.mark.corpus
def test_the_subagent_has_its_own_context(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main_file = subagent_main(corpus)
    sub = subagent_file(corpus)
    assert sub.is_file() and sub.with_suffix(".meta.json").is_file()
    main_replay = one(capsys, "replay", str(main_file))
    assert requests(main_replay) == [25_536, 26_014, 45_901, 46_356, 66_236, 66_408]
    assert main_replay["agreement"] == 1.0 and main_replay["recorded_decisions"] == []
    sub_replay = one(capsys, "replay", str(sub))
    assert requests(sub_replay) == [14_985, 15_715, 35_597, 35_759]
    folder = run_json(capsys, "stats", str(main_file.parent))
    by_file = {Path(s["file"]).name: s for s in folder}
    assert set(by_file) == {main_file.name, sub.name}
    assert by_file[main_file.name]["peak_context_tokens"] == 66_408
    assert by_file[sub.name]["peak_context_tokens"] == 35_759
    assert all(s["compactions"] == [] for s in folder)
    stream = runs(corpus) / "subagent-foreground" / "stream-json.stdout.jsonl"
    threads = run_json(capsys, "stats", str(stream))
    assert threads[0]["peak_context_tokens"] == 66_408  # the sub-agent's lines are not main's
    assert any(s["file"].endswith(f"#agent-{AGENT_D}") for s in threads[1:])


def test_the_limit_printed_adds_up(capsys: pytest.CaptureFixture[str]) -> None:
    """What ``profiles`` prints as window − output reserve − buffer is the threshold acted on."""
    for sets, threshold in (
        ([], 200_000),  # no window: the provider's limit
        (["--set", "autocompact_window=150000"], 117_000),
        (["--set", "version=2.0.64"], 155_000),
        (["--set", "version=2.1.100"], 167_000),
    ):
        args = ["profiles", "-p", "claude-code", "--set", "version=2.1.329", *sets, "--json"]
        assert main(args) == 0
        (shown,) = json.loads(capsys.readouterr().out)
        parts = shown["limit_window"] - shown["limit_max_output"] - shown["limit_buffer"]
        assert parts == shown["effective_limit"] == shown["threshold"] == threshold


# -- the older corpus: a real 2.0.64 auto-compaction ------------------------------------------


@pytest.mark.corpus
def test_a_20_session_compacts_on_its_latest_usage(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2.0 compared the latest response's prompt + output (155,459 + 1,494 = 156,953, its
    preTokens) with window − 45,000; the tool result after it does not count."""
    path = corpus / "claude-code" / "commugraph" / "ab51623b-c26d-45f5-b98e-f9d0cfa17018.jsonl"
    if not path.is_file():
        pytest.skip(f"no 2.0.64 sample at {path}")
    data = run_json(capsys, "replay", str(path))[0]
    assert data["threshold_tokens"] == 155_000  # the session's version: 2.0.64
    assert data["agreement"] == 1.0 and data["disagreements"] == []
    assert compactions(data) == [(68, "replay", 156_953, None)]


@pytest.mark.corpus
def test_merging_the_subagent_file_keeps_it_apart(corpus: Path) -> None:
    """Merged with the main session and the stdout, the sub-agent file becomes the sub-agent's
    thread, as the stdout names it: its four requests once each, with their final usage."""
    paths = [
        subagent_main(corpus),
        subagent_file(corpus),
        runs(corpus) / "subagent-foreground" / "stream-json.stdout.jsonl",
    ]
    (merged,) = open_inputs(
        paths,
        lambda spec: build_profile(None, default=spec.default_profile),
        merge=True,
        count_exact=False,
    )
    usage = [e for _, e in merged.session.events_of(UsageReported) if isinstance(e, UsageReported)]
    by_thread: dict[str, list[tuple[int, int]]] = {}
    for e in usage:
        by_thread.setdefault(e.thread, []).append((e.usage.prompt_tokens, e.usage.output))
    assert [p for p, _ in by_thread["main"]][:: len(by_thread["main"]) - 1] == [25_536, 66_408]
    assert by_thread[f"agent-{AGENT_D}"] == [
        (14_985, 127),
        (15_715, 242),
        (35_597, 322),
        (35_759, 407),
    ]
    assert len(merged.session.steps) == 6  # main's requests only

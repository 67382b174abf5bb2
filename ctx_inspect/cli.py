"""Command line: parse arguments, build the profile, run a headless command.

Headless commands never import Textual. Errors the user can act on are printed as one line on
stderr with exit code 2; nothing else is caught here, so a real bug still shows its traceback.

Everything printed goes through two functions, :func:`_emit` (results, as JSON, CSV or Rich
tables) and :func:`_fail` (errors), which make the text of inputs safe for a terminal with
:mod:`ctx_inspect.safe_text`: no escape sequence or invisible character of an input reaches it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctx_inspect import __version__
from ctx_inspect.errors import InspectorError
from ctx_inspect.safe_text import json_text, safe_data, visible

COMMANDS = ("stats", "replay", "diff", "explain", "sweep", "profiles", "formats", "demo")


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", "-p", help="agent profile (see `ctx-inspect profiles`)")
    parser.add_argument("--config", "-c", type=Path, help="TOML file overriding profile settings")
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one profile setting (repeatable)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctx-inspect",
        description="See, replay and tune the context window of LLM agents.",
    )
    parser.add_argument("--version", action="version", version=f"ctx-inspect {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    stats = sub.add_parser("stats", help="summarise a session's context usage (headless)")
    stats.add_argument("files", nargs="+", type=Path, metavar="FILE")
    _common_options(stats)
    stats.add_argument("--format", "-F", dest="format_name", help="force an input format")
    stats.add_argument("--json", action="store_true", help="print one JSON object per session")
    stats.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="keep reading the file as it grows; print an updated summary on each change",
    )
    stats.add_argument(
        "--merge",
        action="store_true",
        help="read several streams of one run (stdout and stderr) as one session",
    )
    stats.add_argument(
        "--steps",
        action="store_true",
        help="list every step's context figure and where it comes from",
    )
    stats.add_argument(
        "--no-exact",
        action="store_true",
        help="skip exact token counting (use reported figures and the profile's estimate)",
    )

    def engine_command(name: str, help_text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("files", nargs="+", type=Path, metavar="FILE")
        _common_options(cmd)
        cmd.add_argument("--format", "-F", dest="format_name", help="force an input format")
        cmd.add_argument(
            "--merge", action="store_true", help="read several streams of one run as one session"
        )
        cmd.add_argument("--json", action="store_true", help="print JSON")
        cmd.add_argument(
            "--no-exact",
            action="store_true",
            help="skip exact token counting of the recorded messages (figures then use what "
            "the file reports and the profile's estimate; stats --no-exact shows the same)",
        )
        return cmd

    engine_command("replay", "re-run a session under a profile and settings, step by step")
    diff = engine_command("diff", "before and after of a prune, compaction or truncation")
    diff.add_argument(
        "--action",
        "-a",
        choices=("prune", "compact", "truncate"),
        default="prune",
        help="the action to apply (default: prune)",
    )
    diff.add_argument("--step", type=int, help="the step whose context to act on (default: now)")
    diff.add_argument("--full", action="store_true", help="show every text diff line")
    explain = engine_command(
        "explain",
        "why each forced final turn, drop or compaction "
        "happened, and which setting would have avoided it",
    )
    explain.add_argument(
        "--no-search", action="store_true", help="skip the replays that look for avoiding settings"
    )
    sweep = engine_command("sweep", "replay under every combination of settings")
    sweep.add_argument(
        "--vary",
        "-V",
        action="append",
        default=[],
        required=True,
        metavar="KEY=VALUES",
        help="a setting and its values: a,b,c or start:stop:step (repeatable)",
    )
    sweep.add_argument(
        "--workers", "-j", type=int, default=None, help="processes to use (default: every core)"
    )
    sweep.add_argument("--csv", action="store_true", help="print CSV")
    sweep.add_argument("--sort", help="sort rows by a column (prefix - for descending)")

    profiles = sub.add_parser("profiles", help="list agent profiles and their settings")
    _common_options(profiles)
    profiles.add_argument("--json", action="store_true")

    formats = sub.add_parser("formats", help="list the input formats ctx-inspect reads")
    formats.add_argument("--json", action="store_true")

    demo = sub.add_parser("demo", help="watch a simulated agent run live in the dashboard")
    _common_options(demo)
    demo.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    demo.add_argument("--headless", action="store_true", help="print the run's summary")
    demo.add_argument("--delay", type=float, default=0.5, help="seconds between steps")
    demo.add_argument("--theme", help="dark, light or high-contrast")
    return parser


def build_open_parser() -> argparse.ArgumentParser:
    """`ctx-inspect FILE...` and `ctx-inspect --follow FILE`: the dashboard."""
    parser = argparse.ArgumentParser(
        prog="ctx-inspect",
        description="Open sessions in the dashboard (or run a COMMAND: "
        + ", ".join(COMMANDS)
        + "; see ctx-inspect COMMAND --help).",
    )
    parser.add_argument("--version", action="version", version=f"ctx-inspect {__version__}")
    parser.add_argument("files", nargs="*", type=Path, metavar="FILE")
    parser.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="follow a live file (or the newest session in a folder)",
    )
    _common_options(parser)
    parser.add_argument("--format", "-F", dest="format_name", help="force an input format")
    parser.add_argument(
        "--merge", action="store_true", help="read several streams of one run as one session"
    )
    parser.add_argument("--theme", help="dark, light or high-contrast")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    opening = args_list and args_list[0] not in COMMANDS and args_list[0] not in ("-h", "--help")
    if opening and args_list[0] != "--version":
        try:
            return _open(build_open_parser().parse_args(args_list))
        except InspectorError as exc:
            return _fail(exc)
    parser = build_parser()
    args = parser.parse_args(args_list)
    if args.command is None:
        args = parser.parse_args(["demo"])
    try:
        if args.command == "stats":
            return _stats(args)
        if args.command in ("replay", "diff", "explain", "sweep"):
            return _engine(args)
        if args.command == "profiles":
            return _profiles(args)
        if args.command == "formats":
            return _formats(args)
        return _demo(args)
    except InspectorError as exc:
        return _fail(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _fail(exc: InspectorError) -> int:
    """The error on one line of standard error (its paths and quoted input made safe)."""
    print(f"ctx-inspect: {visible(exc.one_line(), keep_layout=False)}", file=sys.stderr)
    return exc.exit_code


def _profile_factory(args: argparse.Namespace) -> Any:
    from ctx_inspect.app.config import build_profile
    from ctx_inspect.formats.registry import FormatSpec

    def profile_for(spec: FormatSpec) -> Any:
        return build_profile(args.profile, args.config, args.sets, default=spec.default_profile)

    return profile_for


def _stats(args: argparse.Namespace) -> int:
    """Each session's summary is printed as soon as it is read (a folder of thousands of
    sessions streams, holding one at a time); a session that cannot be read is reported on
    one line of stderr where it comes, the others are still read, and the exit code is 2."""
    from ctx_inspect.app.loader import FailedInput, iter_inputs
    from ctx_inspect.core.stats import RunFacts, summarize

    if args.follow:
        return _follow_stats(args)
    printer = _Printer(args.json, "render_stats")
    failed = 0
    for loaded in iter_inputs(
        args.files,
        _profile_factory(args),
        format_name=args.format_name,
        count_exact=not args.no_exact,
        merge=args.merge,
        tokenize=not args.no_exact,
    ):
        if isinstance(loaded, FailedInput):
            failed += 1
            printer.fail(loaded.error)
            continue
        printer.show(
            summarize(
                loaded.session,
                loaded.profile,
                RunFacts(
                    path=loaded.name, format=loaded.format.name, tokenizer=loaded.tokenizer_label
                ),
                per_step=args.steps,
            )
        )
    return 2 if failed else 0


class _Printer:
    """Prints results one by one as they come (JSON lines, or tables with a blank line
    between two), flushing each; failures go to stderr as one line each, in their place.
    Strings from inputs are made safe for a terminal: JSON escapes what a terminal would act
    on, tables show every string's visible form (``ctx_inspect.render``'s ``renderer``)."""

    def __init__(self, as_json: bool, renderer: str, **options: Any) -> None:
        self.as_json = as_json
        self.renderer = renderer
        self.options = options
        self.count = 0
        self._out: Any = None

    def show(self, result: Any) -> None:
        if self.as_json:
            sys.stdout.write(json_text(result, default=str) + "\n")
        else:
            from ctx_inspect import render

            if self._out is None:
                self._out = render.console()
            if self.count:
                self._out.print()
            getattr(render, self.renderer)(self._out, safe_data(result), **self.options)
        self.count += 1
        sys.stdout.flush()

    def fail(self, error: InspectorError) -> None:
        sys.stdout.flush()
        _fail(error)
        sys.stderr.flush()


def _follow_stats(args: argparse.Namespace) -> int:
    """``stats --follow``: a summary now, and a new one after every change, until Ctrl+C."""
    import threading

    from ctx_inspect.app.live import follow_stats
    from ctx_inspect.app.loader import calibrate, counter_for, follow_format
    from ctx_inspect.core.session import Session
    from ctx_inspect.core.stats import RunFacts, summarize
    from ctx_inspect.errors import InputError
    from ctx_inspect.sources.stream import display_name, is_stream

    if len(args.files) != 1 or args.merge:
        raise InputError("one file at a time", "--follow reads a single file")
    path = args.files[0]
    stop = threading.Event()
    spool = None
    if path.exists() or is_stream(path):
        spec, spool = follow_format(path, args.format_name, stop)
    else:
        spec = _forced(args, path)
    profile = _profile_factory(args)(spec)
    counter = counter_for(profile)

    def show(session: Session) -> None:
        summary = summarize(
            session,
            calibrate(profile, session),
            RunFacts(path=display_name(path), format=spec.name, tokenizer=counter.info.label),
            per_step=args.steps,
        )
        _emit([summary], args.json, "render_stats")
        if not args.json:
            print(flush=True)
        sys.stdout.flush()

    try:
        follow_stats(
            path,
            spec,
            profile,
            show,
            stop,
            count_exact=not args.no_exact,
            counter=counter,
            spool=spool,
        )
    except KeyboardInterrupt:
        stop.set()
    return 0


def _forced(args: argparse.Namespace, path: Path) -> Any:
    """A file that does not exist yet can be followed when its format is given."""
    from ctx_inspect.errors import InputError
    from ctx_inspect.formats.registry import get_format

    if not args.format_name:
        raise InputError("file not found", f"{path} (to wait for it, name its --format)")
    return get_format(args.format_name)


def _engine(args: argparse.Namespace) -> int:
    """A session that cannot be read is reported on one line of stderr, the others are
    still read, and the exit code is 2."""
    from ctx_inspect.app import commands
    from ctx_inspect.app.loader import FailedInput
    from ctx_inspect.core.collector import collector_paused

    failed: list[FailedInput] = []

    def report(failure: FailedInput) -> None:
        failed.append(failure)
        _Printer(args.json, "").fail(failure.error)

    # a headless command: what it makes lives until the process ends, so the collector never
    # needs to scan it (``core.collector``)
    with collector_paused(freeze=True):
        if args.command == "replay":
            _emit(commands.run_replay(args, report), args.json, "render_replay")
        elif args.command == "diff":
            rows = commands.run_diff(args, report)
            _emit(rows, args.json, "render_diff", full=args.full)
        elif args.command == "explain":
            items = commands.run_explain(args, report)
            if items or not failed:  # when nothing was read, the error lines say why
                _emit([items], args.json, "render_explain")
        else:
            table = commands.run_sweep(args)
            if args.csv and not args.json:
                from ctx_inspect.render import write_sweep_csv

                write_sweep_csv(sys.stdout, safe_data(table))
            else:
                _emit([table], args.json, "render_sweep")
    return 2 if failed else 0


def _emit(results: list[Any], as_json: bool, renderer: str, **options: Any) -> None:
    """Every result printed as ``_Printer`` prints them."""
    printer = _Printer(as_json, renderer, **options)
    for result in results:
        printer.show(result)


def _profiles(args: argparse.Namespace) -> int:
    from ctx_inspect.app.config import build_profile
    from ctx_inspect.core.profiles import profile_names

    names = [args.profile] if args.profile else list(profile_names())
    rows = [build_profile(name, args.config, args.sets).settings() for name in names]
    _emit([rows], args.json, "render_profiles")
    _warn_problems()
    return 0


def _formats(args: argparse.Namespace) -> int:
    from ctx_inspect.formats.registry import all_formats

    rows = [
        {
            "name": f.name,
            "description": f.description,
            "reads": f.reads,
            "default_profile": f.default_profile,
        }
        for f in all_formats()
    ]
    _emit([rows], args.json, "render_formats")
    _warn_problems()
    return 0


def _warn_problems() -> None:
    """A line on standard error for every plug-in (agent or reader) that failed to load."""
    from ctx_inspect.formats.registry import problems

    for name, problem in problems().items():
        line = f"ctx-inspect: warning: {name}: {problem}"
        print(visible(line, keep_layout=False), file=sys.stderr)


def _open(args: argparse.Namespace) -> int:
    if not args.files:
        raise InspectorError("nothing to open", "name a FILE, or run `ctx-inspect demo`")
    if args.follow and len(args.files) != 1:
        raise InspectorError("one file at a time", "--follow follows a single file or folder")
    _check_openable(args)
    _keys_from_terminal(args.files)
    from ctx_inspect.ui.app import InspectorApp, OpenRequest

    request = OpenRequest(
        paths=tuple(args.files),
        profile_for=_profile_factory(args),
        format_name=args.format_name,
        follow=args.follow,
        merge=args.merge,
        config=args.config,
    )
    InspectorApp(request, theme=args.theme).run()
    return 0


def _check_openable(args: argparse.Namespace) -> None:
    """Before the dashboard starts: every path exists (a mistyped command is named as such),
    and there is a terminal to draw on and to read keys from. Otherwise one line, exit 2."""
    import difflib

    from ctx_inspect.errors import InputError
    from ctx_inspect.sources.stream import is_stdin, is_stream

    for i, path in enumerate(args.files):
        if path.exists() or is_stream(path) or (args.follow and args.format_name):
            continue  # a file to be followed may be created later when its format is named
        word = str(path)
        close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
        if i == 0 and close and "/" not in word and "." not in word:
            raise InputError(
                "unknown command", f"{word!r} (did you mean `ctx-inspect {close[0]}`?)"
            )
        raise InputError("file not found", word)
    keys_from_tty = any(is_stdin(p) for p in args.files)
    if not sys.stdout.isatty() or not (sys.stdin.isatty() or keys_from_tty):
        raise InputError(
            "no terminal",
            "the dashboard draws on a terminal and reads keys from it; for a summary in a "
            "pipe or a script, run `ctx-inspect stats FILE`",
        )


def _keys_from_terminal(paths: Sequence[Path]) -> None:
    """The dashboard reads keys from standard input: when a session comes in on it (``-``),
    read it whole first, then take the keys from the terminal (``/dev/tty``), as pagers do."""
    import os

    from ctx_inspect.app.loader import input_file
    from ctx_inspect.sources.stream import is_stdin

    if not any(is_stdin(p) for p in paths) or sys.stdin is None or sys.stdin.isatty():
        return
    input_file(Path("-"))
    try:
        tty = os.open("/dev/tty", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        raise InspectorError(
            "no terminal for the dashboard",
            "standard input holds the session and there is no terminal to read keys from; "
            "use `ctx-inspect stats -`",
        ) from None
    os.dup2(tty, sys.stdin.fileno())
    os.close(tty)


def _demo(args: argparse.Namespace) -> int:
    """A simulated agent writes a live log; the dashboard follows it. Without a terminal (or
    with --headless / --json) the run is written at once and summarised instead."""
    import tempfile
    import threading

    from ctx_inspect.app.demo import write_demo_session

    interactive = sys.stdout.isatty() and sys.stdin.isatty()
    with tempfile.TemporaryDirectory(prefix="ctx-inspect-demo-") as folder:
        path = Path(folder) / "demo-run.jsonl"
        if args.json or args.headless or not interactive:
            write_demo_session(path)
            ns = argparse.Namespace(
                files=[path],
                profile=args.profile or "aiagent",
                config=args.config,
                sets=args.sets,
                format_name="native",
                json=args.json,
                no_exact=False,
                steps=False,
                merge=False,
                follow=False,
            )
            return _stats(ns)
        from ctx_inspect.ui.app import InspectorApp, OpenRequest

        path.touch()
        writer = threading.Thread(
            target=write_demo_session, args=(path,), kwargs={"delay": args.delay}, daemon=True
        )
        writer.start()
        profile_args = argparse.Namespace(
            profile=args.profile or "aiagent", config=args.config, sets=args.sets
        )
        request = OpenRequest(
            paths=(path,),
            profile_for=_profile_factory(profile_args),
            format_name="native",
            follow=True,
            config=args.config,
        )
        InspectorApp(request, theme=args.theme).run()
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

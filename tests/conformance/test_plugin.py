"""A plug-in's format and policy get the conformance suites without a line of their own: the
suites run with the plug-in of ``tests/plugin`` on the path (as an installed distribution, its
``.dist-info`` beside it) and its fixtures named by ``CTX_TEST_DATA``, in a process of their
own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PLUGIN = TESTS / "plugin"
# a case parametrized over every stream format or every policy
CASE = re.compile(r'parametrize\("name", (?:streams|with_policy)\(.*\)\)\ndef (test_\w+)')
SUITES = [TESTS / "conformance" / "test_formats.py", TESTS / "conformance" / "test_policies.py"]


def test_the_plugins_format_and_policy_pass_the_suites() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PLUGIN)
    env["CTX_TEST_DATA"] = str(PLUGIN / "data")
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "0"]
    run = subprocess.run(
        [*command, "-k", "example", *map(str, SUITES)],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    outcomes = dict(re.findall(r"::(test_\w+\[example[\w-]*\]) (\w+)", run.stdout))
    by_suite = {
        suite.name: {test for test in outcomes if f"{suite.name}::{test}" in run.stdout}
        for suite in SUITES
    }
    # every case of both suites for a stream format or a policy ran for the plug-in's
    for suite in SUITES:
        cases = set(re.findall(CASE, suite.read_text()))
        ran = {test.split("[")[0] for test in by_suite[suite.name]}
        assert cases <= ran, sorted(cases - ran)
    assert {outcome for outcome in outcomes.values()} <= {"PASSED", "XFAIL", "SKIPPED"}
    assert sum(outcome == "PASSED" for outcome in outcomes.values()) >= 20

"""The suites every format and every agent's policy pass."""

from __future__ import annotations

import pytest
from _pytest.mark.structures import ParameterSet


def case(*values: str, skip: str | None = None, known: str | None = None) -> ParameterSet:
    """One parameter of a suite's case, named by its values: skipped with why the case does not
    apply to it, or expected to fail (strictly) with the bug it shows."""
    marks = []
    if skip is not None:
        marks.append(pytest.mark.skip(reason=skip))
    if known is not None:
        marks.append(pytest.mark.xfail(strict=True, reason=known))
    return pytest.param(*values, id="-".join(values), marks=marks)

"""The vocabulary of a context window: its zones and how its usable size is composed.

Every profile (``ctx_inspect.core.profiles``) describes its agent's window as ``LimitParts``
and sorts a token count into a ``Zone``; the views colour gauges by zone.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Zone(StrEnum):
    """Where a token count sits relative to the point at which the agent acts."""

    SAFE = "safe"  # below the warning level
    WARNING = "warning"  # from the warning level up to the agent's threshold
    OVERFLOW = "overflow"  # past the threshold: the agent compacts, guards or fails


class LimitParts(BaseModel):
    """A window as the agent composes it: the whole window minus a buffer minus the output
    reserve. ``effective`` is the room left for the prompt."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    window: int = Field(ge=0)
    buffer: int = Field(default=0, ge=0)
    max_output: int = Field(default=0, ge=0)

    @property
    def effective(self) -> int:
        return max(0, self.window - self.buffer - self.max_output)

"""The global ``lcm`` options, as given on the command line (light: the command group imports it at start)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lossless.config import Config

__all__ = ["CliState"]


@dataclass(slots=True)
class CliState:
    """The global options, as given on the command line."""

    database: str | None = None
    config_file: Path | None = None
    agent: str | None = None

    def config(self, **overrides: Any) -> Config:
        from lossless.config import load_config

        values: dict[str, Any] = {"database_url": self.database, "agent_id": self.agent, **overrides}
        return load_config(values, config_file=self.config_file)

"""Reading a fixture into its events."""

from __future__ import annotations

from pathlib import Path

from lossless.transcripts import Entry, Event, ReadContext, SessionInfo, Skipped, reader_for
from tests.conftest import FIXTURES

__all__ = ["FIXTURES", "entries", "infos", "read", "skipped"]


def read(path: Path, format_name: str, **context: object) -> list[Event]:
    with path.open("rb") as stream:
        return list(reader_for(format_name).read(stream, ReadContext(str(path), **context)))  # type: ignore[arg-type]


def entries(events: list[Event]) -> list[Entry]:
    return [e for e in events if isinstance(e, Entry)]


def skipped(events: list[Event]) -> list[Skipped]:
    return [e for e in events if isinstance(e, Skipped)]


def infos(events: list[Event]) -> list[SessionInfo]:
    return [e for e in events if isinstance(e, SessionInfo)]

"""Plain values that the ``lcm`` command line states before anything runs, in a leaf module.

The recall tools' limits (``lcm_grep``'s result count and neighbouring turns, ``lcm_expand``'s
depth), the bounds of an expansion grant and the size of a page of a stored large file are
defined here once and re-exported by the module that enforces each (:mod:`lossless.retrieval.grep`,
:mod:`lossless.retrieval.dag`, :mod:`lossless.engine.recall`, :mod:`lossless.large_files`).
The names of the transcript formats and of the memory categories are the command line's copy of
what :mod:`lossless.transcripts` (its readers) and :mod:`lossless.memory.records` (its ``Category``
type) define; ``tests/test_constants.py`` keeps each copy equal to its source.

Invariant: this module imports nothing of lossless and only :mod:`datetime` of the standard
library, so the command line can put these values in its options and ``--help`` without
loading the engine, the records or the readers.
"""

from __future__ import annotations

from datetime import timedelta

__all__ = [
    "DEFAULT_GRANT_TTL",
    "DEFAULT_LIMIT",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_PAGE_BYTES",
    "EXIT_INTERRUPTED",
    "INTERRUPTED",
    "MAX_CONTEXT",
    "MAX_DEPTH",
    "MAX_GRANT_TOKEN_CAP",
    "MAX_GRANT_TTL",
    "MAX_LIMIT",
    "MAX_PAGE_BYTES",
    "MEMORY_CATEGORIES",
    "MIN_GRANT_TTL",
    "TRANSCRIPT_FORMATS",
]

#: Ctrl-C's exit status (128 + SIGINT, as shells report it) and what ``lcm`` says then (``lossless.cli``, and
#: ``lossless.__main__`` while the command line itself is still loading).
EXIT_INTERRUPTED = 130
INTERRUPTED = (
    "what was already written is kept whole and nothing is half-written (an imported file is stored whole "
    "or not at all); run the same command again to go on: lcm import, lcm index and lcm migrate "
    "continue where they stopped"
)

#: ``lcm_grep``: the most results one call returns, and the default.
MAX_LIMIT = 200
DEFAULT_LIMIT = 50
#: The most neighbouring turns (each side) a hit can come back with.
MAX_CONTEXT = 5

#: ``lcm_expand``: how deep an expansion walks the summary DAG by default, and at most.
DEFAULT_MAX_DEPTH = 3
MAX_DEPTH = 64

#: How long an expansion grant lasts unless told, and its bounds.
DEFAULT_GRANT_TTL = timedelta(minutes=10)
MIN_GRANT_TTL = timedelta(seconds=1)
MAX_GRANT_TTL = timedelta(hours=24)
#: The largest token cap a grant may carry (that of the ``max_expand_tokens`` setting).
MAX_GRANT_TOKEN_CAP = 10_000_000

#: Bytes of content a page of a stored large file holds by default, and at most.
DEFAULT_PAGE_BYTES = 32 * 1024
MAX_PAGE_BYTES = 512 * 1024

#: The transcript formats ``lcm import --format`` takes (:data:`lossless.transcripts.FORMATS`, in order).
TRANSCRIPT_FORMATS: tuple[str, ...] = ("openclaw", "pi", "claude-code", "swe-agent", "openai-chat")
#: The memory categories (:data:`lossless.memory.records.CATEGORIES`, in order).
MEMORY_CATEGORIES: tuple[str, ...] = ("profile", "preferences", "entities", "events", "cases", "patterns")

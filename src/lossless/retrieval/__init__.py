"""Retrieval: finding and reading back what compaction summarised away (grep, describe, expand, expand_query).

Submodules: :mod:`~lossless.retrieval.query` (safe query parsing),
:mod:`~lossless.retrieval.grep` (messages and summaries),
:mod:`~lossless.retrieval.files` (the lines of stored large files),
:mod:`~lossless.retrieval.semantic` (messages and summaries by meaning, through a port),
:mod:`~lossless.retrieval.dag` (describe, expand),
:mod:`~lossless.retrieval.access` (callers, reach, grants),
:mod:`~lossless.retrieval.service` (the caller-aware facade) and
:mod:`~lossless.retrieval.expansion` (expand_query and its sub-agent runners).
All are core: no I/O beyond the Store port and the callables and ports they are given.
"""

from __future__ import annotations

from lossless.retrieval.access import AccessDenied, Caller, Reach
from lossless.retrieval.dag import ExpandedMessage, ExpandedSummary, ExpandResult, SummaryDescription
from lossless.retrieval.grep import GrepHit, GrepOptions, GrepResult
from lossless.retrieval.service import FileView, MessageView, Retriever

__all__ = [
    "AccessDenied",
    "Caller",
    "ExpandResult",
    "ExpandedMessage",
    "ExpandedSummary",
    "FileView",
    "GrepHit",
    "GrepOptions",
    "GrepResult",
    "MessageView",
    "Reach",
    "Retriever",
    "SummaryDescription",
]

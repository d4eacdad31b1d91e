"""Ports: the small protocols the core talks to.  Backends implement them; the core never imports one.

One module per port, all re-exported here (``from lossless.ports import Store`` is the way to import them):

* :mod:`~lossless.ports.store` — :class:`Store`, the conversations, messages, summary DAG, context and
  search of one backend, with the invariants every implementation keeps (the contract suite in
  ``tests/contract/`` checks them);
* :mod:`~lossless.ports.blobs` — :class:`BlobStore` (the bytes of large files) and :class:`ConversationLocks`;
* :mod:`~lossless.ports.summarizer` — :class:`Summarizer` and its request and result;
* :mod:`~lossless.ports.maintenance` — optional store capabilities: integrity checks, batched and
  reach-first search, one-trip session context;
* :mod:`~lossless.ports.retention` — pruning conversations and their blobs;
* :mod:`~lossless.ports.jobs` — the background :class:`JobQueue`;
* :mod:`~lossless.ports.vectors` — :class:`SearchVectorStore`, search vectors built ahead.
"""

from __future__ import annotations

from lossless.ports.blobs import BlobStore, ConversationLocks
from lossless.ports.jobs import Job, JobKind, JobQueue, JobReason, JobState
from lossless.ports.maintenance import (
    BatchSearchStore,
    IndexDiscrepancy,
    MaintainableStore,
    ReachPages,
    ReachSearchStore,
    SessionContext,
    SessionContextStore,
)
from lossless.ports.retention import PrunableBlobStore, PruneCandidate, RetentionStore
from lossless.ports.store import AppendResult, PreparedMessage, SearchRequest, SearchRow, Store, StoreStats
from lossless.ports.summarizer import SegmentItem, Summarizer, SummaryPolicy, SummaryRequest, SummaryResult
from lossless.ports.vectors import ItemVectors, SearchVectorStore, VectorSource, VectorState, VectorTodo

__all__ = [
    "AppendResult",
    "BatchSearchStore",
    "BlobStore",
    "ConversationLocks",
    "IndexDiscrepancy",
    "ItemVectors",
    "Job",
    "JobKind",
    "JobQueue",
    "JobReason",
    "JobState",
    "MaintainableStore",
    "PreparedMessage",
    "PrunableBlobStore",
    "PruneCandidate",
    "ReachPages",
    "ReachSearchStore",
    "RetentionStore",
    "SearchRequest",
    "SearchRow",
    "SearchVectorStore",
    "SegmentItem",
    "SessionContext",
    "SessionContextStore",
    "Store",
    "StoreStats",
    "Summarizer",
    "SummaryPolicy",
    "SummaryRequest",
    "SummaryResult",
    "VectorSource",
    "VectorState",
    "VectorTodo",
]

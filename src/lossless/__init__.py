"""lossless: unlimited, lossless memory of an LLM agent's own conversations.

Every message is stored verbatim; old history is compacted into a DAG of
summaries that always point back to their sources; the agent can search and
expand its way back to any original detail.  Start with :class:`ContextEngine`::

    async with await ContextEngine.open() as engine:
        await engine.ingest("session-1", Message.user("hello"))

Everything listed in ``__all__`` is the public API; other names may change.
"""

import importlib
from typing import TYPE_CHECKING, Any

from lossless._version import VERSION

if TYPE_CHECKING:
    from lossless.assembly import AssembledContext, LeftOut
    from lossless.bootstrap import FileImport
    from lossless.compaction import CompactionResult
    from lossless.config import SETTINGS, Config, load_config
    from lossless.engine import AfterTurnResult, ContextEngine, EngineInfo, FileDescription
    from lossless.engine.wiring import open_store
    from lossless.errors import (
        ConfigError,
        ConflictError,
        InputError,
        LcmError,
        MissingDependencyError,
        NotFoundError,
        SchemaError,
        StoreError,
        TranscriptError,
    )
    from lossless.ports import BlobStore, Store, StoreStats
    from lossless.records import (
        AgentPart,
        CompactionEvent,
        CompactionPart,
        ContextItem,
        ContextRow,
        Conversation,
        FilePart,
        IngestResult,
        LargeFile,
        Message,
        MessageRecord,
        Part,
        PatchPart,
        ReasoningPart,
        RetryPart,
        SnapshotPart,
        StepFinishPart,
        StepStartPart,
        SubtaskPart,
        Summary,
        TextPart,
        ToolPart,
    )
    from lossless.retrieval import AccessDenied, Caller
    from lossless.tokens import EstimatingCounter, TiktokenCounter, TokenCounter
    from lossless.triggers import CompactionDecision

__version__ = VERSION

# Names load on first use (PEP 562): ``import lossless`` and the ``lcm`` command stay fast,
# and nothing optional is imported until the code that needs it runs.
_EXPORTS: dict[str, str] = {
    "AssembledContext": "lossless.assembly",
    "LeftOut": "lossless.assembly",
    "CompactionResult": "lossless.compaction",
    "AfterTurnResult": "lossless.engine",
    "FileImport": "lossless.bootstrap",
    "SETTINGS": "lossless.config",
    "Config": "lossless.config",
    "load_config": "lossless.config",
    "ContextEngine": "lossless.engine",
    "EngineInfo": "lossless.engine",
    "FileDescription": "lossless.engine",
    "ConfigError": "lossless.errors",
    "ConflictError": "lossless.errors",
    "InputError": "lossless.errors",
    "LcmError": "lossless.errors",
    "MissingDependencyError": "lossless.errors",
    "NotFoundError": "lossless.errors",
    "SchemaError": "lossless.errors",
    "StoreError": "lossless.errors",
    "TranscriptError": "lossless.errors",
    "BlobStore": "lossless.ports",
    "Store": "lossless.ports",
    "StoreStats": "lossless.ports",
    "AgentPart": "lossless.records",
    "CompactionEvent": "lossless.records",
    "CompactionPart": "lossless.records",
    "ContextItem": "lossless.records",
    "ContextRow": "lossless.records",
    "Conversation": "lossless.records",
    "FilePart": "lossless.records",
    "IngestResult": "lossless.records",
    "LargeFile": "lossless.records",
    "Message": "lossless.records",
    "MessageRecord": "lossless.records",
    "Part": "lossless.records",
    "PatchPart": "lossless.records",
    "ReasoningPart": "lossless.records",
    "RetryPart": "lossless.records",
    "SnapshotPart": "lossless.records",
    "StepFinishPart": "lossless.records",
    "StepStartPart": "lossless.records",
    "SubtaskPart": "lossless.records",
    "Summary": "lossless.records",
    "TextPart": "lossless.records",
    "ToolPart": "lossless.records",
    "AccessDenied": "lossless.retrieval",
    "Caller": "lossless.retrieval",
    "CompactionDecision": "lossless.triggers",
    "open_store": "lossless.engine.wiring",
    "EstimatingCounter": "lossless.tokens",
    "TiktokenCounter": "lossless.tokens",
    "TokenCounter": "lossless.tokens",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lossless' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "SETTINGS",
    "AccessDenied",
    "AfterTurnResult",
    "AgentPart",
    "AssembledContext",
    "BlobStore",
    "Caller",
    "CompactionDecision",
    "CompactionEvent",
    "CompactionPart",
    "CompactionResult",
    "Config",
    "ConfigError",
    "ConflictError",
    "ContextEngine",
    "ContextItem",
    "ContextRow",
    "Conversation",
    "EngineInfo",
    "EstimatingCounter",
    "FileDescription",
    "FileImport",
    "FilePart",
    "IngestResult",
    "InputError",
    "LargeFile",
    "LcmError",
    "LeftOut",
    "Message",
    "MessageRecord",
    "MissingDependencyError",
    "NotFoundError",
    "Part",
    "PatchPart",
    "ReasoningPart",
    "RetryPart",
    "SchemaError",
    "SnapshotPart",
    "StepFinishPart",
    "StepStartPart",
    "Store",
    "StoreError",
    "StoreStats",
    "SubtaskPart",
    "Summary",
    "TextPart",
    "TiktokenCounter",
    "TokenCounter",
    "ToolPart",
    "TranscriptError",
    "__version__",
    "load_config",
    "open_store",
]

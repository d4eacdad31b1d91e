"""lossless: unlimited, lossless memory of an LLM agent's own conversations.

Every message is stored verbatim; old history is compacted into a DAG of
summaries that always point back to their sources; the agent can search and
expand its way back to any original detail.  Start with :class:`ContextEngine`::

    async with await ContextEngine.open() as engine:
        await engine.ingest("session-1", Message.user("hello"))

Everything listed in ``__all__`` is the public API; other names may change.
"""

from lossless.assembly import LeftOut
from lossless.bootstrap import FileImport
from lossless.config import SETTINGS, Config, load_config
from lossless.engine import VERSION, ContextEngine, EngineInfo, FileDescription
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
from lossless.stores import open_store
from lossless.tokens import EstimatingCounter, TiktokenCounter, TokenCounter
from lossless.triggers import CompactionDecision

__version__ = VERSION

__all__ = [
    "SETTINGS",
    "AccessDenied",
    "AgentPart",
    "BlobStore",
    "Caller",
    "CompactionDecision",
    "CompactionEvent",
    "CompactionPart",
    "Config",
    "ConfigError",
    "ConflictError",
    "ContextEngine",
    "ContextItem",
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

"""The engine: :class:`ContextEngine`, composed of one object per concern (see :mod:`lossless.engine.facade`).

Modules: :mod:`~lossless.engine.facade` (the engine), :mod:`~lossless.engine.wiring` (the only
module that imports backends and providers), :mod:`~lossless.engine.turn` (the write path and the
compaction policy), :mod:`~lossless.engine.conversations`, :mod:`~lossless.engine.recall`,
:mod:`~lossless.engine.memory`, :mod:`~lossless.engine.files` and :mod:`~lossless.engine.operations`.
The names below are the ones hosts and adapters import from ``lossless.engine``.
"""

from lossless._version import VERSION
from lossless.engine.conversations import SpawnHandle, conversation_number
from lossless.engine.facade import ContextEngine, EngineInfo, ImportProgress
from lossless.engine.files import FileDescription
from lossless.engine.recall import IndexBuild
from lossless.engine.turn import AfterTurnResult
from lossless.engine.wiring import MemorySession, open_memory

__all__ = [
    "VERSION",
    "AfterTurnResult",
    "ContextEngine",
    "EngineInfo",
    "FileDescription",
    "ImportProgress",
    "IndexBuild",
    "MemorySession",
    "SpawnHandle",
    "conversation_number",
    "open_memory",
]

"""The ContextEngine: the one object hosts, the CLI and the servers talk to.

It follows the context-engine lifecycle of the reference (``info``, ``bootstrap``, ``ingest``,
``ingest_batch``, ``assemble``, ``after_turn``, ``compact``, sub-agent spawns, ``dispose``) and adds
recall (``grep``, ``describe``, ``expand``, ``expand_query``), large files, long-term memory and
operations (integrity, retention, background jobs).  It is composed, not inherited: each concern
lives in its own object, built once from the :class:`Config` by :mod:`lossless.engine.wiring`,
and each public method here is that object's method (:class:`_Forward`):

* :class:`~lossless.engine.conversations.Conversations` — finding conversations, spawns, restarts;
* :class:`~lossless.engine.turn.Turns` — ingest, assemble, ``after_turn`` and compaction, under
  one :class:`~lossless.engine.turn.CompactionPolicy`;
* :class:`~lossless.engine.recall.Recall` — the agent tools and expansion grants;
* :class:`~lossless.engine.files.Files` — large files;
* :class:`~lossless.engine.memory.AgentMemory` — long-term memory;
* :class:`~lossless.engine.operations.Operations` — integrity, retention, jobs and workers.

Invariants:

* Every conversation the engine creates belongs to ``config.agent_id``; another agent's
  conversation or file is :class:`~lossless.errors.NotFoundError`, as if it did not exist.
* Each ingest is one store transaction; multi-step rewrites of a conversation (compaction) take
  that conversation's lock, so different conversations proceed concurrently.
* Nothing here reads the environment: the :class:`Config` is built once, at the edge
  (:meth:`ContextEngine.open` or the CLI).
* **One clock.**  The ``clock`` the engine is given (default: the wall clock, UTC) is the one
  every part stamps and compares times by: compaction, grants, jobs and long-term memory (the
  times memories are stored, superseded, updated and accessed at, and the "now" their decay and
  recency are read against).
"""

from __future__ import annotations

import logging
import os
import types
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from types import TracebackType
from typing import Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, cast, overload
from zoneinfo import ZoneInfo

import anyio.to_thread

from lossless._version import VERSION
from lossless.bootstrap import FileImport, discover_transcripts, import_transcript
from lossless.config import Config, load_config
from lossless.engine import wiring
from lossless.engine.conversations import Conversations, SpawnHandle
from lossless.engine.files import Files
from lossless.engine.lineage import Lineage
from lossless.engine.memory import AgentMemory
from lossless.engine.operations import Operations
from lossless.engine.recall import Recall
from lossless.engine.turn import CompactionPolicy, Turns
from lossless.errors import InputError, TranscriptError
from lossless.ports import BlobStore, Store, StoreStats, Summarizer
from lossless.records import IngestResult, Message, MessageRecord, utcnow
from lossless.tokens import RecentCounter, TokenCounter, token_counter_for

__all__ = ["ContextEngine", "EngineInfo", "ImportProgress"]

log = logging.getLogger("lossless.engine")

#: Called after each file of an import: (files done, files in all, that file's result or error).
ImportProgress = Callable[[int, int, FileImport | Exception], Awaitable[None] | None]

_Part = TypeVar("_Part")
_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Forward(Generic[_Part, _P, _R]):
    """A public engine method that is a part's method: ``engine.grep`` is ``engine.recall.grep`` (bound, as it is)."""

    def __init__(self, part: str, method: Callable[Concatenate[_Part, _P], _R]) -> None:
        self.part = part
        self.method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, engine: None, owner: type[Any]) -> _Forward[_Part, _P, _R]: ...
    @overload
    def __get__(self, engine: ContextEngine, owner: type[Any]) -> Callable[_P, _R]: ...
    def __get__(self, engine: ContextEngine | None, owner: type[Any]) -> _Forward[_Part, _P, _R] | Callable[_P, _R]:
        if engine is None:
            return self
        return cast("Callable[_P, _R]", types.MethodType(self.method, engine.parts[self.part]))


@dataclass(frozen=True, slots=True)
class EngineInfo:
    id: str
    name: str
    version: str
    owns_compaction: bool


def _local_zone() -> tzinfo:
    zone = datetime.now().astimezone().tzinfo
    assert zone is not None
    return zone


class ContextEngine:
    """Lossless context management for one agent identity over one store.

    Open one with ``await ContextEngine.open()`` (the embedded SQLite default)
    or ``ContextEngine.open("sqlite:///path.db")``, preferably as
    ``async with await ContextEngine.open() as engine: …``.
    """

    info = EngineInfo(id="lossless", name="Lossless Context Engine", version=VERSION, owns_compaction=True)

    def __init__(
        self,
        store: Store,
        config: Config | None = None,
        *,
        token_counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
        clock: Callable[[], datetime] = utcnow,
        blobs: BlobStore | None = None,
        file_summarizer: Summarizer | None = None,
    ) -> None:
        self.store = store
        self.config = config = config or Config()
        self.tokens = token_counter or token_counter_for(config.tokenizer)
        self.clock = clock
        self.zone: tzinfo = ZoneInfo(config.timezone) if config.timezone else _local_zone()
        counting = RecentCounter(self.tokens)  # interception and the ingest checks share counts
        memory = AgentMemory(store, config, clock=clock)
        built = wiring.build(
            store, config, tokens=self.tokens, counting=counting, zone=self.zone, clock=clock,
            summarizer=summarizer, blobs=blobs, file_summarizer=file_summarizer,
            on_leaf=(lambda leaf: memory.mine_summary(leaf)) if config.memory_auto_extract else None,
        )  # fmt: skip
        self.summarizer, self.blobs = built.summarizer, built.blobs
        self.compactor, self.interceptor = built.compactor, built.interceptor
        sessions = Conversations(store, config)
        policy = CompactionPolicy(self.compactor, config)
        files = Files(store, self.blobs, config, sessions)
        self.operations = Operations(
            store, self.blobs, config, conversations=sessions, policy=policy, clock=clock,
            idle_step=lambda: self.recall.run_idle_step(),
        )  # fmt: skip
        self.recall = Recall(
            store, config, tokens=self.tokens, clock=clock, read_file=files.read, memory=memory.memory,
            runner=lambda: wiring.expansion_runner_for(config, self.tokens, memory.leads),
            mine_step=memory.mine_step if config.memory_auto_extract else None,
            memory_vectors_step=memory.vectors_step,
        )  # fmt: skip
        self.turns = Turns(
            store, config, tokens=self.tokens, counting=counting, zone=self.zone, clock=clock,
            interceptor=self.interceptor, conversations=sessions, policy=policy, operations=self.operations,
            remember=memory.remember_turn,
        )  # fmt: skip
        self.sessions = sessions
        #: The parts the public methods forward to, by name.
        self.parts: dict[str, object] = {"sessions": sessions, "turns": self.turns, "recall": self.recall}
        self.parts.update(files=files, operations=self.operations, memory=memory, lineage=Lineage(store, config))

    # -------------------------------------------------------------- lifecycle

    @classmethod
    async def open(
        cls,
        database_url: str | None = None,
        *,
        config: Config | None = None,
        clock: Callable[[], datetime] = utcnow,
        **settings: Any,
    ) -> ContextEngine:
        """Open an engine on ``database_url`` (default: the configured one, else SQLite in the data dir).

        ``settings`` override configuration values by name (e.g. ``fresh_tail_count=32``);
        without ``config`` the configuration is loaded from the environment and config file.
        ``clock``: what "now" is, as for the constructor (default: the wall clock, UTC).
        """
        if config is None:
            config = load_config({"database_url": database_url, **settings})
        elif settings or database_url:
            config = config.replace(**({"database_url": database_url} if database_url else {}), **settings)
        store = await wiring.open_store(config.resolved_database_url, config)
        try:
            return cls(store, config, clock=clock)
        except BaseException:
            # A setting the engine refuses (a summarizer with no model …): close the store again, else
            # its connections and index thread outlive the error (and, in `lcm replay`, its scratch folder).
            await store.close()
            raise

    async def __aenter__(self) -> ContextEngine:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.dispose()

    async def dispose(self) -> None:
        """Release the store's connections.  The engine cannot be used afterwards."""
        await self.blobs.close()
        await self.store.close()

    async def stats(self) -> StoreStats:
        """Row counts and sizes of the store."""
        return await self.store.stats()

    # -------------------------------------------------------------- conversations

    conversation = _Forward("sessions", Conversations.get)
    conversations = _Forward("sessions", Conversations.recent)
    messages = _Forward("sessions", Conversations.messages)
    context = _Forward("sessions", Conversations.context)
    conversation_sizes = _Forward("sessions", Conversations.sizes)

    # -------------------------------------------------------------- the summary DAG by id (this agent's)

    summaries_by_id = _Forward("lineage", Lineage.summaries_by_id)
    summary_sources = _Forward("lineage", Lineage.summary_sources)
    summary_messages = _Forward("lineage", Lineage.summary_messages)
    condensed_into = _Forward("lineage", Lineage.condensed_into)
    messages_by_id = _Forward("lineage", Lineage.messages_by_id)

    async def prepare_subagent_spawn(
        self,
        parent_session_id: str,
        child_session_id: str,
        *,
        mode: Literal["isolated", "fork"] = "isolated",
        child_session_key: str | None = None,
        ttl: timedelta | None = None,
    ) -> SpawnHandle:
        """Set up a sub-agent's conversation before it starts.

        ``isolated``: an empty conversation, linked to its parent.  ``fork``: the child's context
        starts with the newest of the parent's context items, up to ``bootstrap_max_tokens`` (they
        are shared, not copied: expanding them leads to the parent's messages).  Call
        :meth:`SpawnHandle.rollback` if the spawn then fails.

        ``ttl`` (spec 004's optional TTL; 1 s to 24 h): the child also gets a read grant over the
        parent's history that ends after ``ttl`` — or earlier, at :meth:`on_subagent_ended` or
        rollback (``handle.grant.id`` is what ``lcm mcp --grant`` takes).
        """
        return await self.sessions.prepare_spawn(
            parent_session_id, child_session_id, mode=mode, child_session_key=child_session_key, ttl=ttl,
            grant=self.recall.grant_expansion, revoke=self.recall.revoke_expansion_grant,
        )  # fmt: skip

    async def on_subagent_ended(self, child_session_id: str) -> None:
        """A sub-agent finished or was swept: archive its conversation (it stays stored and searchable)."""
        await self.sessions.end_spawn(child_session_id, self.recall.revoke_expansion_grant)

    async def restart_session(
        self, session_id: str, new_session_id: str, *, carry_context: bool = False, drop_newest: int = 0
    ) -> list[MessageRecord]:
        """Go on with ``session_id`` as a new conversation ``new_session_id``; nothing stored is removed.

        The old conversation is archived (it stays stored and searchable) and the new one is
        linked to it as its parent.  ``carry_context``: the new context starts as the old one
        (shared items, not copies), less its newest ``drop_newest`` raw messages — a host's
        "undo" — which are returned, oldest first; otherwise it starts empty (a host's "clear").
        Only raw messages at the end of the context can be left out: a summary stops the count.
        """
        return await self.sessions.restart(
            session_id, new_session_id, carry_context=carry_context, drop_newest=drop_newest
        )

    # -------------------------------------------------------------- the turn

    async def ingest(
        self, session_id: str, message: Message, *, session_key: str | None = None, is_heartbeat: bool = False
    ) -> IngestResult:
        """Store one message (see :meth:`ingest_batch`); heartbeat polls are skipped."""
        if is_heartbeat:
            return IngestResult(None, skipped=1, skip_reason="heartbeat")
        return await self.turns.ingest_batch(session_id, [message], session_key=session_key)

    ingest_batch = _Forward("turns", Turns.ingest_batch)
    assemble = _Forward("turns", Turns.assemble)
    after_turn = _Forward("turns", Turns.after_turn)
    evaluate = _Forward("turns", Turns.evaluate)
    compact = _Forward("turns", Turns.compact)

    # -------------------------------------------------------------- recall

    grep = _Forward("recall", Recall.grep)
    describe = _Forward("recall", Recall.describe)
    expand = _Forward("recall", Recall.expand)
    expand_query = _Forward("recall", Recall.expand_query)
    grant_expansion = _Forward("recall", Recall.grant_expansion)
    expansion_grant = _Forward("recall", Recall.expansion_grant)
    revoke_expansion_grant = _Forward("recall", Recall.revoke_expansion_grant)
    usable_grant = _Forward("recall", Recall.usable_grant)
    vector_builder = _Forward("recall", Recall.vector_builder)
    index_step = _Forward("recall", Recall.index_step)
    index_progress = _Forward("recall", Recall.index_progress)
    index_in_background = _Forward("recall", Recall.index_in_background)
    build_index = _Forward("recall", Recall.build_index)
    run_idle_step = _Forward("recall", Recall.run_idle_step)

    # -------------------------------------------------------------- large files

    file = _Forward("files", Files.file)
    files = _Forward("files", Files.files)
    read_file = _Forward("files", Files.read_file)
    describe_file = _Forward("files", Files.describe_file)
    restore_message = _Forward("files", Files.restore_message)

    # -------------------------------------------------------------- operations

    check_integrity = _Forward("operations", Operations.check_integrity)
    repair_integrity = _Forward("operations", Operations.repair_integrity)
    plan_prune = _Forward("operations", Operations.plan_prune)
    prune = _Forward("operations", Operations.prune)
    vacuum = _Forward("operations", Operations.vacuum)
    summaries = _Forward("operations", Operations.summaries)
    compaction_events = _Forward("operations", Operations.compaction_events)
    compaction_history = _Forward("operations", Operations.compaction_history)
    jobs = _Forward("operations", Operations.jobs)
    enqueue_compaction = _Forward("operations", Operations.enqueue_compaction)
    enqueue_integrity = _Forward("operations", Operations.enqueue_integrity)
    run_compaction_job = _Forward("operations", Operations.run_compaction_job)
    run_integrity_job = _Forward("operations", Operations.run_integrity_job)
    worker = _Forward("operations", Operations.worker)
    background = _Forward("operations", Operations.background)

    # -------------------------------------------------------------- transcripts

    async def bootstrap(
        self,
        session_file: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        session_key: str | None = None,
        format_name: str | None = None,
        full: bool = False,
    ) -> FileImport:
        """Reconcile a transcript file with the store: import whatever it has that the store lacks.

        Cheap to call at every session start: an unchanged file is not read and
        a grown one is read from where the last call stopped.
        """
        result = await import_transcript(
            self.store,
            session_file,
            config=self.config,
            counter=self.turns.counting,
            format_name=format_name,
            full=full,
            session_id=session_id,
            session_key=session_key,
            interceptor=self.interceptor,
        )
        self.sessions.clear()
        return result

    async def import_paths(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        full: bool = False,
        progress: ImportProgress | None = None,
        stop_on_error: bool = False,
    ) -> list[FileImport | Exception]:
        """Import every transcript in ``paths`` (files, or folders searched recursively).

        Each file is imported on its own (all or nothing); a file that fails is
        reported as its exception in the result list and the others go on,
        unless ``stop_on_error``.
        """
        files = await anyio.to_thread.run_sync(discover_transcripts, list(paths))
        results: list[FileImport | Exception] = []
        for done, path in enumerate(files, 1):
            try:
                outcome: FileImport | Exception = await self.bootstrap(path, full=full)
            except (InputError, OSError) as exc:
                if stop_on_error:
                    raise
                outcome = exc
            except (RecursionError, UnicodeError, ValueError, OverflowError) as exc:  # one bad file; the rest go on
                log.warning("import of %s failed: %s", path, exc, exc_info=exc)
                problem = TranscriptError(str(path), None, f"cannot be imported ({type(exc).__name__}: {exc})")
                if stop_on_error:
                    raise problem from exc
                outcome = problem
            results.append(outcome)
            if progress is not None:
                maybe = progress(done, len(files), outcome)
                if maybe is not None:
                    await maybe
        return results

    # -------------------------------------------------------------- long-term memory

    memory = _Forward("memory", AgentMemory.memory)
    remember = _Forward("memory", AgentMemory.remember)
    mine_step = _Forward("memory", AgentMemory.mine_step)
    memory_vectors_step = _Forward("memory", AgentMemory.vectors_step)

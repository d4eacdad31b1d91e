"""Bootstrap: reconcile a transcript file with the store, importing only what is missing.

Invariants:

* **Idempotent.**  Every message carries its transcript key as ``event_key``,
  so importing a file again — whole, grown, or after a crash half-way —
  stores each message exactly once.
* **O(new bytes) for unchanged and append-only files.**  The state row
  remembers the file's size, mtime, the offset after the last complete entry
  and a hash of the 4 KiB before it.  Same size and mtime: nothing is read.
  Grown, with the same bytes before the offset: reading resumes at the offset.
  Anything else (rewritten, truncated, a branch in a tree format): the file is
  read whole and the event keys sort out what is new.
* **A re-read costs nothing per stored entry beyond parsing it.**  An entry whose
  event key the conversation holds is matched on the key before it is prepared:
  its tokens are not counted and its large files not looked for (nor is it
  checked against ``max_message_bytes`` again).  Only the entries matched on
  role and content, or new, are prepared, and tokens are counted only for the
  entries written: one matched on role and content (a message stored live) has
  its large files planned and its text repaired, as the match needs, but its
  tokens are not counted.
* **Reconciled with live ingest.**  A host that stores turns as they happen
  (``after_turn``/``ingest_batch``, without the file's entry ids) and calls
  bootstrap at session start gets no second copy: the file's entries are
  matched against the store's messages on role and content, the *n*-th
  occurrence of a (role, content) in the file with the *n*-th in the store, so
  repeated texts keep their positions.  The newest matched entry is the
  anchor; only the entries after it are imported (entries before it that the
  store lacks are counted in ``left_out``, as the reconciliation leaves them).
  The store's side of the match is remembered (``reconciled_seq``), so an
  appended read compares its new entries only with the messages stored since.
  While there is something to match against, the entries after the newest
  match wait in memory until the next match or the end of the file (a file
  the store knows nothing of is streamed as before).
* **All or nothing per file.**  One file is imported in one transaction: a
  corrupt line rolls back everything read from that file and raises a
  :class:`TranscriptError` naming the file and line; nothing stored before is
  touched.  A last line that is still being written is left for the next read.
* Parsing runs in a worker thread, in chunks, so a large import neither
  blocks the event loop nor holds the whole file in memory (tree formats,
  which need the whole tree, are the exception).
* Large files in an entry are stored aside exactly as at ingest (given an
  :class:`~lossless.interception.Interceptor`), before the entry's size check;
  their rows join the file's transaction and their bytes are written before
  it commits.  Their ids are deterministic, so a re-import refers to the same
  files.
* **Nothing dropped unreported.**  Entries of a sub-agent ``thread`` go to the
  sub-agent's own conversation (``<session>/agent-<thread>``, child of the
  file's conversation), in the same transaction, deduplicated by event key;
  every record not stored as a message is counted by type, with its bytes
  (``skipped_records``, ``skipped_bytes``).  A session the transcript gives no
  title is titled by its first typed prompt.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Literal

import anyio
import anyio.to_thread

from lossless.config import Config
from lossless.errors import InputError, TranscriptError
from lossless.ingest import is_heartbeat_ok, prepare_messages, was_repaired
from lossless.interception import Interceptor, PendingFile, write_batch
from lossless.large_files import file_scope
from lossless.ports import PreparedMessage, Store
from lossless.records import BootstrapState, Conversation, JSONValue, Message, MessageRecord, TextPart, utcnow
from lossless.sessions import SessionPolicy, open_session
from lossless.tokens import TokenCounter
from lossless.transcripts import (
    FORMATS,
    SUFFIXES,
    Entry,
    Event,
    NeedsFullRead,
    ReadContext,
    SessionInfo,
    Skipped,
    TranscriptReader,
    detect_format,
    reader_for,
    why_unrecognised,
)

__all__ = ["FileImport", "discover_transcripts", "import_transcript"]

_CHUNK = 500


class _CountedOnWrite:
    """The token counter an entry is prepared with: none, its tokens are counted when it is written
    (:meth:`_Importer._append`), so an entry matched to a stored message costs no count."""

    name = "counted-on-write"

    def count(self, text: str) -> int:
        return 0


_COUNTED_ON_WRITE = _CountedOnWrite()
_TAIL = 4096

Status = Literal["imported", "appended", "unchanged", "skipped"]


@dataclass(frozen=True, slots=True)
class FileImport:
    """What importing one transcript file did."""

    path: str
    format: str
    status: Status
    conversation_id: int | None = None
    session_id: str | None = None
    stored: int = 0
    duplicates: int = 0
    dropped: int = 0
    parts: int = 0
    skipped_records: dict[str, int] = field(default_factory=dict)
    reason: str | None = None
    left_out: int = 0
    repaired: int = 0
    #: Bytes of the skipped records, by the same type keys as ``skipped_records``.
    skipped_bytes: dict[str, int] = field(default_factory=dict)
    #: Sub-agent conversations this file's messages went to (besides its own), by session id.
    subagents: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "path": self.path,
            "format": self.format,
            "status": self.status,
            "conversation_id": self.conversation_id,
            "session_id": self.session_id,
            "stored": self.stored,
            "duplicates": self.duplicates,
            "dropped": self.dropped,
            "parts": self.parts,
            "skipped_records": dict(self.skipped_records),
            "skipped_bytes": dict(self.skipped_bytes),
            "subagents": dict(self.subagents),
            "reason": self.reason,
            "left_out": self.left_out,
            "repaired": self.repaired,
        }


def discover_transcripts(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Expand folders into the transcript files under them (sorted); files are kept as given.

    Raises :class:`InputError` for a missing path or a folder holding no transcript.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            inside = sorted(
                p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES and detect_format(p) is not None
            )
            if not inside:
                raise InputError(
                    f"{str(path)!r} holds no transcript lossless can read "
                    f"(looked for {', '.join('*' + s for s in SUFFIXES)} files in the formats {', '.join(FORMATS)})"
                )
            found.extend(inside)
        elif path.exists():
            raise InputError(f"{str(path)!r} is neither a file nor a folder")
        else:
            raise InputError(f"{str(path)!r} does not exist")
    return list(dict.fromkeys(found))


def _tail_hash(stream: IO[bytes], offset: int) -> str:
    start = max(0, offset - _TAIL)
    stream.seek(start)
    return hashlib.sha256(stream.read(offset - start)).hexdigest()


def _match_key(role: str, content: str) -> tuple[str, bytes]:
    return role, hashlib.blake2b(content.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(slots=True)
class _Window:
    """The store's messages an import is matched against, by event key and by (role, content)."""

    seqs: dict[tuple[str, bytes], list[int]] = field(default_factory=dict)  # unmatched, oldest first
    keys: dict[str, tuple[int, tuple[str, bytes]]] = field(default_factory=dict)

    def add(self, record: MessageRecord) -> None:
        key = _match_key(record.role, record.content)
        self.seqs.setdefault(key, []).append(record.seq)
        if record.event_key is not None:
            self.keys[record.event_key] = (record.seq, key)

    def match(self, event_key: str | None, role: str, content: str) -> int | None:
        """The seq of the stored message this entry is, or None when the store lacks it.

        The same event key is that message; otherwise the oldest unmatched one with the same role and
        content, so the *n*-th repetition of a text in the file is the *n*-th in the store.
        """
        seq = self.match_key(event_key)
        if seq is not None:
            return seq
        same = self.seqs.get(_match_key(role, content))
        return same.pop(0) if same else None

    def match_key(self, event_key: str | None) -> int | None:
        """The seq of the stored message with this event key (matched now), or None: no entry needs
        preparing (its tokens counted, its large files looked for) to be matched by its key."""
        keyed = self.keys.pop(event_key, None) if event_key is not None else None
        if keyed is None:
            return None
        seq, key = keyed
        waiting = self.seqs.get(key, [])
        if seq in waiting:
            waiting.remove(seq)
        return seq


@dataclass(frozen=True, slots=True)
class _Ready:
    """One entry, prepared for storage (its large files planned, not yet written; its tokens counted on write)."""

    entry: Entry
    prepared: list[PreparedMessage]
    files: list[PendingFile]


@dataclass(slots=True)
class _Run:
    """Mutable bookkeeping for one import."""

    info: SessionInfo = field(default_factory=SessionInfo)
    conversation: Conversation | None = None
    stored: int = 0
    duplicates: int = 0
    dropped: int = 0
    parts: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    offset: int = 0
    last_key: str | None = None
    first_key: str | None = None
    left_out: int = 0
    repaired: int = 0
    window_after: int | None = None  # the store messages above this seq are matched against the entries
    window: _Window | None = None
    pending: list[_Ready] = field(default_factory=list)
    matched_seq: int | None = None
    stored_seq: int | None = None
    skipped_bytes: Counter[str] = field(default_factory=Counter)
    #: Sub-agent threads: what the file says about each, its conversation once made, messages stored.
    threads: dict[str, SessionInfo] = field(default_factory=dict)
    thread_conversations: dict[str, Conversation] = field(default_factory=dict)
    thread_stored: Counter[str] = field(default_factory=Counter)
    #: The first thing a person typed, the title of a session whose transcript names none.
    first_prompt: str | None = None

    @property
    def title(self) -> str | None:
        return self.info.title or self.first_prompt

    def note_prompt(self, entry: Entry) -> None:
        if self.first_prompt is None and entry.thread is None and entry.message.role == "user":
            self.first_prompt = _prompt_title(entry.message)

    def merge(self, info: SessionInfo) -> None:
        if info.thread is not None:
            known = self.threads.get(info.thread)
            self.threads[info.thread] = (
                info if known is None else SessionInfo(metadata={**info.metadata, **known.metadata}, thread=info.thread)
            )
            return
        current = self.info
        self.info = SessionInfo(
            session_id=current.session_id or info.session_id,
            title=info.title or current.title,
            parent_session_id=current.parent_session_id or info.parent_session_id,
            started_at=current.started_at or info.started_at,
            metadata={**info.metadata, **current.metadata},
        )

    def reconciled_seq(self) -> int:
        """The store's point up to which it now agrees with the file (see :class:`BootstrapState`)."""
        if self.stored_seq is not None:
            return self.stored_seq  # what was imported is the store's newest: everything below is settled
        return max(self.matched_seq or 0, self.window_after or 0)


class _Importer:
    """Imports one file; see the module docstring for the rules."""

    def __init__(
        self,
        store: Store,
        path: Path,
        *,
        config: Config,
        counter: TokenCounter,
        agent_id: str,
        policy: SessionPolicy,
        session_id: str | None,
        session_key: str | None,
        format_name: str,
        interceptor: Interceptor | None = None,
    ) -> None:
        self.interceptor = interceptor
        self.format = format_name
        self.store = store
        self.path = path
        self.config = config
        self.counter = counter
        self.agent_id = agent_id
        self.policy = policy
        self.session_id = session_id
        self.session_key = session_key

    async def run(self, *, full: bool) -> FileImport:
        format_name = self.format
        reader = reader_for(format_name)
        path_text = str(self.path)
        try:
            stat = await anyio.to_thread.run_sync(os.stat, self.path)
        except OSError as exc:
            raise InputError(f"cannot read {path_text!r}: {exc.strerror or exc}") from exc
        state = None if full else await self._find_state()
        if state is not None and state.size == stat.st_size and state.mtime_ns == stat.st_mtime_ns:
            return FileImport(path_text, format_name, "unchanged", state.conversation_id)
        start = 0
        if (
            state is not None
            and state.reconciled_seq is not None  # rows from before reconciliation: read whole once
            and reader.incremental
            and await self._continues(state, stat.st_size)
        ):
            start = state.offset
        async with self.store.atomic():
            run = await self._read_and_store(reader, start, state, stat.st_mtime_ns)
            if isinstance(run, FileImport):
                return run
            conversation = run.conversation
            if conversation is not None:
                if run.title and not conversation.title:
                    conversation = await self._conversation(run)
                tail = await anyio.to_thread.run_sync(self._hash_tail, run.offset)
                await self.store.put_bootstrap_state(
                    BootstrapState(
                        conversation_id=conversation.id,
                        path=path_text,
                        size=stat.st_size,
                        mtime_ns=stat.st_mtime_ns,
                        offset=run.offset,
                        tail_hash=tail,
                        last_entry_key=run.last_key,
                        updated_at=utcnow(),
                        reconciled_seq=run.reconciled_seq(),
                    )
                )
        return FileImport(
            path_text,
            format_name,
            "appended" if start else "imported",
            conversation.id if conversation else None,
            conversation.session_id if conversation else None,
            stored=run.stored,
            duplicates=run.duplicates,
            dropped=run.dropped,
            parts=run.parts,
            skipped_records=dict(run.skipped),
            left_out=run.left_out,
            repaired=run.repaired,
            skipped_bytes=dict(run.skipped_bytes),
            subagents={c.session_id: run.thread_stored[t] for t, c in run.thread_conversations.items()},
        )

    async def _find_state(self) -> BootstrapState | None:
        return await self.store.find_bootstrap_state(self.agent_id, str(self.path))

    async def _continues(self, state: BootstrapState, size: int) -> bool:
        if size < state.offset or state.tail_hash is None:
            return False
        return await anyio.to_thread.run_sync(self._hash_tail, state.offset) == state.tail_hash

    def _hash_tail(self, offset: int) -> str:
        with self.path.open("rb") as stream:
            return _tail_hash(stream, offset)

    async def _read_and_store(
        self, reader: TranscriptReader, start: int, state: BootstrapState | None, mtime_ns: int
    ) -> _Run | FileImport:
        fallback = datetime.fromtimestamp(mtime_ns / 1e9, UTC)
        max_line = self.config.max_message_bytes * 2 + 1024 * 1024
        context = ReadContext(
            str(self.path),
            start_offset=start,
            last_entry_key=state.last_entry_key if state and start else None,
            max_line_bytes=max_line,
            fallback_time=fallback,
        )
        run = _Run(offset=start, last_key=context.last_entry_key)
        if start and state is not None:
            run.conversation = await self.store.get_conversation(state.conversation_id)
            run.window_after = state.reconciled_seq
        try:
            outcome = await self._consume(reader, context, run)
        except NeedsFullRead:
            context = ReadContext(str(self.path), max_line_bytes=max_line, fallback_time=fallback)
            run = _Run()
            outcome = await self._consume(reader, context, run)
        if isinstance(outcome, _Run) and outcome.pending:
            await self._commit(outcome.pending, outcome)
            outcome.pending = []
        return outcome

    async def _consume(self, reader: TranscriptReader, context: ReadContext, run: _Run) -> _Run | FileImport:
        pending: list[Entry] = []
        with self.path.open("rb") as stream:
            events: Iterator[Event] = reader.read(stream, context)
            while True:
                chunk = await anyio.to_thread.run_sync(_take, events, _CHUNK)
                if not chunk:
                    break
                for event in chunk:
                    if isinstance(event, SessionInfo):
                        run.merge(event)
                    elif isinstance(event, Skipped):
                        run.skipped[event.kind] += 1
                        run.skipped_bytes[event.kind] += event.size
                        run.offset = max(run.offset, event.end_offset)
                        run.last_key = event.key or run.last_key
                    else:
                        run.note_prompt(event)
                        pending.append(event)
                if pending:
                    blocked = await self._flush(pending, run)
                    if blocked is not None:
                        return blocked
                    pending = []
        if run.conversation is None and run.info.session_id is not None:
            blocked = await self._flush([], run)
            if blocked is not None:
                return blocked
        return run

    async def _flush(self, entries: list[Entry], run: _Run) -> FileImport | None:
        if run.first_key is None and entries:
            run.first_key = entries[0].key
        if run.conversation is None:
            key = self.session_key or self._session_id(run)
            reason = self.policy.write_block_reason(key)
            if reason is not None:
                return FileImport(str(self.path), self.format, "skipped", reason=reason)
            run.conversation = await self._conversation(run)
        if any(entry.thread is not None for entry in entries):
            await self._store_threads([e for e in entries if e.thread is not None], run)
            entries = [e for e in entries if e.thread is None]
        if run.window is None:
            run.window = await self._window(run.conversation.id, run.window_after)
        window = run.window
        matching = bool(window.seqs)  # else nothing stored to match against: store as we read
        ready: list[_Ready] = []
        for entry in entries:
            run.offset = max(run.offset, entry.end_offset)
            run.last_key = entry.key
            # An entry whose key the store holds is matched before it is prepared: a re-read costs no
            # token count and no large-file scan for what is stored already.
            keyed = window.match_key(entry.message.event_key) if matching and self._kept(entry) else None
            if keyed is not None:
                _anchor(run, [keyed])
                continue
            item = await self._prepare(entry, run.conversation)
            run.dropped += 0 if item.prepared else 1
            if not matching:
                ready.append(item)
                continue
            matched = [window.match(p.message.event_key, p.message.role, p.message.content) for p in item.prepared]
            if item.prepared and all(seq is not None for seq in matched):
                _anchor(run, [seq for seq in matched if seq is not None])
            else:
                run.pending.append(item)
        if ready:
            await self._commit(ready, run)
        return None

    def _kept(self, entry: Entry) -> bool:
        """Whether ``entry`` is stored at all (not a heartbeat reply that the settings prune)."""
        return not (self.config.prune_heartbeat_ok and is_heartbeat_ok(entry.message))

    async def _store_threads(self, entries: list[Entry], run: _Run) -> None:
        """Store sub-agent entries in their own conversations (their event keys make a re-read store nothing)."""
        threads: dict[str, list[Entry]] = {}
        for entry in entries:
            threads.setdefault(entry.thread or "", []).append(entry)
            run.offset = max(run.offset, entry.end_offset)
        for thread, batch in threads.items():
            conversation = run.thread_conversations.get(thread)
            if conversation is None:
                prompts = (_prompt_title(e.message) for e in batch if e.message.role == "user")
                conversation = await self._thread_conversation(run, thread, next(filter(None, prompts), None))
                run.thread_conversations[thread] = conversation
            ready = [await self._prepare(entry, conversation) for entry in batch]
            run.dropped += sum(0 if item.prepared else 1 for item in ready)
            run.thread_stored[thread] += (await self._append(conversation, ready, run))[0]

    async def _thread_conversation(self, run: _Run, thread: str, title: str | None) -> Conversation:
        """The sub-agent conversation ``thread`` of the file's session: ``<session>/agent-<thread>``, its child."""
        assert run.conversation is not None
        info = run.threads.get(thread, SessionInfo())
        return await self.store.get_or_create_conversation(
            agent_id=self.agent_id,
            session_id=f"{run.conversation.session_id}/agent-{thread}",
            title=title,
            source=self.format,
            parent_id=run.conversation.id,
            metadata=info.metadata or None,
        )

    async def _window(self, conversation_id: int, after_seq: int | None) -> _Window:
        """The stored messages (above ``after_seq``) that the file's entries are matched against."""
        window = _Window()
        cursor = after_seq
        while True:
            page = await self.store.get_messages(conversation_id, after_seq=cursor, limit=_CHUNK)
            for record in page:
                window.add(record)
            if len(page) < _CHUNK:
                return window
            cursor = page[-1].seq

    async def _prepare(self, entry: Entry, conversation: Conversation) -> _Ready:
        message = entry.message
        files: list[PendingFile] = []
        if self.interceptor is not None:
            scope = file_scope(conversation.agent_id, conversation.session_id)
            planned = await self.interceptor.plan([message], scope=scope)
            message = planned.messages[0]  # type: ignore[assignment]  # a Message in, a Message out
            files += planned.files
        try:
            ready, _dropped = prepare_messages(
                [message],
                counter=_COUNTED_ON_WRITE,
                now=utcnow(),
                max_message_bytes=self.config.max_message_bytes,
                prune_heartbeat_ok=self.config.prune_heartbeat_ok,
            )
        except InputError as exc:
            problem = str(exc).removeprefix("message 0 ")
            raise TranscriptError(str(self.path), entry.line, f"message {problem}") from exc
        return _Ready(entry, ready, files)

    async def _commit(self, ready: list[_Ready], run: _Run) -> None:
        """Store the prepared entries (their large files first) in the file's transaction."""
        assert run.conversation is not None
        _, newest = await self._append(run.conversation, ready, run)
        if newest is not None:
            run.stored_seq = newest

    async def _append(self, conversation: Conversation, ready: list[_Ready], run: _Run) -> tuple[int, int | None]:
        """Append prepared entries to ``conversation`` (large files first): how many were new, the newest seq."""
        count = self.counter.count
        prepared = [replace(p, token_count=count(p.message.content)) for item in ready for p in item.prepared]
        files = [f for item in ready for f in item.files]
        try:
            result = await write_batch(self.store, conversation.id, prepared, files, self.interceptor)
        except InputError as exc:
            raise TranscriptError(str(self.path), ready[0].entry.line if ready else None, str(exc)) from exc
        run.stored += len(result.stored)
        run.repaired += sum(1 for r in result.stored if was_repaired(r.to_message()))
        run.duplicates += result.duplicates
        run.parts += sum(len(r.parts) for r in result.stored)
        return len(result.stored), max((r.seq for r in result.stored), default=None)

    def _session_id(self, run: _Run) -> str:
        if self.session_id:
            return self.session_id
        if run.info.session_id:
            return run.info.session_id
        if run.conversation is not None:  # an appended read: the header with the file's id was read before
            return run.conversation.session_id
        # No id in the file: derive one from its name and its first entry, stable across moves.
        basis = run.first_key or str(self.path.resolve())
        return f"{self.path.stem}:{hashlib.sha256(basis.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"

    async def _conversation(self, run: _Run) -> Conversation:
        parent_id = None
        if run.info.parent_session_id:
            parent = await self.store.get_or_create_conversation(
                agent_id=self.agent_id, session_id=run.info.parent_session_id
            )
            parent_id = parent.id
        return await open_session(
            self.store,
            agent_id=self.agent_id,
            session_id=self._session_id(run),
            session_key=self.session_key,
            retain_depth=self.config.new_session_retain_depth,
            title=run.title,
            source=self.format,
            parent_id=parent_id,
            metadata=run.info.metadata or None,
        )


#: Titles made from a first prompt are cut to this many characters.
TITLE_CHARS = 80
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: A bare slash command ("/mode", "/clear", "/model:opus"): typed, but it names no subject.
_BARE_COMMAND = re.compile(r"/[\w:.-]+")


def _prompt_title(message: Message) -> str | None:
    """A title from a person's message: its first line of typed text (not host-injected, not a
    ``<command…>`` wrapper, not a bare slash command), cut to :data:`TITLE_CHARS`; ``None`` when it
    has none."""
    for part in message.parts:
        if not isinstance(part, TextPart) or part.synthetic or part.ignored:
            continue
        text = part.text.strip()
        if not text or text.startswith("<") or _BARE_COMMAND.fullmatch(text):
            continue
        line = _LONE_SURROGATE.sub("\ufffd", " ".join(text.splitlines()[0].split()))  # a title is plain Unicode
        return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"
    return None


def _anchor(run: _Run, matched: list[int]) -> None:
    """An entry the store holds already (at ``matched``): it is the anchor so far, and what waited before
    it (entries the store lacks, older than a message it has) is left out."""
    run.left_out += sum(1 for waiting in run.pending if waiting.prepared)
    run.pending = []
    run.duplicates += len(matched)
    run.matched_seq = max(run.matched_seq or 0, *matched)


def _resolve(path: str | os.PathLike[str]) -> tuple[Path, bool]:
    resolved = Path(path).expanduser().resolve()
    return resolved, resolved.is_file()


def _take(events: Iterator[Event], count: int) -> list[Event]:
    return list(itertools.islice(events, count))


async def import_transcript(
    store: Store,
    path: str | os.PathLike[str],
    *,
    config: Config,
    counter: TokenCounter,
    agent_id: str | None = None,
    format_name: str | None = None,
    full: bool = False,
    session_id: str | None = None,
    session_key: str | None = None,
    interceptor: Interceptor | None = None,
) -> FileImport:
    """Import (or catch up on) one transcript file.  See the module docstring for the guarantees.

    Without an ``interceptor`` large files stay inline (and count against ``max_message_bytes``).
    """
    file_path, is_file = await anyio.to_thread.run_sync(_resolve, path)
    if not is_file:
        raise InputError(f"{str(file_path)!r} does not exist or is not a file")
    detected = format_name or await anyio.to_thread.run_sync(detect_format, file_path)
    if detected is None:
        reason = await anyio.to_thread.run_sync(why_unrecognised, file_path)
        raise InputError(
            f"{str(file_path)!r} is not a transcript lossless recognises: {reason} "
            f"(formats: {', '.join(FORMATS)}; pass the format explicitly if you know it)"
        )
    policy = SessionPolicy(
        config.ignore_session_patterns, config.stateless_session_patterns, config.skip_stateless_sessions
    )
    importer = _Importer(
        store,
        file_path,
        config=config,
        counter=counter,
        agent_id=agent_id or config.agent_id,
        policy=policy,
        session_id=session_id,
        session_key=session_key,
        format_name=detected,
        interceptor=interceptor,
    )
    return await importer.run(full=full)

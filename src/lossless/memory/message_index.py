"""The background build of search vectors for messages and summaries (never run by a search).

:class:`VectorBuilder` embeds what the store's :class:`~lossless.ports.SearchVectorStore` says has
no vectors for the embedder's model yet, a batch at a time, and writes the vectors back durably.
Background workers (``engine.background()``, ``lcm worker``, the MCP and HTTP servers) run a step
whenever they have no job; ``lcm index`` runs it to the end with a progress bar.

Invariants:

* **Only here are stored texts embedded.**  A search embeds its query and reads stored vectors;
  what is not built yet is found by its words (see :mod:`lossless.memory.messages`).
* **Each text is embedded once per model**: an item with vectors is never handed out again
  (a summary rewritten in place loses its vectors in the rewriting transaction and is embedded
  anew).  Two builders on one store may embed the same batch at the same moment; the second
  write keeps the first's vectors, so the result is the same.
* A long text is embedded in chunks of the embedder's ``max_chars`` (the same chunks as memory);
  a blank one is recorded with no vector, so it counts as indexed.
* **Capped, lossless.**  A long message embeds only its first chunks: a tool output (role ``tool``, or
  a message holding a tool result) at most :data:`TOOL_CHUNKS`, any other message at most
  :data:`MAX_CHUNKS` (:class:`ChunkCap`; plus the context chunk below, alone where one chunk is kept).
  What is embedded for a message is never empty when it has text, opens with its opening (its first
  chunk, or the context chunk that holds it), and is a part of what the uncapped build embeds
  (:func:`embedded_texts`); the rest of a long output is found by its words (the full-text and
  trigram indexes hold every message whole), so a search still finds everything.  Coding-agent
  sessions are mostly tool output (file dumps, test logs): the cap is what makes their build fast
  (``benchmarks/index_build.py``).  Summaries are not capped.
* **Idle is cheap.**  A pass over messages walks the rows after where the previous pass ended, so
  an idle worker checks only new messages; every :data:`RESCAN_S` seconds it walks them all again
  (rows committed out of id order).  Summaries, far fewer, are walked whole every pass, so one
  rewritten in place is embedded again at the next step.
* **Context-aware, lossless.**  A message that has a turn before it in its conversation is embedded
  as that turn's opening followed by the message (its "context chunk"): a reply such as "Yes, we
  went there last week" is found by what "there" is, and a tool result by the command that produced
  it.  A message that keeps more than one chunk (long, and not capped to one) keeps them and gets the
  context chunk besides; the first message of a conversation is embedded as itself.  A message
  scores as its best chunk.  The stored message is never changed; only what is embedded is.
* **Named alike** (format 5).  A chat turn (a user or assistant message holding no tool record) whose
  speaker only its metadata names (a transcript's ``name`` / ``speaker`` field) is embedded as
  ``Name: text``, and so is the turn before a message in its context chunk: the texts are those of a
  host that writes the name into the text, so a question that names a person finds their turns
  however the host stored who spoke (:func:`lossless.speakers.spoken`).
* **Versioned.**  Vectors are stored under :func:`index_model` (the embedder's model plus the
  index format version :data:`INDEX_VERSION`; a builder given another :class:`ChunkCap`, as the
  benchmark's uncapped build, stores under a name of its own and never deletes another format's
  vectors), so a change of format is a new model to the store: the background build (and
  ``lcm index``) builds the new format, and a search in the meantime answers from what is built plus
  keywords, with a note, as during any build.  Once the new format is built, the old format's
  vectors of the same model are deleted a batch per step (where the store can; SQLite).
* **An upgrade re-embeds only what changed.**  :data:`FORMATS` lists every format whose texts this
  code can make again (:class:`IndexFormat`: format 3 is the uncapped build, 4 the capped one).  For
  each item of a batch, the product's build makes the texts of each older listed format that the
  store holds vectors of (newest first); where they equal the new format's texts, the store copies
  that format's rows to the new name in SQL (``INSERT … SELECT``, one statement per batch and
  format: :meth:`copy_item_vectors`, only of an item whose old rows are all there) and only the
  rest are embedded.  Same texts, same model: the copy is byte for byte what embedding them again
  would store (the model name is the promise that its embedder embeds a text the same way), so an
  upgraded store ends with the vectors a fresh build gives.  From 3 to 4 that is every summary and
  every message that keeps all its chunks (a one-chunk message, a long non-tool message of at most
  :data:`MAX_CHUNKS` chunks); only capped long messages are embedded again.  Why compare texts
  made again rather than store a hash of each embedded text beside its vector: the stores that
  upgrade now hold format 3 rows without any hash, so matching them needs format 3's rules anyway;
  rules need no schema change, no migration, no hashing of every text at each write, and a future
  format is reused by adding its entry here (a format whose rules are not a cap gets a field of
  :class:`IndexFormat`).  Formats 1 and 2 are not listed (their stores re-embed everything).
* Progress is measured, not guessed: :meth:`VectorBuilder.progress` counts indexed and total items
  in the store, and the ETA comes from the throughput of this builder's own batches.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from lossless.memory.ports import Embedder
from lossless.memory.vectors import chunk_text  # NumPy-free: vectors imports NumPy on first use
from lossless.parts import ToolPart
from lossless.ports import ItemVectors, SearchVectorStore, VectorSource, VectorTodo
from lossless.records import MessageRecord
from lossless.speakers import spoken

__all__ = [
    "DEFAULT_CAP",
    "FORMATS",
    "INDEX_VERSION",
    "UNCAPPED",
    "Around",
    "BuildProgress",
    "ChunkCap",
    "IndexFormat",
    "VectorBuilder",
    "chunk_text",
    "context_text",
    "embedded_texts",
    "index_model",
    "is_tool_output",
    "to_unit_blob",
]

SOURCES: tuple[VectorSource, ...] = ("messages", "summaries")
#: Items embedded per step: small enough that a step takes about a second with the local model.
DEFAULT_BATCH = 64
#: How often a builder looks through all rows again rather than only those after its last pass.
RESCAN_S = 300.0
#: The format of what is embedded for an item; vectors of another version are not searched (see index_model).
#: 1: each message and summary as itself.  2: messages also with the opening of the turn before them
#: (an extra chunk).  3: a one-chunk message with the turn before it only (one vector; measured better).
#: 4: a long message's own chunks capped (TOOL_CHUNKS for a tool output, MAX_CHUNKS for any other); one
#: that keeps one chunk is embedded as its context chunk alone, as a one-chunk message.  5: a chat turn whose
#: speaker only its metadata names is embedded as ``Name: text`` (:func:`lossless.speakers.spoken`), and so
#: is the turn before it in a context chunk: the text-prefix form, wherever the host put the name.
INDEX_VERSION = 5
#: How much of the turn before a message its context chunk takes (the opening: a question, a command).
CONTEXT_CHARS = 300
#: Own chunks embedded of a tool output (a file dump, a test log): its opening says what it is.
TOOL_CHUNKS = 1
#: Own chunks embedded of any other message (a pasted document, a long answer, a compaction summary).
MAX_CHUNKS = 4


@dataclass(frozen=True, slots=True)
class ChunkCap:
    """How many of a long message's own chunks are embedded (``None``: all); the rest is found by its words."""

    tool: int | None = TOOL_CHUNKS
    other: int | None = MAX_CHUNKS

    def __post_init__(self) -> None:
        if any(n is not None and n < 1 for n in (self.tool, self.other)):
            raise ValueError("a chunk cap keeps at least one chunk")

    def limit(self, tool_output: bool) -> int | None:
        return self.tool if tool_output else self.other


#: The cap of the current format (formats 4 and 5).
DEFAULT_CAP = ChunkCap()
#: Every chunk embedded: format 3, what the build did before the cap (the benchmark's baseline).
UNCAPPED = ChunkCap(None, None)


def index_model(model: str, cap: ChunkCap = DEFAULT_CAP) -> str:
    """The name vectors are stored under: the embedder's model and the index format version.

    The uncapped build is stored under format 3's name (its texts are format 3's but for turns named by
    their metadata, which it names as the current format does); any other cap than the default gets a name
    of its own.
    """
    if cap == UNCAPPED:
        return f"{model}+ctx3"
    if cap == DEFAULT_CAP:
        return model if INDEX_VERSION == 1 else f"{model}+ctx{INDEX_VERSION}"
    return f"{model}+ctx{INDEX_VERSION}-cap{cap.tool or 'all'}.{cap.other or 'all'}"


@dataclass(frozen=True, slots=True)
class IndexFormat:
    """An index format whose texts this code makes again: its version, and how it built a message's texts
    (its cap; ``names``: a turn named by its metadata written with its speaker's name, from format 5).

    Summaries are embedded as their chunks in every listed format.
    """

    version: int
    cap: ChunkCap
    names: bool = False

    def model(self, embedder_model: str) -> str:
        """The name this format's vectors of ``embedder_model`` are stored under."""
        return f"{embedder_model}+ctx{self.version}"

    def texts(self, content: str, max_chars: int, *, previous: str = "", tool_output: bool = False) -> list[str]:
        """What this format embedded for a message of ``content`` (see :func:`embedded_texts`)."""
        return embedded_texts(content, max_chars, previous=previous, tool_output=tool_output, cap=self.cap)

    def message_texts(self, key: int, content: str, max_chars: int, around: Around) -> list[str]:
        """:meth:`texts` of message ``key``, its own text and the turn before it read in ``around`` (named or not)."""
        if self.names:
            content = around.spoken.get(key, content)
        previous = (around.spoken_previous if self.names else around.previous).get(key, "")
        return self.texts(content, max_chars, previous=previous, tool_output=key in around.tools)


@dataclass(frozen=True, slots=True)
class Around:
    """What a batch of messages is embedded with, by message id: the text of the turn before each (where it
    has one with text), the same named as :func:`~lossless.speakers.spoken` writes it, a message's own
    text so named (only where that differs from its stored text), and the ids of the tool outputs."""

    previous: dict[int, str] = field(default_factory=dict[int, str])
    spoken_previous: dict[int, str] = field(default_factory=dict[int, str])
    spoken: dict[int, str] = field(default_factory=dict[int, str])
    tools: frozenset[int] = frozenset()


#: Every format an upgrade can reuse vectors of, oldest first; the last is the current one (:data:`INDEX_VERSION`).
#: A format bump appends its own entry and keeps the others, so a store of any listed format re-embeds only
#: the items whose texts changed.
FORMATS: tuple[IndexFormat, ...] = (
    IndexFormat(3, UNCAPPED),
    IndexFormat(4, DEFAULT_CAP),
    IndexFormat(INDEX_VERSION, DEFAULT_CAP, names=True),
)


def _spoken(record: MessageRecord) -> str:
    """A chat turn's text as embedded from format 5: named as the prefix form writes it (tools' records are not)."""
    if record.role not in ("user", "assistant") or any(isinstance(p, ToolPart) for p in record.parts):
        return record.content
    return spoken(record.content, record.metadata)


def is_tool_output(record: MessageRecord) -> bool:
    """A tool's output: role ``tool``, or a message holding a tool result (hosts that keep call and result in one)."""
    return record.role == "tool" or any(isinstance(p, ToolPart) and p.is_result for p in record.parts)


def embedded_texts(
    content: str, max_chars: int, *, previous: str = "", tool_output: bool = False, cap: ChunkCap = DEFAULT_CAP
) -> list[str]:
    """The texts embedded for a message: its own chunks up to the cap, and its context chunk.

    ``previous`` is the text of the turn before it (blank for a conversation's first message).  A message
    that keeps one chunk (it has one, or its cap is one) and has a turn before it is embedded as its
    context chunk only, which holds its opening; one that keeps more as those chunks followed by its
    context chunk.  Blank content embeds nothing.
    """
    if not content.strip():
        return []
    chunks = chunk_text(content, max_chars)
    limit = cap.limit(tool_output)
    kept = chunks if limit is None else chunks[:limit]
    if not previous.strip():
        return kept
    context = context_text(previous, content, max_chars)
    return [context] if len(kept) == 1 else [*kept, context]


def context_text(previous: str, content: str, max_chars: int) -> str:
    """The text of a message's context chunk: the opening of the turn before it, then the message."""
    head = " ".join(previous.split())[:CONTEXT_CHARS]
    return f"{head}\n{content.strip()}"[:max_chars]


def to_unit_blob(vector: Sequence[float]) -> bytes:
    """A vector scaled to unit length, as little-endian float32 bytes."""
    norm = math.sqrt(sum(float(v) * float(v) for v in vector)) or 1.0
    return struct.pack(f"<{len(vector)}f", *(float(v) / norm for v in vector))


@dataclass(frozen=True, slots=True)
class BuildProgress:
    """How far the build of one model's vectors is, over the whole store."""

    model: str
    indexed: int
    total: int
    #: Items per second of this builder's recent batches (0 before the first).
    rate: float = 0.0

    @property
    def share(self) -> float:
        return 1.0 if self.total == 0 else self.indexed / self.total

    @property
    def done(self) -> bool:
        return self.indexed >= self.total

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the measured rate (``None`` before a rate is known)."""
        if self.done:
            return 0.0
        return None if self.rate <= 0 else (self.total - self.indexed) / self.rate


@dataclass(slots=True)
class _Cursor:
    after: int = 0
    exhausted: bool = False


@dataclass(slots=True)
class VectorBuilder:
    """Embeds the store's messages and summaries that lack vectors, one batch per :meth:`step`."""

    store: SearchVectorStore
    embedder: Embedder
    batch: int = DEFAULT_BATCH
    #: How much of a long message is embedded; another than :data:`DEFAULT_CAP` only to measure (own name;
    #: such a build neither reuses nor deletes another format's vectors).
    cap: ChunkCap = DEFAULT_CAP
    _cursors: dict[str, _Cursor] = field(default_factory=dict)
    _seconds: float = 0.0
    _items: int = 0
    _prepared: set[str] = field(default_factory=set)
    _written_in_pass: int = 0
    _last_rescan: float = field(default_factory=time.monotonic)
    _old_formats_gone: bool = False
    _upgraded: bool = False
    #: The older formats whose vectors the store holds, newest first (listed at the first step and each rescan).
    _reuse_from: list[IndexFormat] | None = None

    @property
    def model(self) -> str:
        return index_model(self.embedder.model, self.cap)

    @property
    def rate(self) -> float:
        return self._items / self._seconds if self._seconds > 0 else 0.0

    async def step(self) -> int:
        """Embed and store one batch (summaries first: fewer, and each covers many messages).

        Returns the number of items written; 0 means both sources are complete (as of this pass).
        """
        for source in ("summaries", "messages"):
            done = await self._step(source)
            if done:
                self._written_in_pass += done
                return done
        # Built: now the space of an earlier index format of this model is given back, a batch per step,
        # and a store made by an older version gets what its searches now use, a batch per step too.
        if not await self._forget_old_formats():
            await self._upgrade_index()
        # The next pass starts where this one ended (new rows have higher ids), and from the start again
        # every RESCAN_S: that catches rows committed out of id order and summaries rewritten in place.
        now = time.monotonic()
        rescan = now - self._last_rescan >= RESCAN_S
        if rescan:
            self._last_rescan = now
            self._reuse_from = None
        for source, cursor in self._cursors.items():
            # summaries (a tenth as many) are always walked again: one rewritten in place is re-embedded soon
            self._cursors[source] = _Cursor(after=0 if rescan or source == "summaries" else cursor.after)
        if self._written_in_pass:
            self._written_in_pass = 0
            # a database that plans its vector searches (PostgreSQL) gets fresh statistics of what was added
            refresh = getattr(self.store, "refresh_vector_statistics", None)
            if refresh is not None:
                await refresh()
        return 0

    async def _upgrade_index(self) -> int:
        """One batch of the store's own index upgrade (where it has one); not asked again once it answers 0
        (a negative answer: not now, ask again at a later step)."""
        if self._upgraded:
            return 0
        upgrade = getattr(self.store, "upgrade_vector_index", None)
        done = int(await upgrade()) if upgrade is not None else 0
        self._upgraded = done == 0
        return max(done, 0)

    async def _forget_old_formats(self) -> int:
        """Delete a batch of this embedder's vectors of another index format (where the store can).

        Returns how many rows went; 0 once none are left (then it is not asked again in this process).
        """
        if self._old_formats_gone or self.cap != DEFAULT_CAP:  # a measuring build leaves the product's alone
            return 0
        drop = getattr(self.store, "drop_item_vectors", None)
        listed = getattr(self.store, "vector_models", None)
        if drop is None or listed is None:
            self._old_formats_gone = True
            return 0
        base = self.embedder.model
        stale = [m for m in await listed() if m != self.model and (m == base or m.startswith(f"{base}+ctx"))]
        dropped = int(await drop(stale)) if stale else 0
        self._old_formats_gone = dropped == 0
        return dropped

    async def _step(self, source: VectorSource) -> int:
        cursor = self._cursors.setdefault(source, _Cursor())
        if cursor.exhausted:
            return 0
        todo = await self.store.vectors_todo(self.model, source, after=cursor.after, limit=self.batch)
        if not todo:
            cursor.exhausted = True
            return 0
        started = time.perf_counter()
        size = self.embedder.max_chars
        if source == "messages":
            around = await self._neighbours(todo)
            build = IndexFormat(INDEX_VERSION, self.cap, names=FORMATS[-1].names)  # a measuring build names alike
            pieces = [build.message_texts(int(t.key), t.content, size, around) for t in todo]
        else:
            around = Around()
            pieces = [chunk_text(t.content, size) if t.content.strip() else [] for t in todo]
        reused = await self._reuse(source, todo, pieces, around)
        fresh = [(t, p) for t, p in zip(todo, pieces, strict=True) if t.key not in reused]
        flat = [p for _, chunks in fresh for p in chunks]
        vectors = await self.embedder.embed(flat, task="passage") if flat else []
        if len(vectors) != len(flat):
            raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(flat)} texts")
        items: list[ItemVectors] = []
        at = 0
        for item, chunks in fresh:
            blobs = tuple(to_unit_blob(v) for v in vectors[at : at + len(chunks)])
            at += len(chunks)
            items.append(ItemVectors(item.key, item.conversation_id, blobs))
        if items:
            await self._prepare(source, len(vectors[0]) if vectors else 0)
            await self.store.put_item_vectors(self.model, source, items)
        cursor.after = todo[-1].row
        self._seconds += time.perf_counter() - started
        self._items += len(todo)
        return len(todo)

    async def _reusable(self) -> list[IndexFormat]:
        """The older listed formats whose vectors the store holds, newest first (none for a measuring build)."""
        if self._reuse_from is None:
            listed = getattr(self.store, "vector_models", None)
            can_copy = hasattr(self.store, "copy_item_vectors")
            self._reuse_from = []
            if self.cap == DEFAULT_CAP and listed is not None and can_copy:
                present = set(await listed())
                base = self.embedder.model
                self._reuse_from = [
                    f for f in reversed(FORMATS) if f.model(base) != self.model and f.model(base) in present
                ]
        return self._reuse_from

    async def _reuse(
        self,
        source: VectorSource,
        todo: Sequence[VectorTodo],
        pieces: Sequence[list[str]],
        around: Around,
    ) -> set[int | str]:
        """Copy, in the store, the vectors of an older format for the items it embedded the same texts for.

        Returns the keys that have vectors of this builder's model now (copied, or written by another builder).
        """
        formats = await self._reusable()
        copy = getattr(self.store, "copy_item_vectors", None)
        if not formats or copy is None:
            return set()
        size = self.embedder.max_chars
        done: set[int | str] = set()
        for fmt in formats:
            wanted: list[tuple[int | str, int]] = []
            for item, texts in zip(todo, pieces, strict=True):
                if item.key in done:
                    continue
                if source == "messages":
                    old = fmt.message_texts(int(item.key), item.content, size, around)
                else:
                    old = texts  # summaries: their chunks in every listed format
                if old == texts:
                    wanted.append((item.key, max(1, len(texts))))  # a blank text has one row (no vector)
            if wanted:
                done.update(await copy(source, fmt.model(self.embedder.model), self.model, wanted))
        return done

    async def _neighbours(self, todo: Sequence[VectorTodo]) -> Around:
        """The turns the messages of ``todo`` are embedded with (see :class:`Around`)."""
        get_by_id = getattr(self.store, "get_messages_by_id", None)
        get_messages = getattr(self.store, "get_messages", None)
        if get_by_id is None or get_messages is None:  # a vector store that is not a message store
            return Around()
        records: list[MessageRecord] = await get_by_id([int(t.key) for t in todo])
        own = {r.id: named for r in records if (named := _spoken(r)) != r.content}
        previous: dict[int, str] = {}
        spoken_previous: dict[int, str] = {}
        seqs: dict[int, list[MessageRecord]] = {}
        for record in records:
            seqs.setdefault(record.conversation_id, []).append(record)
        for conversation_id, found in seqs.items():
            low, high = min(r.seq for r in found), max(r.seq for r in found)
            turns: list[MessageRecord] = await get_messages(conversation_id, after_seq=low - 2, limit=high - low + 1)
            at = {r.seq: r for r in turns}
            for record in found:
                before = at.get(record.seq - 1)
                if before is not None and before.content.strip():
                    previous[record.id] = before.content
                    spoken_previous[record.id] = _spoken(before)
        tools = frozenset(r.id for r in records if is_tool_output(r))
        return Around(previous, spoken_previous, own, tools)

    async def _prepare(self, source: VectorSource, dim: int) -> None:
        """Let a store with a database vector index (pgvector) set it up, once per source."""
        prepare = getattr(self.store, "prepare_vector_index", None)
        if prepare is None or dim == 0 or source in self._prepared:
            return
        await prepare(source, dim)
        self._prepared.add(source)

    async def progress(self, conversation_ids: Sequence[int] | None = None) -> BuildProgress:
        """Indexed and total items (messages and summaries) of the listed conversations, or of the whole store."""
        indexed = total = 0
        for source in SOURCES:
            if conversation_ids is None:
                states = [await self.store.vector_totals(self.model, source)]
            else:
                states = list((await self.store.vector_states(self.model, source, conversation_ids)).values())
            indexed += sum(s.indexed for s in states)
            total += sum(s.total for s in states)
        return BuildProgress(self.model, indexed, total, self.rate)

    async def run(self) -> int:
        """Build until nothing is left; returns the number of items written."""
        written = 0
        while True:
            done = await self.step()
            if not done:
                return written
            written += done

"""The PostgreSQL schema as numbered migrations (the same numbers and meaning as the SQLite ones).

Invariants:

* Migrations are append-only: a released migration is never edited; changes
  come as a new, higher-numbered one.  Each runs in its own transaction with the
  row that records it in ``lcm_migrations`` (see
  :mod:`lossless.stores.postgres.connection`), so a crash leaves the schema at a
  whole version.
* Only SQL that PostgreSQL 15 understands (users run 15–18): no ``uuidv7()``,
  no virtual generated columns.
* The word index is a ``tsvector`` (``english``: the same stemming as SQLite's
  porter tokenizer) over the first 100,000 characters of a text — PostgreSQL
  refuses a ``tsvector`` over 1 MB, and a message must never be refused for
  being long; regex search reads the whole text.  Substring and CJK search use
  ``pg_trgm`` GIN indexes over the whole text.  For summaries both are kept by
  PostgreSQL inside the writing transaction (a stored generated column).  For
  messages (migration 122) they are filled *after* the append commits, as
  SQLite's companion index is: ``content_tsv`` is NULL until the background
  indexer (:mod:`~lossless.stores.postgres.indexer`) sets it, and the trigram
  index holds only rows whose ``content_tsv`` is set (a partial index), so an
  append computes neither; searches read the not-yet-indexed rows through a
  partial index of their own, so nothing committed is ever missed.
* The word index holds a text's identifiers by their words too (migration 124): the ``tsvector``
  of the text, then that of :func:`lossless.text.identifier_words`, computed in SQL by
  ``lcm_identifier_words`` from the very patterns the Python function uses (an ``IMMUTABLE``
  function, so generated columns may use it).  A text without identifiers has the same
  ``tsvector`` as before.  A message's word index also holds the words JSON escapes hide
  (migration 126: :func:`lossless.text.escaped_words`, ``lcm_escaped_words`` in SQL, from
  :data:`lossless.text.ESCAPED_WORD`): ``\\tif`` is the word ``if`` too, as on SQLite.
* JSON-valued columns (tool input, metadata, file ids, …) are ``text`` holding
  the JSON exactly as the SQLite backend writes it: a round trip returns the
  very same document (``jsonb`` would reorder keys and refuse ``\\u0000``).
* Ids come from identity columns, which never hand out an id twice, even after
  deletes or rolled-back transactions.
"""

from __future__ import annotations

from dataclasses import dataclass

from lossless.text import (
    ESCAPED_WORD,
    IDENTIFIER_ACRONYM,
    IDENTIFIER_CAMEL,
    IDENTIFIER_SEPARATORS,
    IDENTIFIER_SPLITTING,
)

__all__ = [
    "ESCAPED_WORDS_FUNCTION",
    "IDENTIFIER_WORDS_FUNCTION",
    "MIGRATIONS",
    "REDO_KEY",
    "SUMMARY_TSV",
    "TSV",
    "TSV_CHARS",
    "Migration",
]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


#: Characters of a text covered by its word index (see the module docstring).
TSV_CHARS = 100_000

#: The word index of a text (``content``) up to migration 124, as migration 1 created it (migrations
#: are never edited).
_TSV = f"to_tsvector('english'::regconfig, left(content, {TSV_CHARS}))"


def _literal(text: str) -> str:
    """``text`` as an ``E''`` literal (reads the same whatever ``standard_conforming_strings`` says)."""
    return "E'" + text.replace("\\", "\\\\").replace("'", "''").replace("\n", "\\n") + "'"


_CAMEL, _ACRONYM, _SPLITTING = (_literal(p) for p in (IDENTIFIER_CAMEL, IDENTIFIER_ACRONYM, IDENTIFIER_SPLITTING))
_SEPARATORS, _SPACES = _literal(IDENTIFIER_SEPARATORS), _literal(" " * len(IDENTIFIER_SEPARATORS))
_BOTH, _NEWLINE = _literal(r"\1 \2"), _literal(chr(10))

#: ``lcm_identifier_words(text)``: :func:`lossless.text.identifier_words` in SQL, from the same patterns.
IDENTIFIER_WORDS_FUNCTION = f"""
CREATE OR REPLACE FUNCTION lcm_identifier_words(body text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
    SELECT translate(
        regexp_replace(
            regexp_replace(coalesce(string_agg(m.found[1], {_NEWLINE} ORDER BY m.n), ''), {_CAMEL}, {_BOTH}, 'g'),
            {_ACRONYM}, {_BOTH}, 'g'),
        {_SEPARATORS}, {_SPACES})
    FROM regexp_matches(body, {_SPLITTING}, 'g') WITH ORDINALITY AS m(found, n)
    WHERE m.found[1] ~ '[A-Za-z]'
$fn$
"""

#: ``lcm_escaped_words(text)``: :func:`lossless.text.escaped_words` in SQL, from the same pattern.
ESCAPED_WORDS_FUNCTION = f"""
CREATE OR REPLACE FUNCTION lcm_escaped_words(body text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
    SELECT coalesce(string_agg(m.found[1], {_NEWLINE} ORDER BY m.n), '')
    FROM regexp_matches(body, {_literal(ESCAPED_WORD)}, 'g') WITH ORDINALITY AS m(found, n)
$fn$
"""


def _word_index(*functions: str) -> str:
    """A text's word index: its words (:data:`_TSV`), then the words each SQL function of ``functions`` finds in it."""
    extra = [f"to_tsvector('english'::regconfig, {name}(left(content, {TSV_CHARS})))" for name in functions]
    return "(" + " || ".join([_TSV, *extra]) + ")"


#: The word index of a text (``content``): its words, then its identifiers' words (migration 124).
#: A summary's generated column (made by migration 124; migrations are never edited).
SUMMARY_TSV = _word_index("lcm_identifier_words")
#: A message's word index: :data:`SUMMARY_TSV`'s, then the words JSON escapes hide (migration 126).
#: What the message indexer computes, and what a search computes for a message not indexed yet.
TSV = _word_index("lcm_identifier_words", "lcm_escaped_words")
#: The ``lcm_meta`` key of the messages still indexed without their identifiers' words (migration 124)
#: or the words JSON escapes hide (migration 126): those with a ``message_id`` up to its value (the
#: word indexer re-indexes them, newest first, in the background).
REDO_KEY = "message_words_redo_below"

_V1 = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE TYPE lcm_message_role AS ENUM ('system', 'user', 'assistant', 'tool')",
    "CREATE TYPE lcm_summary_kind AS ENUM ('leaf', 'condensed')",
    "CREATE TYPE lcm_context_item_type AS ENUM ('message', 'summary')",
    "CREATE TYPE lcm_summary_level AS ENUM ('normal', 'aggressive', 'fallback')",
    """
    CREATE TYPE lcm_message_part_type AS ENUM (
        'text', 'reasoning', 'tool', 'patch', 'file', 'subtask', 'compaction',
        'step_start', 'step_finish', 'snapshot', 'agent', 'retry'
    )
    """,
    """
    CREATE TABLE conversations (
        conversation_id        bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        agent_id               text NOT NULL,
        session_id             text NOT NULL,
        session_key            text,
        parent_conversation_id bigint REFERENCES conversations(conversation_id) ON DELETE SET NULL,
        title                  text,
        source                 text,
        active                 boolean NOT NULL DEFAULT true,
        archived_at            timestamptz,
        bootstrapped_at        timestamptz,
        created_at             timestamptz NOT NULL,
        updated_at             timestamptz NOT NULL,
        metadata               text,
        UNIQUE (agent_id, session_id)
    )
    """,
    """
    CREATE UNIQUE INDEX conversations_active_session_key_idx
        ON conversations (agent_id, session_key) WHERE session_key IS NOT NULL AND active
    """,
    "CREATE INDEX conversations_updated_idx ON conversations (updated_at)",
    "CREATE INDEX conversations_parent_idx ON conversations (parent_conversation_id)",
    f"""
    CREATE TABLE messages (
        message_id      bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        conversation_id bigint NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        seq             bigint NOT NULL,
        role            lcm_message_role NOT NULL,
        content         text NOT NULL,
        token_count     integer NOT NULL CHECK (token_count >= 0),
        created_at      timestamptz NOT NULL,
        event_key       text,
        metadata        text,
        content_tsv     tsvector GENERATED ALWAYS AS ({_TSV}) STORED,
        UNIQUE (conversation_id, seq)
    )
    """,
    """
    CREATE UNIQUE INDEX messages_event_key_idx
        ON messages (conversation_id, event_key) WHERE event_key IS NOT NULL
    """,
    "CREATE INDEX messages_tsv_gin_idx ON messages USING gin (content_tsv)",
    "CREATE INDEX messages_trgm_idx ON messages USING gin (content gin_trgm_ops)",
    "CREATE INDEX messages_created_idx ON messages (conversation_id, created_at)",
    """
    CREATE TABLE message_parts (
        message_id       bigint NOT NULL REFERENCES messages(message_id) ON DELETE CASCADE,
        ordinal          integer NOT NULL CHECK (ordinal BETWEEN 0 AND 65535),
        part_type        lcm_message_part_type NOT NULL,
        from_content     boolean NOT NULL DEFAULT false,
        text_content     text,
        is_ignored       boolean,
        is_synthetic     boolean,
        tool_call_id     text,
        tool_name        text,
        tool_status      text,
        tool_input       text,
        tool_output      text,
        tool_error       text,
        tool_title       text,
        patch_hash       text,
        patch_files      text,
        file_mime        text,
        file_name        text,
        file_url         text,
        subtask_prompt   text,
        subtask_desc     text,
        subtask_agent    text,
        step_reason      text,
        step_cost        double precision,
        step_tokens_in   integer,
        step_tokens_out  integer,
        snapshot_hash    text,
        compaction_auto  boolean,
        metadata         text,
        PRIMARY KEY (message_id, ordinal)
    )
    """,
    # No index on part_type alone: with a handful of values it only tempts the planner into
    # BitmapAnd plans far slower than the primary key range per message.
    f"""
    CREATE TABLE summaries (
        summary_rowid              bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        summary_id                 text NOT NULL UNIQUE,
        conversation_id            bigint NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        kind                       lcm_summary_kind NOT NULL,
        depth                      integer NOT NULL DEFAULT 0 CHECK (depth >= 0),
        content                    text NOT NULL,
        token_count                integer NOT NULL CHECK (token_count >= 0),
        earliest_at                timestamptz,
        latest_at                  timestamptz,
        descendant_count           integer NOT NULL DEFAULT 0,
        descendant_token_count     bigint NOT NULL DEFAULT 0,
        source_message_token_count bigint NOT NULL DEFAULT 0,
        file_ids                   text NOT NULL DEFAULT '[]',
        provider                   text,
        model                      text,
        level                      lcm_summary_level NOT NULL DEFAULT 'normal',
        reason                     text,
        created_at                 timestamptz NOT NULL,
        content_tsv                tsvector GENERATED ALWAYS AS ({_TSV}) STORED
    )
    """,
    "CREATE INDEX summaries_conv_created_idx ON summaries (conversation_id, created_at)",
    "CREATE INDEX summaries_tsv_gin_idx ON summaries USING gin (content_tsv)",
    "CREATE INDEX summaries_trgm_idx ON summaries USING gin (content gin_trgm_ops)",
    """
    CREATE TABLE summary_messages (
        summary_id text NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
        message_id bigint NOT NULL REFERENCES messages(message_id) ON DELETE RESTRICT,
        ordinal    integer NOT NULL,
        PRIMARY KEY (summary_id, message_id)
    )
    """,
    "CREATE INDEX summary_messages_message_idx ON summary_messages (message_id)",
    """
    CREATE TABLE summary_parents (
        summary_id        text NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
        parent_summary_id text NOT NULL REFERENCES summaries(summary_id) ON DELETE RESTRICT,
        ordinal           integer NOT NULL,
        PRIMARY KEY (summary_id, parent_summary_id)
    )
    """,
    "CREATE INDEX summary_parents_parent_idx ON summary_parents (parent_summary_id)",
    """
    CREATE TABLE context_items (
        conversation_id bigint NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        ordinal         bigint NOT NULL,
        item_type       lcm_context_item_type NOT NULL,
        message_id      bigint REFERENCES messages(message_id) ON DELETE RESTRICT,
        summary_id      text REFERENCES summaries(summary_id) ON DELETE RESTRICT,
        created_at      timestamptz NOT NULL,
        PRIMARY KEY (conversation_id, ordinal),
        CHECK ((item_type = 'message' AND message_id IS NOT NULL AND summary_id IS NULL)
            OR (item_type = 'summary' AND summary_id IS NOT NULL AND message_id IS NULL))
    )
    """,
    "CREATE INDEX context_items_message_idx ON context_items (message_id) WHERE message_id IS NOT NULL",
    "CREATE INDEX context_items_summary_idx ON context_items (summary_id) WHERE summary_id IS NOT NULL",
    """
    CREATE TABLE large_files (
        file_id             text PRIMARY KEY,
        file_rowid          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        conversation_id     bigint NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        file_name           text,
        mime_type           text,
        byte_size           bigint,
        content_hash        text,
        storage_uri         text NOT NULL,
        exploration_summary text,
        origin              text CHECK (origin IN ('file_block', 'tool_output', 'data_url')),
        content_kind        text,
        created_at          timestamptz NOT NULL
    )
    """,
    # Files stored at the same time list in the order inserted: file_rowid plays SQLite's rowid.
    "CREATE INDEX large_files_conv_idx ON large_files (conversation_id, created_at, file_rowid)",
    "CREATE INDEX large_files_hash_idx ON large_files (content_hash)",
    """
    CREATE TABLE conversation_bootstrap_state (
        conversation_id           bigint NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        session_file_path         text NOT NULL,
        last_seen_size            bigint NOT NULL,
        last_seen_mtime_ns        bigint NOT NULL,
        last_processed_offset     bigint NOT NULL,
        last_processed_entry_hash text,
        last_entry_key            text,
        updated_at                timestamptz NOT NULL,
        PRIMARY KEY (conversation_id, session_file_path)
    )
    """,
    "CREATE INDEX conversation_bootstrap_state_path_idx ON conversation_bootstrap_state (session_file_path)",
    """
    CREATE TABLE lcm_meta (
        key   text PRIMARY KEY,
        value text NOT NULL
    )
    """,
    "INSERT INTO lcm_meta (key, value) VALUES ('store_id', md5(random()::text || clock_timestamp()::text))",
    # Blobs of large files kept in the database (large_files_storage = database): shared by every host.
    """
    CREATE TABLE large_file_blobs (
        conversation_id bigint NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        content_hash    text NOT NULL CHECK (content_hash ~ '^[0-9a-f]{64}$'),
        data            bytea NOT NULL,
        created_at      timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (conversation_id, content_hash)
    )
    """,
)

#: Delegation grants for expansion sub-agents: durable, so a crash cannot leave one usable forever.
_V2 = (
    """
    CREATE TABLE expansion_grants (
        grant_id         text PRIMARY KEY,
        agent_id         text NOT NULL,
        grantee          text NOT NULL,
        conversation_ids text NOT NULL,
        token_cap        integer NOT NULL CHECK (token_cap >= 0),
        tokens_used      integer NOT NULL DEFAULT 0 CHECK (tokens_used >= 0),
        created_at       timestamptz NOT NULL,
        expires_at       timestamptz NOT NULL,
        revoked_at       timestamptz,
        revoke_reason    text
    )
    """,
    "CREATE INDEX expansion_grants_live_idx ON expansion_grants (expires_at) WHERE revoked_at IS NULL",
)

_MEMORY_CATEGORIES = "'profile', 'preferences', 'entities', 'events', 'cases', 'patterns'"
#: ASCII punctuation the memory word index reads as spaces, so that ``db-9`` is the words ``db`` and
#: ``9`` (PostgreSQL's parser would make ``-9`` a signed number, ``a.b.com`` a host name): the same
#: split as SQLite's ``unicode61`` tokenizer, and the split the query side makes (``\w+``).
MEMORY_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
#: Characters of a memory's overview and abstract covered by the word index (the content: TSV_CHARS).
_MEMORY_TSV_LEVEL_CHARS = 10_000


def _memory_tsv(column: str, chars: int, weight: str, *, identifiers: bool = True) -> str:
    # An E'' literal reads the same whatever standard_conforming_strings says.
    punctuation = MEMORY_PUNCTUATION.replace("\\", "\\\\").replace("'", "''")
    spaces = " " * len(MEMORY_PUNCTUATION)
    words = f"to_tsvector('english'::regconfig, translate(left({column}, {chars}), E'{punctuation}', '{spaces}'))"
    if identifiers:
        words = f"({words} || to_tsvector('english'::regconfig, lcm_identifier_words(left({column}, {chars}))))"
    return f"setweight({words}, '{weight}')"


def _memory_tsvector(*, identifiers: bool) -> str:
    return " || ".join(
        (
            _memory_tsv("abstract", _MEMORY_TSV_LEVEL_CHARS, "A", identifiers=identifiers),
            _memory_tsv("overview", _MEMORY_TSV_LEVEL_CHARS, "B", identifiers=identifiers),
            _memory_tsv("content", TSV_CHARS, "C", identifiers=identifiers),
        )
    )


#: The memory word index of migration 4 (migrations are never edited).
_MEMORY_TSV_V4 = _memory_tsvector(identifiers=False)
#: The memory word index: abstract (weight A), overview (B) and content (C), for BM25 by column; each
#: column's words, then its identifiers' words (``lcm_identifier_words``; migration 125), as messages.
MEMORY_TSV = _memory_tsvector(identifiers=True)
#: The text the memory substring (``pg_trgm``) index covers; queries must use this very expression.
MEMORY_TRGM_TEXT = "(abstract || ' ' || overview || ' ' || content)"

#: Long-term memory: the same tables and meaning as SQLite's migration 4.  The indexes are
#: PostgreSQL's own (a generated tsvector and a pg_trgm GIN index), updated inside the writing
#: transaction, so an update is never visible half-indexed.  Vectors are float32 blobs
#: (``bytea``), exactly as in SQLite: pgvector is not needed (an optional nearest-neighbour table
#: is created at run time where the ``vector`` extension is installed; see
#: :mod:`lossless.stores.postgres.memory`).
_V4 = (
    f"""
    CREATE TABLE memories (
        memory_rowid     bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        memory_id        text COLLATE "C" NOT NULL UNIQUE,
        scope            text NOT NULL,
        category         text NOT NULL CHECK (category IN ({_MEMORY_CATEGORIES})),
        tier             text NOT NULL DEFAULT 'working' CHECK (tier IN ('core', 'working', 'peripheral')),
        abstract         text NOT NULL,
        overview         text NOT NULL,
        content          text NOT NULL,
        importance       double precision NOT NULL CHECK (importance BETWEEN 0 AND 1),
        confidence       double precision NOT NULL CHECK (confidence BETWEEN 0 AND 1),
        temporal_type    text NOT NULL DEFAULT 'static' CHECK (temporal_type IN ('static', 'dynamic')),
        valid_from       timestamptz NOT NULL,
        valid_until      timestamptz,
        fact_key         text,
        supersedes       text,
        superseded_by    text,
        invalidated_at   timestamptz,
        access_count     integer NOT NULL DEFAULT 0 CHECK (access_count >= 0),
        last_accessed_at timestamptz,
        access_gap_days  double precision NOT NULL DEFAULT 0,
        conversation_id  bigint REFERENCES conversations(conversation_id) ON DELETE SET NULL,
        source           text NOT NULL DEFAULT 'manual' CHECK (source IN ('manual', 'extraction', 'import')),
        content_hash     text NOT NULL,
        metadata         text,
        created_at       timestamptz NOT NULL,
        updated_at       timestamptz NOT NULL,
        search_tsv       tsvector GENERATED ALWAYS AS ({_MEMORY_TSV_V4}) STORED
    )
    """,
    "CREATE INDEX memories_scope_idx ON memories (scope, invalidated_at)",
    "CREATE INDEX memories_fact_key_idx ON memories (fact_key, valid_from) WHERE fact_key IS NOT NULL",
    "CREATE INDEX memories_conversation_idx ON memories (conversation_id) WHERE conversation_id IS NOT NULL",
    "CREATE INDEX memories_supersedes_idx ON memories (supersedes) WHERE supersedes IS NOT NULL",
    "CREATE INDEX memories_tsv_gin_idx ON memories USING gin (search_tsv)",
    f"CREATE INDEX memories_trgm_idx ON memories USING gin ({MEMORY_TRGM_TEXT} gin_trgm_ops)",
    """
    CREATE TABLE memory_sources (
        memory_rowid bigint NOT NULL REFERENCES memories(memory_rowid) ON DELETE CASCADE,
        ordinal      integer NOT NULL,
        message_id   bigint NOT NULL,
        PRIMARY KEY (memory_rowid, ordinal)
    )
    """,
    "CREATE INDEX memory_sources_message_idx ON memory_sources (message_id)",
    """
    CREATE TABLE memory_vectors (
        memory_rowid bigint NOT NULL REFERENCES memories(memory_rowid) ON DELETE CASCADE,
        chunk        integer NOT NULL,
        model        text NOT NULL,
        dim          integer NOT NULL CHECK (dim > 0),
        vector       bytea NOT NULL CHECK (octet_length(vector) = 4 * dim),
        PRIMARY KEY (memory_rowid, model, chunk)
    )
    """,
    # Random float32 bytes do not compress: don't try.
    "ALTER TABLE memory_vectors ALTER COLUMN vector SET STORAGE EXTERNAL",
    """
    CREATE TABLE embedding_cache (
        content_hash text NOT NULL,
        model        text NOT NULL,
        dim          integer NOT NULL CHECK (dim > 0),
        vector       bytea NOT NULL CHECK (octet_length(vector) = 4 * dim),
        created_at   timestamptz NOT NULL,
        PRIMARY KEY (content_hash, model)
    )
    """,
    "ALTER TABLE embedding_cache ALTER COLUMN vector SET STORAGE EXTERNAL",
    """
    CREATE TABLE memory_access (
        agent_id   text NOT NULL,
        scope      text NOT NULL,
        granted_at timestamptz NOT NULL,
        PRIMARY KEY (agent_id, scope)
    )
    """,
    "INSERT INTO lcm_meta (key, value) VALUES ('memory_revision', '0')",
)

#: Background jobs (compaction, integrity), claimed with FOR UPDATE SKIP LOCKED under a lease.
_V5 = (
    """
    CREATE TABLE jobs (
        job_id           bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        kind             text NOT NULL CHECK (kind IN ('compaction', 'integrity')),
        conversation_id  bigint REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        reason           text NOT NULL CHECK (reason IN ('threshold', 'manual', 'maintenance')),
        mode             text,
        target_tokens    integer,
        requested_at     timestamptz NOT NULL,
        state            text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
        attempts         integer NOT NULL DEFAULT 0,
        lease_owner      text,
        lease_expires_ms bigint,
        finished_at      timestamptz,
        result           text,
        error            text
    )
    """,
    "CREATE INDEX jobs_state_idx ON jobs (state, job_id)",
    # At most one queued job per (kind, conversation): asking again while one waits adds nothing.
    "CREATE UNIQUE INDEX jobs_queued_idx ON jobs (kind, coalesce(conversation_id, 0)) WHERE state = 'queued'",
)

#: Which messages long-term memory has mined, so that no message is mined twice (rows go with their conversation).
_V6 = (
    """
    CREATE TABLE memory_mined (
        message_id      bigint PRIMARY KEY,
        conversation_id bigint NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        mined_at        timestamptz NOT NULL
    )
    """,
    "CREATE INDEX memory_mined_conversation_idx ON memory_mined (conversation_id)",
)

#: One row per compaction pass, written in the transaction that put its summary in place.
_V7 = (
    """
    CREATE TABLE compaction_events (
        event_id        bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        conversation_id bigint NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        summary_id      text NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
        run_id          text NOT NULL,
        trigger_reason  text NOT NULL CHECK (trigger_reason IN ('threshold', 'manual', 'maintenance')),
        mode            text NOT NULL CHECK (mode IN ('incremental', 'full', 'until_under')),
        source_items    integer NOT NULL CHECK (source_items > 0),
        tokens_before   bigint NOT NULL CHECK (tokens_before >= 0),
        tokens_after    bigint NOT NULL CHECK (tokens_after >= 0),
        elapsed_ms      bigint NOT NULL CHECK (elapsed_ms >= 0),
        created_at      timestamptz NOT NULL
    )
    """,
    "CREATE INDEX compaction_events_conversation_idx ON compaction_events (conversation_id, event_id)",
    "CREATE INDEX compaction_events_summary_idx ON compaction_events (summary_id)",
)

#: Search vectors of messages and summaries, written by the background embedding build (one row per
#: chunk and model; chunk 0 with dim 0 marks a blank text).  Where the ``vector`` extension is
#: installed, stores/postgres/vectors.py adds an ``embedding`` column and HNSW indexes at run time.
_V16 = tuple(
    stmt
    for table, key, refs in (
        ("message_vectors", "message_id bigint", "messages(message_id)"),
        ("summary_vectors", "summary_id text", "summaries(summary_id)"),
    )
    for stmt in (
        f"""
        CREATE TABLE {table} (
            {key} NOT NULL REFERENCES {refs} ON DELETE CASCADE,
            model           text NOT NULL,
            chunk           integer NOT NULL CHECK (chunk >= 0),
            conversation_id bigint NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
            dim             integer NOT NULL CHECK (dim >= 0),
            vector          bytea NOT NULL CHECK (octet_length(vector) = 4 * dim),
            PRIMARY KEY ({key.split()[0]}, model, chunk)
        )
        """,
        f"CREATE INDEX {table}_conversation_idx ON {table} (model, conversation_id, chunk, dim)",
        f"ALTER TABLE {table} ALTER COLUMN vector SET STORAGE EXTERNAL",
    )
)


def _counted(source: str, table: str) -> tuple[str, ...]:
    """Statement triggers that add one delta row per (model, conversation) a statement changed, and the backfill."""
    return (
        f"""
        CREATE TRIGGER {table}_counted AFTER INSERT ON {table} REFERENCING NEW TABLE AS changed
        FOR EACH STATEMENT EXECUTE FUNCTION lcm_count_vectors('{source}')
        """,
        f"""
        CREATE TRIGGER {table}_uncounted AFTER DELETE ON {table} REFERENCING OLD TABLE AS changed
        FOR EACH STATEMENT EXECUTE FUNCTION lcm_count_vectors('{source}')
        """,
        f"""
        INSERT INTO vector_counts (source, model, conversation_id, indexed, rows)
        SELECT '{source}', model, conversation_id, count(*) FILTER (WHERE chunk = 0), count(*) FILTER (WHERE dim > 0)
        FROM {table} GROUP BY model, conversation_id ORDER BY model, conversation_id
        """,
    )


#: How many search vectors each conversation has per model, so a search reads a few rows per
#: conversation instead of counting its vectors (a count over a million vectors takes longer than the
#: search).  Unlike SQLite's one row per key, each statement that adds or deletes vectors *appends*
#: delta rows (no row is ever updated by a writer, so concurrent builders, cascades and prunes never
#: wait on one another or deadlock here); a reader sums them, and the build folds them into one row
#: per key at the end of each pass.  ``max(id)`` of a key's rows is its revision: it grows with every
#: change.  No foreign key: a deleted conversation's rows are counted down to zero by its cascade.
_V116 = (
    """
    CREATE TABLE vector_counts (
        id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        source          text NOT NULL CHECK (source IN ('messages', 'summaries')),
        model           text NOT NULL,
        conversation_id bigint NOT NULL,
        indexed         bigint NOT NULL,
        rows            bigint NOT NULL
    )
    """,
    "CREATE INDEX vector_counts_key_idx ON vector_counts (source, model, conversation_id) INCLUDE (indexed, rows, id)",
    """
    CREATE FUNCTION lcm_count_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO vector_counts (source, model, conversation_id, indexed, rows)
            SELECT TG_ARGV[0], model, conversation_id, count(*) FILTER (WHERE chunk = 0),
                   count(*) FILTER (WHERE dim > 0)
            FROM changed GROUP BY model, conversation_id;
        ELSE
            INSERT INTO vector_counts (source, model, conversation_id, indexed, rows)
            SELECT TG_ARGV[0], model, conversation_id, -count(*) FILTER (WHERE chunk = 0),
                   -count(*) FILTER (WHERE dim > 0)
            FROM changed GROUP BY model, conversation_id;
        END IF;
        RETURN NULL;
    END
    $$
    """,
    *_counted("messages", "message_vectors"),
    *_counted("summaries", "summary_vectors"),
)

#: Where bootstrap reconciliation stands in the store: messages above this seq are not yet matched
#: with the transcript (live ingest that the file may still catch up with).
_V20 = ("ALTER TABLE conversation_bootstrap_state ADD COLUMN reconciled_seq bigint",)

#: Messages are indexed after their append commits (see the module docstring): ``content_tsv`` keeps
#: its values but is no longer computed on insert, the trigram index covers indexed rows only, and a
#: partial index finds the rows still waiting.  (PostgreSQL only: the number is not one of SQLite's.)
_V122 = (
    "ALTER TABLE messages ALTER COLUMN content_tsv DROP EXPRESSION",
    "CREATE INDEX messages_unindexed_idx ON messages (message_id) WHERE content_tsv IS NULL",
    "DROP INDEX messages_trgm_idx",
    "CREATE INDEX messages_trgm_idx ON messages USING gin (content gin_trgm_ops) WHERE content_tsv IS NOT NULL",
)

#: Message text is stored uncompressed (out of line when long, as before): reading a long text back
#: is then a copy of its TOAST chunks, not a pglz decompression, which cost grep and assembly more
#: than the text's transfer (docs/postgres.md).  Rows written before keep their compressed form
#: until rewritten; both read back the same.  (PostgreSQL only.)
_V123 = ("ALTER TABLE messages ALTER COLUMN content SET STORAGE EXTERNAL",)

#: Identifiers are indexed by their words too (see the module docstring).  Summaries' generated
#: column is made again with the new expression (PostgreSQL before 17 cannot change one in place:
#: the table is rewritten and its word index rebuilt inside the migration, as migration 122 built its
#: indexes).  Messages keep their word index, and the background indexer re-indexes those that hold
#: an identifier, in batches, newest first (:data:`REDO_KEY`); until then they are found by their
#: words as before.  (PostgreSQL only: SQLite's companion index file is rebuilt instead.)
_V124 = (
    IDENTIFIER_WORDS_FUNCTION,
    "ALTER TABLE summaries DROP COLUMN content_tsv",
    f"ALTER TABLE summaries ADD COLUMN content_tsv tsvector GENERATED ALWAYS AS ({SUMMARY_TSV}) STORED",
    "CREATE INDEX summaries_tsv_gin_idx ON summaries USING gin (content_tsv)",
    f"INSERT INTO lcm_meta (key, value) SELECT '{REDO_KEY}', coalesce(max(message_id), 0)::text FROM messages",
)

#: Memories' identifiers indexed by their words too, as messages' are since migration 124.
_V125 = (
    "ALTER TABLE memories DROP COLUMN search_tsv",
    f"ALTER TABLE memories ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS ({MEMORY_TSV}) STORED",
    "CREATE INDEX memories_tsv_gin_idx ON memories USING gin (search_tsv)",
)

#: A message's word index holds the words JSON escapes hide too (``\\tif`` is also ``if``; see the module
#: docstring).  Messages keep their word index, and the background indexer re-indexes, newest first,
#: those that hold an identifier or such a word (:data:`REDO_KEY`, as after migration 124); until then
#: they are found by their words as before.  Summaries and memories are indexed as they were.
#: (PostgreSQL only: SQLite's companion index file is rebuilt instead.)
_V126 = (
    ESCAPED_WORDS_FUNCTION,
    f"DELETE FROM lcm_meta WHERE key = '{REDO_KEY}'",
    f"INSERT INTO lcm_meta (key, value) SELECT '{REDO_KEY}', coalesce(max(message_id), 0)::text FROM messages",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _V1),
    Migration(2, "expansion grants", _V2),
    Migration(4, "long-term memory", _V4),
    Migration(5, "background jobs", _V5),
    Migration(6, "memory mining record", _V6),
    Migration(7, "compaction events", _V7),
    Migration(16, "search vectors", _V16),
    Migration(20, "bootstrap reconciliation point", _V20),
    Migration(116, "search vector counts", _V116),
    Migration(122, "message word index filled after the append", _V122),
    Migration(123, "message text stored uncompressed", _V123),
    Migration(124, "identifiers indexed by their words", _V124),
    Migration(125, "memory identifiers indexed by their words", _V125),
    Migration(126, "message words hidden by JSON escapes indexed", _V126),
)

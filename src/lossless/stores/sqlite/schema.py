"""The SQLite schema as numbered migrations.

Invariants:

* Migrations are append-only: a released migration is never edited; changes
  come as a new, higher-numbered one.  Each runs in its own ``BEGIN IMMEDIATE``
  transaction together with the row that records it in ``lcm_migrations``, so a
  crash leaves the schema at a whole version.  A migration runs when its own
  version is not recorded yet (not merely when it is above the highest), so
  numbers handed out to parallel work may land out of order; ``MIGRATIONS``
  stays sorted by version.
* This file holds the canonical rows only.  The full-text indexes are derived
  data and live in a companion file (see :mod:`lossless.stores.sqlite.index`).
* Rows an index points at have an ``INTEGER PRIMARY KEY``, so ``VACUUM``
  cannot renumber them.  Message ids are assigned by the store as
  ``max(max(message_id), lcm_meta.message_id_floor) + 1``; whatever deletes
  messages must first raise ``message_id_floor`` to the highest id it deletes,
  so an id is never reused (``AUTOINCREMENT`` would promise the same at the
  cost of one more page written per commit).
* A part's id is ``message_id * 65536 + ordinal``: the parts of a message are
  stored together, in order, and found by a range scan of the primary key —
  no secondary index to maintain on every insert.  (So ``message_parts`` has no
  foreign key: deleting a message must delete its part range explicitly.)
* ``lcm_meta.store_id`` is a random id made when the file is created; the
  index file records it, so an index can never be matched with the wrong store.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MIGRATIONS", "Migration"]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


_ROLES = "'system','user','assistant','tool'"
_PART_TYPES = (
    "'text','reasoning','tool','patch','file','subtask','compaction',"
    "'step_start','step_finish','snapshot','agent','retry'"
)


_V1 = (
    """
    CREATE TABLE conversations (
        conversation_id        INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id               TEXT NOT NULL,
        session_id             TEXT NOT NULL,
        session_key            TEXT,
        parent_conversation_id INTEGER REFERENCES conversations(conversation_id) ON DELETE SET NULL,
        title                  TEXT,
        source                 TEXT,
        active                 INTEGER NOT NULL DEFAULT 1,
        archived_at            TEXT,
        bootstrapped_at        TEXT,
        created_at             TEXT NOT NULL,
        updated_at             TEXT NOT NULL,
        metadata               TEXT,
        UNIQUE (agent_id, session_id)
    )
    """,
    """
    CREATE UNIQUE INDEX conversations_active_session_key_idx
        ON conversations (agent_id, session_key) WHERE session_key IS NOT NULL AND active = 1
    """,
    "CREATE INDEX conversations_updated_idx ON conversations (updated_at)",
    f"""
    CREATE TABLE messages (
        message_id      INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        seq             INTEGER NOT NULL,
        role            TEXT NOT NULL CHECK (role IN ({_ROLES})),
        content         TEXT NOT NULL,
        token_count     INTEGER NOT NULL CHECK (token_count >= 0),
        created_at      TEXT NOT NULL,
        event_key       TEXT,
        metadata        TEXT,
        UNIQUE (conversation_id, seq)
    )
    """,
    """
    CREATE UNIQUE INDEX messages_event_key_idx
        ON messages (conversation_id, event_key) WHERE event_key IS NOT NULL
    """,
    f"""
    CREATE TABLE message_parts (
        part_id          INTEGER PRIMARY KEY CHECK (part_id = message_id * 65536 + ordinal),
        message_id       INTEGER NOT NULL,
        ordinal          INTEGER NOT NULL CHECK (ordinal BETWEEN 0 AND 65535),
        part_type        TEXT NOT NULL CHECK (part_type IN ({_PART_TYPES})),
        from_content     INTEGER NOT NULL DEFAULT 0,
        text_content     TEXT,
        is_ignored       INTEGER,
        is_synthetic     INTEGER,
        tool_call_id     TEXT,
        tool_name        TEXT,
        tool_status      TEXT,
        tool_input       TEXT,
        tool_output      TEXT,
        tool_error       TEXT,
        tool_title       TEXT,
        patch_hash       TEXT,
        patch_files      TEXT,
        file_mime        TEXT,
        file_name        TEXT,
        file_url         TEXT,
        subtask_prompt   TEXT,
        subtask_desc     TEXT,
        subtask_agent    TEXT,
        step_reason      TEXT,
        step_cost        REAL,
        step_tokens_in   INTEGER,
        step_tokens_out  INTEGER,
        snapshot_hash    TEXT,
        compaction_auto  INTEGER,
        metadata         TEXT
    )
    """,
    """
    CREATE TABLE summaries (
        summary_rowid              INTEGER PRIMARY KEY,
        summary_id                 TEXT NOT NULL UNIQUE,
        conversation_id            INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        kind                       TEXT NOT NULL CHECK (kind IN ('leaf','condensed')),
        depth                      INTEGER NOT NULL DEFAULT 0 CHECK (depth >= 0),
        content                    TEXT NOT NULL,
        token_count                INTEGER NOT NULL CHECK (token_count >= 0),
        earliest_at                TEXT,
        latest_at                  TEXT,
        descendant_count           INTEGER NOT NULL DEFAULT 0,
        descendant_token_count     INTEGER NOT NULL DEFAULT 0,
        source_message_token_count INTEGER NOT NULL DEFAULT 0,
        file_ids                   TEXT NOT NULL DEFAULT '[]',
        provider                   TEXT,
        model                      TEXT,
        level                      TEXT NOT NULL DEFAULT 'normal'
                                   CHECK (level IN ('normal','aggressive','fallback')),
        reason                     TEXT,
        created_at                 TEXT NOT NULL
    )
    """,
    "CREATE INDEX summaries_conv_created_idx ON summaries (conversation_id, created_at)",
    """
    CREATE TABLE summary_messages (
        summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
        message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE RESTRICT,
        ordinal    INTEGER NOT NULL,
        PRIMARY KEY (summary_id, message_id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX summary_messages_message_idx ON summary_messages (message_id)",
    """
    CREATE TABLE summary_parents (
        summary_id        TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
        parent_summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE RESTRICT,
        ordinal           INTEGER NOT NULL,
        PRIMARY KEY (summary_id, parent_summary_id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX summary_parents_parent_idx ON summary_parents (parent_summary_id)",
    """
    CREATE TABLE context_items (
        conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        ordinal         INTEGER NOT NULL,
        item_type       TEXT NOT NULL CHECK (item_type IN ('message','summary')),
        message_id      INTEGER REFERENCES messages(message_id) ON DELETE RESTRICT,
        summary_id      TEXT REFERENCES summaries(summary_id) ON DELETE RESTRICT,
        created_at      TEXT NOT NULL,
        PRIMARY KEY (conversation_id, ordinal),
        CHECK ((item_type = 'message' AND message_id IS NOT NULL AND summary_id IS NULL)
            OR (item_type = 'summary' AND summary_id IS NOT NULL AND message_id IS NULL))
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE large_files (
        file_id             TEXT PRIMARY KEY,
        conversation_id     INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        file_name           TEXT,
        mime_type           TEXT,
        byte_size           INTEGER,
        content_hash        TEXT,
        storage_uri         TEXT NOT NULL,
        exploration_summary TEXT,
        origin              TEXT CHECK (origin IN ('file_block','tool_output','data_url')),
        content_kind        TEXT,
        created_at          TEXT NOT NULL
    )
    """,
    "CREATE INDEX large_files_conv_idx ON large_files (conversation_id, created_at)",
    "CREATE INDEX large_files_hash_idx ON large_files (content_hash)",
    """
    CREATE TABLE conversation_bootstrap_state (
        conversation_id           INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        session_file_path         TEXT NOT NULL,
        last_seen_size            INTEGER NOT NULL,
        last_seen_mtime_ns        INTEGER NOT NULL,
        last_processed_offset     INTEGER NOT NULL,
        last_processed_entry_hash TEXT,
        last_entry_key            TEXT,
        updated_at                TEXT NOT NULL,
        PRIMARY KEY (conversation_id, session_file_path)
    )
    """,
    "CREATE INDEX conversation_bootstrap_state_path_idx ON conversation_bootstrap_state (session_file_path)",
    """
    CREATE TABLE lcm_meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )
    """,
    "INSERT INTO lcm_meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))))",
)

#: Delegation grants for expansion sub-agents (issue 5): durable, so a crash cannot leave one usable forever.
_V2 = (
    """
    CREATE TABLE expansion_grants (
        grant_id         TEXT PRIMARY KEY,
        agent_id         TEXT NOT NULL,
        grantee          TEXT NOT NULL,
        conversation_ids TEXT NOT NULL,
        token_cap        INTEGER NOT NULL CHECK (token_cap >= 0),
        tokens_used      INTEGER NOT NULL DEFAULT 0 CHECK (tokens_used >= 0),
        created_at       TEXT NOT NULL,
        expires_at       TEXT NOT NULL,
        revoked_at       TEXT,
        revoke_reason    TEXT
    )
    """,
    "CREATE INDEX expansion_grants_live_idx ON expansion_grants (expires_at) WHERE revoked_at IS NULL",
)

_MEMORY_CATEGORIES = "'profile','preferences','entities','events','cases','patterns'"
_MEMORY_FTS_COLUMNS = "abstract, overview, content"

# Long-term memory (issue 10).  Unlike the message index, the memory full-text
# tables live in this file and are kept in sync by triggers, in the same
# transaction as the rows: memories are few and written rarely, and an update
# must never be visible half-indexed.  Two FTS5 tables: porter/unicode61 for
# words, trigram for substrings (Chinese, Japanese and Korean have no spaces).
_V4 = (
    f"""
    CREATE TABLE memories (
        memory_rowid     INTEGER PRIMARY KEY,
        memory_id        TEXT NOT NULL UNIQUE,
        scope            TEXT NOT NULL,
        category         TEXT NOT NULL CHECK (category IN ({_MEMORY_CATEGORIES})),
        tier             TEXT NOT NULL DEFAULT 'working' CHECK (tier IN ('core','working','peripheral')),
        abstract         TEXT NOT NULL,
        overview         TEXT NOT NULL,
        content          TEXT NOT NULL,
        importance       REAL NOT NULL CHECK (importance BETWEEN 0 AND 1),
        confidence       REAL NOT NULL CHECK (confidence BETWEEN 0 AND 1),
        temporal_type    TEXT NOT NULL DEFAULT 'static' CHECK (temporal_type IN ('static','dynamic')),
        valid_from       TEXT NOT NULL,
        valid_until      TEXT,
        fact_key         TEXT,
        supersedes       TEXT,
        superseded_by    TEXT,
        invalidated_at   TEXT,
        access_count     INTEGER NOT NULL DEFAULT 0 CHECK (access_count >= 0),
        last_accessed_at TEXT,
        access_gap_days  REAL NOT NULL DEFAULT 0,
        conversation_id  INTEGER REFERENCES conversations(conversation_id) ON DELETE SET NULL,
        source           TEXT NOT NULL DEFAULT 'manual' CHECK (source IN ('manual','extraction','import')),
        content_hash     TEXT NOT NULL,
        metadata         TEXT,
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL
    )
    """,
    "CREATE INDEX memories_scope_idx ON memories (scope, invalidated_at)",
    "CREATE INDEX memories_fact_key_idx ON memories (fact_key, valid_from) WHERE fact_key IS NOT NULL",
    "CREATE INDEX memories_conversation_idx ON memories (conversation_id) WHERE conversation_id IS NOT NULL",
    """
    CREATE TABLE memory_sources (
        memory_rowid INTEGER NOT NULL REFERENCES memories(memory_rowid) ON DELETE CASCADE,
        ordinal      INTEGER NOT NULL,
        message_id   INTEGER NOT NULL,
        PRIMARY KEY (memory_rowid, ordinal)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX memory_sources_message_idx ON memory_sources (message_id)",
    """
    CREATE TABLE memory_vectors (
        memory_rowid INTEGER NOT NULL REFERENCES memories(memory_rowid) ON DELETE CASCADE,
        chunk        INTEGER NOT NULL,
        model        TEXT NOT NULL,
        dim          INTEGER NOT NULL CHECK (dim > 0),
        vector       BLOB NOT NULL CHECK (length(vector) = 4 * dim),
        PRIMARY KEY (memory_rowid, model, chunk)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE embedding_cache (
        content_hash TEXT NOT NULL,
        model        TEXT NOT NULL,
        dim          INTEGER NOT NULL CHECK (dim > 0),
        vector       BLOB NOT NULL CHECK (length(vector) = 4 * dim),
        created_at   TEXT NOT NULL,
        PRIMARY KEY (content_hash, model)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE memory_access (
        agent_id   TEXT NOT NULL,
        scope      TEXT NOT NULL,
        granted_at TEXT NOT NULL,
        PRIMARY KEY (agent_id, scope)
    ) WITHOUT ROWID
    """,
    "INSERT INTO lcm_meta (key, value) VALUES ('memory_revision', '0')",
    f"""
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        {_MEMORY_FTS_COLUMNS}, content='memories', content_rowid='memory_rowid',
        tokenize='porter unicode61 remove_diacritics 2'
    )
    """,
    f"""
    CREATE VIRTUAL TABLE memories_trigram USING fts5(
        {_MEMORY_FTS_COLUMNS}, content='memories', content_rowid='memory_rowid', tokenize='trigram'
    )
    """,
    *(
        stmt
        for table in ("memories_fts", "memories_trigram")
        for stmt in (
            f"""
            CREATE TRIGGER {table}_ai AFTER INSERT ON memories BEGIN
                INSERT INTO {table} (rowid, {_MEMORY_FTS_COLUMNS})
                VALUES (new.memory_rowid, new.abstract, new.overview, new.content);
            END
            """,
            f"""
            CREATE TRIGGER {table}_ad AFTER DELETE ON memories BEGIN
                INSERT INTO {table} ({table}, rowid, {_MEMORY_FTS_COLUMNS})
                VALUES ('delete', old.memory_rowid, old.abstract, old.overview, old.content);
            END
            """,
            f"""
            CREATE TRIGGER {table}_au AFTER UPDATE OF abstract, overview, content ON memories BEGIN
                INSERT INTO {table} ({table}, rowid, {_MEMORY_FTS_COLUMNS})
                VALUES ('delete', old.memory_rowid, old.abstract, old.overview, old.content);
                INSERT INTO {table} (rowid, {_MEMORY_FTS_COLUMNS})
                VALUES (new.memory_rowid, new.abstract, new.overview, new.content);
            END
            """,
        )
    ),
)

# Background jobs (compaction, integrity), claimed by workers under a lease; see stores/sqlite/jobs.py.
_V5 = (
    """
    CREATE TABLE jobs (
        job_id           INTEGER PRIMARY KEY,
        kind             TEXT NOT NULL CHECK (kind IN ('compaction','integrity')),
        conversation_id  INTEGER REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        reason           TEXT NOT NULL CHECK (reason IN ('threshold','manual','maintenance')),
        mode             TEXT,
        target_tokens    INTEGER,
        requested_at     TEXT NOT NULL,
        state            TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued','running','done','failed')),
        attempts         INTEGER NOT NULL DEFAULT 0,
        lease_owner      TEXT,
        lease_expires_ms INTEGER,
        finished_at      TEXT,
        result           TEXT,
        error            TEXT
    )
    """,
    "CREATE INDEX jobs_state_idx ON jobs (state, job_id)",
    # At most one queued job per (kind, conversation): asking again while one waits adds nothing.
    "CREATE UNIQUE INDEX jobs_queued_idx ON jobs (kind, coalesce(conversation_id, 0)) WHERE state = 'queued'",
)

# Which messages long-term memory has mined (after a turn, or when a leaf summary was made), so that
# no message is mined twice; the rows go with their conversation.
_V6 = (
    """
    CREATE TABLE memory_mined (
        message_id      INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        mined_at        TEXT NOT NULL
    )
    """,
    "CREATE INDEX memory_mined_conversation_idx ON memory_mined (conversation_id)",
)

# One row per compaction pass, written in the transaction that put the pass's summary in place (see
# records.CompactionEvent); the rows go with their summary and their conversation.
_V7 = (
    """
    CREATE TABLE compaction_events (
        event_id        INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        summary_id      TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
        run_id          TEXT NOT NULL,
        trigger_reason  TEXT NOT NULL CHECK (trigger_reason IN ('threshold','manual','maintenance')),
        mode            TEXT NOT NULL CHECK (mode IN ('incremental','full','until_under')),
        source_items    INTEGER NOT NULL CHECK (source_items > 0),
        tokens_before   INTEGER NOT NULL CHECK (tokens_before >= 0),
        tokens_after    INTEGER NOT NULL CHECK (tokens_after >= 0),
        elapsed_ms      INTEGER NOT NULL CHECK (elapsed_ms >= 0),
        created_at      TEXT NOT NULL
    )
    """,
    "CREATE INDEX compaction_events_conversation_idx ON compaction_events (conversation_id, event_id)",
    "CREATE INDEX compaction_events_summary_idx ON compaction_events (summary_id)",
)

# Search vectors of messages and summaries, written by the background embedding build (see
# stores/sqlite/vectors.py): one row per chunk and model; chunk 0 with dim 0 marks a blank text
# (nothing to embed, but done).  The rows go with their message, summary and conversation.
_V16 = (
    """
    CREATE TABLE message_vectors (
        message_id      INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE CASCADE,
        model           TEXT NOT NULL,
        chunk           INTEGER NOT NULL CHECK (chunk >= 0),
        conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        dim             INTEGER NOT NULL CHECK (dim >= 0),
        vector          BLOB NOT NULL CHECK (length(vector) = 4 * dim),
        PRIMARY KEY (message_id, model, chunk)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX message_vectors_conversation_idx ON message_vectors (model, conversation_id, chunk, dim)",
    """
    CREATE TABLE summary_vectors (
        summary_id      TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
        model           TEXT NOT NULL,
        chunk           INTEGER NOT NULL CHECK (chunk >= 0),
        conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
        dim             INTEGER NOT NULL CHECK (dim >= 0),
        vector          BLOB NOT NULL CHECK (length(vector) = 4 * dim),
        PRIMARY KEY (summary_id, model, chunk)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX summary_vectors_conversation_idx ON summary_vectors (model, conversation_id, chunk, dim)",
)

#: Where bootstrap reconciliation stands in the store: messages above this seq are not yet matched
#: with the transcript (live ingest that the file may still catch up with).
_V20 = ("ALTER TABLE conversation_bootstrap_state ADD COLUMN reconciled_seq INTEGER",)


def _counted(source: str, table: str) -> tuple[str, ...]:
    """Triggers that keep ``vector_counts`` in step with one vector table (inserts, deletes, cascades)."""
    return (
        f"""
        CREATE TRIGGER {table}_counted AFTER INSERT ON {table} BEGIN
            INSERT INTO vector_counts (source, model, conversation_id, indexed, rows, revision)
            VALUES ('{source}', NEW.model, NEW.conversation_id, NEW.chunk = 0, NEW.dim > 0, 1)
            ON CONFLICT (source, model, conversation_id) DO UPDATE SET
                indexed = indexed + excluded.indexed, rows = rows + excluded.rows, revision = revision + 1;
        END
        """,
        f"""
        CREATE TRIGGER {table}_uncounted AFTER DELETE ON {table} BEGIN
            UPDATE vector_counts SET indexed = indexed - (OLD.chunk = 0), rows = rows - (OLD.dim > 0),
                revision = revision + 1
            WHERE source = '{source}' AND model = OLD.model AND conversation_id = OLD.conversation_id;
        END
        """,
        f"""
        INSERT INTO vector_counts (source, model, conversation_id, indexed, rows, revision)
        SELECT '{source}', model, conversation_id, sum(chunk = 0), sum(dim > 0), 1 FROM {table}
        GROUP BY model, conversation_id
        """,
    )


# How many search vectors each conversation has per model, kept by triggers (so a search reads one row
# per conversation instead of counting its vectors), and a revision that changes with every vector added
# or removed: a searcher's in-memory copy of a conversation's vectors is current while it is unchanged.
# No foreign key: the rows of a deleted conversation are counted down to zero by the cascade's deletes.
_V116 = (
    """
    CREATE TABLE vector_counts (
        source          TEXT NOT NULL CHECK (source IN ('messages', 'summaries')),
        model           TEXT NOT NULL,
        conversation_id INTEGER NOT NULL,
        indexed         INTEGER NOT NULL,
        rows            INTEGER NOT NULL,
        revision        INTEGER NOT NULL,
        PRIMARY KEY (source, model, conversation_id)
    ) WITHOUT ROWID
    """,
    *_counted("messages", "message_vectors"),
    *_counted("summaries", "summary_vectors"),
)


def _memory_words(*, delete: bool, insert: bool) -> str:
    """The trigger body that keeps ``memories_fts`` in step with one change of ``memories`` (from migration 125)."""
    columns = ("abstract", "overview", "content")
    removal = (
        f"INSERT INTO memories_fts (memories_fts, rowid, {_MEMORY_FTS_COLUMNS}) VALUES ('delete', old.memory_rowid, "
        + ", ".join(f"lcm_indexed_text(old.{c})" for c in columns)
        + ");"
    )
    addition = (
        f"INSERT INTO memories_fts (rowid, {_MEMORY_FTS_COLUMNS}) VALUES (new.memory_rowid, "
        + ", ".join(f"lcm_indexed_text(new.{c})" for c in columns)
        + ");"
    )
    return (removal if delete else "") + (addition if insert else "")


# The memory word index reads identifiers by their words too, as the message index does
# (``computeDiff`` is found by "compute diff"): each column is indexed as ``lcm_indexed_text`` of it
# (:func:`lossless.text.indexed_text`, a function every connection of the store registers).  The
# table is external-content still: bm25 needs no column value, and no query reads one back from it.
_V125 = (
    "DROP TRIGGER memories_fts_ai",
    "DROP TRIGGER memories_fts_ad",
    "DROP TRIGGER memories_fts_au",
    "DROP TABLE memories_fts",
    f"""
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        {_MEMORY_FTS_COLUMNS}, content='memories', content_rowid='memory_rowid',
        tokenize='porter unicode61 remove_diacritics 2'
    )
    """,
    f"CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN {_memory_words(delete=False, insert=True)} END",
    f"CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN {_memory_words(delete=True, insert=False)} END",
    "CREATE TRIGGER memories_fts_au AFTER UPDATE OF abstract, overview, content ON memories "
    f"BEGIN {_memory_words(delete=True, insert=True)} END",
    f"""
    INSERT INTO memories_fts (rowid, {_MEMORY_FTS_COLUMNS})
    SELECT memory_rowid, lcm_indexed_text(abstract), lcm_indexed_text(overview), lcm_indexed_text(content)
    FROM memories
    """,
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
    Migration(125, "memory identifiers indexed by their words", _V125),
)

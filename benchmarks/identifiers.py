"""The cost of indexing identifiers by their words: the word index with and without them, in the same run.

The texts are the recall datasets' messages (both splits: 8,207 chat and coding-agent messages), so
the share of identifiers is that of real agent work.  Baselines, built from the very same rows:

* **SQLite**: the store's companion-index tables (a contentless ``porter unicode61`` word table and
  a ``trigram`` table) filled in one ``INSERT … SELECT`` each, as the indexer does, from the text
  alone (before) and from :func:`lossless.text.indexed_text` (now: a Python function per row);
  build time (best of 5, the two alternated) and the word table's size after ``optimize``.
* **PostgreSQL** (``--postgres``; the embedded server the tests use): the word index expression
  before migration 124 and now (:data:`lossless.stores.postgres.schema.TSV`), computed over every
  row (best of 5, alternated) and the total size of the ``tsvector`` values.

Searches are not slowed by this (the same index lookups); only the background indexers work more.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/pg.py: the embedded server

from _harness import ROOT, Figure, report
from lossless.text import indexed_text

_OLD_TSV = "to_tsvector('english'::regconfig, left(content, 100000))"


def _texts(quick: bool) -> list[str]:
    texts = []
    for split in ("dev",) if quick else ("dev", "test"):
        data = json.loads((ROOT / "benchmarks" / "data" / f"recall-{split}.json").read_text())
        texts += [m["content"] for c in data["conversations"] for m in c["messages"]]
    return texts


def _sqlite_once(texts: list[str], word_text: Callable[[str], str] | None) -> tuple[float, int]:
    """(build seconds, word table bytes) for the index tables filled from ``texts`` (as they are, for None)."""
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "index.db", isolation_level=None)
        if word_text is not None:
            conn.create_function("word_text", 1, word_text, deterministic=True)
        conn.execute("CREATE TABLE src (id INTEGER PRIMARY KEY, content TEXT)")
        conn.executemany("INSERT INTO src VALUES (?, ?)", list(enumerate(texts, 1)))
        conn.execute(
            "CREATE VIRTUAL TABLE words USING fts5(content, content='', "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        conn.execute("CREATE VIRTUAL TABLE grams USING fts5(content, content='', tokenize='trigram', detail=none)")
        start = time.perf_counter()
        conn.execute("BEGIN")
        text = "content" if word_text is None else "word_text(content)"
        conn.execute(f"INSERT INTO words(rowid, content) SELECT id, {text} FROM src")
        conn.execute("INSERT INTO grams(rowid, content) SELECT id, content FROM src")
        conn.execute("COMMIT")
        elapsed = time.perf_counter() - start
        conn.execute("INSERT INTO words(words) VALUES ('optimize')")
        size = int(conn.execute("SELECT sum(length(block)) FROM words_data").fetchone()[0])
        conn.close()
    return elapsed, size


def _sqlite(texts: list[str], rounds: int) -> dict[str, tuple[float, int]]:
    """Best of ``rounds`` for the text alone ("before") and with identifiers' words ("now"), alternated."""
    found: dict[str, tuple[float, int]] = {}
    for _ in range(rounds):
        for name, word_text in (("before", None), ("now", indexed_text)):
            elapsed, size = _sqlite_once(texts, word_text)
            if name not in found or elapsed < found[name][0]:
                found[name] = (elapsed, size)
    return found


def _postgres(texts: list[str]) -> dict[str, tuple[float, int]]:
    import psycopg
    from tests import pg

    from lossless.stores.postgres.schema import IDENTIFIER_WORDS_FUNCTION, TSV

    pg.prepare_environment()
    server = pg.start()
    try:
        with psycopg.connect(server.admin_url, autocommit=True) as conn:
            conn.execute(IDENTIFIER_WORDS_FUNCTION)
            conn.execute("CREATE TEMP TABLE src (id bigint, content text)")
            with conn.cursor().copy("COPY src FROM STDIN") as copy:
                for i, text in enumerate(texts):
                    copy.write_row((i, text.replace("\x00", " ")))
            found: dict[str, tuple[float, int]] = {}
            for _ in range(5):
                for name, expression in (("before", _OLD_TSV), ("now", TSV)):
                    start = time.perf_counter()
                    row = conn.execute(f"SELECT sum(pg_column_size({expression})) FROM src").fetchone()
                    elapsed = time.perf_counter() - start
                    assert row is not None
                    if name not in found or elapsed < found[name][0]:
                        found[name] = (elapsed, int(row[0]))
            return found
    finally:
        server.close()


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the dev split's messages only")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON to OUT")
    parser.add_argument("--postgres", action="store_true", help="also measure PostgreSQL's word index")
    args = parser.parse_args()
    texts = _texts(args.quick)
    with_words = sum(1 for t in texts if indexed_text(t) != t)
    print(f"{len(texts):,} messages, {sum(map(len, texts)):,} characters, {with_words:,} with identifiers", flush=True)
    sqlite = _sqlite(texts, 3 if args.quick else 5)
    figures = [
        Figure("sqlite index build (word + trigram tables)", sqlite["now"][0] * 1000, "ms", sqlite["before"][0] * 1000),
        Figure("sqlite word table size", sqlite["now"][1] / 1e6, "MB", sqlite["before"][1] / 1e6),
    ]
    if args.postgres:
        found = _postgres(texts)
        figures += [
            Figure("postgres tsvector of every row", found["now"][0] * 1000, "ms", found["before"][0] * 1000),
            Figure("postgres tsvector size", found["now"][1] / 1e6, "MB", found["before"][1] / 1e6),
        ]
    report("identifiers", figures, args.json)


if __name__ == "__main__":
    main()

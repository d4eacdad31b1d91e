"""Message records kept across reads by id: a message read once is not rebuilt from its row again.

A hybrid grep reads some 650 messages by id a question (the speakers' probe, the ranked candidates and
the turns next to them), most of them read by the question before too; building each record from its
row was a tenth of the question's CPU.  :class:`MessageRecords` keeps the records it built, and
:func:`read_messages` reads by id with them.

Invariants:

* **A read returns exactly what a read without the kept records returns.**  A message's row is
  written once, by the append that stores it, and deleted with its conversation (by any host); the
  only later write to it is the word index's ``content_tsv``, which a record does not hold.  Every
  read sends, in the same snapshot and round trip as the whole rows of the messages it does not
  keep, the id and ``xmin`` (the transaction that wrote that version of the row) of each one it
  does keep; a kept record is returned only when its row is there with the ``xmin`` it had when
  it was read.  So a message deleted since is not returned (and is forgotten), and a row written
  again in any way (any ``UPDATE`` makes a new version with a new ``xmin``) is read again.
* Only plain messages are kept: those without part rows (their one text part is implied by the
  row).  A message with stored parts is read whole every time.  A record's ``metadata`` (a dict)
  is never shared by two reads: a kept record with metadata is returned with its own copy, loaded
  from the JSON text the row held.
* Inside ``atomic()`` or ``snapshot()`` (a read that may be rolled back, or must see the block's
  state) nothing is kept and nothing kept is used: the read is the plain one.
* Bounded: at most :data:`KEPT_RECORDS` records and :data:`KEPT_CHARS` characters of content; past
  either, the records read longest ago are dropped first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from lossless.records import MessageRecord
from lossless.stores.postgres.connection import Database
from lossless.stores.postgres.statements import MESSAGE_COLUMNS, PARTS_OF, attach_parts, chunks, id_array
from lossless.stores.rows import load_json

__all__ = ["KEPT_CHARS", "KEPT_RECORDS", "MessageRecords", "read_messages"]

#: At most this many records are kept, holding at most this many characters of content together.
KEPT_RECORDS = 50_000
KEPT_CHARS = 64_000_000

#: The whole rows of the ids.
_PLAIN = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE message_id = ANY(%s::bigint[])"
#: The kept ids (first array) whose row is still the version (second array) they were read at.
_CURRENT = (
    "SELECT m.message_id FROM unnest(%s::bigint[], %s::text[]) AS k(id, v) "
    "JOIN messages m ON m.message_id = k.id AND m.xmin::text = k.v"
)
#: The whole rows of the ids not kept (first array), and of the kept ones (second) written again since they
#: were read (their row no longer the version in the third array).
_ROWS_UNLESS_CURRENT = (
    f"SELECT {MESSAGE_COLUMNS}, xmin::text FROM messages WHERE message_id = ANY(%s::bigint[]) "
    f"UNION ALL SELECT {', '.join('m.' + c for c in MESSAGE_COLUMNS.split(', '))}, m.xmin::text "
    "FROM unnest(%s::bigint[], %s::text[]) AS k(id, v) JOIN messages m ON m.message_id = k.id AND m.xmin::text <> k.v"
)


@dataclass(frozen=True, slots=True)
class _Kept:
    record: MessageRecord
    version: str  # the row's xmin when it was read
    metadata: str | None  # the row's metadata JSON text (a fresh dict is loaded from it for each read)

    def served(self) -> MessageRecord:
        """The record, its metadata a fresh copy (a dict is never shared by two reads)."""
        return self.record if self.metadata is None else replace(self.record, metadata=load_json(self.metadata))


class MessageRecords:
    """The plain message records a store read by id, with the row version each was read at (oldest first)."""

    def __init__(self, *, limit: int = KEPT_RECORDS, chars: int = KEPT_CHARS) -> None:
        self._kept: dict[int, _Kept] = {}
        self._chars = 0
        self._limit = limit
        self._max_chars = chars

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._kept

    def get(self, message_id: int) -> _Kept | None:
        """What is kept of ``message_id``: its record and the row version (``xmin``) it was read at."""
        return self._kept.get(message_id)

    def keep(self, record: MessageRecord, version: str, metadata: str | None) -> None:
        """Keep a plain record read at row version ``version`` (dropping the oldest past the bounds)."""
        self.forget(record.id)
        self._kept[record.id] = _Kept(record, version, metadata)
        self._chars += len(record.content)
        while self._kept and (len(self._kept) > self._limit or self._chars > self._max_chars):
            self.forget(next(iter(self._kept)))

    def forget(self, message_id: int) -> None:
        kept = self._kept.pop(message_id, None)
        if kept is not None:
            self._chars -= len(kept.record.content)


async def read_messages(db: Database, records: MessageRecords, message_ids: Sequence[int]) -> list[MessageRecord]:
    """The messages of ``message_ids`` that exist, in that order, each once (``Store.get_messages_by_id``).

    One round trip and one snapshot per :data:`~lossless.stores.postgres.statements.CHUNK` ids: the versions
    of the kept ones, the whole rows and parts of the others.
    """
    ids = list(dict.fromkeys(message_ids))
    if not ids:
        return []
    by_id: dict[int, MessageRecord] = {}
    if db.in_block:  # may be rolled back, or must see the block's own writes: the plain read
        async with db.read() as conn:
            for chunk in chunks(ids):
                listed = id_array(chunk)
                async with conn.pipeline():
                    found = await conn.execute(_PLAIN, (listed,))
                    parts = await conn.execute(PARTS_OF, (listed,))
                    rows = await found.fetchall()
                    part_rows = await parts.fetchall()
                by_id.update((r.id, r) for r in attach_parts(rows, part_rows))
        return [by_id[i] for i in ids if i in by_id]
    for chunk in chunks(ids):
        unknown = [i for i in chunk if i not in records]
        known = [(i, kept) for i in chunk if (kept := records.get(i)) is not None]  # as they are now (no await yet)
        kept_ids, versions = id_array(i for i, _ in known), "{" + ",".join(k.version for _, k in known) + "}"
        current, rows, part_rows = await db.read_all(
            [
                (_CURRENT, (kept_ids, versions)),
                (_ROWS_UNLESS_CURRENT, (id_array(unknown), kept_ids, versions)),
                (PARTS_OF, (id_array(unknown),)),  # a kept record has no part rows (a message gains none later)
            ]
        )
        fresh = {row[0] for row in current}
        for message_id, kept in known:
            if message_id in fresh:
                by_id[message_id] = kept.served()
            elif records.get(message_id) is kept:  # deleted since it was read (or written again: its row came)
                records.forget(message_id)
        _build(records, by_id, rows, part_rows)
    return [by_id[i] for i in ids if i in by_id]


def _build(
    records: MessageRecords,
    by_id: dict[int, MessageRecord],
    rows: Sequence[Sequence[Any]],
    part_rows: Sequence[Sequence[Any]],
) -> None:
    """Records of ``rows`` (with their ``xmin`` last) into ``by_id``; the plain ones kept."""
    with_parts = {prow[0] for prow in part_rows}
    for row, record in zip(rows, attach_parts([row[:-1] for row in rows], part_rows), strict=True):
        by_id[record.id] = record
        if record.id not in with_parts:
            records.keep(record, row[-1], row[8])

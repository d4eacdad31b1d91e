"""Which stored messages are mined together: segments, and whether a segment holds anything to mine.

Invariants:

* Pure: no I/O; the same messages give the same segments.
* :func:`segments` keeps every message once, in the order given; a segment holds one conversation's
  consecutive messages, about :data:`MINING_SEGMENT_CHARS` characters.  A tool's output stays in the
  segment of the call it answers (a failure's memory names the command the call ran), so only outputs
  run a segment past that size.
* :func:`worked`: a segment with an assistant's message (its words or tool calls) has an agent's work
  facts to mine; one of tool output alone has none.
"""

from __future__ import annotations

from collections.abc import Sequence

from lossless.memory.failures import is_output
from lossless.records import MessageRecord

__all__ = ["MINING_SEGMENT_CHARS", "segments", "worked"]

#: Messages are mined in segments of about this many characters (an extraction yields at most five memories).
MINING_SEGMENT_CHARS = 6000


def segments(messages: Sequence[MessageRecord]) -> list[list[MessageRecord]]:
    """Consecutive messages of one conversation, about :data:`MINING_SEGMENT_CHARS` characters each."""
    out: list[list[MessageRecord]] = []
    size = 0
    for message in messages:
        if (
            not out
            or out[-1][-1].conversation_id != message.conversation_id
            or (size + len(message.content) > MINING_SEGMENT_CHARS and not is_output(message.role, message.content))
        ):
            out.append([])
            size = 0
        out[-1].append(message)
        size += len(message.content)
    return out


def worked(segment: Sequence[MessageRecord]) -> bool:
    """Whether a segment holds an assistant's message (its words or tool calls), not tool output alone."""
    return any(m.role == "assistant" for m in segment)

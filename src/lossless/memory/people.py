"""The people a memory query names, and its meaning without them (the other person's memories).

A question can name the wrong person: "What did Jonas misplace?" when it was Maya who lost her keys.
Memories of a chat name their speaker ("Maya can't find her house keys …"), and the query's vector
leans so far towards the name it holds that the memory telling the fact falls out of reach. So a
query that names a speaker is also embedded without that name, and a memory that names none of
the query's people is scored by the better of its two cosines. A memory that names one of them
keeps its cosine to the question as asked: the name is part of what it answers, and a question
about Maya is still answered by Maya's memories first (the ranking's *names* stage).

Invariants:

* :func:`named_people` returns the speakers (a memory's ``metadata["speaker"]``) of the given
  memories that the query names as whole words (:func:`lossless.speakers.named_in`, case-sensitive,
  a possessive ``'s`` allowed), each once, in the query's order; only capitalised speakers are
  names ("the user", "the assistant" never are).
* :func:`without_people` removes exactly those names (and their possessive) and returns ``None``
  when no word is left to search for.
* :func:`cosines`: every hit found as asked is kept; a memory that names one of the people keeps
  its cosine as asked; any other memory gets ``max(as asked, without the names)``, never lower than
  as asked; a memory found only without the names is kept only when that score reaches the lowest
  cosine among the hits found as asked (so the new candidates never widen the scale the fusion
  normalises over, and the other candidates' order among themselves is unchanged).
* Pure functions: no I/O, deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from lossless.memory.records import Memory
from lossless.speakers import named_in, without_names

__all__ = ["cosines", "named_people", "names_one", "without_people"]


def named_people(query: str, memories: Iterable[Memory]) -> list[str]:
    """The speakers of ``memories`` that ``query`` names, in the query's order."""
    speakers = {
        speaker.strip()
        for memory in memories
        if isinstance(speaker := (memory.metadata or {}).get("speaker"), str) and speaker.strip()[:1].isupper()
    }
    return named_in(query, speakers) if speakers else []


def without_people(query: str, people: Sequence[str]) -> str | None:
    """``query`` without the names of ``people``; ``None`` when there are none or no word is left."""
    if not people:
        return None
    rest = without_names(query, people)
    return rest if any(c.isalnum() for c in rest) else None


def names_one(memory: Memory, people: Sequence[str]) -> bool:
    """Whether ``memory``'s text names one of ``people``."""
    return bool(people) and bool(named_in(memory.content, people))


def cosines(
    asked_hits: Sequence[str],
    asked: Mapping[str, float],
    blind: Mapping[str, float],
    naming: Iterable[str],
) -> dict[str, float]:
    """Each candidate's cosine for the ranking (see the module docstring).

    ``asked_hits``: the memories found by the question as asked; ``asked`` / ``blind``: the cosines of
    the candidates (those hits and the ones found without the names) to the question as asked and
    without the names; ``naming``: the candidates whose text names one of the question's people.
    """
    holders = set(naming)
    found = set(asked_hits)
    lowest = min((asked[k] for k in asked_hits if k in asked), default=float("-inf"))
    out: dict[str, float] = {}
    for key in dict.fromkeys([*asked_hits, *blind]):
        if key not in asked:
            continue
        score = asked[key] if key in holders or key not in blind else max(asked[key], blind[key])
        if key in found or score >= lowest:
            out[key] = score
    return out

"""Speakers: who said a message, and the speakers a question names.

In a chat between people every turn carries its speaker's name, as a ``speaker`` / ``name`` /
``author`` / ``sender`` in the message's metadata or as a ``Name:`` prefix of its text.  The memory
extractor writes facts about that person; hybrid search reads the names a question mentions, so that
a question that names the wrong person ("Which breed is the dog Jonas adopted?" when Maya adopted
it) still finds the turn that tells the fact.

Invariants:

* :func:`speaker_label` is the one reading of a message's speaker (metadata first, then the prefix);
  ``user`` / ``assistant`` and words such as ``Note:`` or ``Error:`` are no names.
* :func:`named_in` matches whole words, case-sensitively, with or without a possessive ``'s``:
  "Maya's dog" names Maya, "mayan" and "maya" do not.
* :func:`without_names` removes only the names it is given (and their possessive) and folds the
  spaces left; the rest of the text is unchanged.
* :func:`capitalised` gives the candidate names of a question: its capitalised words after the first
  word (which is capitalised as a sentence opens), longer than one letter, without a possessive; it
  only proposes them (hybrid search keeps a candidate only where many turns hold it).
* :func:`spoken` writes a turn as the text-prefix form would: ``Name: text`` where only the metadata
  names its speaker, so what is embedded for a turn does not depend on where the host put the name;
  a text that names its speaker already, or names nobody, is returned unchanged.
* Pure functions of their input: no I/O, no state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["capitalised", "named_in", "speaker_label", "spoken", "without_names"]

#: Metadata keys that name a message's speaker, in order of preference.
SPEAKER_KEYS = ("speaker", "name", "author", "sender")
#: A ``Name:`` (or ``First Last:``) prefix of a chat turn.
NAME_PREFIX = re.compile(r"^\s*([A-Z][\w.'-]{1,30}(?: [A-Z][\w.'-]{1,30})?)\s*:\s+(?=\S)")
#: Capitalised labels that open a line without naming anyone.
NOT_NAMES = frozenset({"Note", "Error", "Warning", "Update", "Summary", "Answer", "Question", "Edit", "Done", "Todo"})
_ROLES = ("user", "assistant")


def speaker_label(content: str, metadata: Mapping[str, object] | None) -> tuple[str, int] | None:
    """The named speaker of a message and where its text starts (after a ``Name:`` prefix; 0 when the name
    comes from the metadata), or ``None`` when it names nobody."""
    if metadata:  # most turns have none: nothing to look up (a search reads hundreds of turns' speakers)
        for key in SPEAKER_KEYS:
            value = metadata.get(key)
            if isinstance(value, str) and value.strip() and value.strip().lower() not in _ROLES:
                return value.strip(), 0
    prefix = NAME_PREFIX.match(content)
    if prefix and prefix.group(1) not in NOT_NAMES and prefix.group(1).lower() not in _ROLES:
        return prefix.group(1), prefix.end()
    return None


def _pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    alternatives = sorted({n for n in names if n.strip()}, key=len, reverse=True)
    if not alternatives:
        return None
    return re.compile(r"(?<![\w'’-])(?:" + "|".join(map(re.escape, alternatives)) + r")(?:['’]s)?(?![\w'’-])")


_CAPITALISED = re.compile(r"(?<![\w'’-])[A-Z][\w'’-]*")


def capitalised(text: str) -> list[str]:
    """The capitalised words of ``text`` after its first word (names, mostly), each once, possessive dropped."""
    found = [re.sub(r"['’]s$", "", m.group(0)) for m in _CAPITALISED.finditer(text) if m.start() > 0]
    first = text.split(maxsplit=1)[0] if text.strip() else ""
    return [w for w in dict.fromkeys(found) if len(w) > 1 and not first.startswith(w)]


def named_in(text: str, names: Iterable[str]) -> list[str]:
    """The ``names`` that ``text`` mentions, each once, in the order they first appear."""
    pattern = _pattern(names)
    if pattern is None:
        return []
    return list(dict.fromkeys(re.sub(r"['’]s$", "", m.group(0)) for m in pattern.finditer(text)))


def without_names(text: str, names: Iterable[str]) -> str:
    """``text`` with each of ``names`` (and its possessive ``'s``) left out and the spaces folded."""
    pattern = _pattern(names)
    if pattern is None:
        return text
    return re.sub(r"\s+([?!.,;:])", r"\1", re.sub(r"\s{2,}", " ", pattern.sub("", text))).strip()


def spoken(content: str, metadata: Mapping[str, object] | None) -> str:
    """``content`` with its speaker's ``Name: `` before it when only ``metadata`` names them (else unchanged)."""
    found = speaker_label(content, metadata)
    if found is None or found[1] > 0 or not content.strip():
        return content
    name = found[0]
    prefix = NAME_PREFIX.match(content)
    if prefix is not None and prefix.group(1) == name:  # the text names them too
        return content
    return f"{name}: {content}"

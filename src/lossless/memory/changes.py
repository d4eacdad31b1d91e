"""Changes of mind: a speaker stopping, ending, quitting or going back on something they said before.

The offline extractor (:mod:`lossless.memory.extraction`) asks :func:`is_change` of every sentence it
keeps.  A change is remembered as a memory of its own, and once the memory service has found the
earlier statement it takes back (:func:`earlier_statement`, among the same speaker's older memories,
by meaning), :func:`with_history` makes the new memory say what it changes, so a question about
either finds both ("Is Maya still avoiding meat?" needs the start and the end of the diet).

What counts as a change, in how people talk:

* a verb of ending with the speaker as subject (``I``/``we``, or a chat sentence with no subject):
  *stopped doing*, *quit*, *gave up (on)*, *ended* (things, it, my …; not *ended up*), *dropped out*, *ditched*,
  *scrapped*, *abandoned*, *cancelled*, *called off*, *backed/pulled out*, *caved*, *switched back*,
  *went back to doing*, *no longer*, *not … any more*; the present forms (*stop*, *give up*) only
  as a firm intent (*decided to stop*, *I'm going to give up*);
* an undertaking of theirs that ends: *the veggie experiment is over*, *my vegan phase is over*,
  *my drinking days are over*, *the wedding is off*;
* the usual markers: *change of plan*, *changed my mind*, *on second thought*, *scratch that*,
  *never mind about selling*, *decided not to* / *against*, and a first-person *… after all*
  (*I'm keeping the car after all*), *back to eating meat*.

Not a change: what merely ends (*the game is over*, *the rain stopped*), someone else's ending (*my
sister quit her job*), a negated or hypothetical one (*I never stopped loving jazz*, *I almost quit*,
*I might give up*, *if I stop*), and the look-alikes *stopped by/at*, *ended up*, *after all these
years*, *after all, it's his birthday*, *back to work*.

Invariants: pure and deterministic; English only (other languages never match); :func:`with_history`
only adds — the change's own words, sources and date stay, the earlier statement is quoted with its
date, and its messages join the provenance only when they are of the same conversation (a memory's
provenance names one conversation).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from lossless.memory.records import Memory, MemoryDraft
from lossless.memory.statements import format_date

__all__ = ["LINK_SIMILARITY", "VERSIONED", "candidates", "earlier_statement", "is_change", "topic", "with_history"]

#: The least similarity (on the common, calibrated scale) at which a change is taken to be about an
#: earlier memory of the same speaker.  Chosen on the recall dev split (see docs/memory.md).
LINK_SIMILARITY = 0.5
#: The categories whose memories a change supersedes (facts that hold until they change; events, cases
#: and patterns are records of what happened and stay current beside it).
VERSIONED = ("profile", "preferences", "entities")
#: At most this much of the earlier statement is quoted (whole sentences, else cut at a word).
MAX_QUOTED_CHARS = 320

_FLAGS = re.I
# A verb of ending; the subject and negation checks are made on the words before it.
_ENDING = re.compile(
    r"\b(?:"
    r"stopped\s+(?=\w+ing\b)|stopping\s+(?=\w+ing\b)"
    r"|quit(?:s|ting)?\b(?!\s+(?:it|that|this)\b)"
    r"|gave\s+up\b|given\s+up\b|giving\s+up\b"
    r"|ended\s+(?:things|it|(?:my|our)\s+(?!(?:day|night|evening|morning|week|weekend|trip|holiday|meal|visit|tour|"
    r"walk|run|session|stay)\b))|dropped\s+out\b"
    r"|(?:ditch|scrapp|abandon|cancell?)(?:ed|ing)\s+(?=\w)"
    r"|call(?:ed|ing)\s+(?:it\s+|\w+\s+)?off\b|(?:backed|pulled)\s+out\b|caved\b"
    r"|switched\s+back\b|(?:went|gone|going|came|am|'m|’m|are|'re|’re)\s+back\s+to\s+(?:\w+ing\b|(?:my|our|the)\s+old\b)"
    r"|no\s+longer\b"
    r")",
    _FLAGS,
)
# Present forms count only as a firm intent: "decided to stop eating meat", "I'm going to give up sugar".
_INTENT = re.compile(
    r"\b(?:decided|decide|going|gonna|promised|resolved|determined)\s+to\s+(?:stop\s+(?=\w+ing\b)|give\s+up\b|quit\b)"
    r"|\b(?:I|we)(?:'ll|’ll|\s+will)\s+(?:stop\s+(?=\w+ing\b)|give\s+up\b)",
    _FLAGS,
)
_NEGATED_ANYMORE = re.compile(
    r"\b(?:don't|don’t|do\s+not|doesn't|didn't|'m\s+not|’m\s+not|am\s+not|'re\s+not|’re\s+not|are\s+not|"
    r"won't|will\s+not|not|never)\b(?P<what>[^.!?,;]{1,48}?)\bany\s?more\b",
    _FLAGS,
)
_UNDERTAKING = (
    r"experiment|phase|diet|challenge|streak|detox|cleanse|fast|trial|attempt|kick|era|habit|idea|plans?|"
    r"regime|routine|resolution|relationship|days|obsession|thing|stint|adventure|engagement|wedding|trip|move"
)
_OVER = re.compile(
    r"\b(?:my|our|the|this|that)\s+(?:[\w-]+\s+){0,3}?(?:" + _UNDERTAKING + r")\s+"
    r"(?:is|are|was|were|'s|’s)\s+(?:(?!not\b|never\b|hardly\b|far\b|nearly\b|almost\b)\w+\s+)?(?:over|off)\b",
    _FLAGS,
)
_MARKER = re.compile(
    r"\b(?:change\s+of\s+plans?|chang(?:ed|ing)\s+(?:my|our)\s+minds?|on\s+second\s+thoughts?|scratch\s+that|"
    r"never\s+mind\s+(?:about\s+\w+|\w+ing\b)|decided\s+(?:not\s+to|against)\b)",
    _FLAGS,
)
_BACK_TO = re.compile(r"^(?:so\s+|and\s+)?back\s+to\s+\w+ing\b", _FLAGS)
_AFTER_ALL = re.compile(
    r"\b(?:I|we)(?:'m|’m|'re|’re|\s+am|\s+are|'ve|’ve|\s+have|'ll|’ll|\s+will)?\s+(?:\w+\s+){0,2}?"
    r"(?:\w+ing|\w+ed|went|kept|stayed|chose|bought|took|did|got|made|sold)\b[^.!?]*?\bafter\s+all\b"
    r"(?!\s+(?:the|these|those|this|that|of|my|our|we|I|he|she|they|you|it)\b)",
    _FLAGS,
)
_CLAUSE = re.compile(r"[,;:—–()]|\b(?:and|but|so|because|since|then|although|though)\b", _FLAGS)
_NEGATION = frozenset(
    ["never", "not", "no", "almost", "nearly", "hardly", "barely", "cannot", "without", "nobody", "none", "neither"]
)
_HYPOTHETICAL = frozenset(
    [
        "might", "may", "could", "should", "would", "if", "unless", "whether", "thinking", "considering",
        "wonder", "wondering", "want", "wanted", "wanna", "hope", "hoping", "wish", "trying", "try", "tried", "need",
        "needs", "supposed", "maybe", "probably", "perhaps", "tempted", "afraid", "scared", "worried",
    ]
)  # fmt: skip
_SUBJECTS = frozenset(["i", "we", "i've", "i'm", "i'd", "i'll", "we've", "we're", "we'd", "we'll"])
_OTHERS = frozenset(["he", "she", "they", "you", "it", "he's", "she's", "they've", "you've", "they're", "it's"])
_LEADING = frozenset(
    [
        "finally", "officially", "just", "totally", "actually", "basically", "recently", "already", "so", "well",
        "also", "then", "today", "yesterday", "now", "honestly", "literally", "completely", "pretty", "much",
        "have", "has", "had", "am", "'ve", "’ve", "'m", "’m", "kind", "of", "kinda", "sort", "sorta", "at",
        "last", "long", "ago", "this", "week", "month", "year", "morning", "weekend", "decided", "to", "and",
        "i", "we", "i've", "i'm", "we've", "we're", "really", "eventually", "even", "since", "'d", "’d",
    ]
)  # fmt: skip


def _own(before: str) -> bool:
    """Whether the words before a verb of ending make it the speaker's real, done (or firmly meant) change."""
    clause = _CLAUSE.split(before)[-1]
    words = [w.strip("\"'“”‘’!.") for w in clause.lower().split()]
    words = [w for w in words if w]
    if any(w in _NEGATION or w.endswith(("n't", "n’t")) for w in words):
        return False
    if any(w in _HYPOTHETICAL for w in words):
        return False
    last = max((i for i, w in enumerate(words) if w in _SUBJECTS or w in _OTHERS), default=-1)
    if last >= 0 and words[last] not in _SUBJECTS:
        return False  # "I think she quit": someone else's
    # only adverbs and auxiliaries between the speaker (or the clause's start) and the verb:
    # "I've finally given up" is theirs; "My sister quit", "I see the flag is not used anymore" are not
    return all(w in _LEADING for w in words[last + 1 :])


def is_change(sentence: str) -> bool:
    """Whether ``sentence`` says its speaker stopped, ended, quit or went back on something (module docstring)."""
    text = " ".join(sentence.split())
    if _MARKER.search(text) or _BACK_TO.match(text) or _AFTER_ALL.search(text) or _OVER.search(text):
        return True
    for pattern in (_ENDING, _INTENT):
        if any(_own(text[: m.start()]) for m in pattern.finditer(text)):
            return True
    for match in _NEGATED_ANYMORE.finditer(text):
        what = match.group("what").lower()
        if re.search(r"\b(?:know|care|remember|understand|sure)\b", what):
            continue  # "I don't know anymore": no change of what they do
        if _own(text[: match.start()] + " "):
            return True
    return False


_HISTORY = re.compile(r"\s*This changes what .*$", re.S)
_SAID_ON = re.compile(r"\s*\((?:said on|as of) [^)]*\)")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_WRITTEN_DATE = re.compile(
    r"\b(?:(?:on|from|in|since|until|by|before|after)\s+)?"
    r"(?:the\s+(?:week(?:end)?|night|morning|afternoon|evening)\s+(?:before|after|of)\s+)?"
    r"(?:(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday),\s+)?"
    r"(?:\d{1,2}\s+)?(?:" + _MONTHS + r")(?:\s+\d{4})?\b|\b(?:in\s+)?(?:19|20)\d{2}\b"
)


def topic(text: str, speaker: str | None) -> str:
    """What a statement is about, for comparing two of one speaker's: their name, dates and history dropped.

    Every memory of a speaker names them and most carry a date, which makes any two alike; ``Maya
    decided to stop eating meat (said on 23 October 2023).`` becomes ``decided to stop eating meat.``
    """
    out = _SAID_ON.sub("", _HISTORY.sub("", text))
    out = _WRITTEN_DATE.sub("", out)
    if speaker:
        name = re.escape(speaker)
        out = re.sub(rf"\b{name}\s+said:\s*|^{name}\s+said(?:\s+it\s+was)?\s+", "", out, flags=re.I)
        out = re.sub(rf"\b{name}['’]s\b", "their", out, flags=re.I)
        out = re.sub(rf"\b{name}\b", "", out, flags=re.I)
    out = re.sub(r"\s+([,.!?;:])", r"\1", " ".join(out.split())).strip(" ,;:—–-")
    return out if re.search(r"\w", out) else text


def candidates(draft: MemoryDraft, memories: Sequence[Memory]) -> list[Memory]:
    """The memories ``draft`` (a change) could take back: the same speaker's, current, older, not its own."""
    speaker = (draft.metadata or {}).get("speaker")
    own = set(draft.source_message_ids)
    return [
        memory
        for memory in memories
        if memory.current
        and (memory.metadata or {}).get("speaker") == speaker
        and (draft.valid_from is None or memory.valid_from < draft.valid_from)
        and not own & set(memory.source_message_ids)
    ]


def earlier_statement(draft: MemoryDraft, scored: Sequence[tuple[Memory, float]]) -> tuple[Memory, float] | None:
    """The memory the change ``draft`` takes back: of its :func:`candidates`, the most similar by topic.

    ``scored`` are (memory, similarity of the two :func:`topic` texts, on the common scale).  One with
    the draft's own fact key wins outright; else the most similar at :data:`LINK_SIMILARITY` or more.
    ``None``: none qualifies.
    """
    allowed = {m.memory_id for m in candidates(draft, [m for m, _ in scored])}
    fitting = [(memory, similarity) for memory, similarity in scored if memory.memory_id in allowed]
    keyed = [(m, s) for m, s in fitting if draft.fact_key is not None and m.fact_key == draft.fact_key]
    if keyed:
        return max(keyed, key=lambda pair: pair[1])
    best = max(fitting, key=lambda pair: pair[1], default=None)
    return best if best is not None and best[1] >= LINK_SIMILARITY else None


def with_history(draft: MemoryDraft, earlier: Memory) -> MemoryDraft:
    """``draft`` saying what it changes: the earlier statement quoted with its date, its messages cited.

    A versioned earlier memory (:data:`VERSIONED`) gives the draft its category and fact key, so the
    change is its next version; an event, case or pattern stays current beside it.
    """
    said = _quote(_HISTORY.sub("", earlier.content))  # its own statement: a chain of changes is not nested
    if not re.search(r"\b(?:19|20)\d{2}\b", said):
        said = f"{said[:-1]} (said on {format_date(earlier.valid_from)}){said[-1]}"
    speaker = (draft.metadata or {}).get("speaker") or "they"
    content = f"{draft.content} This changes what {speaker} said before: {said}"
    same = draft.conversation_id is not None and draft.conversation_id == earlier.conversation_id
    quoted = tuple(i for i in earlier.source_message_ids if i not in draft.source_message_ids) if same else ()
    sources = (*draft.source_message_ids, *quoted)
    versioned = earlier.category in VERSIONED
    return replace(
        draft,
        content=content,
        abstract="",
        overview="",
        category=earlier.category if versioned else draft.category,
        fact_key=(earlier.fact_key or draft.fact_key) if versioned else draft.fact_key,
        source_message_ids=sources,
        metadata={
            **(draft.metadata or {}),
            "revises": True,
            "changes": earlier.memory_id,
            **({"quoted_sources": list(quoted)} if quoted else {}),
        },
    )


def _quote(text: str) -> str:
    """The earlier statement, at most :data:`MAX_QUOTED_CHARS`, ending as a sentence."""
    text = " ".join(text.split())
    if len(text) > MAX_QUOTED_CHARS:
        cut = text[:MAX_QUOTED_CHARS]
        end = max(cut.rfind(". "), cut.rfind("! "))
        text = cut[: end + 1] if end > 40 else cut.rsplit(" ", 1)[0] + "…"
    return text if text[-1] in ".!?…" else text + "."

"""Turning conversation messages into memory drafts, and deciding what to do with each.

:func:`extract` is the deterministic offline extractor (the default; an LLM
extractor can replace it behind the same signature).  It writes facts, not
fragments: from each message, up to :data:`MAX_PER_MESSAGE` sentences that say
something about the speaker or their work — who they are (profile), what they
like (preferences), decisions, plans and happenings (events), fixes (cases),
habits (patterns) and named things (entities) — told in the speaker's name
with relative dates written out (:mod:`lossless.memory.statements`), joined
into one memory per message (a versioned fact, one with a fact key, stands
alone).  :func:`decide` applies the dedup decision rules.

Invariants:

* Every draft has provenance (the conversation and the message it came from),
  its speaker in ``metadata["speaker"]``, and passes
  :func:`~lossless.memory.fragments.fragment_reason` (a failed command's statement,
  written whole by its rule, is not checked: a command reads as code); a named speaker's draft names
  them (:mod:`lossless.memory.attribution`: "Maya said the train was late again.").
* Skipped: system and tool messages, a turn an agent's harness wrote in the user's
  name (:func:`~lossless.memory.requests.by_harness`), questions, "do you remember…" queries,
  greetings and acknowledgements, code, markdown headings and list stubs, tool
  lines; from an agent (an unnamed assistant) everything but its work facts
  (what it changed or fixed and why, the files its edit tools changed); of a
  tool's output, all but a failure of a command the agent ran
  (:mod:`lossless.memory.failures`), kept as an event of that output message.
* In an agent's session (messages with a tool's call or output among them) the
  user's turns, the agent's reply that ends a turn (the user's turn follows it)
  and what the user said refusing a tool call are quoted, one memory each, in
  their own words (:mod:`lossless.memory.requests`; ``quoted_sources`` names the
  message, so the memory leads no grep to it); of such a turn's other
  statements only a versioned fact (one with a fact key) is kept besides.
* Deterministic: the same messages give the same drafts.
* Decisions follow the category rules, among the neighbours of the same
  speaker only: ``profile`` always merges into its nearest profile memory;
  ``preferences`` and ``entities`` are temporally versioned (a new value for the
  same fact key *supersedes* the old one, which stays as history); ``events``
  and ``cases`` are append-only (create or skip); ``patterns`` merge when
  nearly identical.  A change of mind (:mod:`lossless.memory.changes`: "I quit…",
  "the diet is over", "… after all") is kept whole, in the speaker's name and
  dated; told with the earlier statement it takes back (found by the memory
  service) it supersedes that one when it is a profile, preference or entity
  fact, and stands beside an event, case or pattern.  A near-duplicate is
  ``skip`` or ``support``.  No candidate ever falls back to creating a
  duplicate of a memory it matched at ≥ 0.95 similarity.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from lossless.errors import InputError
from lossless.memory.attribution import Vocabulary, attributed, remark
from lossless.memory.changes import VERSIONED, is_change
from lossless.memory.edits import code_refs, edit_statements
from lossless.memory.failures import commands, failure_statement, is_output
from lossless.memory.fragments import fragment_reason, small_talk_reason
from lossless.memory.records import Category, Decision, Memory, MemoryDraft
from lossless.memory.requests import by_harness, refusal_statement, reply_statement, request_statement
from lossless.memory.statements import (
    dates_named,
    format_date,
    prose_sentences,
    resolve_dates,
    speaker_of,
    third_person,
    with_subject,
)
from lossless.records import MessageRecord
from lossless.text import CJK_CHAR

__all__ = ["MAX_PER_EXTRACTION", "MAX_PER_MESSAGE", "Decision", "decide", "extract", "fact_key_for", "told_apart"]

#: The model extractor's cap per call (the spec's); the offline one caps per message instead.
MAX_PER_EXTRACTION = 5
MAX_PER_MESSAGE = 3
MAX_STATEMENT_CHARS = 400
#: A change of mind's sentences are kept first (see :mod:`lossless.memory.changes`).
CHANGE_BONUS = 10.0
_BACK_TO = re.compile(r"^back to\b", re.I)
_LIKING = re.compile(r"\b(?:prefer|like|love|hate|dislike|enjoy|favou?rite)", re.I)

# (category, pattern, topic group) — the topic names the fact a preference or entity is about.
_RULES: tuple[tuple[Category, re.Pattern[str]], ...] = (
    (
        "profile",
        re.compile(r"\b(?:my name is|i am called|call me|i'm a|i am a|i work (?:at|as|for)|i live in)\b", re.I),
    ),
    ("profile", re.compile(r"(?:我叫|我的名字是|我住在|我在.{1,12}工作|私の名前は|저는 .{1,12}입니다)")),
    (
        "preferences",
        re.compile(r"\b(?:i (?:really )?(?:prefer|like|love|hate|dislike|enjoy|want)|my favou?rite)\b", re.I),
    ),
    ("preferences", re.compile(r"(?:我(?:更)?喜欢|我不喜欢|我偏好|が好き|좋아해|좋아합니다)")),
    (
        "events",
        re.compile(r"\b(?:we decided|i decided|we agreed|we (?:shipped|released|launched|moved)|deadline)\b", re.I),
    ),
    ("cases", re.compile(r"\b(?:the fix (?:was|is)|fixed (?:it|by)|the (?:bug|problem|issue) was|root cause)\b", re.I)),
    ("patterns", re.compile(r"\b(?:i always|i usually|i never|every (?:morning|day|week)|my workflow)\b", re.I)),
    ("entities", re.compile(r"\b(?:remember that|note that|for the record|fyi)\b", re.I)),
    # Broader forms, tried after the explicit ones above.
    (
        "profile",
        re.compile(
            r"\b(?:i'?m|i am) (?:allergic|planning|vegetarian|vegan|based|from)\b"
            r"|\bmy (?:manager|boss|wife|husband|partner|daughter|son|kids?|team|budget|birthday)\b",
            re.I,
        ),
    ),
    ("preferences", re.compile(r"(?:大好き|好きです|喜欢)")),
    (
        "cases",
        re.compile(
            r"\b(?:the (?:cause|problem) (?:was|is)|caused by|the fix for|fails with|failed with|error [a-z]?\d{3,})",
            re.I,
        ),
    ),
    (
        "events",
        re.compile(
            r"\b(?:we (?:booked|scheduled|planned|migrated|upgraded|hired|signed)|last (?:night|week)|yesterday|"
            r"this morning)\b",
            re.I,
        ),
    ),
    ("patterns", re.compile(r"\bevery (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|\d+ days)\b", re.I)),
    (
        "entities",
        re.compile(
            r"^(?:our|the|my) [\w-]+(?: [\w-]+)? (?:runs on|is called|is named|uses)\b|^my [\w-]+ is\b"
            r"|\b(?:ticket|issue|jira) [A-Z]{2,}-\d+\b",
            re.I,
        ),
    ),
)
_SKIP = re.compile(
    r"^\s*(?:do you remember|what did i|can you recall|remind me what|ok\b|"
    r"okay\b|let me know\b|i'?m not sure\b|i don'?t (?:know|remember)\b|"
    r"i see\b|i agree\b|me too\b|same here\b|sounds good\b|that'?s (?:great|awesome|amazing|cool|so)\b)",
    re.I,
)
_PERSONAL = re.compile(r"\b(?:I|I'm|I've|I'll|I'd|my|me|we|we're|we've|our|us|mine)\b|\bI’", re.I)
_WORK = re.compile(
    r"\b(?:fix(?:ed)?|chang(?:ed|e)|updat(?:ed|e)|add(?:ed)?|remov(?:ed|e)|renam(?:ed|e)|creat(?:ed|e)|mov(?:ed|e)|"
    r"replac(?:ed|e)|found|identified|decided|switch(?:ed)?|implement(?:ed)?|refactor(?:ed)?|migrat(?:ed|e)|"
    r"upgrad(?:ed|e)|deploy(?:ed)?|wrote|rewrote|resolved|caused|because|root cause|the (?:bug|issue|problem|error))\b",
    re.I,
)
_NARRATION = re.compile(
    r"^(?:(?:now|first|next|then|ok(?:ay)?|great|perfect|good|alright|so|fair enough|you'?re right|good (?:point|catch)"
    r"|got it|makes sense)\b[,!.]?\s*)*"
    r"(?:let me|let's|let us|i'?ll|i will|i need|i'?m going|i am going|we need|we should|we'll|i can see|i see|"
    r"here'?s|here is|here are|i'?m now|i should|i want|i must|looking|checking|running|let me know)\b",
    re.I,
)
_END = re.compile(r"[.!?。！？][\"'’”)\]]*$")
_EXCLAIMED = re.compile(r"(?<=[^\s!?])\s*[!?]*!+[!?]*(?=[\"'’”)\]]*$)")
_WORDS = re.compile(r"[a-z][a-z'-]{2,}|\d+")
_FILLER = frozenset(
    [
        "the",
        "and",
        "but",
        "for",
        "are",
        "was",
        "were",
        "you",
        "your",
        "yours",
        "i'm",
        "i've",
        "i'll",
        "i'd",
        "that",
        "this",
        "these",
        "those",
        "with",
        "have",
        "has",
        "had",
        "just",
        "really",
        "very",
        "so",
        "too",
        "also",
        "what",
        "when",
        "where",
        "which",
        "who",
        "how",
        "why",
        "not",
        "all",
        "any",
        "some",
        "can",
        "could",
        "would",
        "should",
        "will",
        "our",
        "ours",
        "their",
        "them",
        "they",
        "she",
        "her",
        "his",
        "him",
        "its",
        "it's",
        "from",
        "about",
        "into",
        "than",
        "then",
        "there",
        "here",
        "been",
        "being",
        "get",
        "got",
        "thing",
        "things",
        "stuff",
        "lot",
        "lots",
        "much",
        "many",
        "more",
        "most",
        "well",
        "good",
        "great",
        "nice",
        "cool",
        "awesome",
        "amazing",
        "wonderful",
        "glad",
        "happy",
        "love",
        "like",
        "sounds",
        "sound",
        "feel",
        "feels",
        "felt",
        "think",
        "thought",
        "know",
        "yeah",
        "yes",
        "wow",
        "totally",
        "definitely",
        "absolutely",
        "sure",
        "thanks",
        "thank",
        "hope",
        "hoping",
        "always",
        "never",
        "today",
        "now",
        "time",
        "keep",
        "going",
        "gonna",
        "wanna",
        "make",
        "makes",
        "made",
        "see",
        "look",
        "looks",
        "proud",
        "fun",
        "super",
        "pretty",
        "such",
        "something",
        "anything",
        "everything",
        "one",
        "same",
        "way",
        "myself",
        "hey",
        "okay",
    ]
)
_PAST_TENSE = re.compile(
    r"\b(?:I|we)\s+(?:\w+ly\s+)?(?:\w+ed|went|got|saw|made|took|gave|came|found|met|ran|"
    r"bought|began|became|wrote|read|spent|lost|won|started|finished|had|did|was|were)\b",
    re.I,
)
_PLAN = re.compile(
    r"\b(?:I'm|I am|we're|we are)\s+(?:planning|going|thinking|hoping)\b|\b(?:I|we)(?:'ll| will| plan)\b", re.I
)
_PROFILE_HINT = re.compile(r"\b(?:I'?m|I am|my|I (?:have|own|live|work|study|grew|was born))\b", re.I)
_HAS_DATE = re.compile(
    r"\b(?:19|20)\d{2}\b|\b(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December)\b"
)
_PROPER = re.compile(r"(?<=\s)[A-Z][a-z]+")
_RULE_HIT = re.compile(
    r"\b(?:decided|prefer|favou?rite|allergic|because|fixed|root cause|named|called|moved|started|adopt|"
    r"married|graduated|born|birthday|anniversary)\b",
    re.I,
)
_TOPIC = re.compile(
    r"\b(?:prefer|like|love|hate|dislike|enjoy|want|favou?rite|name is|called|live in|work (?:at|as|for))s?\s+"
    r"(?:to\s+)?(?:the\s+|a\s+|an\s+|my\s+)?([\w-]+)",
    re.I,
)
_OWNED = re.compile(r"\bmy ([\w-]+) is\b", re.I)
_CJK = CJK_CHAR
_SOMEONE_ELSE = re.compile(r"(?:he|she|they)\b", re.I)
#: A question answered by yes or no ("Have you been to that new jazz club yet?", "Did you ever try …?").
_YES_NO_QUESTION = re.compile(
    r"^(?:have|has|had|did|do|does|are|is|was|were|can|could|will|would)\b(?:\s+\w+){2}", re.I
)
#: A reply's word that stands for what the question named ("We went *there* last week", "loved *it*");
#: "there is/are/was" names nothing.
_BACK_REFERENCE = re.compile(r"\bthere\b(?!\s*(?:'s|’s|is|are|was|were|has|have)\b)|\b(?:it|them)\b", re.I)
#: A reply that opens with a bare yes or no ("Yes! We went there last week."): its next sentence answers.
_BARE_ANSWER = re.compile(
    r"^(?:yes|yeah|yep|yup|no|nope|not yet|of course|sure|definitely|absolutely|totally|oh yes|oh no)\b[\s!.,]*$",
    re.I,
)
#: No vocabulary: every capitalised first word may be a name.
_NO_WORDS = Vocabulary()


def fact_key_for(category: Category, text: str) -> str | None:
    """``category:topic`` for versioned categories (what the fact is about), else ``None``."""
    if category == "profile":
        lowered = text.lower()
        for marker, topic in (("name", "name"), ("live", "home"), ("work", "work"), ("叫", "name"), ("住", "home")):
            if marker in lowered:
                return f"profile:{topic}"
        return None
    if category not in ("preferences", "entities"):
        return None
    match = _TOPIC.search(text)
    if match:
        return f"{category}:{_topic_word(match.group(1))}"
    owned = _OWNED.search(text)
    if owned:
        return f"{category}:{owned.group(1).lower()}"
    return None


def _topic_word(word: str) -> str:
    word = word.lower()
    groups = {
        "drink": ("coffee", "tea", "espresso", "latte", "water", "juice", "beer", "wine"),
        "editor": ("vim", "neovim", "emacs", "vscode", "helix", "nano"),
        "language": ("python", "rust", "go", "typescript", "javascript", "java", "haskell"),
    }
    for topic, members in groups.items():
        if word in members:
            return topic
    return word


def extract(conversation_id: int, messages: Sequence[MessageRecord]) -> list[MemoryDraft]:
    """Self-contained statements from the messages, at most three sentences per message, in message order.

    See the module docstring: who said it is named, relative dates are written out from the
    message's date, and every draft passes :func:`~lossless.memory.fragments.fragment_reason`.
    """
    drafts: list[MemoryDraft] = []
    seen: set[str] = set()
    names = [speaker_of(m.role, m.content, m.metadata) for m in messages if m.role in ("user", "assistant")]
    people = list(dict.fromkeys(name for name, _, named in names if named))
    words = Vocabulary.of((text for _, text, _ in names), people)
    asked: tuple[str, str] | None = None  # (who asked, the last question) of the message before
    calls: list[str | None] = []  # the commands of the agent's last tool calls not answered yet, in order
    agent = any(is_output(m.role, m.content) or "[tool call: " in m.content for m in messages)
    for index, message in enumerate(messages):
        if is_output(message.role, message.content):
            command = calls.pop(0) if calls else None
            draft = _quoted(message, (), conversation_id) or _failure(command, message, conversation_id)
            if draft is not None:
                drafts.append(draft)
            continue
        if message.role not in ("user", "assistant") or (message.role == "user" and by_harness(message.content)):
            continue  # a turn the agent's harness wrote in the user's name says nothing of the user
        request = _quoted(message, messages[index + 1 : index + 2], conversation_id) if agent else None
        if request is not None:
            drafts.append(request)
        calls = commands(message.content) if message.role == "assistant" else []
        speaker, text, named = speaker_of(message.role, message.content, message.metadata)
        sentences = prose_sentences(text)
        question = asked[1] if named and asked is not None and asked[0] != speaker else None
        asked = _last_question(speaker, sentences) if named else None
        other = next((p for p in people if p != speaker), None) if named and len(people) == 2 else None
        if not named:
            other = "the assistant" if message.role == "user" else "the user"
        worker = message.role == "assistant" and not named  # an agent: only its work facts are kept
        found: list[_Said] = []
        if worker:
            found += _edits(text)
        opening = 1 if len(sentences) > 1 and _BARE_ANSWER.match(sentences[0].strip()) else 0
        for position, sentence in enumerate(sentences):
            answers = question if position == opening else None  # a reply's first sentence answers the question
            said = _statement(sentence, speaker, other, named, worker, message.created_at, position, answers, words)
            if said is not None and said.text.lower() not in seen:
                seen.add(said.text.lower())
                found.append(said)
        if request is not None:  # the words are quoted as said: of the rest, only a versioned fact stands apart
            found = [s for s in found if _fact_key(s) is not None]
        best = sorted(sorted(found, key=lambda s: (-s.score, s.position))[:MAX_PER_MESSAGE], key=lambda s: s.position)
        if not best:
            continue
        best = _with_change(best, text, speaker, other, named, message.created_at)
        for group in _groups(best):
            draft = _draft(group, speaker if named else None, message, conversation_id, words)
            if draft is not None:
                drafts.append(draft)
    return drafts


def _fact_key(said: _Said) -> str | None:
    """The fact a statement gives a new value of.  A verbless remark ("Still our favourite trip.") gives none,
    nor does a sentence about someone it names only as "he"/"she"/"they" ("He reads the rulebook like it's a
    contract."): it stays with the statements around it, which say who that is."""
    if said.bare or _SOMEONE_ELSE.match(said.source):
        return None
    return fact_key_for(said.category, said.source)


def _with_change(
    best: Sequence[_Said], text: str, speaker: str, other: str | None, named: bool, when: datetime
) -> list[_Said]:
    """A message that changes the speaker's mind is remembered whole: the change and the words around it.

    "The veggie experiment is over. Salami won." is one statement (its second sentence alone is too
    short to keep); a versioned fact the message also states (a preference with a fact key) stays apart.
    """
    change = next((s for s in best if s.change and fact_key_for(s.category, s.source) is None), None)
    if change is None:
        return list(best)
    told: list[str] = []
    for sentence in prose_sentences(text):
        sentence = " ".join(sentence.split())
        if sentence.endswith(("?", "？")) or _SKIP.match(sentence) or len(sentence) > MAX_STATEMENT_CHARS:
            continue
        if named:
            sentence = with_subject(sentence)
        if fact_key_for(next((c for c, r in _RULES if r.search(sentence)), "events"), sentence) is not None:
            continue  # a versioned fact is its own memory
        if is_change(sentence):
            told.append(_changed(sentence, speaker, other, named, when))
        else:
            telling = _told(sentence, speaker, other, named, when)
            told.append(telling.bare if telling.bare and told else telling.text)  # "… Day one on 23 October."
    whole = " ".join(told)
    if not told or len(whole) > MAX_STATEMENT_CHARS or fragment_reason(whole) is not None:
        return list(best)
    dated = change.dated or any(s.dated for s in best if _fact_key(s) is None)
    kept = [s for s in best if _fact_key(s) is not None]
    merged = replace(change, text=whole, dated=dated, position=min(s.position for s in best))
    return sorted([*kept, merged], key=lambda s: s.position)


def _changed(sentence: str, speaker: str, other: str | None, named: bool, when: datetime) -> str:
    """A change-of-mind sentence told so that it names its speaker ("Maya said: The veggie experiment is over.")."""
    if _BACK_TO.match(sentence):
        sentence = "I'm " + sentence[0].lower() + sentence[1:]
    statement = _told(sentence, speaker, other, named, when).text
    if speaker.lower() not in statement.lower():
        statement = f"{speaker[0].upper()}{speaker[1:]} said: {statement}"
    return statement


def _groups(said: Sequence[_Said]) -> list[list[_Said]]:
    """A message's statements as memories: a versioned fact (one with a fact key) alone, the rest together."""
    alone = [[s] for s in said if _fact_key(s) is not None]
    rest = [s for s in said if _fact_key(s) is None]
    if rest and sum(len(s.text) + 1 for s in rest) <= MAX_STATEMENT_CHARS:
        return sorted([*alone, rest], key=lambda group: group[0].position)
    return sorted([*alone, *([s] for s in rest)], key=lambda group: group[0].position)


def _failure(command: str | None, message: MessageRecord, conversation_id: int) -> MemoryDraft | None:
    """A command's output that reports a failure, as an event (:func:`~lossless.memory.failures.failure_statement`)."""
    said = failure_statement(command or "", message.content)
    if said is None:
        return None
    return _draft([_Said(said, "events", 5.0, False, said, -1)], None, message, conversation_id, checked=False)


def _quoted(message: MessageRecord, following: Sequence[MessageRecord], conversation_id: int) -> MemoryDraft | None:
    """A turn of an agent's session quoted (:mod:`~lossless.memory.requests`): the user's, the agent's reply that
    ends its turn (the user's turn is ``following``), or what the user said refusing a tool call (its output)."""
    speaker = None
    if is_output(message.role, message.content):
        said, speaker = refusal_statement(message.content), "the user"
    elif message.role == "user":
        said = request_statement(message.content)
    elif following and following[0].role == "user" and not is_output("user", following[0].content):
        said = reply_statement(message.content)
    else:
        return None
    if said is None:
        return None
    group = [_Said(said, "events", 5.0, False, said, -1)]
    return _draft(group, None, message, conversation_id, checked=False, speaker=speaker, quote=True)


def _edits(text: str) -> list[_Said]:
    """The files an agent's tool calls changed, as statements (:func:`~lossless.memory.edits.edit_statements`)."""
    return [_Said(statement, "events", 5.0, False, path, -1) for statement, path in edit_statements(text)]


@dataclass(frozen=True, slots=True)
class _Said:
    """One sentence made into a statement: its text (no trailing date note), why it is kept, where it was."""

    text: str
    category: Category
    score: float
    dated: bool
    source: str
    position: int
    change: bool = False
    bare: str = ""  # a verbless remark as said: how it reads after another statement of its memory


def _draft(
    group: Sequence[_Said],
    person: str | None,
    message: MessageRecord,
    conversation_id: int,
    words: Vocabulary = _NO_WORDS,
    *,
    checked: bool = True,
    speaker: str | None = None,
    quote: bool = False,
) -> MemoryDraft | None:
    """One memory from a message's kept statements (events get the date they were said).

    A verbless remark after another statement reads as said ("… Maya answered: A tiny island. Still Maya's
    favourite trip."); a named speaker's memory that names them nowhere is told as what they said
    (:func:`~lossless.memory.attribution.attributed`: "Maya said the train was late again.")."""
    ranked = sorted(
        group, key=lambda s: ["profile", "preferences", "entities", "cases", "patterns", "events"].index(s.category)
    )
    category = ranked[0].category
    text = " ".join(s.bare if s.bare and i else s.text for i, s in enumerate(group))
    if person is not None:
        text = attributed(text, person, words)
    dated = category == "events" or (person is not None and category not in ("profile", "preferences"))
    dated = dated or any(s.change for s in group)  # a change of mind is dated, whatever it changes
    if dated and not any(s.dated for s in group) and not _HAS_DATE.search(text):
        text = f"{text[:-1]} (said on {format_date(message.created_at)}){text[-1]}"
    if checked and fragment_reason(text) is not None:  # what a rule wrote itself (a failure) is no fragment
        return None
    meta: dict[str, object] = {
        "speaker": person or speaker or ("the user" if message.role == "user" else "the assistant")
    }
    if any(s.change for s in group):
        meta["revises"] = True
    if quote:  # the memory holds the message's own words: no restatement to lead a search to it
        meta["quoted_sources"] = [message.id]
    try:
        return MemoryDraft(
            content=text,
            category=category,
            metadata=meta,
            fact_key=_keyed(_fact_key(ranked[0]), person.lower() if person else None),
            temporal_type="dynamic" if category == "events" else "static",
            conversation_id=conversation_id,
            source_message_ids=(message.id,),
            source="extraction",
            valid_from=message.created_at,
        )
    except InputError:
        return None


def _last_question(speaker: str, sentences: Sequence[str]) -> tuple[str, str] | None:
    """(speaker, the last of their message's ``sentences``) when it is a question: what the next speaker answers."""
    last = " ".join(sentences[-1].split()) if sentences else ""
    if not last.endswith(("?", "？")) or len(last) > MAX_STATEMENT_CHARS // 2 or len(last.split()) < 3:
        return None  # "Seriously?" asks nothing to answer
    return speaker, last


@dataclass(frozen=True, slots=True)
class _Telling:
    """A sentence told about its speaker: the statement that stands alone, whether it is dated, and — for a
    verbless remark — the remark as said (``bare``), which may follow another statement of the same memory."""

    text: str
    dated: bool
    bare: str = ""


def _told(
    sentence: str,
    speaker: str,
    other: str | None,
    named: bool,
    when: datetime,
    question: str | None = None,
    words: Vocabulary = _NO_WORDS,
) -> _Telling:
    """The sentence told about its speaker, dates written out, ending as a sentence.

    A named speaker's sentence with no verb is no statement on its own: when it answers ``question`` (``other``
    asked it just before) both are told ("Maya asked: How was the sound? Jonas answered: Loud in the best
    way."); else it is made a sentence where that stays true (:func:`~lossless.memory.attribution.remark`:
    "RIP my smartwatch." → "Maya's smartwatch died.", "Coffee number three already." → "Maya said it was
    coffee number three already."), or quoted in the speaker's name ("Maya said: After the gig, so tired.").
    A reply to a yes-or-no question that points back at what it asked about (:func:`_points_back`: "We went
    there last week" to "Have you been to that new jazz club yet?") is told with the question too: alone, it
    does not say where "there" is."""
    dated_sentence, dated = resolve_dates(sentence, when)
    statement = _in_third_person(dated_sentence, speaker, other, named)
    verbless = named and fragment_reason(statement) == "no verb"
    if named and question is not None and other is not None and (verbless or _points_back(sentence, question)):
        asked, asked_dated = resolve_dates(question, when)
        answer = f"{other} asked: {third_person(asked, other, speaker)} {speaker} answered: {statement}"
        return _Telling(answer, dated or asked_dated, statement)
    if not verbless:
        return _Telling(statement, dated)
    made = remark(dated_sentence, words)
    if made is not None:
        return _Telling(_in_third_person(made, speaker, other, named), dated, statement)
    return _Telling(f"{speaker} said: {statement}", dated, statement)


def _points_back(sentence: str, question: str) -> bool:
    """Whether ``sentence`` answers a yes-or-no ``question`` by a word that stands for what it asked about."""
    return bool(_YES_NO_QUESTION.match(question) and _BACK_REFERENCE.search(sentence))


def _in_third_person(sentence: str, speaker: str, other: str | None, named: bool) -> str:
    """``sentence`` told about ``speaker`` (:func:`~lossless.memory.statements.third_person`), stated calmly and
    ending as a sentence."""
    agent = not named and speaker == "the assistant"  # an agent's "we": the agent and its user, at work
    statement = third_person(sentence, speaker, other, we_with_other=agent, at_work=not named)
    if statement[:1].islower():
        statement = statement[0].upper() + statement[1:]
    statement = _EXCLAIMED.sub(".", statement)  # a memory states; the speaker's "!" is no part of the fact
    statement = statement.rstrip("！") + "。" if statement.endswith("！") else statement
    if statement[-1] not in ".。":
        statement += "。" if _CJK.search(statement[-1]) else "."
    return statement


def _passed_over(sentence: str, speaker: str, other: str | None, answers: bool = False) -> bool:
    """Too short or long, a question, a stub, a greeting or acknowledgement, or small talk
    (:func:`~lossless.memory.fragments.small_talk_reason`: thanks, wishes, reactions): nothing to remember.
    A verbless remark that ``answers`` a question is told with it ("Loud in the best way." to "How was the
    sound?"), so it is kept."""
    if len(sentence) < 10 or len(sentence) > MAX_STATEMENT_CHARS or sentence.endswith(("?", "？")):
        return True
    if _SKIP.match(sentence) or sentence.endswith((":", ",", ";", "-", "…", "...")):
        return True
    reason = small_talk_reason(sentence, (speaker, other or ""))
    return reason is not None and not (answers and reason == "remark")


def _statement(
    sentence: str,
    speaker: str,
    other: str | None,
    named: bool,
    worker: bool,
    when: datetime,
    position: int,
    question: str | None = None,
    words: Vocabulary = _NO_WORDS,
) -> _Said | None:
    """One sentence worth remembering, told about its speaker (with the ``question`` it answers when it has no
    verb, see :func:`_told`); else ``None``."""
    sentence = " ".join(sentence.split())
    if _passed_over(sentence, speaker, other, question is not None):
        return None
    if named:
        sentence = with_subject(sentence)
    category = next((cat for cat, rule in _RULES if rule.search(sentence)), None)
    change = not worker and is_change(sentence)
    if change and not (category is not None and category in VERSIONED and fact_key_for(category, sentence)):
        # "I no longer love coffee" is the preference's next value; else what they stopped, on the day they said so
        liking = _LIKING.search(sentence) and fact_key_for("preferences", sentence) is not None
        category = "preferences" if liking else "events"
    personal = bool(_PERSONAL.search(sentence))
    if worker:
        if _NARRATION.match(sentence) or not _END.search(sentence):
            return None
        if not (_WORK.search(sentence) and personal) and category not in ("cases", "events"):
            return None
        category = category if category in ("cases", "events") else "events"
    informative = [w for w in _WORDS.findall(sentence.lower()) if w not in _FILLER]
    informative += _CJK.findall(sentence)[::3]  # CJK: about a word per three characters
    if category is None and not personal and not (named and len(informative) >= 2):
        return None
    if len(informative) < (1 if category else 2):
        return None
    if category is None:
        category = "events" if _PAST_TENSE.search(sentence) or _PLAN.search(sentence) else "profile"
        if category == "profile" and not named and not _PROFILE_HINT.search(sentence):
            return None  # "I think that works" from a user is not who they are
        if category == "profile" and not _PROFILE_HINT.search(sentence):
            category = "entities"
    told = _told(sentence, speaker, other, named, when, question, words)
    statement, dated = told.text, told.dated
    if change:
        statement = _changed(sentence, speaker, other, named, when)
    if fragment_reason(statement) is not None:
        return None  # each sentence must stand on its own, before any is joined to another
    score = float(len(set(informative)) + 3 * bool(_RULE_HIT.search(sentence)) + 2 * dated)
    score += 2 * len(_PROPER.findall(sentence[1:])) + CHANGE_BONUS * change
    return _Said(statement, category, score, dated, sentence, position, change, "" if change else told.bare)


def _keyed(fact_key: str | None, speaker: str | None) -> str | None:
    """A named speaker's facts are theirs: ``preferences:caroline:drink`` (the user's keep the plain key)."""
    if fact_key is None or speaker is None:
        return fact_key
    category, _, topic = fact_key.partition(":")
    return f"{category}:{speaker}:{topic}"


def told_apart(one: str, other: str) -> bool:
    """Whether two statements are different facts however alike their wording: they name different files
    or code (:func:`~lossless.memory.edits.code_refs`: an agent's work) or different dates (an event
    that recurs: ``the gym was packed on 7 July 2023`` and ``… on 13 June 2023``)."""
    return code_refs(one) != code_refs(other) or dates_named(one) != dates_named(other)


def decide(draft: MemoryDraft, neighbours: Sequence[tuple[Memory, float]]) -> Decision:
    """What to do with ``draft`` given its nearest current memories (similarity ≥ 0.7, best first)."""
    speaker = (draft.metadata or {}).get("speaker")
    if speaker is not None:  # one person's facts never merge into, support or replace another's
        neighbours = [(m, s) for m, s in neighbours if (m.metadata or {}).get("speaker", speaker) == speaker]
    revised = _revised(draft, neighbours)
    if revised is not None:
        return revised
    same = [(m, s) for m, s in neighbours if m.category == draft.category]
    if draft.fact_key and draft.category in ("preferences", "entities", "profile"):
        keyed = [(m, s) for m, s in same if m.fact_key == draft.fact_key]
        if keyed:
            old, sim = keyed[0]
            if (sim >= 0.95 and not told_apart(old.content, draft.content)) or (
                old.content.strip().lower() == draft.content.strip().lower()
            ):
                return Decision("support", old.memory_id, f"restates {old.memory_id} (similarity {sim:.2f})")
            if draft.category == "profile":
                return Decision("merge", old.memory_id, f"profile facts merge ({draft.fact_key})")
            return Decision("supersede", old.memory_id, f"new value for {draft.fact_key}")
    if not same:
        return Decision("create", reason="no similar memory of this category")
    best, sim = same[0]
    if draft.category == "profile":
        return Decision("merge", best.memory_id, "profile facts always merge")
    if draft.category in ("events", "cases"):
        if sim >= 0.95 and not told_apart(best.content, draft.content):
            return Decision("skip", best.memory_id, f"duplicate of {best.memory_id} (similarity {sim:.2f})")
        return Decision("create", reason="events and cases are append-only (another file, name or date: another fact)")
    apart = told_apart(best.content, draft.content)
    if sim >= 0.95 and not apart:
        return Decision("support", best.memory_id, f"restates {best.memory_id} (similarity {sim:.2f})")
    if draft.category == "patterns" and sim >= 0.9 and not apart:
        return Decision("merge", best.memory_id, "near-identical pattern")
    return Decision("create", reason=f"related to {best.memory_id} but distinct (similarity {sim:.2f})")


def _revised(draft: MemoryDraft, neighbours: Sequence[tuple[Memory, float]]) -> Decision | None:
    """A change of mind about an earlier memory (``metadata["changes"]``, set by
    :func:`~lossless.memory.changes.with_history`): a versioned one (profile, preferences, entities) is
    superseded and stays as history; beside an event, case or pattern the change is created.
    """
    meta = draft.metadata or {}
    earlier = meta.get("changes")
    if not meta.get("revises") or not earlier:
        return None
    target = next((memory for memory, _ in neighbours if memory.memory_id == earlier), None)
    if target is None:
        return None
    if target.category in VERSIONED:
        return Decision("supersede", target.memory_id, f"a change of mind about {target.memory_id}")
    return Decision("create", reason=f"a change of mind about {target.memory_id} ({target.category} stay current)")

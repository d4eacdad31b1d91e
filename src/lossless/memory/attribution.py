"""Whose a memory is: a statement tied to the person who said it wherever it would float free.

A memory is read weeks later, without the conversation around it.  "The train was late again."
said by Maya must say it was Maya who said so, and a verbless remark ("Coffee number three
already.") must become a sentence without words put in the speaker's mouth.

* :func:`remark` — a named speaker's verbless remark (no verb the fragment checker knows; see
  :func:`~lossless.memory.fragments.has_verb`), told before the third person is applied, as a
  sentence in the first person that :func:`~lossless.memory.statements.third_person` then tells
  about the speaker: ``RIP my smartwatch.`` → ``My smartwatch died.`` (what the idiom says);
  a noun phrase → ``I said it was coffee number three already.`` (the ``it is`` a verbless noun
  phrase stands for in chat); anything else (``After the gig, so tired.``: a preposition, an
  adverb, a participle…) → ``None``, and the extractor quotes it (``Maya said: …``), since no rule
  can tell what it stands for.
* :func:`attributed` — a memory that does not name its speaker, told as what they said:
  ``The train was late again.`` by Maya → ``Maya said the train was late again.``  The first word
  keeps its capital when it may be a name (see :func:`_lowered`).  A memory that opens with
  ``he``/``she``/``they`` is quoted instead (``Jonas said: She was thrilled.``): in reported speech
  "Jonas said she was thrilled" can read as Jonas speaking of themself.

:class:`Vocabulary` is what the conversation tells about its capitalised words, so that a first word
is lowered after "said" ("Maya said traffic was awful") only where it is no name ("Rosa wants…").

Invariants: pure and deterministic; the speaker's words are kept, in their order, only the first
letter's case may change: just the speaker's name and ``said`` (``said it was`` for a noun phrase)
are added, and ``RIP`` becomes ``died``; :func:`attributed` returns a text that names the speaker, and
leaves one that already does unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from lossless.memory.fragments import has_verb
from lossless.speakers import named_in, speaker_label

__all__ = ["Vocabulary", "attributed", "remark"]


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """What a conversation tells about its capitalised words: those it also writes in lower case
    (``lower``: "traffic") and those it capitalises where no sentence starts (``names``: "Rosa" in
    "Milestone: Rosa's first tooth").  A sentence's first word is lowered after "said" only on such
    evidence, so that a name never loses its capital."""

    lower: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, texts: Iterable[str], people: Iterable[str] = ()) -> Vocabulary:
        """The vocabulary of ``texts`` (a conversation's messages), ``people`` (its speakers) among the names."""
        lower: set[str] = set()
        names = {word.lower() for person in people for word in person.split()}
        for text in texts:
            lower.update(re.findall(r"(?<![\w'’-])[a-z][a-z'’-]*", text))
            speaker = speaker_label(text, None)  # after a "Jonas: " prefix a sentence starts
            for sentence in re.split(r"(?<=[.!?])\s+|\n+", text[speaker[1] :] if speaker else text):
                words = re.findall(r"[\w'’-]+", sentence)
                names.update(re.sub(r"['’]s$", "", w).lower() for w in words[1:] if w[:1].isupper() and w != "I")
        return cls(frozenset(lower), frozenset(names))


_RIP = re.compile(r"^(?:RIP|R\.I\.P\.?|Rest in peace),?\s+(?P<what>.+?)\s*[.!]*$", re.I)
#: Openings of a verbless remark that is no noun phrase: "it was" would not stand for what is left out.
_NOT_NOUN_PHRASE = frozenset(
    re.findall(
        r"\S+",
        """in on at to from after before with without for by about off into onto over under since until till
        during through across around near behind between via per like unlike as than so too very really not never
        always also only just even quite pretty rather kind sort such yes no nope yeah well oh ah hmm and but or
        then if when while because though although how what why where who which whose here there now soon later
        home back away out up down stuck done busy tired ready almost nearly barely hardly ever""",
    )
)
#: Words a sentence opens with that are no name: lowered after "said".
_COMMON_OPENERS = frozenset(
    re.findall(
        r"\S+",
        """the a an this that these those it it's its there there's here here's everyone everybody everything
        someone somebody something nobody nothing anyone anything most some all both each every many few several
        no none one two three four five six seven eight nine ten at in on after before when if as so but and then
        still also just only maybe apparently what which who how why where my his her their our your people""",
    )
)
#: Nouns in "-ing", so that "Wedding season again" is a noun phrase.
_ING_NOUNS = frozenset(
    ["wedding", "morning", "evening", "building", "ceiling", "clothing", "sibling", "pudding", "something",
     "nothing", "anything", "everything", "thanksgiving", "spring", "string", "meeting", "painting", "feeling"]
)  # fmt: skip
#: Words after a plural that a name ending in "s" ("Jonas", "James") does not take: "Flights to Porto",
#: "Rents in the centre", "Tickets are gone".
_AFTER_PLURAL = frozenset(["are", "were", "have", "to", "in", "for", "of", "from", "on"])
#: Words that follow a name as readily as a noun: "Rosa and Ivy", "Rosa at school", "Rosa too".
_FUNCTION_WORDS = frozenset(
    re.findall(
        r"\S+",
        """and or but nor of in on at to from for with by about as than then too also still just never always
        again already finally really even only so very not""",
    )
)
_PRONOUN_SUBJECT = re.compile(r"^(?:he|she|they|him|her|them)\b", re.I)


def remark(sentence: str, words: Vocabulary = Vocabulary()) -> str | None:
    """A verbless remark ``sentence`` (first person, as said) as a sentence with a verb, or ``None`` when no
    truthful one can be made (see the module docstring); ``words`` as for :func:`attributed`, except that a
    noun phrase's first word is taken for a name only on evidence ("Coffee number three already")."""
    text = " ".join(sentence.split()).strip()
    rip = _RIP.match(text)
    if rip:
        what = rip.group("what").rstrip(" .!")
        return f"{what[0].upper()}{what[1:]} died." if what else None
    tokens = re.findall(r"[\w'’-]+", text)
    if not tokens or not text[:1].isalnum():
        return None
    first = tokens[0].lower()
    if first in _NOT_NOUN_PHRASE or (len(first) > 4 and first.endswith(("ed", "ly"))):
        return None
    if len(first) > 5 and first.endswith("ing") and first not in _ING_NOUNS:
        return None  # "Practising with the app": what the speaker is doing
    body = text.rstrip(" .!?…")
    return f"I said it was {_lowered(body, words, names_unless_known=False)}."


def _lowered(text: str, words: Vocabulary, names_unless_known: bool = True) -> str:
    """``text`` with its first letter lowered to follow "said", unless its first word may be a name.

    A common opener ("the", "there's") is lowered.  Any other first word keeps its capital when the next
    word is capitalised too ("Osteria Nove"), when it has a capital past its first letter or a digit ("iOS",
    "5G"), when it is possessive ("Rosa's") or one of ``words.names``; and (``names_unless_known``) when the
    conversation never writes it in lower case and it is no plural: "traffic" is lowered, "Rosa" is not.  A
    label ("Milestone: …"; a word and a colon) is lowered unless it is one of ``words.names``."""
    split = text.split(" ")
    bare = re.sub(r"[^\w'’-]", "", split[0])
    if not bare or not bare[:1].isupper() or bare == "I" or bare.startswith(("I'", "I’")):
        return text
    lower = bare.lower()
    if split[0].endswith(":") and lower not in words.names:  # a label ("Milestone: Rosa's first tooth")
        return text[0].lower() + text[1:]
    if lower not in _COMMON_OPENERS:
        second = re.sub(r"[^\w]", "", split[1]) if len(split) > 1 else ""
        if any(c.isupper() or c.isdigit() for c in bare[1:]) or (second[:1].isupper() and second != "I"):
            return text
        if lower.endswith(("'s", "’s")) or lower in words.names:
            return text
        plural = lower.endswith("s") and not lower.endswith(("ss", "us", "is")) and second in _AFTER_PLURAL
        if names_unless_known and lower not in words.lower and not plural and not _modifies(split[1:2]):
            return text  # "Rosa wants…" keeps its capital; "Flights to Porto…", "Petrol prices are…" are lowered
    return text[0].lower() + text[1:]


def _modifies(following: list[str]) -> bool:
    """Whether the first word modifies the noun in ``following`` ("Petrol prices", "Student loans"): a
    lower-case word that is no verb, no adverb and no function word ("Rosa wants", "Rosa and Ivy" do not)."""
    word = following[0] if following else ""
    if not re.fullmatch(r"[a-z][a-z-]*", word) or word in _FUNCTION_WORDS or word.endswith("ly"):
        return False
    return not has_verb(word)


def attributed(text: str, speaker: str, words: Vocabulary = Vocabulary()) -> str:
    """``text`` (a memory of ``speaker``'s) told as what they said when it does not name them; else unchanged.
    ``words``: the conversation's (:class:`Vocabulary`), which tells a name from a common word."""
    if not text or named_in(text, [speaker]):
        return text
    if _PRONOUN_SUBJECT.match(text):
        return f"{speaker} said: {text}"
    return f"{speaker} said {_lowered(text, words)}"

"""From what someone said to a statement that stands alone: speaker, clean prose, dates, third person.

The offline extractor's toolkit, in the order it is applied to a message:

* :func:`speaker_of` — who is speaking: a ``speaker``/``name``/``author`` in the
  message's metadata, or a ``Name:`` prefix of its text, else the role
  (``the user``, ``the assistant``);
* :func:`prose_sentences` — the sentences of its prose: code blocks, markdown
  headings, tables, tool-call lines and quoted logs are dropped; bullets and
  emphasis markers are removed; interjections (``Yeah,``, ``Oh wow!``) are cut;
* :func:`resolve_dates` — relative times (``yesterday``, ``last week``, ``two
  weeks ago``, ``last Friday``, ``next month``…) become absolute dates written
  out (``7 May 2023``, ``the week before 9 June 2023``), counted from the
  message's own date;
* :func:`third_person` — ``I``/``my``/``me``/``we``/``our`` become the speaker's
  name (with the verb agreeing: ``I love`` → ``Caroline loves``), ``you``/``your``
  the other speaker's when known; ``their``/``them`` stand for a person only where no
  one else could be meant (``I told you about my trip`` → ``… about Caroline's trip``);
  ``let's``/``let us`` propose (``Caroline suggested that Caroline and Melanie meet``).

Invariants: pure and deterministic; English grammar only (other languages
pass through :func:`third_person` unchanged); nothing is invented except the
speaker's name and the written-out dates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from functools import partial

from lossless.memory.fragments import has_verb
from lossless.speakers import speaker_label

__all__ = [
    "dates_named",
    "format_date",
    "prose_sentences",
    "resolve_dates",
    "speaker_of",
    "third_person",
    "with_subject",
]

_FENCE = re.compile(r"```.*?(?:```|$)", re.S)
_SKIP_LINE = re.compile(r"^\s*(?:#{1,6}\s|\||>|\[tool |\[reasoning\]|\$ |```|<[a-z_/])", re.I)
#: "done.Now let me" — a missing space between sentences; "time.Now()" is code, not two sentences.
_RUN_ON = re.compile(r"(?<=[a-z%)][.!?])(?=[A-Z][a-z]+[\s,;:!?])")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_EMPHASIS = re.compile(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)")
_LABEL = re.compile(r"^\s*\*\*[\w /-]{1,40}(?::\*\*|\*\*:)\s*")
_SPLIT = re.compile(
    r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<!\bMr\.)(?<!\bDr\.)(?<!\bMs\.)(?<=[.!?])[\"'’”)]*\s+|(?<=[。！？])"
)
#: Words that open a sentence without adding to it.  Those that could also start its content ("No more
#: games", "Great news", "Thanks for the map") count only when punctuation follows them ("No, …", "Great!");
#: a dash counts only as punctuation, before a space ("No - …"), never as a word's ("No-one", "No --mock").
_INTERJECTION = re.compile(
    r"^(?:(?:(?:yeah|yes|yep|yup|oh|ooh|hm+|wow|whoa|well|so|haha+|hah|lol|hey|hi|hello|um+|uh+|ah+|aw+|and|"
    r"but|also|actually|honestly|totally|okay|ok|absolutely|definitely|omg|gosh|oh my|my (?:god|gosh|goodness)|"
    r"btw|anyway)\b|(?:no|nope|ha|sure|true|right|great|cool|nice|awesome|thanks|thank you|man|dude|plus|"
    r"you won[’']t believe (?:it|this)|guess what|you know what|believe it or not)\b"
    r"(?=\s*(?:[,!.…]|-+(?=\s|$)|$)))(?:[\s,!.…]|-+(?=\s|$))*)+",
    re.I,
)

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "a couple of": 2, "a few": 3, "several": 3,
}  # fmt: skip
_COUNT = r"(?P<n>\d+|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_LEAD = r"(?P<lead>\b(?:since|until|till|from|by|before|after|of|on|in|during|around)\s+)?"
_RELATIVE = re.compile(
    _LEAD + r"\b(?:"
    r"(?P<simple>yesterday|today|tonight|tomorrow|this morning|this afternoon|this evening|last night)"
    r"|(?P<rel>last|this past|past|this|next|coming)\s+(?P<what>week(?:end)?|month|year|" + "|".join(_WEEKDAYS) + r")"
    r"|" + _COUNT + r"\s+" + _UNIT + r"\s+(?P<dir>ago|from now|later|earlier)"
    r"|in\s+(?P<n2>\d+|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten)\s+"
    r"(?P<unit2>day|week|month|year)s?\b"
    r")\b",
    re.I,
)


_NAMED_DATE = re.compile(
    r"\b(?:\d{1,2}\s+)?(?:" + "|".join(_MONTHS) + r")(?:\s+\d{4})?\b|\b\d{4}-\d{2}-\d{2}\b|\b(?:19|20)\d{2}\b"
)


def dates_named(text: str) -> frozenset[str]:
    """The dates ``text`` names as written: ``7 May 2023``, ``May 2023``, ``2023-05-07``, ``2023``.

    Month names count only capitalised (``may`` is a verb)."""
    return frozenset(" ".join(m.split()) for m in _NAMED_DATE.findall(text))


def format_date(day: date | datetime) -> str:
    """``7 May 2023``: the date written out, day first."""
    return f"{day.day} {_MONTHS[day.month - 1]} {day.year}"


def _month_shift(day: date, months: int) -> tuple[int, int]:
    total = day.year * 12 + day.month - 1 + months
    return total // 12, total % 12 + 1


def _phrase(match: re.Match[str], day: date) -> tuple[str, str]:
    """(bare phrase, preposition to put before it when the text had none) for one relative time."""
    simple = (match.group("simple") or "").lower()
    if simple:
        offsets = {"yesterday": -1, "last night": -1, "tomorrow": 1}
        when = format_date(day + timedelta(days=offsets.get(simple, 0)))
        if simple == "last night" or simple == "tonight":
            return f"the night of {when}", "on "
        if simple.startswith("this "):
            return f"the {simple[5:]} of {when}", "on "
        return when, "on "
    rel = (match.group("rel") or "").lower()
    if rel:
        what = match.group("what").lower()
        back = rel in ("last", "this past", "past")
        ahead = rel in ("next", "coming")
        if what in _WEEKDAYS:
            target = _WEEKDAYS.index(what)
            if back:
                delta = (day.weekday() - target) % 7 or 7
                found = day - timedelta(days=delta)
            else:
                delta = (target - day.weekday()) % 7 or 7
                found = day + timedelta(days=delta)
            return f"{what.capitalize()}, {format_date(found)}", "on "
        if what == "month":
            year, month = _month_shift(day, -1 if back else 1 if ahead else 0)
            return f"{_MONTHS[month - 1]} {year}", "in "
        if what == "year":
            return str(day.year - 1 if back else day.year + 1 if ahead else day.year), "in "
        span = "weekend" if what == "weekend" else "week"
        if back:
            return f"the {span} before {format_date(day)}", "in " if span == "week" else "on "
        if ahead:
            return f"the {span} after {format_date(day)}", "in " if span == "week" else "on "
        return f"the {span} of {format_date(day)}", "in " if span == "week" else "on "
    count = (match.group("n") or match.group("n2") or "1").lower()
    unit = (match.group("unit") or match.group("unit2") or "day").lower()
    direction = (match.group("dir") or "from now").lower()
    n = int(count) if count.isdigit() else _NUMBERS.get(count, 1)
    sign = -1 if direction in ("ago", "earlier") else 1
    if (unit == "day" and count in ("a", "an", "one")) or (unit == "day" and count.isdigit()):
        return format_date(day + timedelta(days=sign * n)), "on "
    words = f"{count} {unit}{'' if n == 1 and count in ('a', 'an', 'one', '1') else 's'}"
    return f"{words} {'before' if sign < 0 else 'after'} {format_date(day)}", ""


def resolve_dates(sentence: str, when: datetime | date) -> tuple[str, bool]:
    """``sentence`` with its relative times written as dates counted from ``when``; and whether any was."""
    day = when.date() if isinstance(when, datetime) else when
    found = False

    def swap(match: re.Match[str]) -> str:
        nonlocal found
        found = True
        phrase, preposition = _phrase(match, day)
        lead = match.group("lead")
        if lead:
            if lead.strip().lower() in ("on", "in", "during", "around"):
                return (preposition or lead) + phrase
            return lead + phrase
        return preposition + phrase

    out = _RELATIVE.sub(swap, sentence)
    if found and out[:1].islower() and not sentence[:1].islower():
        out = out[0].upper() + out[1:]
    return out, found


def speaker_of(role: str, content: str, metadata: Mapping[str, object] | None) -> tuple[str, str, bool]:
    """(speaker, text without a ``Name:`` prefix, whether the speaker is a named person)."""
    label = speaker_label(content, metadata)
    if label is not None:
        return label[0], content[label[1] :], True
    return ("the user" if role == "user" else "the assistant"), content, False


def prose_sentences(text: str) -> list[str]:
    """The sentences of the prose of ``text`` (see the module docstring for what is dropped)."""
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("[tool "))
    text = _FENCE.sub("\n", text.replace("\\n", "\n").replace("\\t", " "))  # escaped newlines (JSON in text)
    text = _RUN_ON.sub(" ", text)
    out: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            joined = " ".join(paragraph)
            out.extend(part.strip() for part in _SPLIT.split(joined) if part.strip())
            paragraph.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if not line or _SKIP_LINE.match(line):
            flush()
            continue
        bullet = _BULLET.match(line)
        if bullet:
            flush()
            line = line[bullet.end() :]
        line = _EMPHASIS.sub("", _LABEL.sub("", line)).replace("`", "")
        paragraph.append(line)
        if bullet or line.endswith(":"):
            flush()
    flush()
    cleaned: list[str] = []
    for sentence in out:
        sentence = _INTERJECTION.sub("", sentence).strip(" ,;-–—")
        if sentence:
            cleaned.append(sentence[0].upper() + sentence[1:])
    return cleaned


_MODALS = frozenset(
    ["will", "would", "can", "could", "should", "might", "must", "may", "shall", "did", "was", "had", "used"]
)
_ADVERBS = frozenset(
    [
        "really",
        "just",
        "also",
        "never",
        "always",
        "usually",
        "often",
        "sometimes",
        "still",
        "actually",
        "recently",
        "finally",
        "totally",
        "even",
        "already",
        "definitely",
        "truly",
        "absolutely",
        "mostly",
        "generally",
        "normally",
        "rarely",
        "seldom",
        "probably",
        "kinda",
        "sorta",
        "only",
        "currently",
        "especially",
        "genuinely",
        "honestly",
    ]
)
#: Verbs that end in "-ly", so a word ending so is not always an adverb ("I barely slept" but "I apply").
_LY_VERBS = frozenset(
    [
        "ally",
        "apply",
        "bully",
        "comply",
        "dally",
        "fly",
        "imply",
        "multiply",
        "rally",
        "rely",
        "reply",
        "supply",
        "tally",
    ]
)


def _adverb(word: str) -> bool:
    """An adverb between ``I`` and its verb: a listed one, or any "-ly" word but a verb (after ``I`` no noun
    such as "family" can stand, so "-ly" is safe there; :func:`with_subject`, where no ``I`` is, uses the list)."""
    word = word.lower().strip(".,!?")
    return word in _ADVERBS or (len(word) > 4 and word.endswith("ly") and word not in _LY_VERBS)


_PAST = re.compile(r"^(?:\w+(?<!e)ed|went|got|saw|made|took|gave|came|found|felt|left|met|ran|said|told|thought|bought|"
                   r"brought|began|became|wrote|read|spent|lost|won|kept|knew|heard|held|sent|sold|paid|built|"
                   r"ate|drank|drove|flew|grew|wore|sat|slept|swam|taught|caught|fought|chose|fell|forgot|let|put|"
                   r"set|hit|cut|quit|hurt|shut)$", re.I)  # fmt: skip
_CONTRACTIONS = (
    (re.compile(r"\bI'm\b|\bI’m\b", re.I), "{S} is"),
    (re.compile(r"\bI've\b|\bI’ve\b", re.I), "{S} has"),
    (re.compile(r"\bI'll\b|\bI’ll\b", re.I), "{S} will"),
    (re.compile(r"\bI'd\b|\bI’d\b", re.I), "{S} would"),
    (re.compile(r"\bI am\b"), "{S} is"),
    (re.compile(r"\bI have\b"), "{S} has"),
    (re.compile(r"\bI do not\b"), "{S} does not"),
    (re.compile(r"\bI don't\b|\bI don’t\b"), "{S} doesn't"),
    (re.compile(r"\bI do\b"), "{S} does"),
    (re.compile(r"\bI was\b"), "{S} was"),
    (re.compile(r"\bwe're\b|\bwe’re\b", re.I), "{W} are"),
    (re.compile(r"\bwe've\b|\bwe’ve\b", re.I), "{W} have"),
    (re.compile(r"\bwe'll\b|\bwe’ll\b", re.I), "{W} will"),
    (re.compile(r"\bwe'd\b|\bwe’d\b", re.I), "{W} would"),
)


def _third(verb: str) -> str:
    lower = verb.lower()
    if lower in _MODALS or _PAST.match(lower) or lower in _MORE_PAST or not lower.isalpha():
        return verb
    if lower == "have":
        return "has"
    if lower in ("do", "go"):
        return verb + "es"
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 2 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _agree(match: re.Match[str], name: str) -> str:
    words = match.group(1).split(" ")
    index = 0
    while index < len(words) - 1:
        word = words[index].lower()
        if word == "no" and words[index + 1].lower() == "longer":  # "I no longer drink" → "Maya no longer drinks"
            index += 2
        elif _adverb(word):
            index += 1
        else:
            break
    index = min(index, len(words) - 1)
    if not _adverb(words[index]) and words[index].lower().strip(".,!?") != "longer":  # the verb is past the three
        words[index] = _third(words[index])
    return f"{name} " + " ".join(words)


def with_subject(sentence: str) -> str:
    """A chat sentence that leaves out its subject (``Made pasta.``, ``Still dreaming of it``) given ``I``."""
    words = sentence.split(" ")
    index = 0
    while index < len(words) - 1 and words[index].lower() in _ADVERBS:  # listed ones: "Family came" has no "I"
        index += 1
    head = re.sub(r"[^\w'-]", "", words[index]).lower()
    if not head or words[0][:1] in ("I", "'") or head in ("i", "we", "my", "our", "let", "let's", "lets"):
        return sentence  # "Let us meet" proposes: it is no "I let …"
    if head.endswith("ing") and len(head) > 5 and head not in _ING_NOUNS:
        if _GERUND_SUBJECT.search(re.split(r"[,;:!?]", sentence, maxsplit=1)[0]):
            return sentence  # "Shopping before a trip is the best part": the -ing phrase is the subject
        return "I'm " + sentence[0].lower() + sentence[1:]
    if _PAST.match(head) or head in _VERB_STARTS or head in _MORE_PAST:
        return "I " + sentence[0].lower() + sentence[1:]
    clause = re.split(r"[,;:!?]|\s[-–—]\s", sentence, maxsplit=1)[0]
    after = (re.findall(r"[\w'’]+", clause)[1:2] or [""])[0].lower()
    state = head in _STATE_STARTS and (after in _STATE_NEXT or after in _STATE_STARTS)
    if index == 0 and state and not has_verb(clause):
        return "I'm " + sentence[0].lower() + sentence[1:]  # "Home from Porto!" → "I'm home from Porto!"
    if index == 0 and _EVENT_NOUN.match(clause) and head not in _DETERMINERS and not has_verb(clause):
        article = "an" if head[:1] in "aeiou" else "a"  # "Dentist appointment tomorrow" → "I have a dentist …"
        return f"I have {article} " + sentence[0].lower() + sentence[1:]
    return sentence


#: Nouns in "-ing": "Wedding season again" is no "I'm wedding …".
_ING_NOUNS = frozenset(
    ["wedding", "morning", "evening", "building", "ceiling", "clothing", "sibling", "pudding", "stuffing", "something",
     "nothing", "anything", "everything", "offspring", "darling", "earring", "wellbeing", "thanksgiving"]
)  # fmt: skip
#: Past tenses a chat sentence opens with, the speaker left out ("Burnt the moussaka tonight").
_MORE_PAST = frozenset(
    ["burnt", "burned", "learnt", "dreamt", "spilt", "woke", "broke", "spoke", "forgot", "froze", "rode", "threw",
     "drew", "hid", "shook", "stole", "sang", "rang", "lent", "dealt", "meant", "fed", "led", "struck", "tore",
     "wrote", "ate", "finished", "baked", "cooked", "watched", "visited", "tried", "joined", "moved", "passed"]
)  # fmt: skip
#: Verbless openings that tell the speaker's state: "Home from Porto!", "Back at work", "Off to Oslo".
_STATE_STARTS = frozenset(
    ["home", "back", "off", "busy", "done", "stuck", "exhausted", "tired", "sick", "ready", "nervous", "excited",
     "sore", "away", "free", "halfway", "almost"]
)  # fmt: skip
#: What may follow such an opening ("Back from", "Home at last"), so that "Back pain again" is no state.
_STATE_NEXT = frozenset(
    ["", "from", "to", "at", "in", "on", "with", "for", "after", "again", "now", "home", "already", "and", "out",
     "early", "today", "tonight", "tomorrow", "finally", "safe", "soon"]
)  # fmt: skip
#: A verbless opening that names something the speaker has coming: "Dentist appointment tomorrow".
_EVENT_NOUN = re.compile(
    r"^(?:[\w'-]+ ){0,2}(?:appointment|interview|exam|meeting|flight|surgery|operation|shift|lesson|"
    r"check-?up|deadline|date|match|recital|audition)s?\b",
    re.I,
)
_DETERMINERS = frozenset(["a", "an", "the", "my", "our", "your", "his", "her", "their", "this", "that", "no", "what"])


#: A finite verb later in the clause: a sentence opening with an "-ing" word is then not "I'm …-ing".
_GERUND_SUBJECT = re.compile(r"\s(?:is|was|are|were|has|had|makes|made|feels|felt|takes|took|seems|seemed)\s", re.I)

_VERB_STARTS = frozenset(
    ["love", "hate", "like", "need", "want", "think", "miss", "finally", "signed", "booked", "adopted", "started"]
)


#: Set phrases with "my", "our" or "you" that name no possession and no person ("Oh my goodness", "my bad",
#: "thank you"): they stay as they are.
_IDIOMS = re.compile(
    r"\b(?:oh my(?=\s*(?:[,.!?]|$))|(?:oh )?(?:my|our) (?:god|gosh|goodness|lord|word|bad|pleasure|apologies|"
    r"condolences)|thank you|see you|bless you|mind you|you know(?=[,.!?]))\b",
    re.I,
)
#: A clause opens before "you" here, so "you" is the subject: "… but you always overpack" (not "I told you").
_CLAUSE_OPENERS = frozenset(
    ["and", "but", "or", "so", "because", "if", "when", "whenever", "since", "though", "although", "as", "that",
     "while", "until", "unless", "before", "once", "where", "now", "then", "maybe", "hope", "hopes", "hoped",
     "bet", "bets", "think", "thinks", "thought", "guess", "guesses", "suppose", "supposes", "said", "says"]
)  # fmt: skip
#: Words after a subject "you" that are no verb to conjugate ("you and Tom", "you guys", "you two").
_NOT_AFTER_YOU = frozenset(["and", "or", "guys", "all", "both", "two", "three", "too", "yourself", "alone", "lot"])
#: "you have" after an auxiliary keeps its bare verb ("Did you have her recipe?" → "Did Maya have …").
_NO_AUXILIARY_BEFORE = "".join(
    f"(?<!{word[0].upper()}{word[1:]} )(?<!\\b{word} )"
    for word in ("did", "does", "do", "can", "could", "will", "would", "should", "might", "must", "may", "to")
)
_YOU_FORMS = (
    (  # a question: "Do you …?", "What do you think?" ("They have you covered" asks nothing)
        re.compile(
            r"(?:^|(?<=[,;:] )|(?<=[Ww]hat )|(?<=[Ww]here )|(?<=[Ww]hen )|(?<=[Ww]hy )|(?<=[Hh]ow )"
            r"|(?<=[Ww]ho )|(?<=[Ww]hich ))([Dd]o|[Aa]re|[Hh]ave|[Ww]ere)(n't|n’t)? you\b"
        ),
        "{Q} {O}",
    ),
    (re.compile(r"\b[Yy]ou(?:'re|’re| are)\b"), "{O} is"),
    (re.compile(r"\b[Yy]ou aren't\b|\b[Yy]ou aren’t\b"), "{O} isn't"),
    (re.compile(r"\b[Yy]ou(?:'ve|’ve)\b|" + _NO_AUXILIARY_BEFORE + r"\b[Yy]ou have\b"), "{O} has"),
    (re.compile(r"\b[Yy]ou haven't\b|\b[Yy]ou haven’t\b"), "{O} hasn't"),
    (re.compile(r"\b[Yy]ou(?:'ll|’ll)\b"), "{O} will"),
    (re.compile(r"\b[Yy]ou(?:'d|’d)\b"), "{O} would"),
    (re.compile(r"\b[Yy]ou were\b"), "{O} was"),
    (re.compile(r"\b[Yy]ou weren't\b|\b[Yy]ou weren’t\b"), "{O} wasn't"),
    (re.compile(r"\b[Yy]ou don't\b|\b[Yy]ou don’t\b"), "{O} doesn't"),
    (re.compile(r"\b[Yy]ou do not\b"), "{O} does not"),
)


_ASKED = {"do": "does", "are": "is", "have": "has", "were": "was"}


def _you_form(match: re.Match[str], template: str, other: str) -> str:
    """One of :data:`_YOU_FORMS` told about ``other`` ("Do you" → "Does Maya", "you're" → "Maya is")."""
    if "{Q}" in template:
        verb = match.group(1)
        said = _ASKED[verb.lower()]
        said = (said[0].upper() + said[1:] if verb[0].isupper() else said) + (match.group(2) or "")
        return template.replace("{Q}", said).replace("{O}", other)
    return template.replace("{O}", other)


def _you_subject(match: re.Match[str], other: str) -> str:
    """``you`` as the subject of a clause becomes ``other`` with the verb agreeing (``You always overpack`` →
    ``Maya always overpacks``); ``you`` as an object (``it grabs you``, ``I told you about it``) is only named."""
    before = match.string[: match.start()].rstrip()
    previous = re.findall(r"[\w'’]+", before)[-1:] if before and before[-1].isalnum() else []
    subject = not previous or previous[0].lower() in _CLAUSE_OPENERS
    words = match.group(1).split(" ")
    if not subject or words[0].lower().strip(".,!?") in _NOT_AFTER_YOU:
        return f"{other} {match.group(1)}"
    return _agree(match, other)


#: "Let us" where a clause opens: a proposal ("Let us meet", "so let us go"), unlike "they won't let us".
_LET_US = r"(?:^|(?<=[,;:] )|(?<=[,;:])|(?<=\b[Ss]o )|(?<=\b[Tt]hen )|(?<=\b[Nn]ow ))[Ll]et us"
#: "We" that takes in the listener: the two of them named together, or a proposal put to the listener (a
#: meeting verb after "we should/could…", "shall we", "let's … together").  Any other "we" — "We adopted a
#: puppy", "We went to Lisbon" — is the speaker and their people, whom the sentence does not name.
_WITH_LISTENER = re.compile(
    r"\b(?:we both|both of us|the two of us|us two|you and (?:I|me)|me and you|each other|one another|let[’']?s)\b"
    r"|" + _LET_US + r"\b"  # "Let us meet", not "the landlord won't let us"
    r"|\b(?:shall|should|could|can|must|might) we\b|\bwhy don[’']?t we\b|\bhow about (?:we|us)\b"
    r"|\bwe(?:[’']ll| will| should| could| can| must| need to| have to| ought to| gotta| might)"
    r"(?: (?:really|definitely|totally|just|still|maybe|all|both|also|so|actually|properly|finally))*"
    r" (?:meet|catch up|get together|hang out|grab|do (?:this|that|it) again|see each other|celebrate)\b"
    r"|\bwe(?: should| could| ought to| might)\b"
    r"[^.!?]*\b(?:together|sometime|some time)\b",  # "We should watch the final together"
    re.I,
)
#: "We" planning what to do: at work with an agent, the user's plan is the two of theirs.
_PLAN = re.compile(r"\bwe(?:[’']ll| will| need| should| must| have to| can| could| gotta)\b", re.I)
#: "You" meaning the listener and the people with them ("Are you guys coming?", "I miss you two"): the
#: listener is named with the others, never as "Jonas guys".  "You all right?" asks after the listener alone,
#: and "you two tickets" has "two" count the tickets, so "you two" / "you all" need no noun after them.
_YOU_GROUP = re.compile(
    r"\b(?:[Yy]ou (?:guys|lot|folks|people|all(?! right| alright)|two|both)|[Yy][’']?all|[Aa]ll of you|[Bb]oth of you)"
    r"(?=\s*(?:[.,;:!?)]|$|(?:are|were|have|had|should|could|can|will|would|must|need|did|do|still|really|always"
    r"|ever|too|got|look|seem|make|and|or|in|at|to|for|with|on|from|about|again|soon|so|both|all|coming|going)\b))",
)


#: "Let's meet", "let us go": a proposal to the listener, told as one ("Maya suggested that Maya and Jonas meet").
#: "Let us" only where a clause opens ("the landlord won't let us paint" is no proposal).
_PROPOSAL = re.compile(r"\b[Ll]et[’']s\s+(not\s+)?|" + _LET_US + r"\s+(?!\W)(not\s+)?")
#: A speaker's word: (its pronoun where the speaker is the one person named before it, its form with the name).
_MINE = {"myself": ("themselves", "{}"), "me": ("them", "{}"), "mine": ("theirs", "{}'s"), "my": ("their", "{}'s")}
#: Where a clause opens: a pronoun refers back only within its clause ("…, wish me luck" → "wish Maya luck").
_CLAUSE_BREAK = re.compile(r"[,;:()]|\s[—–-]\s|\s(?:but|because|although|though|while|whereas)\s")
#: Words that could be what "their"/"them" stands for, besides the person meant.
_OTHER_REFERENTS = re.compile(
    r"\b(?:[Yy]ou|[Yy]our|[Yy]ours|[Yy]ourself|[Yy]ourselves|[Tt]hey|[Tt]hem|[Tt]heir|[Tt]heirs|[Tt]hemselves|others)\b"
)


def _sole_referent(before: str, person: str, rivals: Sequence[str], group: str = "") -> bool:
    """Whether a "their"/"them" after ``before`` can stand for ``person`` alone: ``person`` is named in the
    clause ``before`` ends in, and nobody else who could be meant is — no one of ``rivals``, no other
    capitalised name, no "you"/"they"/"others" ("Maya told Jonas about my trip" → "Maya's trip"; "they
    seemed to like me" → "like Maya").  ``group`` (the speaker "and others") is left out first: after
    "Maya and others took" a "my" is "Maya's"."""
    clause = _CLAUSE_BREAK.split(before.replace(group, "\x01") if group else before)[-1]
    name = re.compile(rf"(?<![\w'’-]){re.escape(person)}(?:['’]s)?(?![\w'’-])")
    if not name.search(clause):
        return False
    rest = name.sub(" ", clause)
    if _OTHER_REFERENTS.search(rest) or any(r and re.search(rf"\b{re.escape(r)}\b", rest) for r in rivals):
        return False
    words = re.findall(r"[\w'’-]+", rest)
    return not any(i > 0 and w[:1].isupper() and w != "I" for i, w in enumerate(words))


def third_person(
    sentence: str, speaker: str, other: str | None = None, *, we_with_other: bool = False, at_work: bool = False
) -> str:
    """``sentence`` told about ``speaker`` (``I`` → the name, the verb agreeing); ``you`` → ``other`` if known,
    the verb agreeing when ``you`` is the subject.  Set phrases (``my goodness``, ``thank you``) stay as they are.

    ``we``/``us`` name the listener only when the sentence takes them in (:data:`_WITH_LISTENER`: "We should
    meet up soon" → "Maya and Jonas should meet up soon"); otherwise they are ``"{speaker} and others"``,
    which is true whoever the others are ("We adopted a puppy" → "Maya and others adopted a puppy").
    ``we_with_other`` takes the listener in always (an agent's "we" is the agent and its user at work on one
    task: "we can add a check" → "the assistant and the user can add a check"; its "our tests" are "the
    tests"); ``at_work`` (a user talking
    to an agent) takes them in for a plan ("we need to fix the tests", "we should", "we'll", "let's"), not
    for the user's own past ("We got a report" → "the user and others got a report").
    ``you guys``/``you all``/``y'all`` become ``"{other} and the others"``, ``you two``/``you both``
    ``"{other} and their companion"``."""
    if not re.search(r"[A-Za-z]", sentence):
        return sentence
    kept: list[str] = []

    def keep(match: re.Match[str]) -> str:
        kept.append(match.group(0))
        return f"\x00{len(kept) - 1}\x00"

    if "\x00" not in sentence:  # the marker of a kept phrase; text that has one keeps no phrase
        sentence = _IDIOMS.sub(keep, sentence)
    listener = other is not None and (
        we_with_other or _WITH_LISTENER.search(sentence) is not None or (at_work and _PLAN.search(sentence) is not None)
    )
    group = f"{speaker} and {other}" if listener else f"{speaker} and others"
    sentence = _PROPOSAL.sub(lambda m: f"{speaker} suggested that {group} {m.group(1) or m.group(2) or ''}", sentence)
    sentence = re.sub(r"(?<![\w'’-])i(?=(?:'m|’m|'ve|’ve|'ll|’ll|'d|’d)?\s)", "I", sentence)  # a lower-case "i"
    for pattern, template in _CONTRACTIONS:
        sentence = pattern.sub(template.replace("{S}", speaker).replace("{W}", group), sentence)
    sentence = re.sub(r"(?<=\band )I\b|\bI(?= and\b)", speaker, sentence)  # "Mei and I are": the verb stays plural
    sentence = re.sub(  # the verb's window stops before another "I": "I think I see" → "… thinks … sees"
        r"\bI ((?:(?!I\b)[\w'’]+ ){0,2}(?!I\b)[\w'’]+)", lambda m: _agree(m, speaker), sentence
    )

    rivals = [other] if other else []

    def mine(match: re.Match[str]) -> str:  # "their" only where it can be no one else's (after "X and others": X's)
        pronoun, name = _MINE[match.group(0).lower()]
        sole = _sole_referent(match.string[: match.start()], speaker, rivals, group)
        return pronoun if sole else name.format(speaker)

    sentence = re.sub(r"\b(?:myself|me|mine|[Mm]y)\b", mine, sentence)
    sentence = re.sub(r"\b[Ww]e\b", group, sentence)  # before "our": "We love our dog" → "… love their dog"
    ours = f"{group}'s" if listener else f"{speaker}'s"  # "our flat": the speaker's, whoever shares it

    def our(match: re.Match[str]) -> str:
        if we_with_other:  # an agent's "our tests" are the project's: "the tests" says it without a clumsy owner
            return "The" if match.group(0) == "Our" else "the"
        before = match.string[: match.start()]
        sole = _sole_referent(before.replace(group, speaker), speaker, rivals)
        return "their" if sole else ours

    sentence = re.sub(r"\b[Oo]ur\b", our, sentence)
    sentence = re.sub(r"\bourselves\b", lambda m: "themselves" if group in m.string[: m.start()] else group, sentence)
    if listener:  # "the two of us should meet up" → "Maya and Jonas should meet up"
        sentence = re.sub(r"\b(?:us two|the two of us|both of us)\b", group, sentence, flags=re.I)
    sentence = re.sub(r"\bus\b", group, sentence)
    if other is not None:

        def others(match: re.Match[str]) -> str:
            pair = re.search(r"two|both", match.group(0), re.I) is not None
            return f"{other} and their companion" if pair else f"{other} and the others"

        sentence = _YOU_GROUP.sub(others, sentence)

        def named(match: re.Match[str]) -> bool:  # "you and your food" → "Maya and their food"
            before = re.sub(r"\b[Yy]ou(?:rs?|rself|rselves)?\b", other, match.string[: match.start()])
            return _sole_referent(before, other, [speaker])

        sentence = re.sub(r"\b[Yy]our\b", lambda m: "their" if named(m) else f"{other}'s", sentence)
        sentence = re.sub(
            r"\byoursel(?:f|ves)\b",
            lambda m: "themselves" if named(m) else other,  # "you did it yourself" → "… did it themselves"
            sentence,
        )
        for pattern, template in _YOU_FORMS:
            sentence = pattern.sub(partial(_you_form, template=template, other=other), sentence)
        sentence = re.sub(r"\b[Yy]ou ((?:[\w'’]+ ){0,2}[\w'’]+)", lambda m: _you_subject(m, other), sentence)
        sentence = re.sub(r"\b[Yy]ou\b", other, sentence)
    if kept:
        sentence = re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], sentence)
    sentence = sentence.replace(f"{speaker}'s's", f"{speaker}'s")
    if sentence[:1].islower():
        sentence = sentence[0].upper() + sentence[1:]
    return sentence

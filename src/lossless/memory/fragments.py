"""Is a text a whole statement, or a fragment? The check every extracted memory passes.

A memory must read on its own, weeks later, without the conversation around
it.  :func:`fragment_reason` names what makes a text a fragment, or returns
``None`` for a complete statement:

* ``empty`` / ``too short`` — fewer than three words (CJK: fewer than four characters);
* ``heading`` — a markdown heading, a bold label (``**Root cause**:``) or a text
  ending in a colon (a list's stub);
* ``list stub`` — starts with a bullet or a number of a list;
* ``code`` / ``tool noise`` — code fences, statements of code, tool-call
  markers, JSON, tracebacks, shell prompts;
* ``no verb`` / ``no subject`` — no verb found, or the verb comes first (an
  instruction or a clipped clause, not a statement about someone); a word right
  after a determiner or "no" is a noun ("no phone signal", "the plan"), and a noun
  that starts with a verb is no inflection of it ("signal", "teacher");
* ``unfinished`` — does not end as a sentence (``.``, ``!``, ``?`` or their CJK
  forms, possibly inside a closing quote or bracket), or ends in an ellipsis.

A whole sentence can still hold nothing worth remembering weeks later.
:func:`small_talk_reason` names why a sentence said in a chat is small talk, or
returns ``None`` when it may carry a fact:

* ``greeting`` — hello, goodbye, "long time no chat", "how are you";
* ``thanks`` — thanks or appreciation with no new fact ("Thanks for the tip!"
  is small talk, "Thanks for helping me move" keeps what happened);
* ``wishes`` — congratulations and wishes ("Happy anniversary in advance!",
  "Good luck with the interview");
* ``reaction`` — every word is a reaction's ("That's a big step.", "No way,
  that's brilliant!", "I'm so happy for you"), or a teasing "you and your …";
* ``exclamation`` / ``remark`` — an exclamation or a remark with no verb that
  names nothing (no proper noun, number, date word, nothing of the speaker's:
  "A dog!", "After three years!", "No backing out.", "Loud in the best way.";
  "Home from Porto!" and "Coffee number three already." are kept: a remark's
  number counts in words too, an exclamation's only in digits).  A verbless reply to a question is told with
  the question by the extractor, so it is judged there, not here.

A sentence that names a person other than the two speakers, a place, a number,
or says what someone did (a verb outside the reaction's words) is never small
talk.  "Coffee number three already." is kept: it reports something countable
about the speaker, and telling a passing remark from a habit needs more than
words.

Invariants: pure and deterministic (no I/O, no model); English texts get the
grammar checks, texts mostly in Chinese, Japanese or Korean only the shape
checks (their verbs are not found by word lists); small talk is judged for
English only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lossless.text import CJK_CHAR

__all__ = ["fragment_reason", "has_verb", "is_fragment", "small_talk_reason"]

_CJK = CJK_CHAR
_HEADING = re.compile(r"^\s*(?:#{1,6}\s|\*\*[^*]+\*\*\s*:?\s*$|\*\*[^*]+:\*\*|__[^_]+__\s*:)|:\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+•]\s|\d{1,3}[.)]\s|\[[ xX]\]\s)")
_CODE = re.compile(
    r"```|^\s*(?:def|class|import|from \S+ import|function|const|let(?!['’])|var|return|if \(|for \(|#include"
    r"|SELECT\s.+\sFROM)\b"
    r"|(?:\b\d+:\s.*){3}|\s//\s|[;{}]\s*$|=>|\)\s*\{|==|!=|:=|\b\w+\([^()]*\)\s*[;{]|^\s*[$>]\s",
    re.I,
)
_TOOL = re.compile(
    r"\[tool (?:call|result|error)|Traceback \(most recent|^\s*[{\[]\s*\"|<\/?[a-z_]+>|^\s*\[\w+\]", re.I
)
_END = re.compile(r"[.!?。！？][\"'’”)\]]*\s*$")
_ELLIPSIS = re.compile(r"(?:\.\.\.|…)[\"'’”)\]]*\s*$")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")

_AUX = frozenset(
    [
        "am",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "may",
        "might",
        "must",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "hasn't",
        "haven't",
        "hadn't",
        "doesn't",
        "don't",
        "didn't",
        "won't",
        "wouldn't",
        "can't",
        "couldn't",
        "shouldn't",
        "'s",
        "'re",
        "'ve",
        "'d",
        "'ll",
    ]
)
# Verbs common in what people tell each other and in agent work, base forms; inflections are derived.
_VERBS = frozenset(
    [
        "accept",
        "add",
        "adopt",
        "agree",
        "allow",
        "announce",
        "answer",
        "appear",
        "apply",
        "arrive",
        "ask",
        "attend",
        "avoid",
        "bake",
        "become",
        "begin",
        "believe",
        "belong",
        "borrow",
        "break",
        "bring",
        "build",
        "buy",
        "call",
        "care",
        "carry",
        "catch",
        "cause",
        "celebrate",
        "change",
        "check",
        "choose",
        "clean",
        "close",
        "collect",
        "come",
        "commit",
        "compare",
        "complete",
        "consider",
        "contain",
        "continue",
        "cook",
        "cost",
        "create",
        "cut",
        "dance",
        "deal",
        "decide",
        "delete",
        "deliver",
        "depend",
        "deploy",
        "describe",
        "design",
        "die",
        "discover",
        "discuss",
        "dislike",
        "do",
        "draw",
        "dream",
        "drink",
        "drive",
        "drop",
        "eat",
        "enjoy",
        "enter",
        "explain",
        "fail",
        "fall",
        "feel",
        "fight",
        "fill",
        "find",
        "finish",
        "fit",
        "fix",
        "fly",
        "follow",
        "forget",
        "found",
        "get",
        "give",
        "go",
        "graduate",
        "grow",
        "hate",
        "have",
        "hear",
        "help",
        "hike",
        "hire",
        "hit",
        "hold",
        "hope",
        "host",
        "hurt",
        "identify",
        "implement",
        "improve",
        "include",
        "install",
        "introduce",
        "invite",
        "join",
        "keep",
        "kill",
        "know",
        "land",
        "last",
        "learn",
        "leave",
        "let",
        "like",
        "listen",
        "live",
        "look",
        "lose",
        "love",
        "make",
        "marry",
        "mean",
        "meet",
        "merge",
        "migrate",
        "miss",
        "move",
        "name",
        "need",
        "open",
        "organize",
        "own",
        "paint",
        "pass",
        "pay",
        "pick",
        "plan",
        "play",
        "practice",
        "prefer",
        "prepare",
        "promote",
        "publish",
        "put",
        "quit",
        "reach",
        "read",
        "realize",
        "receive",
        "recommend",
        "record",
        "reduce",
        "refactor",
        "release",
        "remember",
        "remove",
        "rename",
        "rent",
        "repair",
        "replace",
        "report",
        "require",
        "resolve",
        "rest",
        "retire",
        "return",
        "review",
        "ride",
        "run",
        "save",
        "say",
        "schedule",
        "see",
        "seem",
        "sell",
        "send",
        "serve",
        "set",
        "share",
        "ship",
        "show",
        "sign",
        "sing",
        "sit",
        "sleep",
        "solve",
        "speak",
        "spend",
        "start",
        "stay",
        "stop",
        "struggle",
        "study",
        "succeed",
        "suggest",
        "support",
        "swim",
        "switch",
        "take",
        "talk",
        "teach",
        "tell",
        "test",
        "think",
        "throw",
        "train",
        "travel",
        "try",
        "turn",
        "understand",
        "upgrade",
        "use",
        "visit",
        "volunteer",
        "wait",
        "grab",
        "drag",
        "ruin",
        "pack",
        "overpack",
        "hand",
        "wake",
        "walk",
        "want",
        "watch",
        "wear",
        "win",
        "wish",
        "work",
        "worry",
        "write",
    ]
)
_IRREGULAR_PAST = frozenset(
    [
        "became",
        "began",
        "bought",
        "brought",
        "built",
        "came",
        "caught",
        "chose",
        "did",
        "drank",
        "drew",
        "drove",
        "ate",
        "fell",
        "felt",
        "fought",
        "found",
        "flew",
        "forgot",
        "got",
        "gave",
        "went",
        "grew",
        "had",
        "heard",
        "held",
        "hurt",
        "kept",
        "knew",
        "left",
        "lent",
        "lost",
        "made",
        "meant",
        "met",
        "paid",
        "put",
        "quit",
        "read",
        "rode",
        "ran",
        "said",
        "saw",
        "sold",
        "sent",
        "set",
        "showed",
        "sat",
        "slept",
        "spoke",
        "spent",
        "stood",
        "swam",
        "took",
        "taught",
        "told",
        "thought",
        "threw",
        "understood",
        "woke",
        "wore",
        "won",
        "wrote",
        "gone",
        "done",
        "seen",
        "taken",
        "given",
        "known",
        "written",
        "broken",
        "chosen",
        "broke",
        "blew",
        "dug",
        "fed",
        "forgave",
        "froze",
        "hid",
        "hung",
        "rang",
        "shook",
        "sang",
        "sank",
        "slid",
        "spun",
        "stole",
        "stuck",
        "struck",
        "swore",
        "swung",
        "wept",
        "forgotten",
        "eaten",
        "fallen",
        "driven",
        "ridden",
        "stolen",
        "begun",
        "sung",
    ]
)
_NOT_VERBS = frozenset(
    [
        "this",
        "his",
        "its",
        "yes",
        "less",
        "unless",
        "always",
        "perhaps",
        "news",
        "bus",
        "gas",
        "was",
        "thus",
        "chaos",
        "series",
        "analysis",
        "status",
        "process",
        "class",
        "address",
        "business",
        "across",
        "plus",
    ]
)


_SUBJECTS = frozenset(["i", "he", "she", "it", "they", "we", "you", "this", "that", "there"])


#: Words that take a verb's contraction: "there's", "it's", "they're", "we've", "I'm", "she'd".
_CONTRACTED = re.compile(
    r"^(?:i|you|he|she|it|we|they|there|here|that|this|what|who|where|everything|nothing|something|everyone|"
    r"someone|nobody|let)['’](?:s|re|ve|ll|d|m)$"
)


def _is_verb(word: str) -> bool:
    w = word.lower().strip("'’")
    if w in _AUX or w in _IRREGULAR_PAST or w in _VERBS:
        return True
    if w.endswith(("n't", "n’t")) or _CONTRACTED.match(w):
        return True
    if w in _NOT_VERBS or len(w) < 4:
        return False
    # an inflection's stem: "likes", "loved" → "like"/"love"; "watches", "played"; "tries" (never "signal" → "sign",
    # "teacher" → "teach": a noun that merely starts with a verb)
    stems = (
        w[:-1] if w.endswith(("s", "d")) else "",
        w[:-2] if w.endswith(("es", "ed")) else "",
        w[:-3] + "y" if w.endswith(("ies", "ied")) else "",
    )
    if any(stem in _VERBS for stem in stems if stem):
        return True
    if w.endswith("ed") and len(w) > 4:
        return True
    if w.endswith("ing") and len(w) > 5:
        return w[:-3] in _VERBS or w[:-3] + "e" in _VERBS or (len(w) > 6 and w[-4] == w[-5] and w[:-4] in _VERBS)
    return False


_HE_SHE_IT = frozenset(["he", "she", "it", "who", "which", "that", "this", "everyone", "nobody", "someone"])
_BETWEEN = frozenset(["always", "never", "often", "still", "also", "just", "really", "usually", "sometimes", "even"])
_DETERMINERS = frozenset(["the", "a", "an", "my", "our", "your", "his", "her", "their", "its", "some", "no", "every"])


#: Words after which the next one is a noun, not a verb: "no phone signal", "a walk", "the plan", "every call".
#: ("her", "this" and "that" also stand alone before a verb: "let her go", "that works".)
_NOUN_NEXT = frozenset(
    ["the", "a", "an", "my", "our", "your", "his", "its", "their", "some", "no", "every", "each", "any", "another",
     "these", "those"]
)  # fmt: skip


def _verb_at(words: list[str], index: int, agreeing: bool = True) -> bool:
    """Whether ``words[index]`` is a verb where it stands: a known verb form not right after a determiner
    (``the plan``, ``no signal``), or (``agreeing``) an ``-s`` verb agreeing with its subject (:func:`_agrees`)."""
    if index > 0 and (words[index - 1].lower() in _NOUN_NEXT or words[index] == "May"):
        return False  # "the plan", "no signal"; "on 8 May" is the month (the modal opens a question: "May I")
    return _is_verb(words[index]) or (agreeing and _agrees(words, index))


def _agrees(words: list[str], index: int) -> bool:
    """A verb in ``-s`` after its subject: ``it grabs``, ``she always overpacks``, ``Maya never drags``."""
    w = words[index].lower()
    if len(w) < 4 or not w.endswith("s") or w.endswith(("ss", "us", "is", "'s", "’s")) or w in _NOT_VERBS:
        return False
    at = index - 1
    while at >= 0 and (words[at].lower() in _BETWEEN or (words[at].lower().endswith("ly") and len(words[at]) > 4)):
        at -= 1
    if at < 0:
        return False
    before = words[at]
    named = before[:1].isupper() and before.lower() not in _DETERMINERS and before != "I"
    return before.lower() in _HE_SHE_IT or (named and (at > 0 or at < index - 1))  # "Home runs": no name


def fragment_reason(text: str) -> str | None:
    """Why ``text`` is a fragment rather than a statement (``None``: it is a complete statement)."""
    stripped = " ".join(text.split())
    if not stripped:
        return "empty"
    if _HEADING.search(stripped):
        return "heading"
    if _BULLET.match(stripped):
        return "list stub"
    if _TOOL.search(stripped):
        return "tool noise"
    if _CODE.search(stripped):
        return "code"
    symbols = sum(stripped.count(c) for c in "(){}[]=<>;|\\$#@`")
    if symbols >= 4 and symbols > 0.06 * len(stripped):
        return "code"
    if _ELLIPSIS.search(stripped):
        return "unfinished"
    cjk = len(_CJK.findall(stripped))
    if cjk * 2 >= len(stripped.replace(" ", "")):
        if cjk < 4:
            return "too short"
        return None if _END.search(stripped) or stripped[-1] in "。！？" else "unfinished"
    words = _WORD.findall(re.sub(r"\([^()]*\)", " ", stripped))  # a parenthesis is no part of the clause
    if len(words) < 3:
        return "too short"
    if not _END.search(stripped):
        return "unfinished"
    verbs = [i for i in range(len(words)) if _verb_at(words, i)]
    if not verbs:
        return "no verb"
    first = words[0].lower()
    if verbs[0] == 0 and first not in ("there", "here") and not _CONTRACTED.match(first.replace("’", "'")):
        later = any(words[v - 1].lower() in _SUBJECTS or words[v - 1][:1].isupper() for v in verbs[1:])
        if not later:
            return "no subject"
    return None


def has_verb(text: str) -> bool:
    """Whether ``text`` (English) holds a verb the checker knows, a parenthesis left out."""
    words = _WORD.findall(re.sub(r"\([^()]*\)", " ", text))
    return any(_verb_at(words, i) for i in range(len(words)))


def is_fragment(text: str) -> bool:
    """Whether ``text`` fails :func:`fragment_reason`."""
    return fragment_reason(text) is not None


_GREETING = re.compile(
    r"^(?:hi|hello|hey|hiya|yo|howdy|good (?:morning|afternoon|evening|night|day)|long time no (?:see|chat|talk|speak)|"
    r"how are you|how have you been|how'?s it going|what'?s up|nice to (?:see|meet|hear from) you|bye|goodbye|"
    r"see you|see ya|talk (?:to you )?(?:soon|later|tomorrow)|speak soon|take care|catch you later|"
    r"have a (?:good|great|nice|lovely) (?:one|day|night|evening|weekend|trip))\b",
    re.I,
)
_THANKS = re.compile(r"^(?:thanks|thank you|thx|cheers|much appreciated|i appreciate (?:it|that|you))\b", re.I)
_WISHES = re.compile(
    r"^(?:congrats|congratulations|happy (?:birthday|anniversary|holidays|new year|\w+ day)|merry christmas|"
    r"good luck|best of luck|best wishes|fingers crossed|have fun|enjoy|safe travels|get well soon|feel better|"
    r"well done|bon voyage)\b",
    re.I,
)
_TEASE = re.compile(r"^you and your\b", re.I)
#: The words a reaction is made of: pointing back ("that", "it"), linking verbs, intensifiers, and the
#: evaluations and set nouns people answer news with ("a big step", "such a shame").
_REACTION_WORDS = frozenset(
    re.findall(
        r"\S+",
        """a an the that that's thats this it it's its is was be been being sounds sound looks look seems seem like
    so soo sooo such what how really very pretty quite super totally absolutely truly just too real bit little kind
    sort of definitely seriously honestly must you you're your i i'm me am for to well done worth enough can't cannot
    wait imagine believe know knew hear heard love loved hate deserve deserved earned kidding joking serious wow oh
    no way yes yeah yay hooray ugh oops haha lol omg gosh goodness god my oh ah aw aww hmm same here agreed exactly
    indeed course sure okay ok fine brilliant amazing awesome great good nice cool wonderful fantastic fabulous
    incredible lovely beautiful perfect excellent impressive exciting excited interesting fun funny hilarious crazy
    insane wild huge big massive sweet cute adorable sad terrible awful horrible rough tough hard scary brave smart
    clever wise true fair right wrong weird strange unbelievable epic stunning gorgeous happy glad proud sorry jealous
    thrilled delighted relieved impressed bad worse worst best better legendary classic typical iconic deal plan
    idea step news thing shame pity relief bummer surprise joke story point move achievement milestone day question
    choice call treat luck blast vibe vibes not yet clue either dream""",
    )
)
_SAYS_WHAT = re.compile(
    r"\b(?:[Ii]|[Mm]y|[Ww]e|[Oo]ur|[Mm]e|[Uu]s|mine|yesterday|today|tonight|tomorrow|week|weekend|month|year|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    re.I,
)


_NUMBER_WORDS = frozenset(
    re.findall(
        r"\S+",
        """one two three four five six seven eight nine ten eleven twelve twenty thirty hundred thousand million
        half first second third fourth fifth dozen""",
    )
)


def _names_something(words: list[str], names: set[str], spelt: bool = False) -> bool:
    """A proper noun (past the first word, not one of ``names``) or a number among ``words`` (``spelt``: a
    number in words too)."""
    return any(
        w[:1].isdigit()
        or (spelt and w.lower() in _NUMBER_WORDS)
        or (i > 0 and w[:1].isupper() and w.lower() not in names and w != "I")
        for i, w in enumerate(words)
    )


def _says_something(rest: str, names: set[str]) -> bool:
    """Whether what follows a greeting, thanks or wish tells something: a verb outside a reaction's words
    ("… for helping me move"), a proper noun or a number."""
    words = _WORD.findall(rest)
    if _names_something(["", *words], names) or any(c.isdigit() for c in rest):
        return True
    return any(_is_verb(w) and w.lower() not in _REACTION_WORDS for w in words)


def small_talk_reason(sentence: str, names: Iterable[str] = ()) -> str | None:
    """Why ``sentence``, said in a chat, holds nothing to remember (``None``: it may hold a fact).

    ``names`` are the people talking (``"Good luck, Maya!"`` is a wish all the same); see the module
    docstring for the reasons.  Judged on the sentence as said, before it is told in the third person.
    """
    text = " ".join(sentence.split()).strip()
    if not text or len(_CJK.findall(text)) * 2 >= len(text.replace(" ", "")):
        return None
    known = {n.lower() for name in names for n in name.split()}
    for reason, pattern in (("greeting", _GREETING), ("thanks", _THANKS), ("wishes", _WISHES)):
        found = pattern.match(text)
        if found and not _says_something(text[found.end() :], known):
            return reason
    words = _WORD.findall(text)
    if not words or len(words) > 12 or any(c.isdigit() for c in text):
        return None
    lowered = [w.lower().replace("’", "'") for w in words]
    if all(w in _REACTION_WORDS or w in known for w in lowered):
        return "reaction"
    content = re.sub(r"\([^()]*\)", " ", text)
    content_words = _WORD.findall(content)
    verbless = not any(_verb_at(content_words, i, agreeing=False) for i in range(len(content_words)))
    if _TEASE.match(text) and verbless:
        return "reaction"
    if verbless and not _SAYS_WHAT.search(text):
        if text.rstrip("\"'’”)] ").endswith("!"):  # a cry: a number in words is part of it ("After three years!")
            return None if _names_something(words, known) else "exclamation"
        if len(words[0]) > 5 and words[0].lower().endswith("ing"):
            return None  # "Practising with the app until then": an "-ing" verb the lists lack, the speaker's
        return None if _names_something(words, known, spelt=True) else "remark"
    return None

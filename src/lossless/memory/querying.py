"""What a memory query asks for beyond its words: tag filters and synonym expansion.

Invariants:

* **Tags are exact.**  A query word ``PREFIX:value`` whose prefix is one of
  the configured tag prefixes (``memory_tag_prefixes``, case-insensitive) is a
  filter, not a search term: only memories holding that tag — as a word of
  their text, or in ``metadata["tags"]`` — are returned.  Several tags must
  all be held.  The rest of the query is what is searched; a query of tags
  alone searches for the tags' words.
* **Expansion only adds.**  :func:`expand` appends at most :data:`MAX_ADDED`
  synonyms of the query's words (English and Chinese, from a small fixed
  table) for the keyword side of a search; it never removes or reorders a word,
  and a query with nothing to expand comes back unchanged.
* **Names are what the query calls by name.**  :func:`names` returns its
  capitalised words (``Maya``, ``Kubernetes``; a possessive ``'s`` dropped)
  that are not question or function words, for the ranking's name stage.
* **A query is text.**  :func:`check_query` refuses (``InputError``) anything but non-empty text of
  at most :data:`MAX_QUERY_CHARS` characters that encodes as UTF-8 (no lone surrogate).
* Pure: no I/O, deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lossless.errors import InputError
from lossless.memory.records import Memory
from lossless.text import WORD

__all__ = ["MAX_ADDED", "MAX_QUERY_CHARS", "TagQuery", "check_query", "expand", "holds_tags", "names", "split_tags"]

MAX_ADDED = 5

# Groups of words that name the same thing; a query word found in a group brings the others.
_GROUPS: tuple[tuple[str, ...], ...] = (
    ("bug", "error", "issue", "defect", "错误", "问题"),
    ("fix", "repair", "patch", "修复"),
    ("config", "configuration", "settings", "配置", "设置"),
    ("db", "database", "数据库"),
    ("deploy", "deployment", "release", "部署", "发布"),
    ("test", "tests", "testing", "测试"),
    ("doc", "docs", "documentation", "文档"),
    ("prefer", "preference", "likes", "偏好", "喜欢"),
    ("meeting", "call", "sync", "会议"),
    ("deadline", "due", "截止"),
    ("user", "customer", "用户", "客户"),
    ("password", "credential", "secret", "密码"),
    ("server", "host", "服务器"),
    ("slow", "latency", "performance", "性能", "慢"),
)
_SYNONYMS: Mapping[str, tuple[str, ...]] = {
    word: tuple(w for w in group if w != word) for group in _GROUPS for word in group
}
_NAME = re.compile(r"\b[A-Z][\w-]+(?:'s|’s)?")
_NOT_NAMES = frozenset(
    """what which who whom whose when where why how did does do is are was were can could should would will
    have has had the an in on at of for to and or but if my our your their his her its this that these
    those there here please tell show find list give""".split()  # noqa: SIM905
)
_CJK_WORDS = sorted((w for w in _SYNONYMS if not w.isascii()), key=len, reverse=True)


@dataclass(frozen=True, slots=True)
class TagQuery:
    """A query split into what is searched and the tags every result must hold (lower case)."""

    text: str
    tags: tuple[str, ...] = ()


def split_tags(query: str, prefixes: Sequence[str]) -> TagQuery:
    """Take the ``PREFIX:value`` tag words of ``query`` out (see the module docstring)."""
    if not prefixes or ":" not in query:
        return TagQuery(query)
    wanted = {p.lower() for p in prefixes}
    tags: list[str] = []
    rest: list[str] = []
    for word in query.split():
        prefix, colon, value = word.partition(":")
        if colon and value and prefix.lower() in wanted:
            tags.append(f"{prefix.lower()}:{value.lower()}")
        else:
            rest.append(word)
    if not tags:
        return TagQuery(query)
    text = " ".join(rest) or " ".join(t.replace(":", " ") for t in tags)
    return TagQuery(text, tuple(dict.fromkeys(tags)))


def holds_tags(memory: Memory, tags: Sequence[str]) -> bool:
    """Whether ``memory`` holds every one of ``tags`` (as a word of its text, or in ``metadata["tags"]``)."""
    if not tags:
        return True
    listed = memory.metadata.get("tags") if memory.metadata else None
    held = {str(t).lower() for t in listed} if isinstance(listed, list | tuple) else set()
    text = f"{memory.abstract}\n{memory.overview}\n{memory.content}".lower()
    words = set(text.split()) | {w.strip(".,;()[]\"'") for w in text.split()}
    return all(tag in held or tag in words for tag in tags)


def names(query: str) -> tuple[str, ...]:
    """The names ``query`` holds, lower case, in order (see the module docstring)."""
    found: list[str] = []
    for match in _NAME.finditer(query):
        word = re.sub(r"(?:'s|’s)$", "", match.group(0)).lower()
        if word not in _NOT_NAMES and word not in found:
            found.append(word)
    return tuple(found)


def expand(query: str) -> str:
    """``query`` with at most :data:`MAX_ADDED` synonyms of its words appended (see the module docstring)."""
    words = [w.lower() for w in WORD.findall(query)]  # \w covers CJK ideographs too
    words += [w for w in _CJK_WORDS if w in query]
    present = set(words)
    added: list[str] = []
    for word in words:
        for synonym in _SYNONYMS.get(word, ()):
            if synonym not in present and synonym not in added:
                added.append(synonym)
    added = added[:MAX_ADDED]
    return f"{query} {' '.join(added)}" if added else query


MAX_QUERY_CHARS = 8000


def check_query(query: object) -> None:
    """Refuse a query that is not non-empty text of at most :data:`MAX_QUERY_CHARS` valid Unicode characters."""
    if not isinstance(query, str) or not query.strip():
        raise InputError("the search query must be non-empty text")
    if len(query) > MAX_QUERY_CHARS:
        raise InputError(f"the search query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"the search query holds invalid Unicode (a lone surrogate at position {exc.start})") from exc

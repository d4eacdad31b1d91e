"""Searching the contents of stored large files (``lcm_grep`` with ``scope="files"``).

Large files are stored aside at ingest (see :mod:`lossless.large_files`); their bytes live in the
blob store, not in the search index, so this search reads them: the files of the conversations in
reach, newest first, each decoded and matched line by line.

Invariants:

* **Only the conversations passed in.**  Files are listed per conversation id (already checked
  against the caller's reach); another agent's files are never listed, so never read.
* **Linear time.**  ``regex`` runs on RE2 in multi-line mode (``^`` and ``$`` match at line
  boundaries) over the whole decoded text at once; ``full_text`` is the same safe query language as
  for messages, matched in memory: a line matches when it holds every term of one ``OR``
  alternative (words at the start of a word, ignoring case, so ``deploy`` finds ``deployed``;
  phrases with any whitespace between their words; CJK terms as substrings).  Both patterns are
  built from escaped literals or compiled by RE2, so no input can make them backtrack.
* **Text only.**  Content that is not UTF-8 (images, PDFs, other binary) is skipped, and so are
  files over :data:`MAX_FILE_BYTES`; the result's notes say how many and why.  A file whose bytes
  cannot be read (missing or altered blob) is skipped with a note, never an exception.
* A hit is one line: ``[file_…]``, its line number (1-based, as ``lcm_describe`` pages count
  them), and a snippet of that line around the first match.  ``limit`` and the output cap apply
  as for messages; ``more`` says whether matches were left out.
* No I/O beyond the :class:`~lossless.ports.Store` port and the ``read_file`` callable given.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any

from lossless.errors import InputError, LcmError
from lossless.ports import Store
from lossless.records import LargeFile
from lossless.retrieval.grep import GrepHit, GrepOptions, GrepResult, compile_regex, no_matches, snippet
from lossless.retrieval.query import FullTextQuery, QuerySyntax, Term, has_cjk, parse_full_text

__all__ = ["MAX_FILE_BYTES", "FileReader", "grep_files"]

#: Files larger than this are not searched (their size is known without reading them).
MAX_FILE_BYTES = 256 * 1024 * 1024
_PAGE = 500

FileReader = Callable[[LargeFile], Awaitable[bytes]]
#: Yields ``(start, end)`` of matches in a text, in order.
_Finder = Callable[[str], Iterator[tuple[int, int]]]
#: Whether a line (with where in it to point the snippet) matches.
_LineCheck = Callable[[str], "tuple[int, int] | None"]


def _term_pattern(term: Term) -> str:
    if term.phrase:
        body = r"\s+".join(re.escape(word) for word in term.text.split())
    else:
        body = re.escape(term.text)
    return body if has_cjk(term.text) else r"\b" + body


def _full_text_matcher(query: FullTextQuery) -> tuple[_Finder, _LineCheck]:
    """A finder of candidate spans (any term) and the exact per-line check (all terms of one group).

    The finder is RE2 over literals (a phrase's first word stands for it), case-insensitive: it
    only has to find a superset of the lines the check accepts, fast, over the whole text.
    """
    import re2

    groups = [[re.compile(_term_pattern(t), re.IGNORECASE) for t in group] for group in query.groups]
    literals = {(t.text.split() or [t.text])[0] if t.phrase else t.text for t in query.terms}
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = False
    anything = re2.compile("|".join(re2.escape(w) for w in sorted(literals, key=len, reverse=True)), options)

    def find(text: str) -> Iterator[tuple[int, int]]:
        for found in anything.finditer(text):
            yield found.start(), found.end()

    def check(line: str) -> tuple[int, int] | None:
        for group in groups:
            spans = [pattern.search(line) for pattern in group]
            if all(s is not None for s in spans):
                first = min((s for s in spans if s is not None), key=lambda s: s.start())
                return first.start(), first.end()
        return None

    return find, check


def _regex_finder(compiled: Any) -> _Finder:
    def find(text: str) -> Iterator[tuple[int, int]]:
        for found in compiled.finditer(text):
            yield found.start(), found.end()

    return find


def _matchers(options: GrepOptions) -> tuple[_Finder, _LineCheck | None] | str:
    """The finder and (full-text) line check for ``options``, or what is wrong with the pattern."""
    if options.mode == "regex":
        compiled, problem = compile_regex("(?m)" + options.pattern)
        if problem is not None:
            _, problem = compile_regex(options.pattern)  # report the user's own pattern
            return problem or "the pattern is not a valid regular expression"
        return _regex_finder(compiled), None  # a regex match is a match: no second check
    parsed = parse_full_text(options.pattern)
    if isinstance(parsed, QuerySyntax):
        return parsed.message
    return _full_text_matcher(parsed)


def _line_hits(text: str, find: _Finder, check: _LineCheck | None, want: int) -> list[tuple[int, str, int, int]]:
    """Up to ``want`` matching lines: ``(line number, line text, match start, match end)`` in order."""
    out: list[tuple[int, str, int, int]] = []
    line_no, counted_to = 1, 0
    next_line_at = -1  # matches before this offset lie on a line already taken or checked
    for start, end in find(text):
        if start < next_line_at:
            continue
        line_start = text.rfind("\n", 0, start) + 1
        newline = text.find("\n", start)
        line_end = len(text) if newline < 0 else newline
        next_line_at = line_end + 1
        line_no += text.count("\n", counted_to, line_start)
        counted_to = line_start
        line = text[line_start:line_end]
        if check is None:
            span: tuple[int, int] | None = (start - line_start, min(end, line_end) - line_start)
        else:
            span = check(line)
        if span is None:
            continue
        out.append((line_no, line, span[0], span[1]))
        if len(out) >= want:
            break
    return out


async def _files_in_reach(store: Store, options: GrepOptions, conversation_ids: tuple[int, ...]) -> list[LargeFile]:
    """Every file of the conversations within ``since``/``before``, newest first."""
    files: list[LargeFile] = []
    for conversation_id in conversation_ids:
        offset = 0
        while page := await store.list_large_files(conversation_id, limit=_PAGE, offset=offset):
            offset += len(page)
            files += [f for f in page if _in_range(f.created_at, options)]
            if len(page) < _PAGE:
                break
    return sorted(files, key=lambda f: (f.created_at, f.id), reverse=True)


def _in_range(when: datetime, options: GrepOptions) -> bool:
    return (options.since is None or when >= options.since) and (options.before is None or when < options.before)


async def grep_files(
    store: Store, options: GrepOptions, conversation_ids: tuple[int, ...], read_file: FileReader | None
) -> GrepResult:
    """Search the stored files of ``conversation_ids`` (already checked against the caller's reach)."""
    if options.scope != "files" or options.mode not in ("regex", "full_text"):
        raise InputError("grep_files runs regex and full-text searches with scope='files'")
    conversations = len(conversation_ids)
    matchers = _matchers(options)
    if isinstance(matchers, str):  # an invalid query is an error, never an empty result
        raise InputError(matchers)
    if read_file is None:
        return GrepResult(
            options, message="this search was set up without access to file contents", conversations=conversations
        )
    find, check = matchers
    hits: list[GrepHit] = []
    more = False
    binary: list[str] = []
    too_big: list[str] = []
    unreadable: list[str] = []
    searched = 0
    for file in await _files_in_reach(store, options, conversation_ids):
        if file.byte_size is not None and file.byte_size > MAX_FILE_BYTES:
            too_big.append(file.id)
            continue
        try:
            data = await read_file(file)
        except LcmError as exc:
            unreadable.append(f"{file.id} ({exc})")
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            binary.append(file.id)
            continue
        del data
        searched += 1
        for line_no, line, start, end in _line_hits(text, find, check, options.limit - len(hits) + 1):
            if len(hits) == options.limit:
                more = True
                break
            hits.append(
                GrepHit(
                    scope="files",
                    ref=file.id,
                    conversation_id=file.conversation_id,
                    created_at=file.created_at,
                    snippet=snippet(line, start, end),
                    kind=file.kind,
                    line=line_no,
                    name=file.name,
                )
            )
        if more:
            break
    notes = _notes(options, searched, binary, too_big, unreadable)
    if not hits:
        message = no_matches(options, conversations)
        if searched == 0 and not (binary or too_big or unreadable):
            when = " in that time range" if options.since is not None or options.before is not None else ""
            message = (
                f"no stored files{when} in {conversations} conversation{'s' if conversations != 1 else ''} "
                "(only payloads over large_file_token_threshold are stored as files); "
                "try scope='both' to search messages and summaries"
            )
        return GrepResult(options, message="\n".join([message, *notes]), conversations=conversations)
    return GrepResult(options, tuple(hits), conversations=conversations, more=more, notes=tuple(notes))


def _notes(
    options: GrepOptions, searched: int, binary: list[str], too_big: list[str], unreadable: list[str]
) -> list[str]:
    notes: list[str] = []
    if options.sort == "relevance":
        notes.append("(file matches are listed newest file first, lines in order; relevance order is for messages)")
    if binary:
        shown = ", ".join(binary[:5]) + (" …" if len(binary) > 5 else "")
        notes.append(
            f"({len(binary)} binary file{'s were' if len(binary) != 1 else ' was'} skipped: only text files are "
            f"searched; {shown})"
        )
    if too_big:
        notes.append(f"({len(too_big)} file(s) over {MAX_FILE_BYTES >> 20} MiB were skipped: {', '.join(too_big[:5])})")
    if unreadable:
        notes.append(f"({len(unreadable)} file(s) could not be read: {'; '.join(unreadable[:3])})")
    return notes

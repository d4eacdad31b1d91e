"""The offline summarizer: extractive, deterministic, no network and no key.

It reads the items of a segment (:attr:`~lossless.ports.SummaryRequest.items`: each message's
role, time and text as stored — never parsed back out of the rendered text, so a stored line that
looks like a segment header stays text) and keeps what a later turn is most likely to need, one
labelled line per item:

* ``Asked:`` what the user asked for; ``Decision:`` choices and their
  rationale (a "because …" sentence that follows a decision joins it);
  ``Error:`` failures, with the line that names them, and ``Done:`` what
  was achieved (never a question, nor a conditional "if it passes");
  ``Open:`` tasks still to do and questions still open;
* ``Ran:`` commands; ``Files:`` file operations with paths and their latest
  status (created, modified, deleted, renamed, read), or exactly
  ``Files: none``; ``Refs:`` identifiers — URLs, ticket ids, paths, hashes,
  versions, ports, exception names (not those in file contents) — each named
  once: not when a kept line or a longer ref (its path, its URL) names it;
  they are admitted after the asks, decisions, errors, results and open items
  and before commands, timeline and explanations, with up to a fifth of the
  room kept for them;
* condensed levels add ``Timeline:`` lines whose time grain coarsens with
  depth (d1: hours and minutes, d2: dates and time of day, d3+: dates or date
  ranges);
* the last line is always ``Expand for details about: …`` naming what was
  left out.

Invariants: the same request gives the same text; an item longer than a
line is cut at a sentence end, else a clause, else a word (marked ``…``); the result fits
``target_tokens`` (lines are dropped, lowest priority first, and named in the
footer; when the joined text still counts over, explanations, commands and the
timeline give way before identifiers); every line of the result comes from the sources (nothing is
invented beyond the labels and the timeline's time stamps).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import anyio.to_thread

from lossless.parts import EDIT_TOOLS, WRITE_TOOLS
from lossless.ports import SegmentItem, SummaryRequest, SummaryResult
from lossless.tokens import EstimatingCounter, TokenCounter

__all__ = ["OfflineSummarizer"]

_LINE_MAX = 240
_MAX_REFS = 64
_REF_CANDIDATES = 400  # the most frequent refs of a segment considered for its Refs line
_REFS_AFTER = 2  # the Refs line is filled after the sections of this priority and before the rest
_FIRST_DROPPED = ("Note: ", "Ran: ", "Timeline: ")  # the lines that give way first when a text is over
_REFS_SHARE = 5  # up to 1/5 of a summary's room is kept for its Refs line
_THREAD_ABOVE = 64_000  # characters: bigger segments are summarised in a worker thread

_TOOL_CALL = re.compile(r"^\[tool call: (?P<name>[^\]]+)\] (?P<input>.*)$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])")
_URL = re.compile(r"https?://[^\s)\]>\"'`,]+")
_TICKET = re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b")
_PATH = re.compile(
    r"(?:(?<=\s)|(?<=^)|(?<=[`'\"(]))(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+\.\w{1,8}\b|\b[\w-]+\.(?:py|ts|tsx|js|jsx|go|rs|java|c|h|cpp|rb|ex|exs|md|toml|yaml|yml|json|sql|sh|txt|lock|cfg|ini)\b"
)
# Short commit hashes (7-10 hex) and full ones (40); other hex runs are usually ids of no interest.
_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)(?:[0-9a-f]{7,10}|[0-9a-f]{40})\b")
_ERROR_NAME = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception)\b")
_VERSION = re.compile(r"\bv?\d+\.\d+\.\d+(?:[-.][\w.]+)?\b")
_PORT = re.compile(r"(?:localhost|127\.0\.0\.1|0\.0\.0\.0|port)[: ]\d{2,5}\b", re.I)
_ERROR = re.compile(
    r"\b\w*(?:Error|Exception)\b|Traceback|\bFAILED\b|\bfailed\b|\bfatal\b|\bpanic\b|No such file|"
    r"[Pp]ermission denied|[Ee]xit code [1-9]|exit status [1-9]|\bcannot\b|\bcan't\b|\bundefined\b|\bE\d{3}\b",
)
_RESOLVED = re.compile(
    r"\b(?:fixed|resolved|works now|working now|passes|passing|all tests pass|succeeded|\d+ passed|done|merged|"
    r"committed|green)\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(?:decided|decide|chose|choose|going with|go with|we'll use|will use|switch(?:ed)? to|instead of|"
    r"rather than|prefer|because|so that|trade-?off|approach|opted|settle[d]? on|plan is|the fix is)\b",
    re.I,
)
_OPEN = re.compile(
    r"\b(?:TODO|FIXME|next step|still need|remaining|not yet|follow[- ]up|later|pending|should also|"
    r"left to do|open question|blocked)\b",
    re.I,
)
_QUESTION = re.compile(r"\?[\"'’”)]*$|^(?:I'?m|I am) (?:wondering|not sure|curious)\b", re.I)
_REASON = re.compile(r"^(?:because|since|this is because|that'?s because|the reason|so that|otherwise)\b", re.I)
_TENTATIVE = re.compile(
    r"\b(?:if|whether|once|when|until|not yet|isn'?t|wasn'?t|not)\b[^.]*\b(?:done|fixed|passes|works)\b", re.I
)
_FOOTER = re.compile(r"^Expand for details about:\s*(.*)$", re.M)
_LABELS = ("Timeline", "Asked", "Decision", "Error", "Done", "Open", "Ran", "Files", "Refs", "Note")

_READ = {"read", "view", "open", "cat", "read_file", "readfile", "open_file", "glob", "ls", "grep", "search"}
_SHELL = {"bash", "shell", "sh", "run", "exec", "execute", "terminal", "run_command", "command"}
_PATH_KEYS = ("file_path", "path", "filename", "file", "notebook_path", "target_file", "target", "source")


@dataclass(slots=True)
class _Notes:
    """What was found in a segment, before it is cut to size."""

    asked: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    open: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> latest status
    refs: Counter[str] = field(default_factory=Counter)
    footer: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)


def _clip(text: str, limit: int = _LINE_MAX) -> str:
    """``text`` within ``limit`` characters, cut at a sentence end, else a clause, else a word (then ``…``)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[:limit]
    sentence = max(head.rfind(". "), head.rfind("! "), head.rfind("? "))
    if sentence >= limit // 2:
        return head[: sentence + 1]
    clause = max(head.rfind(", "), head.rfind("; "), head.rfind(" — "), head.rfind(" - "))
    if clause >= limit // 2:
        return head[:clause].rstrip(" ,;—-") + " …"
    return head[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + " …"


_CODE_LINE = re.compile(r"^(?:\s{2,}|\t|[-*>#|`$]|\d+[.)→] |\w+[:=(]\S)")


def _sentences(text: str) -> list[str]:
    """Sentences of prose; wrapped lines of a paragraph are joined, code-like lines stay whole."""
    out: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        lines = [line for line in paragraph.splitlines() if line.strip()]
        if not lines:
            continue
        if sum(1 for line in lines if _CODE_LINE.match(line)) * 2 > len(lines):
            chunks = lines  # mostly code, a list or a log: one item per line
        else:
            chunks = [" ".join(line.strip() for line in lines)]
        for chunk in chunks:
            chunk = chunk.strip(" \t-*>#")
            if chunk:
                out.extend(part.strip() for part in _SENTENCE.split(chunk) if part.strip())
    return out


def _add(items: list[str], value: str, limit: int = 400) -> None:
    value = _clip(value)
    if value and value not in items and len(items) < limit:
        items.append(value)


def _refs(text: str, into: Counter[str]) -> None:
    for pattern in (_URL, _TICKET, _PATH, _HASH, _VERSION, _PORT):
        for match in pattern.findall(text):
            token = match.strip(".,;:'\"`)")
            if 3 <= len(token) <= 160:
                into[token] += 1


def _error_names(text: str, into: Counter[str]) -> None:
    """Exception names (``ModuleNotFoundError``) met in prose or a command's output (not in file contents)."""
    for name in _ERROR_NAME.findall(text):
        into[name] += 1


def _tool_input(raw: str) -> dict[str, object]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {"command": raw}
    return value if isinstance(value, dict) else {"value": value}


def _path_of(args: dict[str, object]) -> str | None:
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _shell_files(command: str, files: dict[str, str]) -> None:
    for segment in re.split(r"&&|\|\||;|\n", command):
        words = segment.split()
        if not words:
            continue
        head = words[1] if words[0] == "git" and len(words) > 1 else words[0]
        args = [w for w in words[1 if words[0] != "git" else 2 :] if not w.startswith("-")]
        if head in ("rm", "unlink") and args:
            for path in args:
                files[path] = "deleted"
        elif head == "mv" and len(args) >= 2:
            files[args[0]] = f"renamed to {args[-1]}"
            files[args[-1]] = "created (renamed)"
        elif head in ("touch", "mkdir") and args:
            for path in args:
                files.setdefault(path, "created")


def _file_operation(name: str, args: dict[str, object], files: dict[str, str]) -> None:
    key = name.lower().replace("-", "_")
    path = _path_of(args)
    command = args.get("command")
    if key == "str_replace_editor" and isinstance(command, str):
        key = {"create": "create", "view": "view"}.get(command, "edit")
    if key in _SHELL and isinstance(command, str):
        _shell_files(command, files)
        return
    if path is None:
        return
    if key in WRITE_TOOLS:
        files[path] = "modified" if files.get(path) in ("created", "modified") else "created"
    elif key in EDIT_TOOLS:
        files[path] = "created" if files.get(path) == "created" else "modified"
    elif key in ("delete", "remove", "delete_file", "rm"):
        files[path] = "deleted"
    elif key in ("move", "rename", "mv"):
        destination = args.get("destination") or args.get("new_path") or args.get("to")
        files[path] = f"renamed to {destination}" if isinstance(destination, str) else "renamed"
    elif key in _READ:
        files.setdefault(path, "read")


def _prose(text: str) -> tuple[SegmentItem, ...]:
    """A request that came without items (a caller's own text): one headless item."""
    return (SegmentItem(ref="text", text=text.strip()),) if text.strip() else ()


def _scan_message(item: SegmentItem, notes: _Notes) -> None:  # noqa: C901 - one pass, one branch per kind of line
    notes.counts[item.role or "other"] += 1
    lines = item.text.splitlines()
    prose: list[str] = []
    for line in lines:
        call = _TOOL_CALL.match(line.strip())
        if call:
            name = call.group("name").strip()
            args = _tool_input(call.group("input"))
            notes.counts["tool calls"] += 1
            _file_operation(name, args, notes.files)
            command = args.get("command")
            if name.lower() in _SHELL and isinstance(command, str):
                _add(notes.ran, command.splitlines()[0])
            continue
        if line.startswith("[reasoning]"):
            notes.counts["reasoning"] += 1
            for sentence in _sentences(line.removeprefix("[reasoning]")):
                if _DECISION.search(sentence):
                    _add(notes.decisions, sentence)
            continue
        prose.append(line)
    text = "\n".join(prose)
    _refs(item.text, notes.refs)
    if item.role == "user" and not text.startswith("[tool"):
        _error_names(text, notes.refs)  # a pasted traceback names what failed
        sentences = _sentences(text)
        if sentences:
            _add(notes.asked, " ".join(sentences[:2]))
        for sentence in sentences[2:]:
            if _OPEN.search(sentence) or _DECISION.search(sentence):
                _add(notes.open if _OPEN.search(sentence) else notes.decisions, sentence)
        return
    if item.role == "tool" or text.startswith(("[tool result]", "[tool error]")):
        notes.counts["tool results"] += 1
        tools = {t.strip().lower() for t in (item.tool or "").split(",")}
        if tools and tools <= _READ | WRITE_TOOLS | EDIT_TOOLS and not text.startswith("[tool error]"):
            return  # file contents, search hits, edit confirmations: their words are data, not events
        _error_names(text, notes.refs)
        errors = [line.strip() for line in prose if _ERROR.search(line) and len(line.strip()) > 3]
        for line in errors[:2]:
            _add(notes.errors, line)
        for line in prose:
            if re.search(r"\b\d+ (?:passed|failed|errors?)\b", line):
                _add(notes.done if "failed" not in line and "error" not in line else notes.errors, line.strip())
        return
    _error_names(text, notes.refs)
    decided = False  # whether the sentence before was a decision (a reason that follows joins it)
    for sentence in _sentences(text):
        was_decision, decided = decided, False
        if _QUESTION.search(sentence):
            _add(notes.open, sentence)  # a question asked is open, never done or decided
        elif was_decision and _REASON.match(sentence) and notes.decisions:
            notes.decisions[-1] = _clip(f"{notes.decisions[-1]} {sentence}", 2 * _LINE_MAX)  # the why with the what
        elif _OPEN.search(sentence):
            _add(notes.open, sentence)
        elif _DECISION.search(sentence):
            _add(notes.decisions, sentence)
            decided = True
        elif _RESOLVED.search(sentence) and not _TENTATIVE.search(sentence):
            _add(notes.done, sentence)
        elif _ERROR.search(sentence) and len(sentence) < 200:
            _add(notes.errors, sentence)
        elif not notes.notes or len(notes.notes) < 3:
            _add(notes.notes, sentence)


def _scan_summary(item: SegmentItem, notes: _Notes, grain: int) -> None:
    """Read a child summary: our own labelled lines when present, else its sentences."""
    notes.counts["summaries"] += 1
    footer = _FOOTER.search(item.text)
    if footer:
        notes.footer.extend(p.strip() for p in footer.group(1).split(",") if p.strip())
    body = _FOOTER.sub("", item.text)
    headline = ""
    labelled = False
    for line in body.splitlines():
        label, _, value = line.partition(":")
        value = value.strip()
        if label in _LABELS and value:
            labelled = True
            if label == "Files":
                if value != "none":
                    for entry in value.split("; "):
                        path, _, status = entry.partition(" (")
                        notes.files[path.strip()] = status.rstrip(")") or "touched"
            elif label == "Refs":
                for ref in value.split(", "):
                    notes.refs[ref.strip()] += 1
            elif label == "Timeline":
                continue  # re-made below at this level's grain
            else:
                _refs(value, notes.refs)  # a child names an identifier in a line rather than in its Refs
                target = {
                    "Asked": notes.asked, "Decision": notes.decisions, "Error": notes.errors, "Done": notes.done,
                    "Open": notes.open, "Ran": notes.ran, "Note": notes.notes,
                }[label]  # fmt: skip
                _add(target, value)
                if not headline and label in ("Asked", "Done", "Note"):
                    headline = value
    if not labelled:
        fake = SegmentItem(item.ref, body, role="assistant")
        _scan_message(fake, notes)
        headline = next(iter(_sentences(body)), "")
    notes.timeline.append(f"{_grained(item.span or '', grain)}: {_clip(headline, 160)}")


_TIME = re.compile(r"(\d{4}-\d{2}-\d{2}) (\d{2}):(\d{2})")


def _grained(span: str, depth: int) -> str:
    """A summary's time span at the grain of a node of ``depth``."""
    times = _TIME.findall(span)
    if not times:
        return span.strip() or "undated"
    (d1, h1, m1), (d2, h2, m2) = times[0], times[-1]
    if depth <= 1:
        return f"{d1} {h1}:{m1}–{h2}:{m2}" if d1 == d2 else f"{d1} {h1}:{m1} – {d2} {h2}:{m2}"
    if depth == 2:
        part = ("night", "morning", "afternoon", "evening")
        first, last = part[int(h1) // 6], part[int(h2) // 6]
        return f"{d1} {first}" + ("" if (d1, first) == (d2, last) else f" – {d2} {last}")
    return d1 if d1 == d2 else f"{d1} – {d2}"


def _time_line(request: SummaryRequest, notes: _Notes) -> str:
    def stamp(value: datetime | None) -> str:
        return f"{value:%Y-%m-%d %H:%M} UTC" if value else "?"

    counts = ", ".join(f"{n} {kind}" for kind, n in notes.counts.most_common() if kind in _COUNTED)
    return f"Time: {stamp(request.earliest_at)} – {stamp(request.latest_at)}" + (f" ({counts})" if counts else "")


_COUNTED = ("user", "assistant", "tool results", "tool calls", "summaries")


class OfflineSummarizer:
    """Deterministic extractive summaries (see the module docstring)."""

    provider = "offline"
    model: str | None = "extractive-1"

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter = counter or EstimatingCounter()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if len(request.text) > _THREAD_ABOVE:
            text = await anyio.to_thread.run_sync(self.summarize_text, request)
        else:
            text = self.summarize_text(request)
        return SummaryResult(
            text,
            self.provider,
            self.model,
            input_tokens=self.counter.count(request.text),
            output_tokens=self.counter.count(text),
        )

    def summarize_text(self, request: SummaryRequest) -> str:
        notes = _Notes()
        for item in request.items or _prose(request.text):
            if item.is_message or request.kind == "leaf":
                _scan_message(item, notes)
            else:
                _scan_summary(item, notes, request.depth)
        if request.policy == "aggressive":
            notes.asked = notes.asked[-3:]
            notes.notes = []
            notes.ran = notes.ran[:3]
        return self._compose(request, notes)

    # ------------------------------------------------------------------ fitting to the target

    def _compose(self, request: SummaryRequest, notes: _Notes) -> str:
        files = [f"{path} ({status})" for path, status in notes.files.items() if status != "read"]
        read = [path for path, status in notes.files.items() if status == "read"]
        refs = _distinct_refs(notes.refs, [path for path, status in notes.files.items() if status != "read"])
        # (label, items, priority): lower priority numbers are kept first.
        sections: list[tuple[str, list[str], int]] = [
            ("Asked", notes.asked, 2),
            ("Timeline", notes.timeline, 3),
            ("Decision", notes.decisions, 1),
            ("Error", notes.errors, 1),
            ("Done", notes.done, 2),
            ("Open", notes.open, 1),
            ("Ran", notes.ran, 4),
            ("Note", notes.notes, 5),
        ]
        head = _time_line(request, notes)
        files_line = "Files: " + ("; ".join(files) if files else "none")
        budget = max(32, request.target_tokens)
        used = self.counter.count(head) + self.counter.count(files_line) + 24  # 24: room for the footer
        kept: dict[str, list[str]] = {label: [] for label, _, _ in sections}
        dropped: Counter[str] = Counter()
        # Round-robin, admitting lower-priority sections step by step, so every section gets its first
        # items before any gets many.  An item that does not fit is skipped, not retried.  The
        # identifiers (Refs) come after the priority-1 and -2 sections and before the commands, the
        # timeline and the explanations: prose can be re-read by expanding, a path must be known to
        # be looked for.
        position = {label: 0 for label, _, _ in sections}
        refs_kept: list[str] = []
        named = 0  # refs left out because a kept line names them
        # A share of the room stays for the identifiers, so that many decisions or errors cannot crowd
        # every one of them out.
        reserve = min(sum(self.counter.count(ref) + 1 for ref in refs[:_MAX_REFS]), (budget - used) // _REFS_SHARE)
        for priority in range(1, 6):
            room = budget - reserve if priority <= _REFS_AFTER else budget
            progressed = True
            while progressed:
                progressed = False
                for label, items, rank in sections:
                    if rank > priority or position[label] >= len(items):
                        continue
                    item = items[position[label]]
                    position[label] += 1
                    progressed = True
                    cost = self.counter.count(f"{label}: {item}") + 1
                    if used + cost <= room:
                        kept[label].append(item)
                        used += cost
            if priority == _REFS_AFTER:
                said = "\n".join([files_line, *(item for items in kept.values() for item in items)])
                for ref in refs:
                    if len(refs_kept) >= _MAX_REFS:
                        break
                    if ref in said:
                        named += 1
                        continue  # already named by a kept line
                    cost = self.counter.count(ref) + 1
                    if used + cost <= budget:
                        refs_kept.append(ref)
                        used += cost
        for label, items, _ in sections:
            dropped[label] += len(items) - len(kept[label])
        lines = [head]
        for label, _, _ in sections:
            lines += [f"{label}: {item}" for item in kept[label]]
        lines.append(files_line)
        if refs_kept:
            lines.append("Refs: " + ", ".join(refs_kept))
        lines.append("Expand for details about: " + _footer(notes, dropped, len(refs) - len(refs_kept) - named, read))
        return self._fit(lines, budget, head_short=head.split(" (")[0])

    def _fit(self, lines: list[str], budget: int, *, head_short: str) -> str:
        """Drop optional lines, then shorten the mandatory ones, until the text fits.

        The explanations, commands and timeline go first (the last of each first), then identifiers
        from the end of the Refs line, then the other optional lines from the end.
        """
        text = "\n".join(lines)
        for label in _FIRST_DROPPED:
            while self.counter.count(text) > budget:
                at = next((i for i in range(len(lines) - 2, 0, -1) if lines[i].startswith(label)), None)
                if at is None:
                    break
                lines.pop(at)
                text = "\n".join(lines)
        if lines[-2].startswith("Refs: "):
            refs = lines[-2].removeprefix("Refs: ").split(", ")
            over = self.counter.count(text) - budget
            while len(refs) > 1 and over > 0:
                while len(refs) > 1 and over > 0:  # drop about as many as the excess, then count again
                    over -= self.counter.count(refs.pop()) + 1
                lines[-2] = "Refs: " + ", ".join(refs)
                text = "\n".join(lines)
                over = self.counter.count(text) - budget
        while self.counter.count(text) > budget:
            if lines[-2].startswith("Refs:"):
                lines.pop(-2)
            elif len(lines) > 3:
                lines.pop(-3)  # the last optional line before Files (the time, Files and footer stay)
            else:
                break
            text = "\n".join(lines)
        if self.counter.count(text) <= budget:
            return text
        lines[0] = head_short
        for index in (-1, -2):  # the footer, then the Files line: keep as many items as fit
            label, _, items = lines[index].partition(": ")
            pieces = items.split(", " if index == -1 else "; ")
            while len(pieces) > 1 and self.counter.count("\n".join(lines)) > budget:
                pieces.pop()
                lines[index] = f"{label}: {(', ' if index == -1 else '; ').join(pieces)} …"
        return "\n".join(lines)


_WHAT = {
    "Asked": "earlier requests",
    "Timeline": "timeline entries",
    "Decision": "decisions",
    "Error": "error details",
    "Done": "results",
    "Open": "open items",
    "Ran": "commands",
    "Note": "explanations",
}


def _footer(notes: _Notes, dropped: Counter[str], refs_dropped: int, read: Sequence[str]) -> str:
    parts: list[str] = []
    if notes.counts["tool results"]:
        parts.append(f"full output of {notes.counts['tool results']} tool results")
    if notes.counts["reasoning"]:
        parts.append("the model's reasoning")
    parts += [f"{n} more {_WHAT[label]}" for label, n in dropped.items() if n > 0]
    if refs_dropped > 0:
        parts.append(f"{refs_dropped} more identifiers")
    if read:
        parts.append(f"contents of {len(read)} files read ({', '.join(list(read)[:3])}{'…' if len(read) > 3 else ''})")
    parts += _unique(notes.footer)[:6]
    return ", ".join(_unique(parts)) or "exact wording of the messages"


def _distinct_refs(refs: Counter[str], files: Sequence[str]) -> list[str]:
    """``refs`` most frequent first, without the files listed and without any contained in another ref.

    A ref inside a longer one (``fields.py`` in ``src/marshmallow/fields.py``, a ticket in its URL)
    is named whenever the longer one is, so it would only take room; the longer one takes the better
    of the two ranks, so that the shorter one's frequency still counts.
    """
    listed = set(files)
    ranked = [ref for ref, _ in refs.most_common(_REF_CANDIDATES) if ref not in listed]
    joined = "\n".join([*ranked, *files])
    whole = {ref: rank for rank, ref in enumerate(ranked) if joined.count(ref) == 1}
    for rank, ref in enumerate(ranked):
        if ref not in whole:
            holder = next((other for other in whole if ref in other), None)  # best-ranked first
            if holder is not None and rank < whole[holder]:
                whole[holder] = rank
    return sorted(whole, key=whole.__getitem__)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))

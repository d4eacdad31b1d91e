#!/usr/bin/env python3
# ruff: noqa: E501  (the fictional files and tool output below are kept verbatim, long lines included)
"""Write lossless's bundled demo session and the transcript-reader test fixtures.

Every word in these files is invented for lossless: the fictional ``tollgate``
service, its developer, the bug (RL-482) and all tool output.  Only the *shape*
of each format follows the real transcripts in ``shared/corpus`` (see its
SOURCES.md); no content is copied from them.

Output (relative to the repository root):

* ``examples/sample-session.jsonl`` -- a two-hour Claude Code session in which a
  developer and the agent find and fix a rate limiter that double-counts
  requests after midnight (one host compaction half-way through).
* ``tests/fixtures/{claude-code,pi,openclaw,swe-agent,openai-chat}/...`` -- small,
  hand-shaped files that exercise each reader.
* ``tests/fixtures/bad/...`` -- corrupt files each reader must reject with the
  right line number, plus one valid file with an escaped NUL and a folder with
  no transcripts at all.

The output is deterministic: a fixed seed, fixed timestamps, sorted nothing
left to chance.  Running the script twice gives byte-identical files.

Usage::

    python scripts/make_fixtures.py            # writes into this checkout
    python scripts/make_fixtures.py --root DIR # writes under DIR instead
    python scripts/make_fixtures.py --check    # exit 1 if a committed file differs from what this writes

The files are committed; CI (``.ci/run``) runs ``--check``, so a hand edit of a fixture that the
script would not reproduce (or a script change whose output was not committed) fails the build.
"""

from __future__ import annotations

import argparse
import base64
import difflib
import fnmatch
import hashlib
import json
import random
import re
import struct
import textwrap
import uuid
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SEED = 482
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


# ----------------------------------------------------------------------------- small helpers


def dumps(record: Any) -> str:
    """One JSONL line the way the agents write them: compact, UTF-8 kept as is."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def write_jsonl(path: Path, records: Iterable[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for record in records:
            fh.write(dumps(record) + "\n")


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.write(data)


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def iso_ms(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def epoch_ms(stamp: str) -> int:
    return round(epoch(stamp) * 1000)


class Ids:
    """Deterministic ids in the shapes the agents use (uuid4, msg_…, toolu_…, req_…)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def b62(self, n: int) -> str:
        return "".join(self.rng.choice(_B62) for _ in range(n))

    def hex(self, n: int) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(n))

    def msg_id(self) -> str:
        return "msg_01" + self.b62(22)

    def tool_id(self) -> str:
        return "toolu_01" + self.b62(22)

    def request_id(self) -> str:
        return "req_011C" + self.b62(20)

    def signature(self) -> str:
        return base64.b64encode(self.rng.randbytes(self.rng.randint(150, 320))).decode()

    def address(self) -> str:
        return "0x7f" + self.hex(9) + "0"


class Clock:
    """Session time: moves forward only, with a little deterministic jitter."""

    def __init__(self, start: str, seed: int) -> None:
        self.now = datetime.fromisoformat(start.replace("Z", "+00:00"))
        self.rng = random.Random(seed)

    def tick(self, seconds: float, spread: float = 0.4) -> str:
        jitter = self.rng.uniform(0, spread * seconds) if spread else 0.0
        self.now += timedelta(seconds=seconds + jitter, milliseconds=self.rng.randint(1, 999))
        return self.stamp()

    def at(self, hh_mm_ss: str) -> str:
        """Jump to a wall-clock time on the same day (must be later than now)."""
        h, m, s = (int(x) for x in hh_mm_ss.split(":"))
        target = self.now.replace(hour=h, minute=m, second=s, microsecond=self.rng.randint(0, 999) * 1000)
        if target <= self.now:
            raise ValueError(f"clock would go backwards: {self.stamp()} -> {hh_mm_ss}")
        self.now = target
        return self.stamp()

    def stamp(self) -> str:
        return iso_ms(self.now)


# ----------------------------------------------------------------------------- the fictional repository


class Project:
    """The files of the fictional repository, so tool output stays consistent with every edit."""

    def __init__(self, root: str, files: dict[str, str]) -> None:
        self.root = root
        self.files = dict(files)
        self.original = dict(files)
        self.renames: dict[str, str] = {}  # new path -> old path

    def abs(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def numbered(self, rel: str, offset: int = 1, limit: int | None = None) -> str:
        lines = self.files[rel].split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        chosen = lines[offset - 1 : (offset - 1 + limit) if limit else None]
        return "\n".join(f"{offset + i:>6}\u2192{line}" for i, line in enumerate(chosen))

    def line_of(self, rel: str, snippet: str) -> int:
        for number, line in enumerate(self.files[rel].split("\n"), start=1):
            if snippet in line:
                return number
        raise KeyError(f"{snippet!r} not in {rel}")

    def function_source(self, rel: str, name: str) -> list[str]:
        lines = self.files[rel].split("\n")
        start = next(i for i, line in enumerate(lines) if re.match(rf"\s*(async )?def {name}\(", line))
        end = start + 1
        while end < len(lines) and not (lines[end] and not lines[end][0].isspace()):
            end += 1
        while lines[end - 1] == "":
            end -= 1
        return lines[start:end]

    def edit(self, rel: str, old: str, new: str) -> tuple[str, str]:
        before = self.files[rel]
        if before.count(old) != 1:
            raise ValueError(f"edit of {rel}: old text found {before.count(old)} times")
        self.files[rel] = before.replace(old, new)
        return before, self.files[rel]

    def rename(self, old: str, new: str) -> None:
        self.files[new] = self.files.pop(old)
        self.renames[new] = self.renames.pop(old, old)

    def grep(self, pattern: str, under: str = "") -> list[tuple[str, int, str]]:
        regex = re.compile(pattern)
        hits = []
        for rel in sorted(self.files):
            if rel.startswith(under):
                for number, line in enumerate(self.files[rel].split("\n"), start=1):
                    if regex.search(line):
                        hits.append((rel, number, line))
        return hits

    def glob(self, pattern: str) -> list[str]:
        flat = pattern.replace("**/", "*")
        return sorted(rel for rel in self.files if fnmatch.fnmatch(rel, flat))


def blob_id(text: str) -> str:
    data = text.encode()
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()[:7]


def structured_patch(before: str, after: str) -> list[dict[str, Any]]:
    """Claude Code's ``structuredPatch``: unified-diff hunks as objects."""
    hunks: list[dict[str, Any]] = []
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=3))
    for line in lines[2:]:
        header = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line)
        if header:
            a, b, c, d = header.groups()
            hunks.append(
                {
                    "oldStart": int(a),
                    "oldLines": int(b or 1),
                    "newStart": int(c),
                    "newLines": int(d or 1),
                    "lines": [],
                }
            )
        else:
            hunks[-1]["lines"].append(line)
    return hunks


def git_diff(project: Project, paths: Iterable[str]) -> str:
    """``git diff`` between the repository as the session found it and as it is now."""
    out: list[str] = []
    for rel in paths:
        old_rel = project.renames.get(rel, rel)
        before = project.original.get(old_rel)
        after = project.files.get(rel)
        a = f"a/{old_rel}" if before is not None else "/dev/null"
        b = f"b/{rel}" if after is not None else "/dev/null"
        out.append(f"diff --git a/{old_rel} b/{rel}")
        if before is None:
            out += ["new file mode 100644", f"index 0000000..{blob_id(after or '')}"]
        elif old_rel != rel:
            ratio = difflib.SequenceMatcher(None, before, after or "").ratio()
            out += [f"similarity index {int(ratio * 100)}%", f"rename from {old_rel}", f"rename to {rel}"]
            if before != after:
                out.append(f"index {blob_id(before)}..{blob_id(after or '')} 100644")
        else:
            out.append(f"index {blob_id(before)}..{blob_id(after or '')} 100644")
        if before == after:
            continue
        body = difflib.unified_diff((before or "").splitlines(), (after or "").splitlines(), a, b, lineterm="", n=3)
        out += list(body)
    return "\n".join(out)


def diff_counts(project: Project, paths: Iterable[str]) -> dict[str, tuple[int, int]]:
    counts = {}
    for rel in paths:
        before = project.original.get(project.renames.get(rel, rel)) or ""
        after = project.files.get(rel) or ""
        plus = minus = 0
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                plus += 1
            elif line.startswith("-") and not line.startswith("---"):
                minus += 1
        counts[rel] = (plus, minus)
    return counts


# ----------------------------------------------------------------------------- Claude Code tool calls


@dataclass
class ToolRun:
    """One tool call and its outcome, as Claude Code records them."""

    name: str
    input: dict[str, Any]
    content: Any  # what the model sees (tool_result.content)
    result: Any  # the structured copy (toolUseResult)
    is_error: bool = False
    seconds: float = 1.0
    progress: list[Any] = field(default_factory=list)  # bash output snapshots, or sub-agent progress data


class Tools:
    """Builds :class:`ToolRun` objects whose output follows from the project files."""

    def __init__(self, project: Project) -> None:
        self.p = project

    def read(self, rel: str, offset: int | None = None, limit: int | None = None) -> ToolRun:
        args: dict[str, Any] = {"file_path": self.p.abs(rel)}
        if offset:
            args["offset"] = offset
        if limit:
            args["limit"] = limit
        if rel not in self.p.files:
            text = "<tool_use_error>File does not exist.</tool_use_error>"
            return ToolRun("Read", args, text, "Error: File does not exist.", is_error=True, seconds=0.2)
        text = self.p.numbered(rel, offset or 1, limit)
        total = len(self.p.files[rel].rstrip("\n").split("\n"))
        shown = "\n".join(line.split("\u2192", 1)[1] for line in text.split("\n"))
        result = {
            "type": "text",
            "file": {
                "filePath": self.p.abs(rel),
                "content": shown,
                "numLines": len(text.split("\n")),
                "startLine": offset or 1,
                "totalLines": total,
            },
        }
        return ToolRun("Read", args, text, result, seconds=0.3)

    def write(self, rel: str, content: str) -> ToolRun:
        existed = rel in self.p.files
        original = self.p.files.get(rel)
        self.p.files[rel] = content
        text = (
            f"The file {self.p.abs(rel)} has been updated successfully."
            if existed
            else f"File created successfully at: {self.p.abs(rel)}"
        )
        result = {
            "type": "update" if existed else "create",
            "filePath": self.p.abs(rel),
            "content": content,
            "structuredPatch": structured_patch(original, content) if original is not None else [],
            "originalFile": original,
        }
        return ToolRun("Write", {"file_path": self.p.abs(rel), "content": content}, text, result, seconds=0.4)

    def edit(self, rel: str, old: str, new: str) -> ToolRun:
        before, after = self.p.edit(rel, old, new)
        args = {"file_path": self.p.abs(rel), "old_string": old, "new_string": new}
        result = {
            "filePath": self.p.abs(rel),
            "oldString": old,
            "newString": new,
            "originalFile": before,
            "structuredPatch": structured_patch(before, after),
            "userModified": False,
            "replaceAll": False,
        }
        text = f"The file {self.p.abs(rel)} has been updated successfully."
        return ToolRun("Edit", args, text, result, seconds=0.4)

    def multi_edit(self, rel: str, edits: list[tuple[str, str]]) -> ToolRun:
        """Several replacements in one file, applied in order, as one tool call."""
        before = self.p.files[rel]
        for old, new in edits:
            self.p.edit(rel, old, new)
        after = self.p.files[rel]
        pairs = [{"old_string": old, "new_string": new} for old, new in edits]
        result = {
            "filePath": self.p.abs(rel),
            "edits": [{**pair, "replace_all": False} for pair in pairs],
            "originalFileContents": before,
            "structuredPatch": structured_patch(before, after),
            "userModified": False,
        }

        def first(text: str) -> str:
            line = text.strip().split("\n")[0]
            return line if len(line) <= 50 else line[:50] + "..."

        lines = [f"Applied {len(edits)} edits to {self.p.abs(rel)}:"]
        lines += [f'{n}. Replaced "{first(o)}" with "{first(w)}"' for n, (o, w) in enumerate(edits, start=1)]
        args = {"file_path": self.p.abs(rel), "edits": pairs}
        return ToolRun("MultiEdit", args, "\n".join(lines), result, seconds=0.5)

    def bash(
        self,
        command: str,
        output: str,
        description: str,
        *,
        exit_code: int = 0,
        seconds: float = 1.5,
        progress: list[str] | None = None,
        background: bool = False,
    ) -> ToolRun:
        args: dict[str, Any] = {"command": command, "description": description}
        if background:
            args["run_in_background"] = True
        if exit_code:
            text = f"Exit code {exit_code}\n{output}"
            return ToolRun("Bash", args, text, f"Error: {text}", True, seconds, progress or [])
        result = {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}
        if background:
            result["backgroundTaskId"] = "bash_1"
        return ToolRun("Bash", args, output, result, seconds=seconds, progress=progress or [])

    def grep(self, pattern: str, path: str = "", glob: str | None = None) -> ToolRun:
        hits = self.p.grep(pattern, path)
        if glob:
            hits = [h for h in hits if fnmatch.fnmatch(h[0].rsplit("/", 1)[-1], glob)]
        lines = [f"{self.p.abs(rel)}:{number}:{text}" for rel, number, text in hits]
        text = "\n".join(lines) if lines else "No matches found"
        args: dict[str, Any] = {"pattern": pattern, "path": self.p.abs(path) if path else self.p.root}
        if glob:
            args["glob"] = glob
        args.update({"output_mode": "content", "-n": True})
        result = {"mode": "content", "numFiles": 0, "filenames": [], "content": text, "numLines": len(lines)}
        return ToolRun("Grep", args, text, result, seconds=0.3)

    def glob(self, pattern: str) -> ToolRun:
        names = [self.p.abs(rel) for rel in self.p.glob(pattern)]
        result = {"filenames": names, "durationMs": 14 + len(names), "numFiles": len(names), "truncated": False}
        return ToolRun("Glob", {"pattern": pattern}, "\n".join(names), result, seconds=0.2)

    def fetch(self, url: str, prompt: str, answer: str, size: int) -> ToolRun:
        result = {"bytes": size, "code": 200, "codeText": "OK", "result": answer, "durationMs": 1843, "url": url}
        return ToolRun("WebFetch", {"url": url, "prompt": prompt}, answer, result, seconds=2.2)

    def todo(self, todos: list[tuple[str, str, str]], old: list[dict[str, str]] | None = None) -> ToolRun:
        items = [{"content": c, "status": s, "activeForm": a} for c, s, a in todos]
        text = "Todos have been modified successfully. Keep using the todo list to track progress."
        return ToolRun("TodoWrite", {"todos": items}, text, {"oldTodos": old or [], "newTodos": items}, seconds=0.1)


# ----------------------------------------------------------------------------- Claude Code session writer


class ClaudeCodeSession:
    """Appends Claude Code records: a chain of uuids, one API response spread over several records."""

    def __init__(
        self,
        *,
        session_id: str,
        cwd: str,
        branch: str,
        ids: Ids,
        clock: Clock,
        version: str = "2.1.42",
        model: str = "claude-opus-4-6",
        agent_id: str | None = None,
        base_context: int = 19_800,
        token_scale: float = 1.0,
    ) -> None:
        """``base_context``: tokens of system prompt and tool schemas (not in the file); ``token_scale``
        stretches the per-message token estimate (characters / 4) so that usage figures can be made to
        match a compaction's ``preTokens``."""
        self.session_id = session_id
        self.cwd = cwd
        self.branch = branch
        self.ids = ids
        self.clock = clock
        self.version = version
        self.model = model
        self.agent_id = agent_id
        self.slug: str | None = None
        self.records: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.base_context = base_context
        self.token_scale = token_scale
        self.context = base_context
        self.turn_started: datetime | None = None

    # -- records

    def _base(self, kind: str, parent: str | None) -> dict[str, Any]:
        record: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": self.agent_id is not None,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "gitBranch": self.branch,
        }
        if self.agent_id:
            record["agentId"] = self.agent_id
        if self.slug:
            record["slug"] = self.slug
        record["type"] = kind
        return record

    def _chain(self, record: dict[str, Any]) -> str:
        record["uuid"] = record.get("uuid") or self.ids.uuid()
        self.records.append(record)
        self.parent = record["uuid"]
        if "message" in record:
            self.context += int(len(dumps(record["message"])) / 4 * self.token_scale)
        return str(record["uuid"])

    def _reorder(self, record: dict[str, Any], *tail: str) -> dict[str, Any]:
        """Move ``uuid``/``timestamp`` and the given keys to the end, as Claude Code writes them."""
        for key in ("uuid", "timestamp", *tail):
            if key in record:
                record[key] = record.pop(key)
        return record

    def hook_progress(self, event: str, command: str, parent: str | None = None) -> None:
        tool_use = self.ids.uuid()
        record = self._base("progress", parent if parent is not None else self.parent)
        record["data"] = {
            "type": "hook_progress",
            "hookEvent": event,
            "hookName": f"{event}:startup",
            "command": command,
        }
        record.update({"parentToolUseID": tool_use, "toolUseID": tool_use, "timestamp": self.clock.tick(0.2)})
        record["uuid"] = self.ids.uuid()
        self.records.append(record)

    def snapshot(self, message_id: str, backups: dict[str, int] | None = None, *, update: bool = False) -> None:
        tracked = {
            path: {
                "backupFileName": f"{hashlib.sha1(path.encode()).hexdigest()[:16]}@v{version}",
                "version": version,
                "backupTime": self.clock.stamp(),
            }
            for path, version in (backups or {}).items()
        }
        record = {
            "type": "file-history-snapshot",
            "messageId": message_id,
            "snapshot": {"messageId": message_id, "trackedFileBackups": tracked, "timestamp": self.clock.stamp()},
            "isSnapshotUpdate": update,
        }
        # A new snapshot is written just before the user message it belongs to.
        at_prompt = not update and self.records and self.records[-1].get("uuid") == message_id
        self.records.insert(len(self.records) - 1 if at_prompt else len(self.records), record)

    def user(self, content: Any, *, at: str | None = None, gap: float = 30.0, prompt: bool = True, **extra: Any) -> str:
        stamp = self.clock.at(at) if at else self.clock.tick(gap)
        record = self._base("user", self.parent)
        record["message"] = {"role": "user", "content": content}
        record["uuid"] = self.ids.uuid()
        record["timestamp"] = stamp
        record.update(extra)
        if prompt and isinstance(content, str) and not extra:
            record.update({"thinkingMetadata": {"maxThinkingTokens": 31999}, "todos": [], "permissionMode": "default"})
            self.turn_started = self.clock.now
        return self._chain(record)

    def respond(
        self,
        *,
        thinking: str | None = None,
        text: str | None = None,
        tools: Iterable[ToolRun] = (),
        think_seconds: float = 4.0,
    ) -> list[str]:
        """One API response (records per block), then the results of its tool calls."""
        tools = list(tools)
        message_id, request_id = self.ids.msg_id(), self.ids.request_id()
        blocks: list[dict[str, Any]] = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": thinking, "signature": self.ids.signature()})
        if text:
            blocks.append({"type": "text", "text": text})
        tool_ids = []
        for run in tools:
            tool_ids.append(self.ids.tool_id())
            blocks.append({"type": "tool_use", "id": tool_ids[-1], "name": run.name, "input": run.input})
        out_tokens = sum(len(dumps(b)) for b in blocks) // 4 + 12
        input_tokens = 3 + self.ids.rng.randint(0, 6)
        cache_write = min(self.context - self.base_context, 600 + self.ids.rng.randint(0, 4000))
        usage = {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": self.context,
            "cache_creation": {"ephemeral_5m_input_tokens": cache_write, "ephemeral_1h_input_tokens": 0},
            "output_tokens": out_tokens,
            "service_tier": "standard",
        }
        tool_use_uuid: dict[str, str] = {}
        for index, block in enumerate(blocks):
            last = index == len(blocks) - 1
            seconds = think_seconds if index == 0 else 0.6 + len(dumps(block)) / 900
            record = self._base("assistant", self.parent)
            record["message"] = {
                "model": self.model,
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": ("tool_use" if tools else "end_turn") if last else None,
                "stop_sequence": None,
                "usage": usage,
            }
            record["requestId"] = request_id
            record["type"] = record.pop("type")
            record["uuid"] = self.ids.uuid()
            record["timestamp"] = self.clock.tick(seconds)
            uid = self._chain(record)
            if block["type"] == "tool_use":
                tool_use_uuid[block["id"]] = uid
        for tool_id, run in zip(tool_ids, tools, strict=True):
            self._tool_result(tool_id, run, tool_use_uuid[tool_id])
        return tool_ids

    def _tool_result(self, tool_id: str, run: ToolRun, source: str) -> None:
        for n, snapshot in enumerate(run.progress):
            record = self._base("progress", source)
            if isinstance(snapshot, dict):  # a sub-agent's message, streamed while the Task tool runs
                record["data"] = snapshot
                progress_id = "agent_msg_" + self.ids.b62(24)
            else:
                record["data"] = {
                    "type": "bash_progress",
                    "output": "\n".join(snapshot.split("\n")[-5:]),
                    "fullOutput": snapshot,
                    "elapsedTimeSeconds": int((n + 1) * run.seconds / (len(run.progress) + 1)),
                    "totalLines": snapshot.count("\n") + 1,
                }
                progress_id = f"bash-progress-{n}"
            record.update({"toolUseID": progress_id, "parentToolUseID": tool_id})
            record["uuid"] = self.ids.uuid()
            record["timestamp"] = self.clock.tick(run.seconds / (len(run.progress) + 1), spread=0.05)
            self.records.append(record)
        block: dict[str, Any] = {"tool_use_id": tool_id, "type": "tool_result", "content": run.content}
        if run.is_error:
            block["is_error"] = True
        record = self._base("user", self.parent)
        record["message"] = {"role": "user", "content": [block]}
        record["uuid"] = self.ids.uuid()
        seconds = run.seconds / (len(run.progress) + 1) if run.progress else run.seconds
        record["timestamp"] = self.clock.tick(seconds, spread=0.2)
        record["toolUseResult"] = run.result
        record["sourceToolAssistantUUID"] = source
        self._chain(record)

    def stop_hooks(self, commands: list[str]) -> None:
        record = self._base("system", self.parent)
        record.update(
            {
                "subtype": "stop_hook_summary",
                "hookCount": len(commands),
                "hookInfos": [{"command": c} for c in commands],
                "hookErrors": [],
                "preventedContinuation": False,
                "stopReason": "",
                "hasOutput": False,
                "level": "suggestion",
                "timestamp": self.clock.tick(0.3),
                "uuid": self.ids.uuid(),
                "toolUseID": self.ids.uuid(),
            }
        )
        self.records.append(record)
        self.parent = record["uuid"]

    def turn_duration(self) -> None:
        assert self.turn_started is not None
        record = self._base("system", self.parent)
        duration = int((self.clock.now - self.turn_started).total_seconds() * 1000)
        record.update({"subtype": "turn_duration", "durationMs": duration, "timestamp": self.clock.tick(0.05)})
        record.update({"uuid": self.ids.uuid(), "isMeta": False})
        self.records.append(record)
        self.parent = record["uuid"]

    def compact(self, summary: str, pre_tokens: int) -> None:
        """A host auto-compaction: a new root (compact_boundary) and the summary as a user record."""
        boundary = self._base("system", None)
        boundary = {
            "parentUuid": None,
            "logicalParentUuid": self.parent,
            **{k: v for k, v in boundary.items() if k != "parentUuid"},
        }
        boundary.update(
            {
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "isMeta": False,
                "timestamp": self.clock.tick(38.0, spread=0.1),
                "uuid": self.ids.uuid(),
                "level": "info",
                "compactMetadata": {"trigger": "auto", "preTokens": pre_tokens},
            }
        )
        self.records.append(boundary)
        self.parent = boundary["uuid"]
        record = self._base("user", self.parent)
        record["message"] = {"role": "user", "content": summary}
        record["isVisibleInTranscriptOnly"] = True
        record["isCompactSummary"] = True
        record["uuid"] = self.ids.uuid()
        record["timestamp"] = boundary["timestamp"]
        self.context = self.base_context
        self._chain(record)

    def summary(self, text: str) -> None:
        self.records.append({"type": "summary", "summary": text, "leafUuid": self.parent})


# ----------------------------------------------------------------------------- tollgate: the fictional service
#
# A small Python edge service that applies per-tenant request limits.  These are
# the files as the session finds them; the story below edits them.

TOLLGATE_ROOT = "/home/mara/src/tollgate"

LIMITS_TOML = """# Request limits for the tollgate edge.
# Reloaded on SIGHUP.  Semantics of every key: docs/limits.md

[server]
host = "0.0.0.0"
port = 8443
tls_cert = "/etc/tollgate/tls/edge.pem"
tls_key = "/etc/tollgate/tls/edge.key"

[limits]
window_seconds = 60
default_requests_per_minute = 300
store = "redis"
redis_url = "redis://rl-redis.internal:6379/3"
# Requests over the limit get 429 with Retry-After set to the window reset.
retry_after_jitter_ms = 250

[tenants.acme-logistics]
requests_per_minute = 1200
note = "contract 2025-11, raised from 900 (RL-377)"

[tenants.blue-harbor]
requests_per_minute = 600

[tenants.northwind-freight]
requests_per_minute = 2400
note = "bulk label printing at 06:00 UTC"

[tenants.internal-healthcheck]
requests_per_minute = 6000
exempt_paths = ["/healthz", "/readyz"]
"""

INIT_PY = '''"""tollgate's rate limiting: per-tenant request limits applied at the edge."""

from ratelimit.config import ConfigError, LimitsConfig, load
from ratelimit.window import Decision, FixedWindowLimiter

__all__ = ["ConfigError", "Decision", "FixedWindowLimiter", "LimitsConfig", "load"]
__version__ = "0.13.2"
'''

WINDOW_PY = '''"""Fixed-window request counting for the tollgate edge.

Every tenant gets one counter per clock-aligned window (60 s unless
``[limits] window_seconds`` says otherwise).  A request is allowed while the
tenant's counter, including the request itself, is at or below its limit.
Counters live in a :class:`~ratelimit.store.CounterStore`, so all edge workers
share them through Redis.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timezone

from ratelimit.store import CounterStore

__all__ = ["Clock", "Decision", "FixedWindowLimiter"]

log = logging.getLogger(__name__)

#: Seconds since the epoch, like time.time(); tests pass a fake.
Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome for one request: may it pass, and what to tell the client."""

    allowed: bool
    count: int
    limit: int
    remaining: int
    reset_at: float

    def headers(self) -> dict[str, str]:
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(max(self.remaining, 0)),
            "X-RateLimit-Reset": str(int(self.reset_at)),
        }
        if not self.allowed:
            headers["Retry-After"] = str(max(1, int(self.reset_at - time.time())))
        return headers


class FixedWindowLimiter:
    """Counts requests per tenant in fixed, clock-aligned windows."""

    def __init__(
        self,
        store: CounterStore,
        limits: Mapping[str, int],
        *,
        default_limit: int,
        window_seconds: int = 60,
        clock: Clock = time.time,
    ) -> None:
        if window_seconds <= 0:
            raise ValueError(f"window_seconds must be positive, got {window_seconds!r}")
        if default_limit <= 0:
            raise ValueError(f"default_limit must be positive, got {default_limit!r}")
        self._store = store
        self._limits = dict(limits)
        self._default_limit = default_limit
        self.window_seconds = window_seconds
        self._clock = clock
        self._day: date = datetime.fromtimestamp(clock(), tz=timezone.utc).date()

    def limit_for(self, tenant: str) -> int:
        return self._limits.get(tenant, self._default_limit)

    def hit(self, tenant: str, cost: int = 1) -> Decision:
        """Count one request (``cost`` units) for ``tenant`` and decide whether it may pass."""
        now = self._clock()
        window_start = int(now // self.window_seconds) * self.window_seconds
        key = self._bucket_key(tenant, window_start)
        self._roll_over_if_new_day(key, now, cost)
        count = self._store.incr(key, cost, ttl=self.window_seconds * 2)
        limit = self.limit_for(tenant)
        allowed = count <= limit
        if not allowed:
            log.info("throttled tenant=%s count=%d limit=%d window=%d", tenant, count, limit, window_start)
        return Decision(allowed, count, limit, limit - count, window_start + self.window_seconds)

    def peek(self, tenant: str) -> Decision:
        """The current state for ``tenant`` without counting a request."""
        now = self._clock()
        window_start = int(now // self.window_seconds) * self.window_seconds
        count = self._store.get(self._bucket_key(tenant, window_start))
        limit = self.limit_for(tenant)
        return Decision(count < limit, count, limit, limit - count, window_start + self.window_seconds)

    def reload(self, limits: Mapping[str, int], default_limit: int) -> None:
        """Swap in new limits (on SIGHUP); counters are kept."""
        self._limits = dict(limits)
        self._default_limit = default_limit

    def _bucket_key(self, tenant: str, window_start: int) -> str:
        if window_start < 0:
            raise ValueError(f"invalid window start {window_start!r} for tenant {tenant!r}")
        return f"rl:{tenant}:{window_start}"

    def _roll_over_if_new_day(self, key: str, now: float, cost: int) -> None:
        # RL-301: requests that straddled midnight were lost when the nightly
        # counter reset ran.  On the first hit of a new day, seed the fresh
        # bucket with this request so the reset cannot drop it.
        today = datetime.now().date()
        if today != self._day:
            self._store.incr(key, cost, ttl=self.window_seconds * 2)
            self._day = datetime.fromtimestamp(now, tz=timezone.utc).date()
            log.debug("day rollover key=%s day=%s", key, self._day)
'''

STORE_PY = '''"""Counter stores shared by the limiters: in-process for tests and dev, Redis in production."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["CounterStore", "MemoryStore", "RedisStore"]


class CounterStore(Protocol):
    def incr(self, key: str, amount: int = 1, *, ttl: int) -> int:
        """Add ``amount`` to ``key`` (created at 0 with ``ttl`` seconds to live) and return the new value."""
        ...

    def get(self, key: str) -> int:
        """The value of ``key``; 0 when it does not exist or has expired."""
        ...


class MemoryStore:
    """A dict with expiry, for one process (tests, ``make dev``)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._values: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    def incr(self, key: str, amount: int = 1, *, ttl: int) -> int:
        now = self._clock()
        with self._lock:
            value, expires = self._values.get(key, (0, now + ttl))
            if expires <= now:
                value, expires = 0, now + ttl
            value += amount
            self._values[key] = (value, expires)
            return value

    def get(self, key: str) -> int:
        now = self._clock()
        with self._lock:
            value, expires = self._values.get(key, (0, now))
            return value if expires > now else 0

    def __len__(self) -> int:
        return len(self._values)


class RedisStore:
    """Counters in Redis: INCRBY and EXPIRE NX in one pipeline, so every worker sees one count."""

    def __init__(self, client: Any, prefix: str = "") -> None:
        self._client = client
        self._prefix = prefix

    @classmethod
    def from_url(cls, url: str, prefix: str = "") -> RedisStore:
        import redis  # imported lazily: tests and make dev run without it

        return cls(redis.Redis.from_url(url, socket_timeout=0.05), prefix)

    def incr(self, key: str, amount: int = 1, *, ttl: int) -> int:
        pipe = self._client.pipeline(transaction=False)
        pipe.incrby(self._prefix + key, amount)
        pipe.expire(self._prefix + key, ttl, nx=True)
        value, _ = pipe.execute()
        return int(value)

    def get(self, key: str) -> int:
        value = self._client.get(self._prefix + key)
        return int(value) if value is not None else 0
'''

CONFIG_PY = '''"""Load and check config/limits.toml."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ConfigError", "LimitsConfig", "TenantLimit", "load"]

_SERVER_KEYS = {"host", "port", "tls_cert", "tls_key"}
_LIMIT_KEYS = {"window_seconds", "default_requests_per_minute", "store", "redis_url", "retry_after_jitter_ms"}
_TENANT_KEYS = {"requests_per_minute", "note", "exempt_paths"}
_STORES = {"memory", "redis"}


class ConfigError(ValueError):
    """The limits file is invalid; the message names the file, the table and the key."""


@dataclass(frozen=True, slots=True)
class TenantLimit:
    name: str
    requests_per_minute: int
    exempt_paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    host: str
    port: int
    window_seconds: int
    default_requests_per_minute: int
    store: str
    redis_url: str | None = None
    retry_after_jitter_ms: int = 0
    tls_cert: str | None = None
    tls_key: str | None = None
    tenants: dict[str, TenantLimit] = field(default_factory=dict)

    def limits(self) -> dict[str, int]:
        return {name: tenant.requests_per_minute for name, tenant in self.tenants.items()}


def load(path: str | Path) -> LimitsConfig:
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    server = _table(data, "server", path)
    limits = _table(data, "limits", path)
    _check_keys(server, _SERVER_KEYS, "server", path)
    _check_keys(limits, _LIMIT_KEYS, "limits", path)
    tenants = {}
    for name, raw in _table(data, "tenants", path, required=False).items():
        _check_keys(raw, _TENANT_KEYS, f"tenants.{name}", path)
        rpm = _positive_int(raw, "requests_per_minute", f"tenants.{name}", path)
        tenants[name] = TenantLimit(name, rpm, tuple(raw.get("exempt_paths", ())))
    store = limits.get("store", "memory")
    if store not in _STORES:
        raise ConfigError(f"{path}: [limits] store must be one of {sorted(_STORES)}, got {store!r}")
    port = server.get("port", 8443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigError(f"{path}: [server] port must be 1..65535, got {port!r}")
    return LimitsConfig(
        host=server.get("host", "127.0.0.1"),
        port=port,
        window_seconds=_positive_int(limits, "window_seconds", "limits", path, default=60),
        default_requests_per_minute=_positive_int(limits, "default_requests_per_minute", "limits", path),
        store=store,
        redis_url=limits.get("redis_url"),
        retry_after_jitter_ms=limits.get("retry_after_jitter_ms", 0),
        tls_cert=server.get("tls_cert"),
        tls_key=server.get("tls_key"),
        tenants=tenants,
    )


def _table(data: dict[str, Any], name: str, path: Path, *, required: bool = True) -> dict[str, Any]:
    table = data.get(name)
    if table is None and not required:
        return {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: missing table [{name}]")
    return table


def _check_keys(table: dict[str, Any], allowed: set[str], where: str, path: Path) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} in [{where}] (allowed: {', '.join(sorted(allowed))})")


def _positive_int(table: dict[str, Any], key: str, where: str, path: Path, default: int | None = None) -> int:
    value = table.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{path}: [{where}] {key} must be a positive integer, got {value!r}")
    return value
'''

MIDDLEWARE_PY = '''"""ASGI middleware that applies the tenant's request limit before the app sees the request."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import datetime
from typing import Any

from ratelimit.config import LimitsConfig
from ratelimit.store import CounterStore
from ratelimit.window import Clock, Decision, FixedWindowLimiter

__all__ = ["RateLimitMiddleware", "build_limiter", "clock_from_env"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def clock_from_env() -> Clock:
    """``time.time``, or (dev only) a clock that starts at ``TOLLGATE_FAKE_NOW`` and runs at real speed."""
    fake_now = os.environ.get("TOLLGATE_FAKE_NOW")
    if not fake_now:
        return time.time
    offset = datetime.fromisoformat(fake_now.replace("Z", "+00:00")).timestamp() - time.time()
    log.warning("using a fake clock that started at %s", fake_now)
    return lambda: time.time() + offset


def build_limiter(config: LimitsConfig, store: CounterStore, clock: Clock | None = None) -> FixedWindowLimiter:
    return FixedWindowLimiter(
        store,
        config.limits(),
        default_limit=config.default_requests_per_minute,
        window_seconds=config.window_seconds,
        clock=clock or clock_from_env(),
    )


def _tenant_of(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"x-tenant-id":
            return value.decode("latin-1").strip() or None
    return None


async def _reply(send: Send, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})


class RateLimitMiddleware:
    """Counts every HTTP request against its tenant's limit; answers 429 when it is used up."""

    def __init__(self, app: App, limiter: FixedWindowLimiter, *, exempt_paths: frozenset[str] | None = None) -> None:
        self._app = app
        self._limiter = limiter
        self._exempt = exempt_paths or frozenset({"/healthz", "/readyz"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._exempt:
            await self._app(scope, receive, send)
            return
        tenant = _tenant_of(scope)
        if tenant is None:
            await _reply(send, 401, {"error": "missing_tenant", "detail": "send an X-Tenant-Id header"}, {})
            return
        decision = self._limiter.hit(tenant)
        if not decision.allowed:
            body = {"error": "rate_limited", "tenant": tenant, "limit": decision.limit}
            await _reply(send, 429, body, decision.headers())
            return
        await self._app(scope, receive, _with_headers(send, decision))


def _with_headers(send: Send, decision: Decision) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            extra = [(k.lower().encode(), v.encode()) for k, v in decision.headers().items()]
            message["headers"] = [*message.get("headers", ()), *extra]
        await send(message)

    return wrapped
'''

APP_PY = '''"""The tollgate edge service: a thin ASGI app behind the rate limiter."""

from __future__ import annotations

import os
import signal

from ratelimit import config as limits_config
from ratelimit.middleware import RateLimitMiddleware, build_limiter
from ratelimit.store import MemoryStore, RedisStore

CONFIG_PATH = os.environ.get("TOLLGATE_LIMITS", "config/limits.toml")


async def upstream(scope, receive, send):
    """Stand-in for the shipment API behind the edge (make dev)."""
    if scope["path"] == "/healthz":
        body = b'{"status":"ok"}'
    else:
        body = b'{"accepted":true}'
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def create_app():
    cfg = limits_config.load(CONFIG_PATH)
    store = RedisStore.from_url(cfg.redis_url) if cfg.store == "redis" else MemoryStore()
    limiter = build_limiter(cfg, store)

    def reload(*_):
        fresh = limits_config.load(CONFIG_PATH)
        limiter.reload(fresh.limits(), fresh.default_requests_per_minute)

    signal.signal(signal.SIGHUP, reload)
    return RateLimitMiddleware(upstream, limiter)
'''

CONFTEST_PY = '''"""Shared fixtures: a controllable clock and an in-memory counter store."""

from __future__ import annotations

import time

import pytest

from ratelimit.store import MemoryStore


class FakeClock:
    """Starts at the real time and only moves when a test moves it."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def advance_to_next_window(self, window_seconds: int) -> None:
        self.now = (self.now // window_seconds + 1) * window_seconds + 0.001

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now!r})"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock: FakeClock) -> MemoryStore:
    return MemoryStore(clock)
'''

TEST_WINDOW_PY = '''"""Fixed-window limiter behaviour."""

from __future__ import annotations

import pytest

from ratelimit.store import MemoryStore
from ratelimit.window import FixedWindowLimiter

LIMITS = {"acme-logistics": 1200, "blue-harbor": 600}


@pytest.fixture
def limiter(clock, store: MemoryStore) -> FixedWindowLimiter:
    return FixedWindowLimiter(store, LIMITS, default_limit=300, window_seconds=60, clock=clock)


def test_allows_up_to_the_limit(limiter):
    decisions = [limiter.hit("blue-harbor") for _ in range(600)]
    assert all(d.allowed for d in decisions)
    assert decisions[-1].remaining == 0


def test_blocks_the_request_over_the_limit(limiter):
    for _ in range(600):
        limiter.hit("blue-harbor")
    decision = limiter.hit("blue-harbor")
    assert not decision.allowed
    assert decision.count == 601
    assert decision.headers()["X-RateLimit-Remaining"] == "0"


def test_new_window_starts_from_zero(limiter, clock):
    for _ in range(600):
        limiter.hit("blue-harbor")
    clock.advance_to_next_window(60)
    assert limiter.hit("blue-harbor").count == 1


def test_unknown_tenant_gets_the_default_limit(limiter):
    assert limiter.hit("someone-new").limit == 300


def test_cost_counts_as_several_requests(limiter):
    decision = limiter.hit("acme-logistics", cost=25)
    assert decision.count == 25
    assert decision.remaining == 1175


def test_headers_tell_the_client_when_to_retry(limiter):
    for _ in range(601):
        decision = limiter.hit("blue-harbor")
    headers = decision.headers()
    assert headers["X-RateLimit-Limit"] == "600"
    assert int(headers["Retry-After"]) >= 1


def test_window_must_be_positive(store):
    with pytest.raises(ValueError, match="window_seconds must be positive"):
        FixedWindowLimiter(store, LIMITS, default_limit=300, window_seconds=0)


def test_reload_keeps_counters(limiter):
    limiter.hit("blue-harbor")
    limiter.reload({"blue-harbor": 900}, default_limit=300)
    decision = limiter.hit("blue-harbor")
    assert (decision.count, decision.limit) == (2, 900)


def test_rollover_does_not_double_count(limiter, clock):
    limiter.hit("acme-logistics")
    clock.advance_to_next_window(60)
    decision = limiter.hit("acme-logistics")
    assert decision.count == 1
    assert decision.remaining == 1199
'''

TEST_CONFIG_PY = '''"""Loading config/limits.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratelimit.config import ConfigError, load

EXAMPLE = Path(__file__).resolve().parent.parent / "config" / "limits.toml"


def test_example_config_loads():
    cfg = load(EXAMPLE)
    assert cfg.port == 8443
    assert cfg.limits()["acme-logistics"] == 1200


def test_unknown_key_is_rejected(tmp_path):
    path = tmp_path / "limits.toml"
    path.write_text("[server]\\nport = 8443\\n[limits]\\ndefault_requests_per_minute = 10\\nwindow = 60\\n")
    with pytest.raises(ConfigError, match="unknown key 'window' in \\\\[limits\\\\]"):
        load(path)


def test_port_must_be_in_range(tmp_path):
    path = tmp_path / "limits.toml"
    path.write_text("[server]\\nport = 70000\\n[limits]\\ndefault_requests_per_minute = 10\\n")
    with pytest.raises(ConfigError, match="port must be 1..65535"):
        load(path)


def test_tenant_limit_must_be_positive(tmp_path):
    path = tmp_path / "limits.toml"
    path.write_text(
        "[server]\\n[limits]\\ndefault_requests_per_minute = 10\\n[tenants.x]\\nrequests_per_minute = 0\\n"
    )
    with pytest.raises(ConfigError, match="requests_per_minute must be a positive integer"):
        load(path)


def test_missing_limits_table(tmp_path):
    path = tmp_path / "limits.toml"
    path.write_text("[server]\\nport = 8443\\n")
    with pytest.raises(ConfigError, match="missing table \\\\[limits\\\\]"):
        load(path)
'''

TEST_MIDDLEWARE_PY = '''"""The ASGI middleware: 401 without a tenant, 429 over the limit, headers on every response."""

from __future__ import annotations

import json

import pytest

from ratelimit.config import LimitsConfig
from ratelimit.middleware import RateLimitMiddleware, build_limiter, clock_from_env
from ratelimit.store import MemoryStore

CONFIG = LimitsConfig(host="127.0.0.1", port=8443, window_seconds=60, default_requests_per_minute=2, store="memory")


async def ok_app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


async def call(app, path="/v1/shipments", tenant=b"acme-logistics"):
    sent = []
    headers = [(b"x-tenant-id", tenant)] if tenant else []

    async def send(message):
        sent.append(message)

    await app({"type": "http", "path": path, "headers": headers}, None, send)
    return sent[0]["status"], dict(sent[0]["headers"]), sent[1]["body"]


@pytest.fixture
def app(clock):
    return RateLimitMiddleware(ok_app, build_limiter(CONFIG, MemoryStore(clock), clock))


@pytest.mark.anyio
async def test_passes_request_under_limit(app):
    status, headers, _ = await call(app)
    assert status == 200
    assert headers[b"x-ratelimit-remaining"] == b"1"


@pytest.mark.anyio
async def test_returns_429_with_retry_after(app):
    for _ in range(2):
        await call(app)
    status, headers, body = await call(app)
    assert status == 429
    assert json.loads(body)["error"] == "rate_limited"
    assert int(headers[b"retry-after"]) >= 1


@pytest.mark.anyio
async def test_missing_tenant_is_401(app):
    status, _, _ = await call(app, tenant=None)
    assert status == 401


@pytest.mark.anyio
async def test_exempt_paths_skip_the_limiter(app):
    for _ in range(5):
        status, _, _ = await call(app, path="/healthz")
    assert status == 200


@pytest.mark.anyio
async def test_headers_added_to_response(app):
    _, headers, _ = await call(app)
    assert {b"x-ratelimit-limit", b"x-ratelimit-remaining", b"x-ratelimit-reset"} <= set(headers)


def test_fake_clock_from_env(monkeypatch):
    monkeypatch.setenv("TOLLGATE_FAKE_NOW", "2026-03-04T22:59:00Z")
    assert abs(clock_from_env()() - 1772665140.0) < 5


def test_real_clock_without_env(monkeypatch):
    monkeypatch.delenv("TOLLGATE_FAKE_NOW", raising=False)
    assert clock_from_env().__name__ == "time"


@pytest.mark.anyio
async def test_non_http_scope_passes_through(app):
    seen = []

    async def lifespan_app(scope, receive, send):
        seen.append(scope["type"])

    wrapped = RateLimitMiddleware(lifespan_app, app._limiter)
    await wrapped({"type": "lifespan"}, None, None)
    assert seen == ["lifespan"]
'''

TEST_STORE_PY = '''"""MemoryStore semantics (RedisStore is covered by the integration suite)."""

from __future__ import annotations

from ratelimit.store import MemoryStore


def test_incr_creates_key(store):
    assert store.incr("k", ttl=60) == 1


def test_incr_adds_amount(store):
    store.incr("k", 5, ttl=60)
    assert store.incr("k", 7, ttl=60) == 12


def test_expired_key_restarts_at_zero(store, clock):
    store.incr("k", 5, ttl=60)
    clock.advance(61)
    assert store.incr("k", ttl=60) == 1


def test_get_missing_key_is_zero(store):
    assert store.get("nope") == 0


def test_ttl_set_only_on_create(store, clock):
    store.incr("k", ttl=60)
    clock.advance(50)
    store.incr("k", ttl=60)
    clock.advance(11)
    assert store.get("k") == 0


def test_len_counts_keys(clock):
    store = MemoryStore(clock)
    for key in "abc":
        store.incr(key, ttl=60)
    assert len(store) == 3
'''

CHANGELOG_MD = """# Changelog

All notable changes to tollgate.  Dates are release dates (UTC).

## 0.13.2 - 2026-02-19

- ratelimit: `X-RateLimit-Reset` is now an integer (RL-466).
- ratelimit: `internal-healthcheck` may list `exempt_paths` (RL-459).

## 0.13.1 - 2026-02-03

- edge: TLS certificates are reloaded on SIGHUP together with the limits.
- ratelimit: log line for throttled requests includes the window start.

## 0.13.0 - 2026-01-21

- ratelimit: per-tenant limits move from environment variables to `config/limits.toml`.
- ratelimit: Redis counter store with `EXPIRE NX`, shared by all edge workers (RL-402).
"""

TOLLGATE_FILES = {
    "CHANGELOG.md": CHANGELOG_MD,
    "config/limits.toml": LIMITS_TOML,
    "src/ratelimit/__init__.py": INIT_PY,
    "src/ratelimit/app.py": APP_PY,
    "src/ratelimit/config.py": CONFIG_PY,
    "src/ratelimit/middleware.py": MIDDLEWARE_PY,
    "src/ratelimit/store.py": STORE_PY,
    "src/ratelimit/window.py": WINDOW_PY,
    "tests/conftest.py": CONFTEST_PY,
    "tests/test_config.py": TEST_CONFIG_PY,
    "tests/test_middleware.py": TEST_MIDDLEWARE_PY,
    "tests/test_store.py": TEST_STORE_PY,
    "tests/test_window.py": TEST_WINDOW_PY,
}

# Files the agent writes during the session.

TEST_ROLLOVER_PY = '''"""RL-482: a request must be counted once, whatever the local time zone says the date is.

The edge runs with TZ=Europe/Berlin.  Between 00:00 and 01:00 CET the local
date is one day ahead of the UTC date, and every request used to be counted
twice, so tenants were throttled at half their limit.
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from ratelimit import window
from ratelimit.store import MemoryStore
from ratelimit.window import FixedWindowLimiter

# (zone, instant): for every zone but UTC the local date differs from the UTC date at that instant.
CASES = [
    ("UTC", "2026-03-04T23:30:00+00:00"),
    ("Europe/Berlin", "2026-03-04T23:30:00+00:00"),
    ("America/Los_Angeles", "2026-03-05T03:00:00+00:00"),
    ("Pacific/Honolulu", "2026-03-05T09:40:00+00:00"),
    ("Pacific/Kiritimati", "2026-03-05T10:15:00+00:00"),
    ("Asia/Tokyo", "2026-03-05T16:00:00+00:00"),
]


class FrozenDatetime(datetime):
    """``datetime`` whose now() follows the test clock instead of the wall clock."""

    frozen = 0.0

    @classmethod
    def now(cls, tz=None):
        return datetime.fromtimestamp(cls.frozen, tz=tz)


@pytest.fixture
def local_zone(monkeypatch):
    def use(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield use
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(("zone", "instant"), CASES)
def test_each_request_counted_once(zone, instant, local_zone, monkeypatch):
    local_zone(zone)
    FrozenDatetime.frozen = datetime.fromisoformat(instant).timestamp()
    monkeypatch.setattr(window, "datetime", FrozenDatetime)

    def clock() -> float:
        return FrozenDatetime.frozen

    limiter = FixedWindowLimiter(MemoryStore(clock), {"acme-logistics": 1200}, default_limit=300, clock=clock)
    for expected in range(1, 11):
        decision = limiter.hit("acme-logistics")
        assert decision.count == expected, f"request {expected} counted as {decision.count} in {zone}"
        assert decision.remaining == 1200 - expected
'''

SLIDING_WINDOW_PY = '''"""Sliding-window counter limiter (RL-482).

The estimate for a request at time ``t`` is::

    count(current window) + count(previous window) * (1 - elapsed)

where ``elapsed`` is the fraction of the current window that has passed.  Like
the fixed window it needs two counters per tenant, but a tenant can no longer
send twice its limit across a window boundary, and nothing depends on the
calendar date, so there is no midnight rollover to get wrong.

Everything is derived from the injected clock (seconds since the epoch, UTC).
This module must not read the wall clock or the local time zone.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping

from ratelimit.store import CounterStore
from ratelimit.window import Clock, Decision

__all__ = ["SlidingWindowLimiter"]

log = logging.getLogger(__name__)


class SlidingWindowLimiter:
    """Approximates a true sliding window with two fixed-window counters per tenant."""

    def __init__(
        self,
        store: CounterStore,
        limits: Mapping[str, int],
        *,
        default_limit: int,
        window_seconds: int = 60,
        clock: Clock = time.time,
    ) -> None:
        if window_seconds <= 0:
            raise ValueError(f"window_seconds must be positive, got {window_seconds!r}")
        if default_limit <= 0:
            raise ValueError(f"default_limit must be positive, got {default_limit!r}")
        self._store = store
        self._limits = dict(limits)
        self._default_limit = default_limit
        self.window_seconds = window_seconds
        self._clock = clock

    def limit_for(self, tenant: str) -> int:
        return self._limits.get(tenant, self._default_limit)

    def hit(self, tenant: str, cost: int = 1) -> Decision:
        """Count one request (``cost`` units) for ``tenant`` and decide whether it may pass."""
        now = self._clock()
        start = int(now // self.window_seconds) * self.window_seconds
        weight = 1.0 - (now - start) / self.window_seconds
        previous = self._store.get(self._key(tenant, start - self.window_seconds))
        key = self._key(tenant, start)
        current = self._store.incr(key, cost, ttl=self.window_seconds * 2)
        estimate = previous * weight + current
        limit = self.limit_for(tenant)
        if estimate <= limit:
            return Decision(True, math.ceil(estimate), limit, math.floor(limit - estimate), start + self.window_seconds)
        # A rejected request must not use up quota: take it back out of the counter.
        self._store.incr(key, -cost, ttl=self.window_seconds * 2)
        log.info("throttled tenant=%s estimate=%.1f limit=%d window=%d", tenant, estimate, limit, start)
        reset_at = self._reset_at(tenant, previous, current - cost, start)
        return Decision(False, math.ceil(estimate), limit, 0, reset_at)

    def peek(self, tenant: str) -> Decision:
        """The current state for ``tenant`` without counting a request."""
        now = self._clock()
        start = int(now // self.window_seconds) * self.window_seconds
        weight = 1.0 - (now - start) / self.window_seconds
        previous = self._store.get(self._key(tenant, start - self.window_seconds))
        estimate = previous * weight + self._store.get(self._key(tenant, start))
        limit = self.limit_for(tenant)
        remaining = math.floor(limit - estimate)
        return Decision(estimate < limit, math.ceil(estimate), limit, remaining, start + self.window_seconds)

    def reload(self, limits: Mapping[str, int], default_limit: int) -> None:
        """Swap in new limits (on SIGHUP); counters are kept."""
        self._limits = dict(limits)
        self._default_limit = default_limit

    def _reset_at(self, tenant: str, previous: int, current: int, start: int) -> float:
        """When the weighted estimate will leave room for one more request."""
        room = self.limit_for(tenant) - 1 - current
        if previous <= 0 or room < 0:
            return start + self.window_seconds
        return start + self.window_seconds * max(0.0, 1.0 - room / previous)

    def _key(self, tenant: str, window_start: int) -> str:
        if window_start < 0:
            raise ValueError(f"invalid window start {window_start!r} for tenant {tenant!r}")
        return f"rl:{tenant}:{window_start}"
'''

TEST_SLIDING_WINDOW_PY = '''"""Sliding-window counter behaviour (RL-482)."""

from __future__ import annotations

import pytest

from ratelimit.sliding_window import SlidingWindowLimiter
from ratelimit.store import MemoryStore

LIMITS = {"acme-logistics": 1200, "blue-harbor": 600}


@pytest.fixture
def limiter(clock, store: MemoryStore) -> SlidingWindowLimiter:
    clock.advance_to_next_window(60)
    return SlidingWindowLimiter(store, LIMITS, default_limit=300, window_seconds=60, clock=clock)


def test_allows_up_to_the_limit_in_a_fresh_window(limiter):
    decisions = [limiter.hit("blue-harbor") for _ in range(600)]
    assert all(d.allowed for d in decisions)
    assert not limiter.hit("blue-harbor").allowed


def test_previous_window_counts_with_its_weight(limiter, clock):
    for _ in range(600):
        limiter.hit("blue-harbor")
    clock.advance(60 + 15)  # a quarter into the next window: 600 * 0.75 = 450 still count
    allowed = sum(limiter.hit("blue-harbor").allowed for _ in range(200))
    assert allowed == 150


def test_no_double_limit_burst_across_the_boundary(limiter, clock):
    clock.advance(59)
    burst = sum(limiter.hit("acme-logistics").allowed for _ in range(1200))
    clock.advance(2)
    burst += sum(limiter.hit("acme-logistics").allowed for _ in range(1200))
    assert burst <= 1200 + 40  # a fixed window allows 2400 here


def test_rejected_requests_do_not_use_quota(limiter, clock):
    for _ in range(700):
        limiter.hit("blue-harbor")
    clock.advance(60)
    assert limiter.peek("blue-harbor").count == 600


def test_cost_counts_as_several_requests(limiter):
    decision = limiter.hit("acme-logistics", cost=25)
    assert (decision.count, decision.remaining) == (25, 1175)


def test_unknown_tenant_gets_the_default_limit(limiter):
    assert limiter.hit("someone-new").limit == 300


def test_no_wall_clock_or_local_date(monkeypatch, limiter):
    import ratelimit.sliding_window as module

    assert not hasattr(module, "datetime")
    monkeypatch.setattr("time.time", lambda: 0.0)
    assert limiter.hit("acme-logistics").count == 1


def test_window_must_be_positive(store):
    with pytest.raises(ValueError, match="window_seconds must be positive"):
        SlidingWindowLimiter(store, LIMITS, default_limit=300, window_seconds=0)
'''


# ----------------------------------------------------------------------------- simulated command output


def t(text: str) -> str:
    """Dedented text without the surrounding blank lines (for the prose below)."""
    return textwrap.dedent(text).strip("\n")


# The fictional test suite, file by file, as pytest collects it.
SUITE_BEFORE = {
    "tests/test_config.py": [
        "test_example_config_loads",
        "test_unknown_key_is_rejected",
        "test_port_must_be_in_range",
        "test_tenant_limit_must_be_positive",
        "test_missing_limits_table",
    ],
    "tests/test_middleware.py": [
        "test_passes_request_under_limit",
        "test_returns_429_with_retry_after",
        "test_missing_tenant_is_401",
        "test_exempt_paths_skip_the_limiter",
        "test_headers_added_to_response",
        "test_fake_clock_from_env",
        "test_real_clock_without_env",
        "test_non_http_scope_passes_through",
    ],
    "tests/test_store.py": [
        "test_incr_creates_key",
        "test_incr_adds_amount",
        "test_expired_key_restarts_at_zero",
        "test_get_missing_key_is_zero",
        "test_ttl_set_only_on_create",
        "test_len_counts_keys",
    ],
    "tests/test_window.py": [
        "test_allows_up_to_the_limit",
        "test_blocks_the_request_over_the_limit",
        "test_new_window_starts_from_zero",
        "test_unknown_tenant_gets_the_default_limit",
        "test_cost_counts_as_several_requests",
        "test_headers_tell_the_client_when_to_retry",
        "test_window_must_be_positive",
        "test_reload_keeps_counters",
        "test_rollover_does_not_double_count",
    ],
}
ZONES = ["UTC", "Europe/Berlin", "America/Los_Angeles", "Pacific/Honolulu", "Pacific/Kiritimati", "Asia/Tokyo"]
ROLLOVER_IDS = [
    f"test_each_request_counted_once[{zone}-{instant}]"
    for zone, instant in [
        ("UTC", "2026-03-04T23:30:00+00:00"),
        ("Europe/Berlin", "2026-03-04T23:30:00+00:00"),
        ("America/Los_Angeles", "2026-03-05T03:00:00+00:00"),
        ("Pacific/Honolulu", "2026-03-05T09:40:00+00:00"),
        ("Pacific/Kiritimati", "2026-03-05T10:15:00+00:00"),
        ("Asia/Tokyo", "2026-03-05T16:00:00+00:00"),
    ]
]
SLIDING_TESTS = [
    "test_allows_up_to_the_limit_in_a_fresh_window",
    "test_previous_window_counts_with_its_weight",
    "test_no_double_limit_burst_across_the_boundary",
    "test_rejected_requests_do_not_use_quota",
    "test_cost_counts_as_several_requests",
    "test_unknown_tenant_gets_the_default_limit",
    "test_no_wall_clock_or_local_date",
    "test_window_must_be_positive",
]


def banner(title: str, fill: str, width: int = 80) -> str:
    return f" {title} ".center(width, fill) if title else fill * width


def pytest_header(root: str, count: int, *, verbose: bool = False) -> list[str]:
    lines = [banner("test session starts", "=")]
    python = f" -- {root}/.venv/bin/python" if verbose else ""
    lines += [
        f"platform linux -- Python 3.11.9, pytest-8.3.4, pluggy-1.5.0{python}",
        *(["cachedir: .pytest_cache"] if verbose else []),
        f"rootdir: {root}",
        "configfile: pyproject.toml",
        "plugins: anyio-4.8.0, timeout-2.3.1",
    ]
    lines.append(f"collecting ... collected {count} items" if verbose else f"collected {count} items")
    return [*lines, ""]


def pytest_progress(marks: str, width: int = 80) -> list[str]:
    """``pytest -q`` progress lines: dots/F's, wrapped, with the running percentage."""
    lines, done, total = [], 0, len(marks)
    step = width - 8
    for start in range(0, total, step):
        chunk = marks[start : start + step]
        done += len(chunk)
        lines.append(chunk.ljust(width - 6) + f"[{done * 100 // total:>3}%]")
    return lines


def pytest_verbose(files: dict[str, list[str]], failed: frozenset[str] = frozenset(), width: int = 80) -> list[str]:
    tests = [(rel, name) for rel, names in files.items() for name in names]
    lines = []
    for n, (rel, name) in enumerate(tests, start=1):
        outcome = "FAILED" if name in failed else "PASSED"
        left = f"{rel}::{name} {outcome}"
        lines.append(left + " " * max(1, width - 6 - len(left)) + f"[{n * 100 // len(tests):>3}%]")
    return lines


def pytest_failure(
    project: Project,
    rel: str,
    func: str,
    fail_snippet: str,
    explanation: list[str],
    params: list[tuple[str, str]],
    *,
    title: str | None = None,
    error: str = "AssertionError",
    short: bool = False,
) -> list[str]:
    """One section of pytest's FAILURES report, with the source taken from the project files."""
    if short:  # --tb=short: only the failing line
        where = project.line_of(rel, fail_snippet)
        lines = [banner(title or func, "_"), f"{rel}:{where}: in {func}", f"    {fail_snippet}"]
        return lines + [f"E   {e}" if e else "E" for e in explanation]
    source = project.function_source(rel, func)
    lines = [banner(title or func, "_"), ""]
    lines += [f"{name} = {value}" for name, value in params]
    if params:
        lines.append("")
    for line in source:
        shown = "    " + line
        if fail_snippet in line:
            lines.append(">" + shown[1:])
            break
        lines.append(shown)
    lines += [f"E       {e}" if e else "E" for e in explanation]
    lines += ["", f"{rel}:{project.line_of(rel, fail_snippet)}: {error}"]
    return lines


def decision_repr(allowed: bool, count: int, limit: int, reset_at: float) -> str:
    return (
        f"Decision(allowed={allowed}, count={count}, limit={limit}, remaining={limit - count}, reset_at={reset_at!r})"
    )


# ----------------------------------------------------------------------------- the demo session


@dataclass
class Story:
    """Everything the demo session needs while it is being written."""

    project: Project
    tools: Tools
    session: ClaudeCodeSession
    ids: Ids
    rng: random.Random


def window_failures(story: Story, now_epoch: float, *, short: bool = False) -> list[str]:
    """The FAILURES block of tests/test_window.py when every request is counted twice."""
    p, ids = story.project, story.ids
    start = int(now_epoch // 60) * 60
    reset = float(start + 60)
    limiter_repr = f"<ratelimit.window.FixedWindowLimiter object at {ids.address()}>"
    clock_repr = f"FakeClock(now={now_epoch!r})"
    out: list[str] = []
    out += pytest_failure(
        p,
        "tests/test_window.py",
        "test_allows_up_to_the_limit",
        "assert all(d.allowed",
        [
            "assert False",
            " +  where False = all(<generator object test_allows_up_to_the_limit.<locals>.<genexpr> at "
            f"{ids.address()}>)",
        ],
        [("limiter", limiter_repr)],
        short=short,
    )
    out += pytest_failure(
        p,
        "tests/test_window.py",
        "test_blocks_the_request_over_the_limit",
        "assert decision.count == 601",
        ["assert 1202 == 601", f" +  where 1202 = {decision_repr(False, 1202, 600, reset)}.count"],
        [("limiter", limiter_repr)],
        short=short,
    )
    out += pytest_failure(
        p,
        "tests/test_window.py",
        "test_new_window_starts_from_zero",
        'assert limiter.hit("blue-harbor").count == 1',
        [
            "assert 2 == 1",
            f" +  where 2 = {decision_repr(True, 2, 600, reset + 60)}.count",
            f" +    where {decision_repr(True, 2, 600, reset + 60)} = <bound method FixedWindowLimiter.hit of "
            f"{limiter_repr}>('blue-harbor')",
        ],
        [("limiter", limiter_repr), ("clock", clock_repr)],
        short=short,
    )
    out += pytest_failure(
        p,
        "tests/test_window.py",
        "test_cost_counts_as_several_requests",
        "assert decision.count == 25",
        ["assert 50 == 25", f" +  where 50 = {decision_repr(True, 50, 1200, reset)}.count"],
        [("limiter", limiter_repr)],
        short=short,
    )
    out += pytest_failure(
        p,
        "tests/test_window.py",
        "test_reload_keeps_counters",
        "assert (decision.count, decision.limit) == (2, 900)",
        ["assert (4, 900) == (2, 900)", "", "  At index 0 diff: 4 != 2", "  Use -v to get more diff"],
        [("limiter", limiter_repr)],
        short=short,
    )
    out += pytest_failure(
        p,
        "tests/test_window.py",
        "test_rollover_does_not_double_count",
        "assert decision.count == 1",
        ["assert 2 == 1", f" +  where 2 = {decision_repr(True, 2, 1200, reset + 60)}.count"],
        [("limiter", limiter_repr), ("clock", clock_repr)],
        short=short,
    )
    return out


WINDOW_FAILED = [
    "test_allows_up_to_the_limit",
    "test_blocks_the_request_over_the_limit",
    "test_new_window_starts_from_zero",
    "test_cost_counts_as_several_requests",
    "test_reload_keeps_counters",
    "test_rollover_does_not_double_count",
]
WINDOW_SHORT = {
    "test_allows_up_to_the_limit": "assert False",
    "test_blocks_the_request_over_the_limit": "assert 1202 == 601",
    "test_new_window_starts_from_zero": "assert 2 == 1",
    "test_cost_counts_as_several_requests": "assert 50 == 25",
    "test_reload_keeps_counters": "assert (4, 900) == (2, 900)",
    "test_rollover_does_not_double_count": "assert 2 == 1",
}


def ci_log(story: Story) -> str:
    """``gh run view --log-failed`` for the run that failed on the Los Angeles runner."""
    t0 = datetime(2026, 3, 5, 0, 41, 2, 118000, tzinfo=UTC)
    rng = random.Random(8812345)
    lines: list[str] = []

    def emit(text: str, seconds: float = 0.01) -> None:
        nonlocal t0
        t0 += timedelta(seconds=seconds * rng.uniform(0.5, 1.5))
        lines.append(f"test (self-hosted)\tRun tests\t{t0.strftime('%Y-%m-%dT%H:%M:%S.%f')}0Z {text}")

    emit("##[group]Run make test-ci")
    emit("make test-ci")
    emit("shell: /usr/bin/bash -e {0}")
    emit("env:")
    emit("  PYTHONDONTWRITEBYTECODE: 1")
    emit("  PIP_DISABLE_PIP_VERSION_CHECK: 1")
    emit("  RUNNER_NAME: ci-sh-04")
    emit("  TZ: America/Los_Angeles")
    emit("##[endgroup]")
    emit(".venv/bin/python -m pytest -q --tb=short -p no:cacheprovider --junitxml=reports/junit.xml", 0.4)
    marks = "." * 5 + "." * 8 + "." * 6 + "FFF.F..FF"
    for line in pytest_progress(marks):
        emit(line, 0.3)
    emit(banner("FAILURES", "="), 0.05)
    for line in window_failures(story, 1772671262.118, short=True):
        emit(line)
    emit(banner("short test summary info", "="))
    for name in WINDOW_FAILED:
        emit(f"FAILED tests/test_window.py::{name} - {WINDOW_SHORT[name]}")
    emit("6 failed, 22 passed in 0.87s")
    emit("make: *** [Makefile:31: test-ci] Error 1", 0.05)
    emit("##[error]Process completed with exit code 2.", 0.02)
    return "\n".join(lines)


def per_minute_table(rng: random.Random) -> tuple[str, dict[str, int]]:
    """Per-minute request counts for acme-logistics around last night's midnight (UTC)."""
    rows = ["minute_utc        requests   ok  429  max_count"]
    totals = {"throttled": 0, "requests_bad_hour": 0, "max_requests": 0}
    moment = datetime(2026, 3, 4, 22, 30, tzinfo=UTC)
    while moment <= datetime(2026, 3, 5, 0, 30, tzinfo=UTC):
        requests = rng.randint(612, 706)
        doubled = moment.hour == 23
        counted = requests * 2 if doubled else requests
        ok = min(requests, 600) if doubled else requests
        throttled = requests - ok
        if doubled:
            totals["throttled"] += throttled
            totals["requests_bad_hour"] += requests
            totals["max_requests"] = max(totals["max_requests"], requests)
        rows.append(f"{moment:%Y-%m-%dT%H:%M}  {requests:>8} {ok:>4} {throttled:>4} {counted:>10}")
        moment += timedelta(minutes=1)
    return "\n".join(rows), totals


def throttle_lines(rng: random.Random, ids: Ids) -> str:
    """The first 429s of the night from the edge log (throttle log line + access line for each)."""
    out = []
    window = int(epoch("2026-03-04T23:00:00Z"))
    moment = datetime(2026, 3, 4, 23, 0, 0, tzinfo=UTC)
    moment += timedelta(seconds=53.2)
    paths = ["/v1/shipments", "/v1/shipments", "/v1/labels", "/v1/shipments/track", "/v1/rates"]
    count = 1202
    for n in range(25):
        if n == 10:  # the next window
            window += 60
            count = 1202
            moment = datetime(2026, 3, 4, 23, 1, 52, 806000, tzinfo=UTC)
        moment += timedelta(milliseconds=rng.randint(40, 190))
        rid = ids.hex(16)
        pid = rng.choice([2817, 2818, 2821, 2824])
        out.append(
            f"{iso_ms(moment)} edge-fra-2 tollgate[{pid}]: INFO ratelimit.window throttled "
            f"tenant=acme-logistics count={count} limit=1200 window={window}"
        )
        out.append(
            f"{iso_ms(moment + timedelta(microseconds=410))} edge-fra-2 tollgate[{pid}]: access "
            f"{rng.choice(['POST', 'POST', 'GET'])} {rng.choice(paths)} status=429 tenant=acme-logistics "
            f"rid={rid} dur_ms={rng.uniform(0.2, 0.9):.2f} ua=acme-dispatch/4.2"
        )
        count += 2
    return "\n".join(out)


def loadgen_output(
    rng: random.Random, *, url: str, rate: int, seconds: int, allowed_per_step: Callable[[int], int], label: str = ""
) -> tuple[str, list[str], dict[str, int]]:
    """scripts/loadgen.py output: one row per 10 s, then totals.  Returns the text, progress snapshots, totals."""
    head = [
        f"loadgen 0.4.1 -> {url}  tenant=acme-logistics  rate={rate}/min  duration={seconds}s  workers=8",
        *([label] if label else []),
        "   t   sent    ok   429   p50_ms   p99_ms  clock(server)",
    ]
    rows = []
    sent_total = ok_total = 0
    for step in range(1, seconds // 10 + 1):
        sent = round(rate / 6) + rng.randint(-2, 2)
        ok = min(sent, allowed_per_step(step))
        sent_total += sent
        ok_total += ok
        server_clock = ""
        if label:
            moment = datetime(2026, 3, 4, 22, 59, 0, tzinfo=UTC) + timedelta(seconds=10 * step)
            server_clock = f"{moment:%H:%M:%S}Z"
        p50 = rng.uniform(2.6, 3.8)
        p99 = rng.uniform(9.0, 14.5)
        rows.append(
            f"{10 * step:>4}s {sent:>6} {ok:>5} {sent - ok:>5} {p50:>8.1f} {p99:>8.1f}  {server_clock}".rstrip()
        )
    tail = [
        "",
        f"sent {sent_total}  ok {ok_total}  429 {sent_total - ok_total}  ({100 * ok_total / sent_total:.1f}% accepted)",
        f"effective accepted rate over the last 60 s: {sum(allowed_per_step(s) for s in range(seconds // 10 - 5, seconds // 10 + 1)):.1f} req/min",
        "status codes: "
        + ", ".join(f"{code}={n}" for code, n in (("200", ok_total), ("429", sent_total - ok_total)) if n),
    ]
    text = "\n".join(head + rows + tail)
    progress = ["\n".join(head + rows[: len(rows) // 3]), "\n".join(head + rows[: 2 * len(rows) // 3])]
    return text, progress, {"sent": sent_total, "ok": ok_total}


SAMPLE_SESSION_ID = "5e8f2c1a-7d43-4b9e-a6f0-3c2d1b0e9a84"
TICKET_URL = "https://tracker.example.com/browse/RL-482"
GRAFANA_URL = (
    "https://grafana.example.com/d/rl-edge/edge-rate-limits?orgId=1&var-tenant=acme-logistics"
    f"&from={epoch_ms('2026-03-04T22:30:00Z')}&to={epoch_ms('2026-03-05T00:30:00Z')}"
)
PR_URL = "https://git.example.com/platform/tollgate/pull/1318"

SUITE_AFTER = {
    "tests/test_config.py": [
        *SUITE_BEFORE["tests/test_config.py"][:4],
        "test_algorithm_must_be_known",
        "test_missing_limits_table",
    ],
    "tests/test_middleware.py": SUITE_BEFORE["tests/test_middleware.py"],
    "tests/test_rollover.py": [
        f"{case[:-1]}-{cls}]" for case in ROLLOVER_IDS for cls in ("FixedWindowLimiter", "SlidingWindowLimiter")
    ],
    "tests/test_sliding_window.py": SLIDING_TESTS,
    "tests/test_store.py": SUITE_BEFORE["tests/test_store.py"],
    "tests/test_window.py": SUITE_BEFORE["tests/test_window.py"],
}

TICKET_TEXT = t(
    """
    RL-482: Tenants throttled at ~50% of their limit right after midnight (edge)

    Type: Bug | Priority: P1 | Status: In Progress | Component: ratelimit, edge
    Reporter: Tom Becker (on call) | Assignee: Mara Lindqvist
    Created: 2026-03-05 00:52 CET | Labels: customer-impact, paged

    Description (Tom Becker):
    Paged at 00:07 CET by "EdgeTenant429RateHigh" for acme-logistics. Their dispatch system retries on 429,
    so the retries made it worse. Grafana (edge-rate-limits, tenant=acme-logistics) shows 429s starting at
    00:00 CET sharp, with the accepted rate flat at ~600 req/min, although limits.toml says 1200 for them
    (raised from 900 in RL-377). No deploy since Tuesday. At 01:00 CET it stopped by itself.
    Other tenants affected: blue-harbor (limit 600, throttled at ~300) and northwind-freight (limit 2400,
    throttled at ~1200), same hour. Only edge-fra-* nodes checked; edge-ams-* looked normal (they run with
    TZ=UTC, edge-fra-* with TZ=Europe/Berlin: maybe relevant?).
    Customer contact: acme asked for an incident report by Friday.

    Comments:
    - Tom Becker, 01:14 CET: Not reproducible now. Leaving it for day shift. Restarting the edge workers
      did not help at 00:40.
    - Priya Raman, 08:31 CET: The CI flake on test_window.py (ci-sh-04 only) has the same "count is 2x"
      smell. ci-sh-04 is the runner we set up in Los Angeles last month.
    - Jonas Krüger, 08:50 CET: The carry in window.py is mine (RL-301, last summer). It only seeds the
      first request of a new day, it can't double-count a whole hour... can it?
    - Mara Lindqvist, 09:05 CET: Taking it. Will look at window.py and the CI logs this morning.

    Linked: RL-301 (nightly reset lost requests, done), RL-402 (Redis counter store, done),
    RL-455 (fixed window allows bursts at window boundaries, open)
    """
)

GIT_ARCHAEOLOGY = t(
    """
    7e21c5a 2025-06-12 Jonas Krüger  ratelimit: carry requests across the nightly counter reset (RL-301)
    3f9d0b8 2026-01-21 Priya Raman  ratelimit: remove nightly reset job, keys expire via EXPIRE NX (RL-402)
    c8a1e47 2025-06-12 Jonas Krüger  ratelimit: reset job logs how many keys it dropped
    a41c7e2 2025-03-02 Mara Lindqvist  ratelimit: nightly counter reset at 00:00 local time
    commit 3f9d0b8e61f2a9c4d7b05e3a8c1f6d2b9e4a7c30
    Author:     Priya Raman <priya.raman@tollgate.example.com>
    AuthorDate: Wed Jan 21 14:02:33 2026 +0100
    Commit:     Priya Raman <priya.raman@tollgate.example.com>
    CommitDate: Wed Jan 21 15:40:09 2026 +0100

        ratelimit: remove nightly reset job, keys expire via EXPIRE NX (RL-402)

        With the Redis counter store every bucket gets a TTL of two windows when
        it is created (EXPIRE NX), so stale buckets disappear on their own and
        the cron job that deleted all rl:* keys at 00:00 is no longer needed.
        Removing it also removes the 2-3 s Redis latency spike at midnight.

        The RL-301 carry in window.py stays for now; it is harmless without the
        reset job and can go in a later cleanup.

     deploy/cron/tollgate-reset.cron     |  2 -
     docs/limits.md                      | 14 +++---
     src/ratelimit/reset_job.py          | 74 ------------------------------
     src/ratelimit/store.py              | 41 +++++++++++++++--
     tests/test_reset_job.py             | 58 -----------------------
     5 files changed, 43 insertions(+), 146 deletions(-)
    """
)


def build_sample_session() -> list[dict[str, Any]]:
    """A ~2 hour Claude Code session: RL-482, a rate limiter that double-counts after midnight."""
    ids = Ids(SEED)
    project = Project(TOLLGATE_ROOT, TOLLGATE_FILES)
    session = ClaudeCodeSession(
        session_id=SAMPLE_SESSION_ID,
        cwd=TOLLGATE_ROOT,
        branch="main",
        ids=ids,
        clock=Clock("2026-03-05T09:12:03.000Z", SEED),
        base_context=31_400,  # system prompt, tool schemas, CLAUDE.md
        token_scale=3.15,  # so that usage reaches ~150k tokens where the host compacts at 151,234
    )
    story = Story(project, Tools(project), session, ids, random.Random(SEED + 1))
    investigate(story)
    confirm_in_logs(story)
    regression_test(story)
    design_and_implement(story)
    verify_locally(story)
    assert 140_000 < session.context < 151_234, session.context
    session.compact(COMPACT_SUMMARY, 151_234)
    after_compaction(story)
    ship(story)
    wrap_up(story)
    return session.records


def investigate(story: Story) -> None:
    s, tools, p = story.session, story.tools, story.project
    s.hook_progress("SessionStart", "$HOME/.claude/hooks/notify.sh session-start")
    first = s.user(
        t(
            f"""
            Morning. We got paged overnight for RL-482 ({TICKET_URL}): acme-logistics was getting 429s from
            the edge right after midnight, even though their limit in config/limits.toml is 1200 req/min. The
            Grafana panel shows throttling kicking in at roughly 600 req/min between 00:00 and 01:00 CET, and
            then it goes back to normal by itself.

            Separately, tests/test_window.py has been flaky in CI for about two weeks
            (test_rollover_does_not_double_count is the one everybody remembers from the failure emails). I
            have a feeling it's the same thing. Can you dig in? Don't change anything yet, I want to
            understand it first. Local dev server is `make dev`, it listens on https://localhost:8443.
            """
        ),
        at="09:12:41",
    )
    s.slug = "patient-copper-heron"
    s.snapshot(first)
    s.respond(
        thinking=t(
            """
            The user reports 429s at about half of the configured limit (600 instead of 1200 req/min) right
            after midnight CET, healing by itself, plus a flaky rollover test. Half the limit smells like
            every request being counted twice. "Right after midnight" and "heals by itself an hour later"
            smells like something keyed on the calendar date: CET is UTC+1, so 00:00-01:00 CET is
            23:00-00:00 UTC, exactly the hour in which the local date and the UTC date differ.

            Before guessing further: read the config, find the limiter and the tests.
            """
        ),
        text="I'll start with the ticket, the limits config and the layout of the limiter package and its tests.",
        tools=[
            tools.fetch(
                TICKET_URL, "Return the ticket description, fields and all comments verbatim.", TICKET_TEXT, 48_211
            ),
            tools.read("config/limits.toml"),
            tools.glob("src/ratelimit/**/*.py"),
            tools.glob("tests/**/*.py"),
        ],
        think_seconds=6.5,
    )
    s.respond(
        tools=[tools.read("src/ratelimit/window.py"), tools.read("src/ratelimit/store.py")],
    )
    bug_line = p.line_of("src/ratelimit/window.py", "today = datetime.now().date()")
    s.respond(
        thinking=t(
            f"""
            window.py line {bug_line}: `_roll_over_if_new_day` compares `datetime.now().date()` (naive, so
            the process's local time zone) with `self._day`. But `self._day` is always assigned from the UTC
            date of the injected clock: in __init__ and again after every "rollover". So when the local date
            differs from the UTC date, the condition is true on *every* request, and each time it does an
            extra `incr` of the same bucket key that hit() increments right afterwards. Exactly 2x counting.

            Berlin is UTC+1 in March, so local date != UTC date from 00:00 to 01:00 local. Matches the page.

            The comment says the carry exists for RL-301 (nightly counter reset). The store uses EXPIRE NX
            since RL-402, so is there still a nightly reset at all? Check later.

            For the flaky test: what clock do the tests use? If FakeClock starts at the real time.time(),
            then the tests depend on the real local date vs UTC date of the machine running them.
            """
        ),
        text="I have a strong suspect already. Let me check how the tests build their clock before I say more.",
        tools=[tools.read("tests/test_window.py"), tools.read("tests/conftest.py")],
        think_seconds=9.0,
    )
    s.respond(
        text=(
            "Running the window tests locally first. My shell is in Europe/Berlin and it is 10:1x CET, so "
            "the local and the UTC date agree right now; if my theory is right, they pass:"
        ),
        tools=[
            tools.bash(
                "pytest -q tests/test_window.py",
                "\n".join([*pytest_progress("." * 9), "9 passed in 0.19s"]),
                "Run the fixed-window tests",
                seconds=2.1,
            )
        ],
    )
    s.respond(
        text="Passes here, as predicted. Now the CI side: the log of last night's failed run on main.",
        tools=[tools.bash("gh run view 8812345 --log-failed", ci_log(story), "Show the failed job log", seconds=3.2)],
    )
    s.respond(
        thinking=t(
            """
            Confirmed: job ran on ci-sh-04 with TZ=America/Los_Angeles at 00:41 UTC, which is 16:41 PST the
            previous day. The UTC date is a day ahead of the local date, the same mismatch in the other
            direction. Every count-based test fails with exactly doubled counts (1202 vs 601, 2 vs 1, 50 vs
            25, (4, 900) vs (2, 900)); the tests that don't look at counts pass. Not flaky at all:
            deterministic by runner time zone and time of day.

            Anything else in src reading the wall clock or local dates?
            """
        ),
        tools=[tools.grep(r"datetime\.now\(|date\.today\(|utcnow|time\.time\(\)", "src")],
        think_seconds=7.0,
    )
    s.respond(
        tools=[
            tools.bash(
                "git log -S _roll_over_if_new_day --format='%h %ad %an  %s' --date=short && "
                "git log --format='%h %ad %an  %s' --date=short -- src/ratelimit/reset_job.py && "
                "git show --stat --format=fuller 3f9d0b8",
                GIT_ARCHAEOLOGY,
                "Find the commits behind the rollover carry and the reset job",
                seconds=0.6,
            )
        ],
    )
    hit_line = p.line_of("src/ratelimit/window.py", "count = self._store.incr(key, cost")
    retry_line = p.line_of("src/ratelimit/window.py", 'headers["Retry-After"]')
    s.respond(
        text=t(
            f"""
            Here is what's going on. It is one bug, and it explains both symptoms.

            **The bug**: `src/ratelimit/window.py:{bug_line}`, in `_roll_over_if_new_day()`:

            ```python
            today = datetime.now().date()          # local date (the process's TZ)
            if today != self._day:                 # self._day is always a *UTC* date
                self._store.incr(key, cost, ...)   # extra increment of the same bucket
                self._day = datetime.fromtimestamp(now, tz=timezone.utc).date()
            ```

            `self._day` is set from the UTC date but compared with the *local* date. Whenever the two differ,
            the condition is true on every request, not only on the first one of a new day, so each request
            increments its bucket twice: once here and once in `hit()` (line {hit_line}).

            - **Production**: the edge runs with `TZ=Europe/Berlin`. From 00:00 to 01:00 CET (23:00 to 00:00
              UTC) the local date is one day ahead, every request counts as 2, and acme-logistics gets 429
              after ~600 real requests per minute instead of 1200. At 01:00 CET the UTC date catches up and it
              heals by itself. That is exactly the Grafana shape.
            - **CI**: runner `ci-sh-04` is self-hosted with `TZ=America/Los_Angeles`. From 16:00 to 24:00
              Pacific the UTC date is a day *ahead* of the local one: the same mismatch, other direction.
              `FakeClock` starts at the real `time.time()` and `datetime.now()` reads the real wall clock, so
              6 of the 9 tests in test_window.py fail with exactly doubled counts (`assert 1202 == 601`,
              `assert 2 == 1`, `assert 50 == 25`, ...). It only looks flaky because it depends on the runner
              and the time of day.

            Two more findings:

            1. The comment says the carry exists because of RL-301 (the nightly counter reset). Since RL-402
               (0.13.0) the buckets expire through `EXPIRE NX` and there is no nightly reset any more, so the
               carry has no job left at all.
            2. `Decision.headers()` (line {retry_line}) computes `Retry-After` from `time.time()` instead of
               the limiter's clock. Harmless in production, wrong under `TOLLGATE_FAKE_NOW`. Not part of
               RL-482, but worth a ticket.

            If you want, I can check this against last night's edge logs before we change anything.
            """
        ),
        think_seconds=5.0,
    )


def confirm_in_logs(story: Story) -> None:
    s, tools = story.session, story.tools
    s.user(
        t(
            f"""
            Yes please. I synced last night's logs from edge-fra-2 into ./logs/ (they're gitignored, don't
            commit them). Grafana for reference: {GRAFANA_URL}
            """
        ),
        at="09:31:12",
    )
    table, totals = per_minute_table(story.rng)
    awk = (
        "zcat logs/access-2026-03-04.log.gz logs/access-2026-03-05.log.gz "
        "| grep ' access ' | grep 'tenant=acme-logistics' "
        '| awk \'$1 >= "2026-03-04T22:30" && $1 < "2026-03-05T00:31" '
        '{m=substr($1,1,16); n[m]++; if ($7=="status=429") r[m]++} '
        'END {for (m in n) printf "%s  %8d %4d %4d %10d\\n", m, n[m], n[m]-r[m], r[m], '
        '(m >= "2026-03-04T23:00" && m < "2026-03-05T00:00") ? 2*n[m] : n[m]}\' | sort'
    )
    s.respond(
        thinking=t(
            """
            The access log has one line per request with status and tenant. Count per minute for
            acme-logistics from 22:30 to 00:30 UTC: requests, 200s, 429s. The counter value itself is not in
            the access line; the throttle log line has it, but only for rejected requests. I'll add the
            expected counter value (2x in the suspect hour) as a column and then check it against the
            throttle lines separately.
            """
        ),
        tools=[tools.bash(awk, table, "Per-minute request and 429 counts for acme-logistics", seconds=41.0)],
        think_seconds=5.5,
    )
    s.respond(
        tools=[
            tools.bash(
                "zcat logs/access-2026-03-04.log.gz | grep -E 'throttled|status=429' | grep acme-logistics | head -50",
                throttle_lines(story.rng, story.ids),
                "First 429s of the night with counter values",
                seconds=23.0,
            )
        ],
    )
    s.respond(
        text=t(
            f"""
            The logs confirm it, minute by minute:

            - **22:30 to 22:59 UTC**: acme-logistics sends 612 to 706 requests per minute, zero 429s.
            - **23:00 to 23:59 UTC** (00:00 to 01:00 CET): in *every* minute exactly 600 requests pass and the
              rest get 429, {totals["throttled"]:,} rejected requests in that hour out of
              {totals["requests_bad_hour"]:,}. The busiest minute had {totals["max_requests"]} requests, far
              below the contracted 1200.
            - **From 00:00 UTC**: back to zero 429s without anybody touching anything.

            The throttle lines show the mechanism directly: the first rejected request of the 23:00 window
            logs `count=1202 limit=1200`, the next `count=1204`, then `1206`: the counter moves in steps of
            **2** per request. With single counting those would be 1201, 1202, 1203.

            So RL-482 is the local-date/UTC-date comparison in `_roll_over_if_new_day()`, confirmed in
            production data.
            """
        ),
    )


def regression_test(story: Story) -> None:
    s, tools, p = story.session, story.tools, story.project
    s.user(
        t(
            """
            ok, convinced. Before touching the limiter: write a regression test that fails deterministically,
            not depending on when or where it runs. Put it in its own file.
            """
        ),
        at="09:44:30",
    )
    s.respond(
        thinking=t(
            """
            Deterministic means: control both the instant (the injected clock) and the local time zone, and
            make `datetime.now()` in the module follow the injected clock instead of the wall clock.

            - time zone: monkeypatch TZ + time.tzset(), restored afterwards.
            - `window.datetime`: replace the module attribute with a datetime subclass whose now() returns
              the frozen instant (fromtimestamp with tz=None gives local time under the patched TZ).
            - instants: pick one per zone where local date != UTC date, plus a UTC control case.
              Berlin 23:30Z (00:30 CET next day), LA 03:00Z (19:00 PST previous day), Honolulu 09:40Z
              (23:40 previous day), Kiritimati UTC+14 at 10:15Z (00:15 next day), Tokyo 16:00Z (01:00 next
              day).

            Assert count == n and remaining == 1200 - n for 10 requests.
            """
        ),
        tools=[tools.write("tests/test_rollover.py", TEST_ROLLOVER_PY)],
        think_seconds=12.0,
    )
    failures: list[str] = []
    rollover_cases = [
        ("Europe/Berlin", "2026-03-04T23:30:00+00:00"),
        ("America/Los_Angeles", "2026-03-05T03:00:00+00:00"),
        ("Pacific/Honolulu", "2026-03-05T09:40:00+00:00"),
        ("Pacific/Kiritimati", "2026-03-05T10:15:00+00:00"),
        ("Asia/Tokyo", "2026-03-05T16:00:00+00:00"),
    ]
    for (zone, instant), case_id in zip(rollover_cases, ROLLOVER_IDS[1:], strict=True):
        reset = float(int(epoch(instant) // 60) * 60 + 60)
        failures += pytest_failure(
            p,
            "tests/test_rollover.py",
            "test_each_request_counted_once",
            "assert decision.count == expected",
            [
                f"AssertionError: request 1 counted as 2 in {zone}",
                "assert 2 == 1",
                f" +  where 2 = {decision_repr(True, 2, 1200, reset)}.count",
            ],
            [
                ("zone", repr(zone)),
                ("instant", repr(instant)),
                ("local_zone", f"<function local_zone.<locals>.use at {story.ids.address()}>"),
                ("monkeypatch", f"<_pytest.monkeypatch.MonkeyPatch object at {story.ids.address()}>"),
            ],
            title=case_id,
        )
    output = "\n".join(
        pytest_progress(".FFFFF")
        + [banner("FAILURES", "=")]
        + failures
        + [banner("short test summary info", "=")]
        + [
            f"FAILED tests/test_rollover.py::{cid} - AssertionError: request 1 counted as 2 in {z}"
            for (z, _), cid in zip(rollover_cases, ROLLOVER_IDS[1:], strict=True)
        ]
        + ["5 failed, 1 passed in 0.31s"]
    )
    s.respond(
        tools=[
            tools.bash(
                "pytest -q tests/test_rollover.py", output, "Run the new regression test", exit_code=1, seconds=2.4
            )
        ]
    )
    s.respond(
        text=t(
            """
            `tests/test_rollover.py` now fails deterministically: 5 of 6 cases, each with `request 1 counted
            as 2`. Only the UTC control case passes, which is the point: the bug needs local date != UTC date.

            How it stays deterministic wherever it runs:

            - the local time zone is set per case (`TZ` + `time.tzset()`, undone after each case);
            - `ratelimit.window.datetime` is swapped for a subclass whose `now()` follows the test clock, so
              the wall clock of the CI runner no longer matters;
            - each instant is chosen so that the local date differs from the UTC date in that zone (Berlin
              00:30 CET, Los Angeles 19:00 PST the day before, Honolulu 23:40 the day before, Kiritimati
              00:15 two days after in local terms, Tokyo 01:00).

            I haven't touched the limiter yet.
            """
        ),
    )


OPTIONS_TEXT = """
Four options, from the smallest change to the largest:

1. **One-line fix.** Compare UTC with UTC (`datetime.fromtimestamp(now, tz=timezone.utc).date()`), or
   drop the carry entirely since there is no nightly reset any more. Fixes RL-482 today. It leaves RL-455
   alone: with a fixed window a tenant can send 1200 requests at 12:00:59 and another 1200 at 12:01:00,
   2,400 requests in about two seconds, twice the contract.

2. **Sliding window counter.** Keep the current and the previous minute's counters and estimate
   `previous * (1 - elapsed) + current`. Same storage as today (two keys per tenant, the same Redis
   `INCRBY` + `EXPIRE NX` pipeline), no calendar dates anywhere, and the boundary burst goes away: the
   worst case is about the limit, not twice the limit. Cost: it is an approximation that assumes the
   previous window's requests were spread evenly; in the worst case it is off by a few percent.

3. **Sliding log.** Store a timestamp per request (Redis sorted set: `ZADD`, `ZREMRANGEBYSCORE`,
   `ZCARD`). Exact, but memory grows with traffic: acme alone is 1,200 entries per minute, and across the
   ~38,000 tenants on a busy edge node it works out to roughly **365 MB** of sorted-set entries per Redis
   shard, plus three round trips per request instead of one pipeline.

4. **Token bucket.** Smooth and cheap, but it changes what a limit *means* (refill rate + burst size
   instead of requests per minute), and both the contracts and billing's usage reports are written in
   requests per minute. A bigger conversation than this ticket.

My recommendation: **option 2, the sliding window counter**, and additionally remove the rollover carry
from the old code so the fixed window is also correct for as long as it stays around. It fixes RL-482 by
construction (there are no dates left to compare), addresses RL-455, and needs no new infrastructure. I
would keep the fixed window selectable in limits.toml for one release as a fallback.
"""


def design_and_implement(story: Story) -> None:
    s, tools, p = story.session, story.tools, story.project
    s.user(
        t(
            """
            Good. What are the options for the fix? I'd rather not ship a one-line band-aid if the fixed
            window design itself is the problem. Product has also been complaining about boundary bursts
            (RL-455).
            """
        ),
        at="09:52:08",
    )
    s.respond(
        thinking=t(
            """
            Options: band-aid (UTC date / drop carry), sliding window counter, sliding log, token bucket.
            Numbers for the sliding log: ~38k tenants per busy node; at an average of ~100 req/min with a 60 s
            log plus sorted-set overhead (~100 bytes per member with the skiplist and dict) that's
            38,000 * 100 * 96 bytes = ~365 MB. Sliding window counter: 2 counters per tenant, same as now.
            Token bucket changes the contract semantics. Recommend the sliding window counter.
            """
        ),
        text=t(OPTIONS_TEXT),
        think_seconds=14.0,
    )
    decision = s.user(
        t(
            """
            Go with the sliding window counter. Agreed on rejecting the sliding log, 365 MB per shard is a
            non-starter for the edge Redis. Keep the fixed window behind `algorithm = "fixed"` in
            limits.toml for one release, default to sliding. Work on a branch.
            """
        ),
        at="09:58:40",
    )
    s.snapshot(decision, {"tests/test_rollover.py": 1}, update=False)
    s.respond(
        text=t(
            """
            Decision for the record (I'll put it in the commit message too): we chose a sliding window counter
            over the fixed window because it never looks at calendar dates (so RL-482 cannot come back), it
            caps a boundary burst at about 1x the limit instead of 2x (RL-455), and it needs the same two
            Redis counters per tenant as today. Rejected: the sliding log (~365 MB per Redis shard, three
            round trips per request) and the token bucket (changes what a limit means). The fixed window
            stays for one release behind `algorithm = "fixed"`. Starting on a branch.
            """
        ),
        tools=[
            tools.bash(
                "git switch -c fix/rl-482-sliding-window",
                "Switched to a new branch 'fix/rl-482-sliding-window'",
                "Create the feature branch",
                seconds=0.3,
            )
        ],
    )
    s.branch = "fix/rl-482-sliding-window"
    plan = [
        ("Add SlidingWindowLimiter in src/ratelimit/sliding_window.py", "in_progress", "Adding SlidingWindowLimiter"),
        ("Remove the midnight rollover carry from the fixed window", "pending", "Removing the rollover carry"),
        (
            'Add `algorithm = "sliding" | "fixed"` to limits.toml and config.py',
            "pending",
            "Adding the algorithm setting",
        ),
        ("Select the limiter in middleware.build_limiter()", "pending", "Wiring the limiter selection"),
        ("Run the full suite, the TZ matrix and loadgen on :8443", "pending", "Running the checks"),
    ]
    s.respond(tools=[tools.todo(plan)])
    s.respond(
        tools=[tools.read("src/ratelimit/middleware.py"), tools.read("src/ratelimit/config.py")],
    )
    s.respond(
        thinking=t(
            """
            SlidingWindowLimiter: same constructor and public API as FixedWindowLimiter (hit, peek, reload,
            limit_for, window_seconds) so the middleware can take either. Reuse Decision and Clock from the
            window module for now.

            hit(): read previous window's counter (get), incr current, estimate = previous * weight + current.
            If over the limit, refund the increment: otherwise rejected requests keep the estimate high and a
            tenant that retries aggressively locks itself out for the rest of the window (that's one of the
            complaints in RL-455 too). Refund costs one extra INCRBY only on the rejected path.

            No datetime import at all in the new module; everything from the injected clock.
            """
        ),
        tools=[tools.write("src/ratelimit/sliding_window.py", SLIDING_WINDOW_PY)],
        think_seconds=16.0,
    )
    s.respond(
        tools=[tools.write("tests/test_sliding_window.py", TEST_SLIDING_WINDOW_PY)],
    )
    s.respond(
        text=t(
            """
            `SlidingWindowLimiter` and its 8 tests are in. It has the same interface as
            `FixedWindowLimiter` (`hit`, `peek`, `reload`, `limit_for`), so the middleware can take either.

            Next steps: wire it into `build_limiter()` and the config, and take the rollover carry out of the
            fixed window. I'd also delete `window.py` once `Decision` and `Clock` have moved to their own
            module, since nothing should use the fixed window after the fallback release.
            """
        ),
    )
    cjk = s.user("先别删旧的 window.py，发布说明里还要引用它。改个名字就行，改成 fixed_window.py。", at="10:07:55")
    s.snapshot(cjk, {"tests/test_rollover.py": 1, "src/ratelimit/sliding_window.py": 1}, update=False)
    p.rename("src/ratelimit/window.py", "src/ratelimit/fixed_window.py")
    s.respond(
        text="好的, I'll keep it and only rename it to `fixed_window.py`, so the name says which algorithm it is.",
        tools=[
            tools.bash(
                "git mv src/ratelimit/window.py src/ratelimit/fixed_window.py",
                "",
                "Rename window.py to fixed_window.py",
                seconds=0.2,
            )
        ],
    )
    fix_imports(story)
    add_algorithm_setting(story)


def collection_errors(p: Project) -> str:
    def block(rel: str, frames: list[tuple[str, str]], error: str) -> list[str]:
        lines = [banner(f"ERROR collecting {rel}", "_")]
        if rel != "tests/test_middleware.py":
            lines += [
                f"ImportError while importing test module '{p.abs(rel)}'.",
                "Hint: make sure your test modules/packages have valid Python names.",
                "Traceback:",
            ]
        lines += [
            "/usr/lib/python3.11/importlib/__init__.py:126: in import_module",
            "    return _bootstrap._gcd_import(name[level:], package, level)",
        ]
        for frame_rel, snippet in frames:
            lines += [f"{frame_rel}:{p.line_of(frame_rel, snippet)}: in <module>", f"    {snippet}"]
        return [*lines, f"E   {error}"]

    out = [banner("ERRORS", "=")]
    out += block(
        "tests/test_middleware.py",
        [
            ("tests/test_middleware.py", "from ratelimit.config import LimitsConfig"),
            ("src/ratelimit/__init__.py", "from ratelimit.window import Decision, FixedWindowLimiter"),
        ],
        "ModuleNotFoundError: No module named 'ratelimit.window'",
    )
    out += block(
        "tests/test_rollover.py",
        [("tests/test_rollover.py", "from ratelimit import window")],
        f"ImportError: cannot import name 'window' from 'ratelimit' ({p.abs('src/ratelimit/__init__.py')})",
    )
    out += block(
        "tests/test_sliding_window.py",
        [
            ("tests/test_sliding_window.py", "from ratelimit.sliding_window import SlidingWindowLimiter"),
            ("src/ratelimit/sliding_window.py", "from ratelimit.window import Clock, Decision"),
        ],
        "ModuleNotFoundError: No module named 'ratelimit.window'",
    )
    out += block(
        "tests/test_window.py",
        [("tests/test_window.py", "from ratelimit.window import FixedWindowLimiter")],
        "ModuleNotFoundError: No module named 'ratelimit.window'",
    )
    out += [banner("short test summary info", "=")]
    out += [
        f"ERROR {rel}"
        for rel in (
            "tests/test_middleware.py",
            "tests/test_rollover.py",
            "tests/test_sliding_window.py",
            "tests/test_window.py",
        )
    ]
    out += [banner("Interrupted: 4 errors during collection", "!"), "4 errors in 0.46s"]
    return "\n".join(out)


def fix_imports(story: Story) -> None:
    s, tools, p = story.session, story.tools, story.project
    s.respond(
        tools=[
            tools.bash(
                "pytest -q", collection_errors(p), "Run the whole suite after the rename", exit_code=2, seconds=2.2
            )
        ]
    )
    s.respond(
        tools=[tools.grep(r"ratelimit\.window|from ratelimit import window", "")],
    )
    s.respond(
        tools=[
            tools.edit(
                "src/ratelimit/__init__.py",
                'from ratelimit.config import ConfigError, LimitsConfig, load\nfrom ratelimit.window import Decision, FixedWindowLimiter\n\n__all__ = ["ConfigError", "Decision", "FixedWindowLimiter", "LimitsConfig", "load"]',
                'from ratelimit.config import ConfigError, LimitsConfig, load\nfrom ratelimit.fixed_window import Decision, FixedWindowLimiter\nfrom ratelimit.sliding_window import SlidingWindowLimiter\n\n__all__ = [\n    "ConfigError",\n    "Decision",\n    "FixedWindowLimiter",\n    "LimitsConfig",\n    "SlidingWindowLimiter",\n    "load",\n]',
            )
        ]
    )
    s.respond(
        tools=[
            tools.edit(
                "src/ratelimit/sliding_window.py",
                "from ratelimit.store import CounterStore\nfrom ratelimit.window import Clock, Decision",
                "from ratelimit.fixed_window import Clock, Decision\nfrom ratelimit.store import CounterStore",
            )
        ]
    )
    s.respond(
        text=(
            "The middleware needs the new imports, a `Limiter` type that both classes satisfy, and "
            "`build_limiter()` has to pick the class from the config:"
        ),
        tools=[
            tools.multi_edit(
                "src/ratelimit/middleware.py",
                [
                    (
                        "from ratelimit.config import LimitsConfig\nfrom ratelimit.store import CounterStore\nfrom ratelimit.window import Clock, Decision, FixedWindowLimiter",
                        "from ratelimit.config import LimitsConfig\nfrom ratelimit.fixed_window import Clock, Decision, FixedWindowLimiter\nfrom ratelimit.sliding_window import SlidingWindowLimiter\nfrom ratelimit.store import CounterStore\n\nLimiter = FixedWindowLimiter | SlidingWindowLimiter",
                    ),
                    (
                        "def build_limiter(config: LimitsConfig, store: CounterStore, clock: Clock | None = None) -> FixedWindowLimiter:\n    return FixedWindowLimiter(\n        store,",
                        'def build_limiter(config: LimitsConfig, store: CounterStore, clock: Clock | None = None) -> Limiter:\n    """The limiter that ``[limits] algorithm`` names (``sliding`` unless set)."""\n    cls = FixedWindowLimiter if config.algorithm == "fixed" else SlidingWindowLimiter\n    log.info("rate limiter: %s window, %d s", config.algorithm, config.window_seconds)\n    return cls(\n        store,',
                    ),
                    (
                        "def __init__(self, app: App, limiter: FixedWindowLimiter, *, exempt_paths",
                        "def __init__(self, app: App, limiter: Limiter, *, exempt_paths",
                    ),
                ],
            )
        ],
    )
    s.respond(
        tools=[
            tools.edit(
                "tests/test_window.py",
                "from ratelimit.window import FixedWindowLimiter",
                "from ratelimit.fixed_window import FixedWindowLimiter",
            )
        ]
    )
    s.respond(
        text=(
            "The regression test should cover both limiters from now on, so it keeps guarding the fallback "
            "too. Parametrizing it over the class:"
        ),
        tools=[
            tools.multi_edit(
                "tests/test_rollover.py",
                [
                    (
                        "from ratelimit import window\nfrom ratelimit.store import MemoryStore\nfrom ratelimit.window import FixedWindowLimiter\n",
                        "from ratelimit import fixed_window, sliding_window\nfrom ratelimit.fixed_window import FixedWindowLimiter\nfrom ratelimit.sliding_window import SlidingWindowLimiter\nfrom ratelimit.store import MemoryStore\n",
                    ),
                    (
                        '@pytest.mark.parametrize(("zone", "instant"), CASES)\ndef test_each_request_counted_once(zone, instant, local_zone, monkeypatch):\n    local_zone(zone)\n    FrozenDatetime.frozen = datetime.fromisoformat(instant).timestamp()\n    monkeypatch.setattr(window, "datetime", FrozenDatetime)\n',
                        '@pytest.mark.parametrize("limiter_class", [FixedWindowLimiter, SlidingWindowLimiter])\n@pytest.mark.parametrize(("zone", "instant"), CASES)\ndef test_each_request_counted_once(zone, instant, limiter_class, local_zone, monkeypatch):\n    local_zone(zone)\n    FrozenDatetime.frozen = datetime.fromisoformat(instant).timestamp()\n    for module in (fixed_window, sliding_window):\n        monkeypatch.setattr(module, "datetime", FrozenDatetime, raising=False)\n',
                    ),
                    (
                        "    limiter = FixedWindowLimiter(MemoryStore(clock), {",
                        "    limiter = limiter_class(MemoryStore(clock), {",
                    ),
                ],
            )
        ],
    )
    source = p.files["src/ratelimit/fixed_window.py"]
    old_method = source[source.index("\n    def _roll_over_if_new_day") :]
    s.respond(
        text=(
            "Now the carry itself. The nightly reset it compensated for (RL-301) is gone since the buckets "
            "expire via `EXPIRE NX`, so I'm removing it rather than patching the date comparison:"
        ),
        tools=[
            tools.multi_edit(
                "src/ratelimit/fixed_window.py",
                [
                    (
                        "        self._clock = clock\n        self._day: date = datetime.fromtimestamp(clock(), tz=timezone.utc).date()\n",
                        "        self._clock = clock\n",
                    ),
                    (
                        "        key = self._bucket_key(tenant, window_start)\n        self._roll_over_if_new_day(key, now, cost)\n",
                        "        key = self._bucket_key(tenant, window_start)\n",
                    ),
                    (old_method, "\n"),
                ],
            )
        ],
    )


def add_algorithm_setting(story: Story) -> None:
    s, tools, p = story.session, story.tools, story.project
    edited = [
        "src/ratelimit/__init__.py",
        "src/ratelimit/middleware.py",
        "tests/test_window.py",
        "tests/test_rollover.py",
    ]
    s.snapshot(s.parent or "", dict.fromkeys(edited, 1) | {"src/ratelimit/fixed_window.py": 2}, update=True)
    s.respond(
        tools=[
            tools.multi_edit(
                "src/ratelimit/config.py",
                [
                    (
                        '_STORES = {"memory", "redis"}',
                        '_STORES = {"memory", "redis"}\n_ALGORITHMS = {"fixed", "sliding"}',
                    ),
                    (
                        "    redis_url: str | None = None\n    retry_after_jitter_ms: int = 0",
                        '    redis_url: str | None = None\n    algorithm: str = "sliding"\n    retry_after_jitter_ms: int = 0',
                    ),
                    (
                        '        raise ConfigError(f"{path}: [limits] store must be one of {sorted(_STORES)}, got {store!r}")\n',
                        '        raise ConfigError(f"{path}: [limits] store must be one of {sorted(_STORES)}, got {store!r}")\n    algorithm = limits.get("algorithm", "sliding")\n    if algorithm not in _ALGORITHMS:\n        raise ConfigError(f"{path}: [limits] algorithm must be one of {sorted(_ALGORITHMS)}, got {algorithm!r}")\n',
                    ),
                    (
                        '        redis_url=limits.get("redis_url"),\n',
                        '        redis_url=limits.get("redis_url"),\n        algorithm=algorithm,\n',
                    ),
                ],
            )
        ],
    )
    s.respond(
        tools=[
            tools.edit(
                "config/limits.toml",
                "[limits]\nwindow_seconds = 60\n",
                '[limits]\n# "sliding" (default since RL-482) or "fixed" (fallback, removed in the next release).\nalgorithm = "sliding"\nwindow_seconds = 60\n',
            )
        ]
    )
    allowed = ", ".join(
        sorted({"window_seconds", "default_requests_per_minute", "store", "redis_url", "retry_after_jitter_ms"})
    )
    err = f"ratelimit.config.ConfigError: {p.abs('config/limits.toml')}: unknown key 'algorithm' in [limits] (allowed: {allowed})"
    raise_line = p.line_of("src/ratelimit/config.py", 'raise ConfigError(f"{path}: unknown key')
    failure = [
        banner("test_example_config_loads", "_"),
        "",
        "    def test_example_config_loads():",
        ">       cfg = load(EXAMPLE)",
        "",
        f"tests/test_config.py:{p.line_of('tests/test_config.py', 'cfg = load(EXAMPLE)')}: ",
        "_ " * 39 + "_",
        f"src/ratelimit/config.py:{p.line_of('src/ratelimit/config.py', '_check_keys(limits, _LIMIT_KEYS')}: in load",
        '    _check_keys(limits, _LIMIT_KEYS, "limits", path)',
        "_ " * 39 + "_",
        "",
        "table = {'algorithm': 'sliding', 'default_requests_per_minute': 300, 'redis_url': 'redis://rl-redis.internal:6379/3', 'retry_after_jitter_ms': 250, ...}",
        "allowed = {'default_requests_per_minute', 'redis_url', 'retry_after_jitter_ms', 'store', 'window_seconds'}",
        "where = 'limits'",
        f"path = PosixPath('{p.abs('config/limits.toml')}')",
        "",
        "    def _check_keys(table: dict[str, Any], allowed: set[str], where: str, path: Path) -> None:",
        "        unknown = sorted(set(table) - allowed)",
        "        if unknown:",
        ">           raise ConfigError(f\"{path}: unknown key {unknown[0]!r} in [{where}] (allowed: {', '.join(sorted(allowed))})\")",
        f"E           {err}",
        "",
        f"src/ratelimit/config.py:{raise_line}: ConfigError",
    ]
    marks = "F" + "." * 4 + "." * 8 + "." * 12 + "." * 8 + "." * 6 + "." * 9
    output = "\n".join(
        [
            *pytest_progress(marks),
            banner("FAILURES", "="),
            *failure,
            banner("short test summary info", "="),
            f"FAILED tests/test_config.py::test_example_config_loads - {err}",
            "1 failed, 47 passed in 1.12s",
        ]
    )
    s.respond(tools=[tools.bash("pytest -q", output, "Run the whole suite", exit_code=1, seconds=3.1)])
    s.respond(
        thinking="Forgot to allow the new key in _LIMIT_KEYS; the check runs before my validation.",
        tools=[
            tools.edit(
                "src/ratelimit/config.py",
                '_LIMIT_KEYS = {"window_seconds", "default_requests_per_minute", "store", "redis_url", "retry_after_jitter_ms"}',
                '_LIMIT_KEYS = {\n    "algorithm",\n    "window_seconds",\n    "default_requests_per_minute",\n    "store",\n    "redis_url",\n    "retry_after_jitter_ms",\n}',
            )
        ],
        think_seconds=3.0,
    )
    s.respond(
        tools=[
            tools.edit(
                "tests/test_config.py",
                "def test_missing_limits_table(tmp_path):",
                'def test_algorithm_must_be_known(tmp_path):\n    path = tmp_path / "limits.toml"\n    path.write_text(\'[server]\\n[limits]\\ndefault_requests_per_minute = 10\\nalgorithm = "leaky"\\n\')\n    with pytest.raises(ConfigError, match="algorithm must be one of"):\n        load(path)\n\n\ndef test_missing_limits_table(tmp_path):',
            )
        ],
    )
    s.respond(
        tools=[
            tools.bash(
                "pytest -v",
                "\n".join(
                    pytest_header(TOLLGATE_ROOT, 49, verbose=True)
                    + pytest_verbose(SUITE_AFTER)
                    + ["", banner("49 passed in 1.09s", "=")]
                ),
                "Run the whole suite",
                seconds=3.0,
            )
        ]
    )
    s.respond(
        text=t(
            """
            All 49 tests pass. What changed:

            - **New** `src/ratelimit/sliding_window.py`: `SlidingWindowLimiter` (estimate = previous window x
              weight + current window; rejected requests are refunded) and `tests/test_sliding_window.py`.
            - **Renamed** `src/ratelimit/window.py` -> `src/ratelimit/fixed_window.py` (kept, as you asked),
              and the midnight rollover carry is **removed** from it, so the fallback is correct too.
            - `config/limits.toml` + `src/ratelimit/config.py`: `[limits] algorithm = "sliding" | "fixed"`,
              default `sliding`, unknown values rejected.
            - `src/ratelimit/middleware.py`: `build_limiter()` picks the class from the config.
            - `tests/test_rollover.py` now runs each of the 6 zone/instant cases against both limiters (12
              cases); all pass.
            """
        ),
    )


def dev_server_crash(p: Project) -> str:
    """What ``make dev`` printed when it tried to import the Redis client."""
    app_line = p.line_of("src/ratelimit/app.py", "store = RedisStore.from_url")
    import_line = p.line_of("src/ratelimit/store.py", "import redis")
    venv = f"{TOLLGATE_ROOT}/.venv/lib/python3.11/site-packages"
    return t(
        f"""
        curl: (7) Failed to connect to localhost port 8443 after 0 ms: Couldn't connect to server
        TOLLGATE_LIMITS=config/limits.toml .venv/bin/uvicorn --factory ratelimit.app:create_app --host 0.0.0.0 --port 8443 --ssl-keyfile dev/tls/localhost.key --ssl-certfile dev/tls/localhost.pem
        Traceback (most recent call last):
          File "{TOLLGATE_ROOT}/.venv/bin/uvicorn", line 8, in <module>
            sys.exit(main())
                     ^^^^^^
          File "{venv}/click/core.py", line 1161, in __call__
            return self.main(*args, **kwargs)
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^
          File "{venv}/uvicorn/main.py", line 412, in main
            run(
          File "{venv}/uvicorn/main.py", line 579, in run
            server.run()
          File "{venv}/uvicorn/server.py", line 66, in run
            return asyncio.run(self.serve(sockets=sockets))
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
          File "{venv}/uvicorn/server.py", line 70, in serve
            await self._serve(sockets)
          File "{venv}/uvicorn/server.py", line 77, in _serve
            config.load()
          File "{venv}/uvicorn/config.py", line 479, in load
            self.loaded_app = self.loaded_app()
                              ^^^^^^^^^^^^^^^^^
          File "{TOLLGATE_ROOT}/src/ratelimit/app.py", line {app_line}, in create_app
            store = RedisStore.from_url(cfg.redis_url) if cfg.store == "redis" else MemoryStore()
                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
          File "{TOLLGATE_ROOT}/src/ratelimit/store.py", line {import_line}, in from_url
            import redis  # imported lazily: tests and make dev run without it
            ^^^^^^^^^^^^
        ModuleNotFoundError: No module named 'redis'
        make: *** [Makefile:24: dev] Error 1
        """
    )


def verify_locally(story: Story) -> None:
    s, tools, p = story.session, story.tools, story.project
    s.user(
        "nice. Run the rollover + window tests under a few real TZs too, then the load generator against a local "
        "instance on 8443 with acme's limit.",
        at="10:24:30",
    )
    tz_out = []
    for zone in ["UTC", "Europe/Berlin", "America/Los_Angeles", "Pacific/Honolulu", "Pacific/Kiritimati"]:
        tz_out += [f"== TZ={zone}", *pytest_progress("." * 21), "21 passed in 0.38s"]
    s.respond(
        tools=[
            tools.bash(
                "for tz in UTC Europe/Berlin America/Los_Angeles Pacific/Honolulu Pacific/Kiritimati; do "
                'echo "== TZ=$tz"; TZ=$tz pytest -q tests/test_rollover.py tests/test_window.py | tail -n 2; done',
                "\n".join(tz_out),
                "Run rollover and window tests under five time zones",
                seconds=6.0,
            )
        ]
    )
    refused = "curl: (7) Failed to connect to localhost port 8443 after 0 ms: Couldn't connect to server"
    s.respond(
        tools=[
            tools.bash(
                "curl -sk https://localhost:8443/healthz",
                refused,
                "Check whether the dev server is up",
                exit_code=7,
                seconds=0.2,
            )
        ]
    )
    s.respond(
        tools=[
            tools.bash(
                "make dev > /tmp/tollgate-dev.log 2>&1",
                "Command running in background with ID: bash_1",
                "Start the dev server on :8443",
                seconds=0.4,
                background=True,
            )
        ],
    )
    s.respond(
        tools=[
            tools.bash(
                "sleep 2; curl -sSk https://localhost:8443/healthz; tail -n 30 /tmp/tollgate-dev.log",
                dev_server_crash(p),
                "Check health and the server log",
                seconds=2.4,
            )
        ],
    )
    s.respond(
        text=t(
            """
            The dev server died on startup: `make dev` loaded `config/limits.toml`, which selects the Redis
            store, and the dev venv has no `redis` client (it is only installed in the production image). The
            Makefile takes `LIMITS=`, and `config/limits.dev.toml` uses the in-memory store, so restarting with
            that:
            """
        ),
        tools=[
            tools.bash(
                "make dev LIMITS=config/limits.dev.toml > /tmp/tollgate-dev.log 2>&1",
                "Command running in background with ID: bash_2",
                "Restart the dev server with the in-memory store",
                seconds=0.4,
                background=True,
            )
        ],
    )
    s.respond(
        tools=[
            tools.bash(
                "sleep 2 && curl -sk -i https://localhost:8443/healthz && tail -n 3 /tmp/tollgate-dev.log",
                t(
                    """
                    HTTP/1.1 200 OK
                    content-type: application/json
                    content-length: 15

                    {"status":"ok"}
                    INFO:     Uvicorn running on https://0.0.0.0:8443 (Press CTRL+C to quit)
                    INFO ratelimit.middleware rate limiter: sliding window, 60 s
                    INFO:     127.0.0.1:51734 - "GET /healthz HTTP/1.1" 200 OK
                    """
                ),
                "Wait for the server and check health",
                seconds=2.6,
            )
        ]
    )
    steady = {1: 217, 2: 217, 3: 217, 4: 217, 5: 217, 6: 115}
    text, progress, totals = loadgen_output(
        story.rng,
        url="https://localhost:8443/v1/shipments",
        rate=1300,
        seconds=120,
        allowed_per_step=lambda step: steady.get(step, 200),
    )
    s.respond(
        tools=[
            tools.bash(
                "python scripts/loadgen.py --url https://localhost:8443/v1/shipments --tenant acme-logistics "
                "--rate 1300 --duration 120 --insecure",
                text,
                "Load test at 1300 req/min for 120 s",
                seconds=123.0,
                progress=progress,
            )
        ],
    )
    s.respond(
        text=t(
            f"""
            Load test against the branch on :8443, acme-logistics at 1300 req/min (100 over its limit):

            - first minute: everything passes until the estimate reaches 1200 at ~55 s, then 429s start;
            - second minute (steady state): **1200 req/min accepted**, ~100/min rejected, spread evenly over
              the minute instead of a wall of 429s at the end of each window;
            - overall {totals["ok"]:,} of {totals["sent"]:,} accepted, p99 latency under 15 ms.

            The TZ matrix is green in all five zones (21 tests each).
            """
        ),
    )


COMPACT_SUMMARY = t(
    """
    This session is being continued from an earlier conversation that ran out of context. Summary of that conversation:

    1. What the user asked for
       - Investigate RL-482 (https://tracker.example.com/browse/RL-482): tenant acme-logistics received 429s from the tollgate edge between 00:00 and 01:00 CET although its limit in config/limits.toml is 1200 req/min; throttling started at ~600 req/min and healed by itself at 01:00 CET.
       - Find out why tests/test_window.py is flaky in CI (test_rollover_does_not_double_count most often).
       - First understand, then: write a deterministic regression test, then fix properly (no one-line band-aid), on a branch.

    2. Root cause (confirmed)
       - src/ratelimit/window.py `_roll_over_if_new_day()` compared `datetime.now().date()` (local date) with `self._day` (always a UTC date). Whenever local date != UTC date the "rollover" fired on every request and incremented the same bucket a second time, so every request counted twice.
       - Production edge runs TZ=Europe/Berlin: 23:00-00:00 UTC every request counted as 2, so acme was cut off after ~600 real requests/min.
       - CI runner ci-sh-04 runs TZ=America/Los_Angeles: 16:00-24:00 PST the UTC date is ahead; FakeClock starts at the real time.time(), so 6 of 9 tests in test_window.py failed with doubled counts (assert 1202 == 601, assert 2 == 1, ...). CI run 8812345 shows it.
       - Edge logs from edge-fra-2 (./logs/, gitignored) confirmed: 23:00-23:59 UTC exactly 600 requests passed per minute, throttle log lines show count=1202, 1204, 1206 (steps of 2).
       - The carry was added for RL-301 (nightly counter reset), which no longer exists since RL-402 (keys expire via EXPIRE NX).

    3. Decision
       - Replace the fixed window with a sliding window counter (estimate = previous window count x (1 - elapsed fraction) + current window count). Rationale: fixes RL-482 by construction (no calendar dates anywhere), fixes the boundary burst of RL-455 (fixed window allows 2 x 1200 = 2400 requests within ~2 s around a window boundary), same storage as before (two counters per tenant, same Redis INCRBY + EXPIRE NX pipeline).
       - Rejected: sliding log (exact, but ~365 MB of sorted-set entries per Redis shard for ~38,000 tenants, three round trips per request); token bucket (changes the meaning of limits, contracts and billing use requests/minute); one-line UTC fix alone (leaves RL-455).
       - Keep the fixed window for one release behind `[limits] algorithm = "fixed"`; default "sliding".
       - User (in Chinese) asked not to delete window.py because the release notes still reference it; it was renamed to fixed_window.py instead.

    4. Files changed so far (branch fix/rl-482-sliding-window)
       - NEW src/ratelimit/sliding_window.py: SlidingWindowLimiter(store, limits, *, default_limit, window_seconds=60, clock=time.time) with hit/peek/reload/limit_for; rejected requests are refunded with incr(key, -cost); no datetime import.
       - NEW tests/test_sliding_window.py (8 tests, incl. boundary burst <= 1240 and refund of rejected requests).
       - NEW tests/test_rollover.py: 6 (zone, instant) cases x both limiter classes = 12 cases; sets TZ + time.tzset() and swaps the module's datetime for FrozenDatetime.
       - RENAMED src/ratelimit/window.py -> src/ratelimit/fixed_window.py; removed `_roll_over_if_new_day`, its call in hit() and `self._day`.
       - src/ratelimit/__init__.py, src/ratelimit/middleware.py (build_limiter picks FixedWindowLimiter or SlidingWindowLimiter from config.algorithm; `Limiter` type alias), tests/test_window.py (import), src/ratelimit/config.py (`algorithm` field, _ALGORITHMS, added to _LIMIT_KEYS after a failing run: "unknown key 'algorithm' in [limits]"), tests/test_config.py (test_algorithm_must_be_known), config/limits.toml (`algorithm = "sliding"`).

    5. Verification so far
       - pytest -q: 49 passed. TZ matrix (UTC, Europe/Berlin, America/Los_Angeles, Pacific/Honolulu, Pacific/Kiritimati): 21 passed each.
       - First `make dev` crashed with "ModuleNotFoundError: No module named 'redis'" (config/limits.toml selects the Redis store; the dev venv has no redis client). Restarted as `make dev LIMITS=config/limits.dev.toml` (in-memory store), running in the background (bash_2) on https://localhost:8443; healthz OK; log says "rate limiter: sliding window, 60 s".
       - loadgen at 1300 req/min for 120 s: steady state 1200 req/min accepted, ~100/min 429, spread over the minute.

    6. Errors met on the way, and their fixes
       - Regression test before the fix: `pytest -q tests/test_rollover.py` -> 5 failed, 1 passed, e.g. "AssertionError: request 1 counted as 2 in Europe/Berlin / assert 2 == 1" (tests/test_rollover.py, in test_each_request_counted_once).
       - After `git mv src/ratelimit/window.py src/ratelimit/fixed_window.py`: 4 collection errors, "ModuleNotFoundError: No module named 'ratelimit.window'" (src/ratelimit/__init__.py, src/ratelimit/sliding_window.py, tests/test_window.py) and "ImportError: cannot import name 'window' from 'ratelimit'" (tests/test_rollover.py). Fixed by updating the imports in all four places.
       - After adding `algorithm = "sliding"` to config/limits.toml: tests/test_config.py::test_example_config_loads failed with "ratelimit.config.ConfigError: .../config/limits.toml: unknown key 'algorithm' in [limits]" because `_check_keys` runs before the new validation. Fixed by adding "algorithm" to _LIMIT_KEYS; added test_algorithm_must_be_known.
       - `curl -sk https://localhost:8443/healthz` failed with "curl: (7) Failed to connect to localhost port 8443" until make dev was started.

    7. Key code (src/ratelimit/sliding_window.py, SlidingWindowLimiter.hit)
       ```python
       now = self._clock()
       start = int(now // self.window_seconds) * self.window_seconds
       weight = 1.0 - (now - start) / self.window_seconds
       previous = self._store.get(self._key(tenant, start - self.window_seconds))
       current = self._store.incr(key, cost, ttl=self.window_seconds * 2)
       estimate = previous * weight + current
       if estimate <= limit: allowed
       else: self._store.incr(key, -cost, ...)  # refund, then 429
       ```

    8. All user messages so far
       - "Morning. We got paged overnight for RL-482 ... limit in config/limits.toml is 1200 req/min ... throttling kicking in at roughly 600 req/min between 00:00 and 01:00 CET ... tests/test_window.py has been flaky in CI ... Don't change anything yet ... make dev, https://localhost:8443"
       - "Yes please. I synced last night's logs from edge-fra-2 into ./logs/ (they're gitignored, don't commit them). Grafana for reference: https://grafana.example.com/d/rl-edge/edge-rate-limits?..."
       - "ok, convinced. Before touching the limiter: write a regression test that fails deterministically ... Put it in its own file."
       - "Good. What are the options for the fix? I'd rather not ship a one-line band-aid ... boundary bursts (RL-455)."
       - "Go with the sliding window counter. Agreed on rejecting the sliding log, 365 MB per shard is a non-starter ... Keep the fixed window behind algorithm = "fixed" ... for one release, default to sliding. Work on a branch."
       - "先别删旧的 window.py，发布说明里还要引用它。改个名字就行，改成 fixed_window.py。" (do not delete window.py yet, the release notes still reference it; just rename it to fixed_window.py)
       - "nice. Run the rollover + window tests under a few real TZs too, then the load generator against a local instance on 8443 with acme's limit."

    9. Still open / next
       - Decision.headers() computes Retry-After from time.time() instead of the limiter clock (separate ticket).
       - Not yet committed. No CHANGELOG entry yet.
       - User may want an end-to-end demonstration of the midnight case.
    """
)


def after_compaction(story: Story) -> None:
    s, tools = story.session, story.tools
    s.user(
        "<local-command-caveat>Caveat: the messages below were produced by local commands the user ran. "
        "Do not respond to them unless the user asks you to.</local-command-caveat>",
        gap=40.0,
        isMeta=True,
    )
    s.user(
        "<command-name>/cost</command-name>\n            <command-message>cost</command-message>\n"
        "            <command-args></command-args>",
        gap=0.1,
        prompt=False,
    )
    s.user(
        t(
            """
            <local-command-stdout>Total cost:            $4.81
            Total duration (API):  21m 7.4s
            Total duration (wall): 1h 16m 59.6s
            Total code changes:    402 lines added, 61 lines removed
            Usage by model:
                claude-opus-4-6:  2.9k input, 38.2k output, 3.1m cache read, 171.5k cache write ($4.62)
               claude-haiku-4-5:  41.0k input, 1.3k output, 0 cache read, 0 cache write ($0.19)</local-command-stdout>
            """
        ),
        gap=0.1,
        prompt=False,
    )
    s.user(
        t(
            """
            Before we wrap up I want to see the actual midnight case end to end. Can you start the dev server
            with a fake clock at 2026-03-04T22:59:00Z and TZ=Europe/Berlin, push 900 req/min through it across
            23:00Z, and do the same against main for comparison? 900 is well under acme's 1200, so main should
            throttle and the branch shouldn't.
            """
        ),
        at="10:47:20",
    )
    s.respond(
        thinking=t(
            """
            The summary doesn't say how the dev server's clock can be faked. I think there was an environment
            switch for it; a clock module would be the obvious place, so look there first.
            """
        ),
        tools=[tools.read("src/ratelimit/clock.py")],
        think_seconds=5.0,
    )
    s.respond(
        tools=[tools.grep("TOLLGATE_FAKE_NOW", "")],
    )
    s.respond(
        text=(
            "It's `clock_from_env()` in the middleware, read once at startup. Restarting the branch server "
            "with the fake clock and Berlin time:"
        ),
        tools=[
            tools.bash(
                "kill $(lsof -t -i :8443) 2>/dev/null; TZ=Europe/Berlin TOLLGATE_FAKE_NOW=2026-03-04T22:59:00Z "
                "make dev PORT=8443 LIMITS=config/limits.dev.toml > /tmp/tollgate-branch.log 2>&1",
                "Command running in background with ID: bash_3",
                "Restart the branch server with a fake clock",
                seconds=0.5,
                background=True,
            )
        ],
    )
    s.respond(
        tools=[
            tools.bash(
                "git worktree add /tmp/tollgate-main main >/dev/null 2>&1 && cd /tmp/tollgate-main && "
                "TZ=Europe/Berlin TOLLGATE_FAKE_NOW=2026-03-04T22:59:00Z make dev PORT=9443 "
                "LIMITS=config/limits.dev.toml > /tmp/tollgate-main.log 2>&1",
                "Command running in background with ID: bash_4",
                "Start main on :9443 with the same fake clock",
                seconds=0.6,
                background=True,
            )
        ],
    )

    def legacy(step: int) -> int:
        # main: from 23:00Z (00:00 CET) each request counts twice, so 600 of 900 per minute pass
        return 150 if step <= 6 or (step - 7) % 6 < 4 else 0

    branch_text, branch_progress, _ = loadgen_output(
        story.rng,
        url="https://localhost:8443/v1/shipments",
        rate=900,
        seconds=180,
        allowed_per_step=lambda step: 160,
        label="server clock starts at 2026-03-04T22:59:00Z (TZ=Europe/Berlin)",
    )
    main_text, _, main_totals = loadgen_output(
        story.rng,
        url="https://localhost:9443/v1/shipments",
        rate=900,
        seconds=180,
        allowed_per_step=legacy,
        label="server clock starts at 2026-03-04T22:59:00Z (TZ=Europe/Berlin)",
    )
    loadgen = (
        "python scripts/loadgen.py --url https://localhost:{port}/v1/shipments --tenant acme-logistics "
        "--rate 900 --duration 180 --insecure"
    )
    s.respond(
        text="Both servers are up. Running the two load tests in parallel, 900 req/min for 3 minutes across 23:00Z:",
        tools=[
            tools.bash(
                loadgen.format(port=8443),
                branch_text,
                "Load test the branch across midnight CET",
                seconds=182.0,
                progress=branch_progress,
            ),
            # ran in parallel with the first one: its result arrives right after
            tools.bash(loadgen.format(port=9443), main_text, "Load test main across midnight CET", seconds=0.8),
        ],
        think_seconds=4.0,
    )
    throttled = main_totals["sent"] - main_totals["ok"]
    counts = t(
        f"""
        /tmp/tollgate-main.log:{throttled}
        /tmp/tollgate-branch.log:0
        --- first throttle lines on main:
        2026-03-04T23:00:40.377Z INFO ratelimit.window throttled tenant=acme-logistics count=1202 limit=1200 window=1772665200
        2026-03-04T23:00:40.441Z INFO ratelimit.window throttled tenant=acme-logistics count=1204 limit=1200 window=1772665200
        2026-03-04T23:00:40.502Z INFO ratelimit.window throttled tenant=acme-logistics count=1206 limit=1200 window=1772665200
        """
    )
    s.respond(
        tools=[
            tools.bash(
                "grep -c throttled /tmp/tollgate-main.log /tmp/tollgate-branch.log; "
                "echo '--- first throttle lines on main:'; grep -m 3 throttled /tmp/tollgate-main.log",
                counts,
                "Count throttle log lines on both servers",
                seconds=0.3,
            )
        ]
    )
    s.respond(
        text=t(
            f"""
            That is RL-482 reproduced end to end, and gone on the branch. Same fake clock (starting
            2026-03-04T22:59:00Z), same `TZ=Europe/Berlin`, same 900 req/min for acme-logistics:

            | | 22:59 UTC | 23:00 UTC (00:00 CET) | 23:01 UTC |
            |---|---|---|---|
            | **main** (:9443) | 900 ok | 600 ok, 300 x 429 | 600 ok, 300 x 429 |
            | **branch** (:8443) | 900 ok | 900 ok | 900 ok |

            On main the first throttle line at 23:00:40Z says `count=1202 limit=1200` after only ~600 real
            requests, and the counter keeps moving in steps of 2. {throttled} requests were rejected on main,
            zero on the branch. The Berlin midnight makes no difference to the sliding window because it never
            looks at a date.
            """
        ),
    )


def ship(story: Story) -> None:
    s, tools, p = story.session, story.tools, story.project
    s.user(
        "Perfect, that's the table I wanted for the ticket. Now write the CHANGELOG entry and commit. Mention "
        "RL-482, and the rejected alternatives, so reviewers don't re-suggest the sliding log.",
        at="10:58:02",
    )
    changed = [
        "config/limits.toml",
        "src/ratelimit/__init__.py",
        "src/ratelimit/config.py",
        "src/ratelimit/fixed_window.py",
        "src/ratelimit/middleware.py",
        "src/ratelimit/sliding_window.py",
        "tests/test_config.py",
        "tests/test_rollover.py",
        "tests/test_sliding_window.py",
        "tests/test_window.py",
    ]
    status = "\n".join(
        f"{'A' if p.renames.get(rel, rel) not in p.original else 'R' if rel in p.renames else 'M'}  "
        + (f"{p.renames[rel]} -> {rel}" if rel in p.renames else rel)
        for rel in changed
    )
    s.respond(
        tools=[
            tools.bash(
                "kill $(lsof -t -i :8443 -i :9443); git worktree remove /tmp/tollgate-main && git add -A && git status --short",
                status,
                "Clean up and show the staged changes",
                seconds=0.7,
            )
        ],
    )
    src_paths = [
        "config/limits.toml",
        "src/ratelimit/config.py",
        "src/ratelimit/fixed_window.py",
        "src/ratelimit/middleware.py",
    ]
    s.respond(
        tools=[
            tools.bash(
                "git diff --cached -M -- config src/ratelimit/config.py src/ratelimit/window.py src/ratelimit/fixed_window.py "
                "src/ratelimit/middleware.py",
                git_diff(p, src_paths),
                "Show the staged source diff",
                seconds=0.4,
            )
        ],
    )
    s.respond(tools=[tools.read("CHANGELOG.md")])
    s.respond(
        tools=[
            tools.edit(
                "CHANGELOG.md",
                "## 0.13.2 - 2026-02-19\n",
                t(
                    """
                    ## Unreleased

                    - ratelimit: **sliding window counter** replaces the fixed window as the default limiter
                      (`[limits] algorithm = "sliding"`). Fixes RL-482: between 00:00 and 01:00 CET every request
                      was counted twice (the midnight "rollover carry" compared the local date with the UTC date),
                      so tenants were throttled at half their limit. Also fixes the boundary burst of RL-455 (a
                      fixed window let a tenant send twice its limit around a window boundary).
                    - ratelimit: `window.py` is renamed to `fixed_window.py` and stays available for one release
                      with `algorithm = "fixed"`; its rollover carry (RL-301) is removed.
                    - Considered and rejected: a sliding log (exact, but ~365 MB per Redis shard for our tenant
                      count and three round trips per request) and a token bucket (changes what a limit means for
                      contracts and billing).

                    ## 0.13.2 - 2026-02-19
                    """
                )
                + "\n",
            )
        ]
    )
    changed.insert(0, "CHANGELOG.md")
    counts = diff_counts(p, changed)
    insertions = sum(a for a, _ in counts.values())
    deletions = sum(d for _, d in counts.values())
    commit_message = t(
        """
        ratelimit: sliding window counter instead of fixed window (RL-482)

        Between 00:00 and 01:00 CET every request was counted twice: the
        midnight rollover carry in window.py compared the local date with the
        UTC date, so it fired on every request while the two differed. Tenants
        were throttled at half their limit (acme-logistics at ~600 of 1200
        req/min), and test_window.py failed on the America/Los_Angeles runner
        from 16:00 to 24:00 PST.

        - New SlidingWindowLimiter (current window + weighted previous window);
          default via [limits] algorithm = "sliding". No calendar dates at all.
        - window.py renamed to fixed_window.py, kept for one release as
          algorithm = "fixed"; the rollover carry (RL-301) is removed.
        - tests/test_rollover.py pins TZ and the clock; fails on the old code.

        Rejected: sliding log (exact, ~365 MB per Redis shard, 3 round trips
        per request); token bucket (changes the meaning of limits).

        Refs: RL-482, RL-455
        """
    )
    commit_out = t(
        f"""
        [fix/rl-482-sliding-window 4c1d2e7] ratelimit: sliding window counter instead of fixed window (RL-482)
         {len(changed)} files changed, {insertions} insertions(+), {deletions} deletions(-)
         create mode 100644 src/ratelimit/sliding_window.py
         create mode 100644 tests/test_rollover.py
         create mode 100644 tests/test_sliding_window.py
         rename src/ratelimit/{{window.py => fixed_window.py}} (89%)
        """
    )
    s.respond(
        tools=[
            tools.bash(
                f"git add -A && git commit -F - <<'EOF'\n{commit_message}\nEOF",
                commit_out,
                "Commit the fix",
                seconds=0.8,
            )
        ]
    )
    s.respond(
        text=t(
            f"""
            Committed as `4c1d2e7` on `fix/rl-482-sliding-window` ({len(changed)} files, +{insertions} / -{deletions}).

            The CHANGELOG entry under **Unreleased** and the commit message both name RL-482 and RL-455, explain
            the local-date/UTC-date comparison, and list the rejected alternatives (sliding log: ~365 MB per
            Redis shard and three round trips; token bucket: changes what a limit means), so reviewers have the
            reasoning in front of them.
            """
        ),
    )
    s.user("CI is green locally? push it and open the PR. reviewers: @jonas-k and @priya-sre", at="11:06:40")
    push = t(
        """
        Enumerating objects: 31, done.
        Counting objects: 100% (31/31), done.
        Delta compression using up to 16 threads
        Compressing objects: 100% (17/17), done.
        Writing objects: 100% (19/19), 8.62 KiB | 8.62 MiB/s, done.
        Total 19 (delta 10), reused 0 (delta 0), pack-reused 0
        remote:
        remote: Create a pull request for 'fix/rl-482-sliding-window' on git.example.com:
        remote:   https://git.example.com/platform/tollgate/compare/fix/rl-482-sliding-window
        remote:
        To git.example.com:platform/tollgate.git
         * [new branch]      fix/rl-482-sliding-window -> fix/rl-482-sliding-window
        branch 'fix/rl-482-sliding-window' set up to track 'origin/fix/rl-482-sliding-window'.
        """
    )
    s.respond(
        tools=[
            tools.bash(
                "git push -u origin fix/rl-482-sliding-window && "
                'gh pr create --title "ratelimit: sliding window counter instead of fixed window (RL-482)" '
                "--body-file .git/COMMIT_EDITMSG --reviewer jonas-k,priya-sre",
                push
                + f"\n\nCreating pull request for fix/rl-482-sliding-window into main in platform/tollgate\n\n{PR_URL}",
                "Push the branch and open the pull request",
                seconds=5.1,
            )
        ]
    )
    checks = t(
        """
        Some checks were not successful
        1 failing, 3 successful, 0 skipped, and 0 pending checks

        X  ci/lint                    1m4s   https://ci.example.com/tollgate/runs/8814410/job/1
        ✓  ci/test (3.11)             2m31s  https://ci.example.com/tollgate/runs/8814410/job/2
        ✓  ci/test (3.12)             2m28s  https://ci.example.com/tollgate/runs/8814410/job/3
        ✓  ci/test (self-hosted)      2m47s  https://ci.example.com/tollgate/runs/8814410/job/4
        """
    )
    s.respond(
        tools=[
            tools.bash(
                "gh pr checks 1318 --watch --interval 20", checks, "Watch the PR checks", exit_code=1, seconds=171.0
            )
        ]
    )
    import_line = p.line_of("src/ratelimit/fixed_window.py", "from datetime import date, datetime, timezone")
    ruff = t(
        f"""
        src/ratelimit/fixed_window.py:{import_line}:22: F401 [*] `datetime.date` imported but unused
        src/ratelimit/fixed_window.py:{import_line}:28: F401 [*] `datetime.datetime` imported but unused
        src/ratelimit/fixed_window.py:{import_line}:38: F401 [*] `datetime.timezone` imported but unused
        Found 3 errors.
        [*] 3 fixable with the `--fix` option.
        """
    )
    s.respond(
        text="Lint failed; the tests are green everywhere, including the self-hosted runner. Checking lint locally:",
        tools=[tools.bash("ruff check src tests", ruff, "Run ruff locally", exit_code=1, seconds=0.5)],
    )
    s.respond(
        tools=[tools.edit("src/ratelimit/fixed_window.py", "from datetime import date, datetime, timezone\n", "")],
    )
    s.respond(
        tools=[
            tools.bash(
                "ruff check src tests && pytest -v",
                "\n".join(
                    [
                        "All checks passed!",
                        *pytest_header(TOLLGATE_ROOT, 49, verbose=True),
                        *pytest_verbose(SUITE_AFTER),
                        "",
                        banner("49 passed in 1.07s", "="),
                    ]
                ),
                "Lint and test",
                seconds=3.4,
            )
        ]
    )
    s.respond(
        tools=[
            tools.bash(
                'git commit -qam "ratelimit: drop imports left over from the rollover carry" && git push -q && '
                "gh pr checks 1318 --watch --interval 20",
                t(
                    """
                    All checks were successful
                    0 failing, 4 successful, 0 skipped, and 0 pending checks

                    ✓  ci/lint                    58s    https://ci.example.com/tollgate/runs/8814602/job/1
                    ✓  ci/test (3.11)             2m29s  https://ci.example.com/tollgate/runs/8814602/job/2
                    ✓  ci/test (3.12)             2m33s  https://ci.example.com/tollgate/runs/8814602/job/3
                    ✓  ci/test (self-hosted)      2m44s  https://ci.example.com/tollgate/runs/8814602/job/4
                    """
                ),
                "Commit the lint fix, push, and watch the checks",
                seconds=168.0,
            )
        ]
    )
    s.respond(
        text=t(
            f"""
            PR is open and green: {PR_URL}

            - reviewers requested: @jonas-k, @priya-sre
            - the first run failed only on lint (three unused `datetime` imports left in `fixed_window.py` after
              removing the carry); fixed in a second commit, and all four checks pass now, including
              `ci/test (self-hosted)`, which runs on the America/Los_Angeles runner.
            """
        ),
    )


OPEN_TODOS = [
    ("RL-482: sliding window limiter, rollover carry removed, PR #1318", "completed", "Fixing RL-482"),
    (
        "Soak the sliding window on edge-fra-staging for 24 h across midnight CET before the prod rollout; "
        "compare the 429 rate with production",
        "pending",
        "Soaking on staging",
    ),
    (
        "Update the Grafana alert that parses `count=` from the throttle log; the sliding window logs "
        "`estimate=` instead",
        "pending",
        "Updating the Grafana alert",
    ),
    (
        "RL-491: Decision.headers() computes Retry-After from time.time() instead of the limiter's clock",
        "pending",
        "Fixing Retry-After",
    ),
    (
        "Move Decision and Clock out of fixed_window.py (into ratelimit/decision.py) before fixed_window.py is deleted",
        "pending",
        "Moving Decision and Clock",
    ),
    (
        'RL-490: delete fixed_window.py and `algorithm = "fixed"` in the release after next, once the release '
        "notes no longer reference window.py",
        "pending",
        "Scheduling the fixed window removal",
    ),
    (
        "INFRA-1177: set TZ=UTC on the edge nodes and on the self-hosted runner ci-sh-04 (belt and braces)",
        "pending",
        "Filing the TZ change",
    ),
    ("Comment on RL-455 that PR #1318 also fixes the boundary burst", "pending", "Commenting on RL-455"),
]


def wrap_up(story: Story) -> None:
    s, tools = story.session, story.tools
    s.user(
        "Thanks! What's still open? Put it in the todo list so I can paste it into the ticket.",
        at="11:15:30",
    )
    s.respond(tools=[tools.todo(OPEN_TODOS)], think_seconds=3.0)
    pending = [content for content, status, _ in OPEN_TODOS if status == "pending"]
    lines = [f"{n}. {content}" for n, content in enumerate(pending, start=1)]
    s.respond(
        text="Done: RL-482 is fixed in PR #1318 ("
        + PR_URL
        + ").\n\nStill open, ready to paste into the ticket:\n\n"
        + "\n".join(lines)
        + "\n\nThe first two matter before the production rollout; the rest can be separate tickets.",
    )
    s.stop_hooks(["$HOME/.claude/hooks/notify.sh stop", "$HOME/.claude/hooks/lint-staged.sh"])
    s.turn_duration()
    s.summary("RL-482: limiter double-counted after midnight CET; sliding window counter fix")


# ----------------------------------------------------------------------------- small Claude Code fixture (+ sub-agent)

FIXTURE_SESSION_ID = "11111111-2222-3333-4444-555555555555"
SUBAGENT_ID = "abc1234"
NOTES_ROOT = "/home/ines/code/pocket-notes"

RENDER_PY = '''"""Render notes as Markdown."""

from notes.model import Note


def render_title(note: Note) -> str:
    return f"# {note.title.strip()}" if note.title else "# (untitled)"


def render(note: Note) -> str:
    header = render_title(note) + "\\n\\n" + f"_{note.created:%Y-%m-%d}_ · tags: {', '.join(sorted(note.tags)) or 'none'} · {note.word_count} words"
    return header + "\\n\\n" + note.body.strip() + "\\n"
'''

EXPORT_PY = '''"""Export a notebook to a folder of Markdown files."""

from pathlib import Path

from notes.render import render, render_title


def export(notebook, target: Path) -> list[Path]:
    written = []
    for note in notebook:
        path = target / f"{note.slug}.md"
        path.write_text(render(note), encoding="utf-8")
        written.append(path)
    index = "\\n".join(f"- [{render_title(n)[2:]}]({n.slug}.md)" for n in notebook)
    (target / "index.md").write_text(index + "\\n", encoding="utf-8")
    return written
'''


def build_small_claude_code() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """~20 records touching every record kind, and a sub-agent file with the same session id."""
    ids = Ids(SEED + 10)
    project = Project(NOTES_ROOT, {"src/notes/render.py": RENDER_PY, "src/notes/export.py": EXPORT_PY})
    tools = Tools(project)
    main = ClaudeCodeSession(
        session_id=FIXTURE_SESSION_ID,
        cwd=NOTES_ROOT,
        branch="main",
        ids=ids,
        clock=Clock("2026-02-20T14:03:11.000Z", SEED + 10),
        version="2.1.40",
    )
    main.snapshot("00000000-0000-4000-8000-000000000001")
    main.hook_progress("SessionStart", "$HOME/.claude/hooks/notify.sh session-start")
    prompt = main.user(
        "`make lint` fails with E501 in src/notes/render.py. Fix it, and tell me who else calls render_title().",
        at="14:03:20",
    )
    main.records[0]["messageId"] = main.records[0]["snapshot"]["messageId"] = prompt
    long_line = project.line_of("src/notes/render.py", "header = render_title(note)")
    lint = (
        f"ruff check src tests\nsrc/notes/render.py:{long_line}:121: E501 Line too long (151 > 120)\n"
        "Found 1 error.\nmake: *** [Makefile:9: lint] Error 1"
    )
    main.respond(
        thinking="Reproduce the lint failure first, then look at the line.",
        text="Let me reproduce the lint error.",
        tools=[tools.bash("make lint", lint, "Run the linter", exit_code=2, seconds=1.2)],
    )
    # Two tool calls in one response (parallel): two tool_use records share one message.id.
    main.respond(
        tools=[tools.read("src/notes/render.py"), tools.grep(r"render_title\(", "src")],
    )
    task_prompt = (
        "List every caller of render_title() in src/ and tests/, with file and line, and say what each uses it for."
    )
    started = main.clock.now
    sub = build_subagent(task_prompt, started + timedelta(seconds=15))  # after the Task call below
    finished = datetime.fromisoformat(sub.records[-1]["timestamp"].replace("Z", "+00:00"))
    answer = sub.records[-1]["message"]["content"][0]["text"]
    task = ToolRun(
        "Task",
        {"subagent_type": "Explore", "description": "Find render_title callers", "prompt": task_prompt},
        [
            {"type": "text", "text": answer},
            {"type": "text", "text": f"agentId: {SUBAGENT_ID} (for resuming this agent later)"},
        ],
        {
            "status": "completed",
            "prompt": task_prompt,
            "agentId": SUBAGENT_ID,
            "content": [{"type": "text", "text": answer}],
            "totalDurationMs": int((finished - started).total_seconds() * 1000),
            "totalTokens": 9214,
            "totalToolUseCount": 2,
        },
        seconds=(finished - started).total_seconds() + 1.0,
        progress=[
            {
                "message": {
                    "type": "user",
                    "message": {"role": "user", "content": [{"type": "text", "text": task_prompt}]},
                    "uuid": sub.records[0]["uuid"],
                    "timestamp": sub.records[0]["timestamp"],
                },
                "normalizedMessages": [],
                "type": "agent_progress",
                "prompt": task_prompt,
                "agentId": SUBAGENT_ID,
            }
        ],
    )
    main.respond(text="I'll have a sub-agent check the tests too while I fix the line.", tools=[task])
    main.respond(
        tools=[
            tools.edit(
                "src/notes/render.py",
                "    header = render_title(note) + \"\\n\\n\" + f\"_{note.created:%Y-%m-%d}_ · tags: {', '.join(sorted(note.tags)) or 'none'} · {note.word_count} words\"",
                '    tags = ", ".join(sorted(note.tags)) or "none"\n    meta = f"_{note.created:%Y-%m-%d}_ · tags: {tags} · {note.word_count} words"\n    header = render_title(note) + "\\n\\n" + meta',
            )
        ]
    )
    main.respond(
        text=(
            "Fixed: the header line in `render()` is split into `tags` and `meta`, so it fits in 120 columns.\n\n"
            "`render_title()` callers: `render()` itself and `export()` in src/notes/export.py (for the index "
            "links, where it strips the leading `# `); no tests call it directly."
        )
    )
    main.stop_hooks(["$HOME/.claude/hooks/notify.sh stop"])
    main.turn_duration()
    main.summary("Fix E501 in render.py; render_title callers")
    main.compact(
        "This session is being continued from an earlier conversation. Summary: the user asked to fix an E501 "
        "lint error in src/notes/render.py (line 11, 151 > 120 columns) and to list callers of render_title(). "
        "The header line was split into `tags` and `meta` variables. Callers: render() and export() in "
        "src/notes/export.py (index links). Nothing is committed yet.",
        pre_tokens=48_230,
    )
    main.user(
        "<local-command-caveat>Caveat: the messages below were produced by local commands the user ran. "
        "Do not respond to them unless the user asks you to.</local-command-caveat>",
        gap=20.0,
        isMeta=True,
    )
    main.user("thanks, that's all for now", gap=15.0)
    main.respond(text="You're welcome. The fix is uncommitted in src/notes/render.py whenever you want to review it.")
    return main.records, sub.records


def build_subagent(prompt: str, start: datetime) -> ClaudeCodeSession:
    ids = Ids(SEED + 11)
    project = Project(NOTES_ROOT, {"src/notes/render.py": RENDER_PY, "src/notes/export.py": EXPORT_PY})
    tools = Tools(project)
    sub = ClaudeCodeSession(
        session_id=FIXTURE_SESSION_ID,
        cwd=NOTES_ROOT,
        branch="main",
        ids=ids,
        clock=Clock(iso_ms(start), SEED + 11),
        version="2.1.40",
        model="claude-haiku-4-5",
        agent_id=SUBAGENT_ID,
    )
    sub.user(prompt, gap=0.0, prompt=False)
    sub.respond(tools=[tools.grep(r"render_title", "")], think_seconds=1.5)
    sub.respond(tools=[tools.read("src/notes/export.py")], think_seconds=1.0)
    sub.respond(
        text=(
            "Callers of render_title():\n"
            "- src/notes/render.py:11 in render(): first line of every exported note.\n"
            "- src/notes/export.py:15 in export(): index.md link text (drops the leading '# ').\n"
            "No test calls it directly; it is covered through render()."
        ),
        think_seconds=2.0,
    )
    return sub


# ----------------------------------------------------------------------------- pi v1 fixture


def pi_usage(inp: int, out: int, read: int = 0, write: int = 0) -> dict[str, Any]:
    cost = {
        "input": round(inp * 3e-6, 6),
        "output": round(out * 15e-6, 6),
        "cacheRead": round(read * 0.3e-6, 7),
        "cacheWrite": round(write * 3.75e-6, 7),
    }
    cost["total"] = round(sum(cost.values()), 7)
    return {"input": inp, "output": out, "cacheRead": read, "cacheWrite": write, "cost": cost}


class PiLog:
    """pi session entries with increasing timestamps."""

    def __init__(self, start: str, seed: int) -> None:
        self.clock = Clock(start, seed)
        self.ids = Ids(seed)
        self.entries: list[dict[str, Any]] = []

    def entry(self, kind: str, gap: float, **fields: Any) -> dict[str, Any]:
        record = {"type": kind, "timestamp": self.clock.tick(gap), **fields}
        self.entries.append(record)
        return record

    def message(self, message: dict[str, Any], gap: float = 3.0) -> dict[str, Any]:
        stamp = self.clock.tick(gap)
        body = {**message, "timestamp": epoch_ms(stamp) - self.clock.rng.randint(0, 40)}
        record = {"type": "message", "timestamp": stamp, "message": body}
        self.entries.append(record)
        return record

    def user(self, text: str, gap: float = 20.0) -> dict[str, Any]:
        return self.message({"role": "user", "content": [{"type": "text", "text": text}]}, gap)

    def assistant(
        self,
        content: list[dict[str, Any]],
        *,
        model: str = "claude-sonnet-4-5",
        stop: str = "stop",
        usage: dict[str, Any] | None = None,
        gap: float = 4.0,
        **extra: Any,
    ) -> dict[str, Any]:
        message = {
            "role": "assistant",
            "content": content,
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": model,
            "usage": usage or pi_usage(3, 120, 1800, 900),
            "stopReason": stop,
            **extra,
        }
        return self.message(message, gap)

    def tool_result(
        self, call_id: str, name: str, text: str, *, error: bool = False, gap: float = 0.5
    ) -> dict[str, Any]:
        return self.message(
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{"type": "text", "text": text}],
                "isError": error,
            },
            gap,
        )

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"type": "toolCall", "id": self.ids.tool_id(), "name": name, "arguments": arguments}

    def thinking(self, text: str) -> dict[str, Any]:
        return {"type": "thinking", "thinking": text, "thinkingSignature": self.ids.signature()[:120]}


EXPORT_LEDGER_PY = """def export_csv(entries, out):
    writer = csv.writer(out)
    writer.writerow(["date", "account", "amount", "memo"])
    for i in range(len(entries) - 1):
        e = entries[i]
        writer.writerow([e.date.isoformat(), e.account, f"{e.amount:.2f}", e.memo])"""


def build_pi_session() -> list[dict[str, Any]]:
    log = PiLog("2026-01-14T08:20:05.000Z", SEED + 20)
    log.entries.append(
        {
            "type": "session",
            "id": "9d4c2b7e-51a0-4f3e-8b6d-2e1f0a9c8b71",
            "timestamp": log.clock.stamp(),
            "cwd": "/home/ines/code/ledger",
            "provider": "anthropic",
            "modelId": "claude-sonnet-4-5",
            "thinkingLevel": "off",
        }
    )
    log.user("`ledger export --csv` drops the last entry of the month. Can you find out why?", gap=12.0)
    read = log.call("read", {"path": "ledger/export.py"})
    log.assistant(
        [
            log.thinking("Dropping the last row sounds like an off-by-one in the export loop. Read export.py."),
            {"type": "text", "text": "Let me look at the CSV exporter."},
            read,
        ],
        stop="toolUse",
    )
    log.tool_result(read["id"], "read", EXPORT_LEDGER_PY)
    run = log.call("bash", {"command": "python -m ledger export --csv tests/data/march.ledger | tail -n 2"})
    log.assistant(
        [
            {
                "type": "text",
                "text": "`range(len(entries) - 1)` skips the last entry. Confirming with the March test data:",
            },
            run,
        ],
        stop="toolUse",
    )
    log.tool_result(run["id"], "bash", "2026-03-30,expenses:rent,-1250.00,March rent\n2026-03-30,income:refund,31.40,")
    edit = log.call(
        "edit",
        {
            "path": "ledger/export.py",
            "oldText": "    for i in range(len(entries) - 1):\n        e = entries[i]\n",
            "newText": "    for e in entries:\n",
        },
    )
    log.assistant(
        [{"type": "text", "text": "The 31 March salary entry is missing. Fixing the loop:"}, edit],
        stop="toolUse",
    )
    log.tool_result(edit["id"], "edit", "Successfully replaced text in ledger/export.py.")
    log.entry("thinking_level_change", 25.0, thinkingLevel="high")
    log.entry("model_change", 3.0, provider="anthropic", modelId="claude-opus-4-5")
    log.user("Run the export tests.", gap=6.0)
    log.assistant(
        [],
        model="claude-opus-4-5",
        stop="aborted",
        usage=pi_usage(0, 0),
        errorMessage="Request was aborted.",
        gap=1.5,
    )
    log.message(
        {
            "role": "bashExecution",
            "command": "pytest -q tests/test_export.py",
            "output": "....                                                                     [100%]\n4 passed in 0.08s\n",
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
        },
        gap=9.0,
    )
    log.entry(
        "compaction",
        40.0,
        summary=(
            "## Goal\nFix `ledger export --csv` dropping the last entry of a month.\n\n"
            "## Done\n- Cause: `range(len(entries) - 1)` in ledger/export.py skipped the last entry.\n"
            "- Loop changed to `for e in entries:`; tests/test_export.py passes (4 tests).\n\n"
            "## Next\n- CHANGELOG entry."
        ),
        firstKeptEntryIndex=10,
        tokensBefore=61_404,
    )
    log.user("Thanks. Add a line to CHANGELOG.md too.", gap=15.0)
    append = log.call("bash", {"command": "grep -n '^## ' CHANGLOG.md | head -n 3"})
    log.assistant([append], model="claude-opus-4-5", stop="toolUse", usage=pi_usage(5, 60, 2100, 400))
    log.tool_result(
        append["id"], "bash", "grep: CHANGLOG.md: No such file or directory\n\nCommand exited with code 2", error=True
    )
    log.assistant(
        [
            log.thinking("Typo in the file name (CHANGLOG). The file is CHANGELOG.md."),
            {
                "type": "text",
                "text": 'I mistyped the file name. I\'ll add this line under the newest heading of `CHANGELOG.md` once you confirm the wording: "export: CSV no longer drops the last entry of the month".',
            },
        ],
        model="claude-opus-4-5",
        usage=pi_usage(6, 95, 2300, 0),
    )
    return log.entries


# ----------------------------------------------------------------------------- OpenClaw v3 fixture
#
# The entry tree (ids are fixed so tests can name them):
#
#   1a2b3c4d user          -> 2b3c4d5e assistant (toolCall read) -> 3c4d5e6f toolResult -> 4d5e6f70 assistant
#   4d5e6f70 -> a0b1c2d3 user "more formal" -> b1c2d3e4 assistant        (ABANDONED branch, written first)
#   4d5e6f70 -> 5e6f7081 user "shorter" -> 6f708192 model_change -> 708192a3 assistant (toolCall write)
#            -> 8192a3b4 toolResult -> 92a3b4c5 compaction (firstKeptEntryId 5e6f7081) -> a3b4c5d6 user
#            -> b4c5d6e7 assistant (toolCall message) -> c5d6e7f8 toolResult -> d6e7f809 assistant (last line)
#
# Active path (leaf d6e7f809 back to the root), in order:
#   1a2b3c4d 2b3c4d5e 3c4d5e6f 4d5e6f70 5e6f7081 6f708192 708192a3 8192a3b4 92a3b4c5 a3b4c5d6 b4c5d6e7
#   c5d6e7f8 d6e7f809
# Of these, 11 are message entries, 1 is the compaction (both become messages) and 1 the model_change (skipped).
# Off the path: a0b1c2d3 b1c2d3e4.

OPENCLAW_ACTIVE_PATH = [
    "1a2b3c4d",
    "2b3c4d5e",
    "3c4d5e6f",
    "4d5e6f70",
    "5e6f7081",
    "6f708192",
    "708192a3",
    "8192a3b4",
    "92a3b4c5",
    "a3b4c5d6",
    "b4c5d6e7",
    "c5d6e7f8",
    "d6e7f809",
]
OPENCLAW_ABANDONED = ["a0b1c2d3", "b1c2d3e4"]

STANDUP_NOTES = """# Standup 2026-02-27
- Ravi: customs API sandbox works again, prod keys next week
- Lena: label printer driver rollout 60% (Hamburg done, Lyon Monday)
- Tom: on call, two pages overnight, both the disk alert on rl-redis-2
- Blocker: nobody owns the rl-redis-2 disk alert"""


def build_openclaw_session() -> list[dict[str, Any]]:
    log = PiLog("2026-02-27T19:02:11.000Z", SEED + 30)
    out: list[dict[str, Any]] = [
        {
            "type": "session",
            "version": 3,
            "id": "oc-session-1",
            "timestamp": log.clock.stamp(),
            "cwd": "/home/lena/.openclaw/workspace",
        }
    ]

    def add(entry_id: str, parent: str | None, record: dict[str, Any]) -> None:
        log.entries.remove(record)
        out.append(
            {
                "type": record["type"],
                "id": entry_id,
                "parentId": parent,
                **{k: v for k, v in record.items() if k != "type"},
            }
        )

    sonnet = "claude-sonnet-4-5"
    add(
        "1a2b3c4d",
        None,
        log.user("Summarise notes/standup-2026-02-27.md and draft a short message to the team.", gap=4.0),
    )
    read = log.call("read", {"path": "notes/standup-2026-02-27.md"})
    add("2b3c4d5e", "1a2b3c4d", log.assistant([read], stop="toolUse", model=sonnet))
    add("3c4d5e6f", "2b3c4d5e", log.tool_result(read["id"], "read", STANDUP_NOTES))
    draft = (
        "Summary: customs sandbox is back (prod keys next week), label printer rollout at 60% with Lyon on "
        "Monday, and two overnight pages for the rl-redis-2 disk alert, which has no owner.\n\nDraft:\n"
        "Hi all, quick standup recap: customs sandbox works again, printer rollout 60% (Lyon Monday). "
        "The rl-redis-2 disk alert paged twice overnight and has no owner; can someone pick it up?"
    )
    add("4d5e6f70", "3c4d5e6f", log.assistant([{"type": "text", "text": draft}], model=sonnet))
    # The user first asks for a formal version (abandoned), then goes back to entry 4d5e6f70 and asks again.
    add("a0b1c2d3", "4d5e6f70", log.user("Make it more formal, it's going to the VP.", gap=30.0))
    formal = "Dear all, please find below a summary of today's standup. ..."
    add("b1c2d3e4", "a0b1c2d3", log.assistant([{"type": "text", "text": formal}], model=sonnet))
    add("5e6f7081", "4d5e6f70", log.user("Actually no: shorter please, three bullet points, casual.", gap=45.0))
    add("6f708192", "5e6f7081", log.entry("model_change", 1.0, provider="openai", modelId="gpt-5.1"))
    bullets = "- customs sandbox is back 🎉 (prod keys next week)\n- printers: 60%, Lyon on Monday\n- rl-redis-2 disk alert paged twice and has no owner, who takes it?"
    write = log.call("write", {"path": "drafts/standup-message.md", "content": bullets + "\n"})
    add(
        "708192a3",
        "6f708192",
        log.assistant(
            [{"type": "text", "text": "Here's the short version; saving it as a draft:"}, write],
            stop="toolUse",
            model="gpt-5.1",
            api="openai-responses",
            provider="openai",
        ),
    )
    add(
        "8192a3b4",
        "708192a3",
        log.tool_result(
            write["id"], "write", f"Successfully wrote {len(bullets.encode()) + 1} bytes to drafts/standup-message.md"
        ),
    )
    compaction = log.entry(
        "compaction",
        20.0,
        summary="User wants a short, casual 3-bullet standup message (customs sandbox, printer rollout, unowned rl-redis-2 alert); draft saved in drafts/standup-message.md.",
        firstKeptEntryId="5e6f7081",
        tokensBefore=48_210,
    )
    add("92a3b4c5", "8192a3b4", compaction)
    add("a3b4c5d6", "92a3b4c5", log.user("Send it to #team-logistics.", gap=12.0))
    send = log.call("message", {"channel": "#team-logistics", "text": bullets})
    add(
        "b4c5d6e7",
        "a3b4c5d6",
        log.assistant([send], stop="toolUse", model="gpt-5.1", api="openai-responses", provider="openai"),
    )
    add(
        "c5d6e7f8", "b4c5d6e7", log.tool_result(send["id"], "message", "Sent to #team-logistics (ts 1772219551.000200)")
    )
    add(
        "d6e7f809",
        "c5d6e7f8",
        log.assistant(
            [{"type": "text", "text": "Sent to #team-logistics."}],
            model="gpt-5.1",
            api="openai-responses",
            provider="openai",
        ),
    )
    return out


# ----------------------------------------------------------------------------- SWE-agent .traj fixture

SLUG_BEFORE = """import re
import unicodedata


def slugify(text: str, sep: str = "-") -> str:
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^a-z]+", sep, text.lower())
    return text.strip(sep)
"""

SUBMISSION = """diff --git a/src/tinyslug/core.py b/src/tinyslug/core.py
index 5a1c9e2..b07d3f4 100644
--- a/src/tinyslug/core.py
+++ b/src/tinyslug/core.py
@@ -4,5 +4,5 @@ import unicodedata
\x20
 def slugify(text: str, sep: str = "-") -> str:
     text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
-    text = re.sub(r"[^a-z]+", sep, text.lower())
+    text = re.sub(r"[^a-z0-9]+", sep, text.lower())
     return text.strip(sep)
"""

SWE_SYSTEM = (
    "SETTING: You are an autonomous programmer working in a repository checked out at /testbed. "
    "You have a bash tool, a file editor (str_replace_editor) and a submit tool. Make the smallest change that "
    "fixes the issue, verify it, then submit."
)
SWE_ISSUE = (
    "<uploaded_files>\n/testbed\n</uploaded_files>\nI've uploaded a python code repository in /testbed. Consider "
    "the following issue:\n\n<issue_description>\nslugify() drops digits\n\n`tinyslug.slugify('Café 2026')` "
    "returns `'cafe'`; expected `'cafe-2026'`. Same for 'Release 3.1' -> 'release'.\n</issue_description>\n\n"
    "Make the minimal change to non-test files in /testbed so that the issue is resolved."
)


def build_swe_trajectory() -> dict[str, Any]:
    numbered = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(SLUG_BEFORE.rstrip("\n").split("\n"), start=1))
    steps = [
        (
            "Let me find where slugify is defined.",
            "bash",
            {"command": "grep -rn 'def slugify' /testbed/src"},
            '/testbed/src/tinyslug/core.py:5:def slugify(text: str, sep: str = "-") -> str:',
        ),
        (
            "Let me look at the implementation.",
            "str_replace_editor",
            {"command": "view", "path": "/testbed/src/tinyslug/core.py"},
            f"Here's the result of running `cat -n` on /testbed/src/tinyslug/core.py:\n{numbered}",
        ),
        (
            "The character class `[^a-z]` replaces digits too. Let me reproduce first.",
            "bash",
            {"command": "cd /testbed && python -c \"from tinyslug import slugify; print(repr(slugify('Café 2026')))\""},
            "'cafe'",
        ),
        (
            "Reproduced. Keep digits by allowing 0-9 in the character class.",
            "str_replace_editor",
            {
                "command": "str_replace",
                "path": "/testbed/src/tinyslug/core.py",
                "old_str": 'text = re.sub(r"[^a-z]+", sep, text.lower())',
                "new_str": 'text = re.sub(r"[^a-z0-9]+", sep, text.lower())',
            },
            "The file /testbed/src/tinyslug/core.py has been edited. Here's the result of running `cat -n` on a "
            'snippet of /testbed/src/tinyslug/core.py:\n     6\t    text = unicodedata.normalize("NFKD", text)'
            '.encode("ascii", "ignore").decode()\n     7\t    text = re.sub(r"[^a-z0-9]+", sep, text.lower())\n'
            "     8\t    return text.strip(sep)\nReview the changes and make sure they are as expected.",
        ),
        (
            "Check both examples from the issue.",
            "bash",
            {
                "command": "cd /testbed && python -c \"from tinyslug import slugify; print(slugify('Café 2026'), slugify('Release 3.1'))\""
            },
            "cafe-2026 release-3-1",
        ),
        ("Both examples work. Submitting.", "submit", {}, SUBMISSION),
    ]
    history: list[dict[str, Any]] = [
        {"message_type": "system_prompt", "role": "system", "content": SWE_SYSTEM, "agent": "main"},
        {"message_type": "observation", "role": "user", "content": SWE_ISSUE, "agent": "main"},
    ]
    trajectory = []
    ids = Ids(SEED + 40)
    for n, (thought, tool, args, observation) in enumerate(steps):
        call_id = "call_" + ids.b62(24)
        action = tool if not args else f"{tool} " + " ".join(str(v) for v in args.values())
        history.append(
            {
                "message_type": "action",
                "role": "assistant",
                "content": thought,
                "thought": thought,
                "action": action,
                "agent": "main",
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
                ],
            }
        )
        history.append(
            {
                "message_type": "observation",
                "role": "tool",
                "content": observation,
                "agent": "main",
                "tool_call_ids": [call_id],
            }
        )
        trajectory.append(
            {
                "action": action,
                "observation": observation,
                "response": thought,
                "thought": thought,
                "execution_time": round(0.11 + 0.37 * n, 3),
                "state": {"open_file": "/testbed/src/tinyslug/core.py" if n else "n/a", "working_dir": "/testbed"},
            }
        )
    return {
        "environment": "main",
        "trajectory": trajectory,
        "history": history,
        "info": {
            "exit_status": "submitted",
            "submission": SUBMISSION,
            "model_stats": {"instance_cost": 0.0412, "tokens_sent": 11873, "tokens_received": 412, "api_calls": 6},
            "swe_agent_version": "1.0.1",
        },
    }


# ----------------------------------------------------------------------------- OpenAI chat fixtures


def tiny_png() -> str:
    """A 1x1 teal PNG as a data URL, built here so nothing is copied."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"\x89PNG\r\n\x1a\n"
    raw += chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    raw += chunk(b"IDAT", zlib.compress(b"\x00\x1f\x9e\x8f", 9))
    raw += chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def build_chat_json() -> list[dict[str, Any]]:
    return [
        {
            "role": "system",
            "content": "You are the support assistant of Harbor Parcel. Be brief. Use lookup_order for order questions.",
        },
        {"role": "user", "content": "Where is my order HP-20931?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_hp1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_id": "HP-20931"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_hp1",
            "content": '{"order_id": "HP-20931", "status": "in_transit", "hub": "Bremen", "eta": "2026-03-07"}',
        },
        {"role": "assistant", "content": "HP-20931 is in transit via the Bremen hub and should arrive on 7 March."},
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "The label on the box I got last week looked torn, see photo. Is that a problem?",
                },
                {"type": "image_url", "image_url": {"url": tiny_png(), "detail": "low"}},
            ],
        },
        {
            "role": "assistant",
            "content": "The barcode is still readable, so delivery is not affected. I've noted the damaged label on the order.",
        },
        {"role": "user", "content": "great, thanks"},
    ]


def build_chat_jsonl() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You convert units and check the weather for travellers."},
        {"role": "user", "content": "How warm is it in Lyon, and what is 14 °C in Fahrenheit?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'},
                },
                {
                    "id": "call_c1",
                    "type": "function",
                    "function": {"name": "convert", "arguments": '{"value": 14, "from": "C", "to": "F"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": '{"city": "Lyon", "temp_c": 14, "sky": "light rain"}'},
        {"role": "tool", "tool_call_id": "call_c1", "content": "57.2"},
        {"role": "assistant", "content": "Lyon: 14 °C (57.2 °F) with light rain. Take an umbrella."},
        {"role": "user", "content": [{"type": "text", "text": "and tomorrow?"}]},
        {"role": "assistant", "content": "I only have current conditions; tomorrow's forecast isn't available to me."},
    ]


# ----------------------------------------------------------------------------- corrupt and edge-case files


def pi_line(record: dict[str, Any]) -> bytes:
    return dumps(record).encode() + b"\n"


def bad_files() -> dict[str, bytes]:
    header = {
        "type": "session",
        "id": "bad-0001",
        "timestamp": "2026-01-02T10:00:00.000Z",
        "cwd": "/tmp/bad",
        "provider": "anthropic",
        "modelId": "claude-sonnet-4-5",
        "thinkingLevel": "off",
    }

    def msg(n: int, role: str, text: str) -> dict[str, Any]:
        stamp = f"2026-01-02T10:00:{n:02d}.000Z"
        body: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": epoch_ms(stamp)}
        if role == "assistant":
            body.update(
                {
                    "api": "anthropic-messages",
                    "provider": "anthropic",
                    "model": "claude-sonnet-4-5",
                    "usage": pi_usage(3, 9),
                    "stopReason": "stop",
                }
            )
        return {"type": "message", "timestamp": stamp, "message": body}

    files = {
        # line 4 is not JSON
        "not-json.jsonl": b"".join(
            [
                pi_line(header),
                pi_line(msg(1, "user", "hello")),
                pi_line(msg(2, "assistant", "hi")),
                b'{"type": "message", oops}\n',
                pi_line(msg(4, "user", "still there?")),
                pi_line(msg(5, "assistant", "yes")),
            ]
        ),
        # line 3 has a role no reader knows
        "unknown-role.jsonl": b"".join(
            [
                pi_line(header),
                pi_line(msg(1, "user", "hello")),
                pi_line(msg(2, "robot", "beep")),
                pi_line(msg(3, "assistant", "hi")),
            ]
        ),
        # line 3 holds the raw bytes FF FE inside a JSON string: not UTF-8
        "invalid-utf8.jsonl": b"".join(
            [
                pi_line(header),
                pi_line(msg(1, "user", "hello")),
                pi_line(msg(2, "user", "caf\x01")).replace(b"\\u0001", b"\xff\xfe"),
                pi_line(msg(3, "assistant", "hi")),
            ]
        ),
        # line 3 holds a raw NUL byte inside a JSON string
        "nul-byte.jsonl": b"".join(
            [
                pi_line(header),
                pi_line(msg(1, "user", "hello")),
                pi_line(msg(2, "user", "a\x01b")).replace(b"\\u0001", b"\x00"),
                pi_line(msg(3, "assistant", "hi")),
            ]
        ),
        # valid: the NUL is escaped as \u0000, which JSON allows
        "escaped-nul.jsonl": b"".join(
            [pi_line(header), pi_line(msg(1, "user", "before\x00after")), pi_line(msg(2, "assistant", "got it"))]
        ),
        "not-a-transcript/notes.txt": b"Shopping list\n- coffee\n- printer paper\n",
        "not-a-transcript/data.json": b'{"hello": "world"}\n',
    }
    assert b"\\u0000" in files["escaped-nul.jsonl"]
    assert b"\xff\xfe" in files["invalid-utf8.jsonl"].split(b"\n")[2]
    assert b"\x00" in files["nul-byte.jsonl"].split(b"\n")[2]
    return files


# ----------------------------------------------------------------------------- main


def write_all(root: Path) -> dict[Path, str]:
    """Write every file; returns what each holds (lines, or messages for JSON documents)."""
    fixtures = root / "tests" / "fixtures"
    written: dict[Path, str] = {}

    def jsonl(path: Path, records: list[dict[str, Any]]) -> None:
        write_jsonl(path, records)
        written[path] = f"{len(records)} lines"

    def document(path: Path, value: Any, messages: int) -> None:
        write_bytes(path, (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode())
        written[path] = f"{messages} messages"

    jsonl(root / "examples" / "sample-session.jsonl", build_sample_session())
    main, sub = build_small_claude_code()
    jsonl(fixtures / "claude-code" / "session.jsonl", main)
    jsonl(fixtures / "claude-code" / "session" / "subagents" / f"agent-{SUBAGENT_ID}.jsonl", sub)
    jsonl(fixtures / "pi" / "session.jsonl", build_pi_session())
    jsonl(fixtures / "openclaw" / "session.jsonl", build_openclaw_session())
    trajectory = build_swe_trajectory()
    document(fixtures / "swe-agent" / "task-1.traj", trajectory, len(trajectory["history"]))
    chat = build_chat_json()
    document(fixtures / "openai-chat" / "chat.json", chat, len(chat))
    jsonl(fixtures / "openai-chat" / "chat.jsonl", build_chat_jsonl())
    for name, data in bad_files().items():
        write_bytes(fixtures / "bad" / name, data)
        written[fixtures / "bad" / name] = f"{len(data.splitlines())} lines"
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description="Write the demo session and the transcript-reader fixtures.")
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="repository root to write into (default: this checkout)"
    )
    parser.add_argument(
        "--check", action="store_true", help="write into a scratch folder and compare with the files under --root"
    )
    args = parser.parse_args()
    if args.check:
        raise SystemExit(check(args.root))
    for path, what in write_all(args.root).items():
        print(f"{path.relative_to(args.root)!s:<66} {path.stat().st_size:>8} bytes  {what}")


def check(root: Path) -> int:
    """0 when every file this script writes is committed under ``root`` byte for byte, else 1 (with what differs)."""
    import tempfile

    stale: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch)
        written = write_all(fresh)
        for path in written:
            relative = path.relative_to(fresh)
            committed = root / relative
            if not committed.is_file():
                stale.append(f"{relative}: missing (run scripts/make_fixtures.py)")
            elif committed.read_bytes() != path.read_bytes():
                stale.append(f"{relative}: differs from what scripts/make_fixtures.py writes")
    for line in stale:
        print(line)
    if not stale:
        print(f"{len(written)} fixture files are as scripts/make_fixtures.py writes them")
    return 1 if stale else 0


if __name__ == "__main__":
    main()

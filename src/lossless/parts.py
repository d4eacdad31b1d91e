"""Message parts: the twelve typed pieces a message is made of.

Invariants:

* Parts mirror the twelve part types of the reference schema
  (:data:`PART_TYPES`); :func:`part_from_dict` refuses unknown types and fields.
* Parts are frozen values that do no I/O.  Structured fields (tool input,
  metadata) are JSON values, checked on construction, and round-trip exactly
  (``part_from_dict(part.to_dict()) == part``).
* :func:`render_parts` is the flattened, searchable text of a message: a single
  text part renders to exactly its text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias, get_args

from lossless.errors import InputError, check_nesting

__all__ = [
    "EDIT_TOOLS",
    "FAILURE",
    "FAILURE_SCANNED",
    "PART_TYPES",
    "SHELL_TOOLS",
    "TOOL_STATUSES",
    "WRITE_TOOLS",
    "AgentPart",
    "CompactionPart",
    "FilePart",
    "JSONValue",
    "Part",
    "PartType",
    "PatchPart",
    "ReasoningPart",
    "RetryPart",
    "SnapshotPart",
    "StepFinishPart",
    "StepStartPart",
    "SubtaskPart",
    "TextPart",
    "ToolPart",
    "ToolStatus",
    "check_json",
    "freeze_meta",
    "is_part",
    "part_from_dict",
    "render_parts",
]

#: Tool names (lowercased) that create a file, and that change one, across agent harnesses.
WRITE_TOOLS = frozenset({"write", "create", "write_file", "create_file", "createfile", "writefile", "new_file"})
EDIT_TOOLS = frozenset({
    "edit", "multiedit", "str_replace", "str_replace_editor", "replace", "apply_patch", "patch", "notebookedit",
    "insert", "edit_file", "update_file", "search_replace", "sed",
})  # fmt: skip
#: Tool names (lowercased) that run a shell command, across agent harnesses.
SHELL_TOOLS = frozenset({
    "bash", "shell", "sh", "zsh", "powershell", "terminal", "exec", "exec_command", "run_command",
    "execute_command", "run_terminal_cmd", "run_shell_command", "local_shell",
})  # fmt: skip
#: A tool's output that reports a failure (in its first :data:`FAILURE_SCANNED` characters): the error
#: mark a renderer writes, a non-zero exit code, a failed test, a traceback, a panic, an error line.
FAILURE = re.compile(
    r"^\[tool error\]|\b[Ee]xit (?:code|status):? [1-9]|^(?:--- )?FAIL\b|Traceback \(most recent call last\)|"
    r"\bpanic: |^(?:error|Error|ERROR|fatal|FATAL)\b[:\[ ]",
    re.M,
)
FAILURE_SCANNED = 4000

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = "dict[str, JSONValue]"

PartType = Literal[
    "text",
    "reasoning",
    "tool",
    "patch",
    "file",
    "subtask",
    "compaction",
    "step_start",
    "step_finish",
    "snapshot",
    "agent",
    "retry",
]
PART_TYPES: tuple[PartType, ...] = get_args(PartType)

ToolStatus = Literal["pending", "running", "completed", "error"]
TOOL_STATUSES: tuple[ToolStatus, ...] = get_args(ToolStatus)


# ----------------------------------------------------------------- JSON checks


def check_json(value: object, what: str) -> None:
    check_nesting(value, what)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{what} must be JSON-serialisable: {exc}") from exc


def freeze_meta(value: Mapping[str, Any] | None, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError(f"{what} must be a mapping, got {type(value).__name__}")
    out = dict(value)
    check_json(out, what)
    return out or None


# ----------------------------------------------------------------- parts


@dataclass(frozen=True, slots=True, kw_only=True)
class _PartBase:
    """Fields every part has.  ``metadata`` carries anything the typed fields do not."""

    metadata: dict[str, JSONValue] | None = None

    type: ClassVar[PartType]

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", freeze_meta(self.metadata, f"{self.type} part metadata"))

    def to_dict(self) -> dict[str, JSONValue]:
        """A JSON-ready dict: ``{"type": …}`` plus every field that differs from its default."""
        out: dict[str, JSONValue] = {"type": self.type}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            default = self.__dataclass_fields__[name].default
            if value == default:
                continue
            out[name] = list(value) if isinstance(value, tuple) else value
        return out


def _opt_str(value: object, what: str) -> None:
    if value is not None and not isinstance(value, str):
        raise InputError(f"{what} must be a string or None, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class TextPart(_PartBase):
    """Visible text.  ``synthetic`` marks text the host injected (not typed by a person)."""

    text: str
    synthetic: bool = False
    ignored: bool = False
    type: ClassVar[PartType] = "text"

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InputError(f"text part text must be a string, got {type(self.text).__name__}")
        _PartBase.__post_init__(self)


@dataclass(frozen=True, slots=True)
class ReasoningPart(_PartBase):
    """Model reasoning ("thinking").  ``signature`` is the provider's opaque verification token."""

    text: str
    signature: str | None = None
    redacted: bool = False
    type: ClassVar[PartType] = "reasoning"

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InputError("reasoning part text must be a string")
        _opt_str(self.signature, "reasoning signature")
        _PartBase.__post_init__(self)


@dataclass(frozen=True, slots=True)
class ToolPart(_PartBase):
    """A tool call, its result, or both.

    A call has ``input`` (and usually ``call_id`` and ``name``); a result has
    ``output`` or ``error``.  Chat transcripts keep the call in the assistant
    message and the result in the next tool/user message, both with the same
    ``call_id``; other hosts keep both halves in one part.
    """

    call_id: str | None = None
    name: str | None = None
    input: JSONValue = None
    output: str | None = None
    error: str | None = None
    status: ToolStatus | None = None
    title: str | None = None
    type: ClassVar[PartType] = "tool"

    def __post_init__(self) -> None:
        for what in ("call_id", "name", "output", "error", "title"):
            _opt_str(getattr(self, what), f"tool part {what}")
        if self.status is not None and self.status not in TOOL_STATUSES:
            raise InputError(f"tool status {self.status!r} is not one of {', '.join(TOOL_STATUSES)}")
        check_json(self.input, "tool input")
        _PartBase.__post_init__(self)

    @property
    def is_call(self) -> bool:
        return self.input is not None or (self.output is None and self.error is None)

    @property
    def is_result(self) -> bool:
        return self.output is not None or self.error is not None


@dataclass(frozen=True, slots=True)
class PatchPart(_PartBase):
    """A set of file changes, identified by a hash, touching ``files``."""

    hash: str | None = None
    files: tuple[str, ...] = ()
    type: ClassVar[PartType] = "patch"

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", tuple(self.files))
        if not all(isinstance(f, str) for f in self.files):
            raise InputError("patch part files must be strings")
        _PartBase.__post_init__(self)


@dataclass(frozen=True, slots=True)
class FilePart(_PartBase):
    """A file or image attached to a message: a URL (``data:`` URLs included) plus name and MIME type."""

    mime: str | None = None
    name: str | None = None
    url: str | None = None
    type: ClassVar[PartType] = "file"

    def __post_init__(self) -> None:
        for what in ("mime", "name", "url"):
            _opt_str(getattr(self, what), f"file part {what}")
        _PartBase.__post_init__(self)


@dataclass(frozen=True, slots=True)
class SubtaskPart(_PartBase):
    """A sub-agent task that was spawned: its prompt, a description, and the agent that ran it."""

    prompt: str | None = None
    description: str | None = None
    agent: str | None = None
    type: ClassVar[PartType] = "subtask"


@dataclass(frozen=True, slots=True)
class CompactionPart(_PartBase):
    """A compaction event: the host's (or our) summary of earlier history, if it produced one."""

    summary: str | None = None
    auto: bool | None = None
    tokens_before: int | None = None
    type: ClassVar[PartType] = "compaction"


@dataclass(frozen=True, slots=True)
class StepStartPart(_PartBase):
    """The start of one model step (optionally with a workspace snapshot hash)."""

    snapshot: str | None = None
    type: ClassVar[PartType] = "step_start"


@dataclass(frozen=True, slots=True)
class StepFinishPart(_PartBase):
    """The end of one model step: why it stopped, what it cost, tokens in and out."""

    reason: str | None = None
    cost: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    snapshot: str | None = None
    type: ClassVar[PartType] = "step_finish"


@dataclass(frozen=True, slots=True)
class SnapshotPart(_PartBase):
    """A workspace snapshot, identified by its hash."""

    hash: str | None = None
    type: ClassVar[PartType] = "snapshot"


@dataclass(frozen=True, slots=True)
class AgentPart(_PartBase):
    """A switch to (or mention of) a named agent."""

    name: str | None = None
    type: ClassVar[PartType] = "agent"


@dataclass(frozen=True, slots=True)
class RetryPart(_PartBase):
    """A retried model call: the attempt number and the error that caused it."""

    attempt: int | None = None
    error: str | None = None
    type: ClassVar[PartType] = "retry"


Part: TypeAlias = (
    TextPart
    | ReasoningPart
    | ToolPart
    | PatchPart
    | FilePart
    | SubtaskPart
    | CompactionPart
    | StepStartPart
    | StepFinishPart
    | SnapshotPart
    | AgentPart
    | RetryPart
)

_PART_CLASSES: dict[str, type[Any]] = {
    cls.type: cls
    for cls in (
        TextPart,
        ReasoningPart,
        ToolPart,
        PatchPart,
        FilePart,
        SubtaskPart,
        CompactionPart,
        StepStartPart,
        StepFinishPart,
        SnapshotPart,
        AgentPart,
        RetryPart,
    )
}


def is_part(value: object) -> bool:
    """Whether ``value`` is one of the twelve part values (not a subclass, not a dict)."""
    return type(value) in _PART_CLASSES.values()


def part_from_dict(data: Mapping[str, Any]) -> Part:
    """Inverse of ``part.to_dict()``.  Unknown types or fields raise :class:`InputError`."""
    kind = data.get("type")
    cls = _PART_CLASSES.get(str(kind))
    if cls is None:
        raise InputError(f"unknown part type {kind!r}: expected one of {', '.join(PART_TYPES)}")
    fields = {k: v for k, v in data.items() if k != "type"}
    unknown = set(fields) - set(cls.__dataclass_fields__)
    if unknown:
        raise InputError(f"{kind} part has unknown field(s): {', '.join(sorted(unknown))}")
    if "files" in fields and isinstance(fields["files"], list):
        fields["files"] = tuple(fields["files"])
    try:
        part: Part = cls(**fields)
    except TypeError as exc:
        raise InputError(f"invalid {kind} part: {exc}") from exc
    return part


def _render_json(value: JSONValue) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _render_part(part: Part) -> str:
    match part:
        case TextPart(text=text):
            return text
        case ReasoningPart(text=text):
            return f"[reasoning] {text}" if text else ""
        case ToolPart():
            pieces: list[str] = []
            if part.input is not None:
                label = part.name or "tool"
                pieces.append(f"[tool call: {label}] {_render_json(part.input)}")
            if part.output is not None:
                pieces.append(part.output if part.input is None else f"[tool result] {part.output}")
            if part.error is not None:
                pieces.append(f"[tool error] {part.error}")
            return "\n".join(pieces)
        case PatchPart(files=files):
            return f"[patch] {', '.join(files)}" if files else ""
        case FilePart(name=name, mime=mime):
            label = " ".join(x for x in (name, f"({mime})" if mime else None) if x)
            return f"[file] {label}" if label else "[file]"
        case SubtaskPart(prompt=prompt, description=desc):
            return f"[subtask] {desc or prompt or ''}".rstrip()
        case CompactionPart(summary=summary):
            return summary or ""
        case RetryPart(error=error):
            return f"[retry] {error}" if error else ""
        case _:
            return ""


def render_parts(parts: Iterable[Part]) -> str:
    """The flattened, searchable text of a message's parts, in order, blank pieces dropped.

    A message with one text part renders to exactly that text.
    """
    return "\n\n".join(piece for piece in map(_render_part, parts) if piece)

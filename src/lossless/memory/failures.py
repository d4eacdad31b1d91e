"""What went wrong when an agent ran a command, as a statement a memory can hold.

An agent's session is full of commands; the ones that failed are what it asks about later ("what was
the error when the migration failed?"). :func:`commands` reads the tool calls of an assistant's message
(``[tool call: Bash] {"command": …}``, as the transcript readers write them) and
:func:`failure_statement` turns a tool's output that reports a failure into
``The assistant ran `mise run lint:full`, which failed (exit code 1): mise ERROR no task lint:full found.``

Invariants:

* Pure: no I/O; the same text gives the same result.
* :func:`commands` gives one entry per tool call, in order (the outputs that follow answer them in
  that order): the call's command (its first line, spaces folded and ``2>&1`` left out, at most
  :data:`COMMAND_CHARS` characters) or ``None`` for a call that runs no command (an edit, a read) or
  whose arguments cannot be read.
* :func:`failure_statement` gives a statement only for a command's output that reports a failure
  (:data:`lossless.parts.FAILURE`: an error mark, a non-zero exit code, FAIL, a traceback, an error
  line); it quotes the command and one line of the output (the one that says what went wrong, at most
  :data:`REASON_CHARS` characters), never more of it.
"""

from __future__ import annotations

import json
import re

from lossless.parts import FAILURE, FAILURE_SCANNED

__all__ = ["COMMAND_CHARS", "REASON_CHARS", "commands", "failure_statement", "is_output"]

COMMAND_CHARS = 160
REASON_CHARS = 200
_CALL = re.compile(r"^\[tool call: ([^\]\n]{1,120})\] (.*)$", re.M)
#: A ``command`` field, whole or cut short (a long call kept in part).
_COMMAND_FIELD = re.compile(r'"(?:command|cmd)"\s*:\s*"((?:[^"\\]|\\.)*)')
#: A line that says what went wrong, best first: a raised exception, an error or failure line, a refusal.
_REASONS = (
    re.compile(r"^\w*(?:Error|Exception)\b.*$", re.M),  # a traceback's last word
    re.compile(r"^.*\b(?:error|ERROR|Error|fatal|FATAL|panic|FAIL)\b.*$", re.M),
    re.compile(r"^.*\b(?:not found|No such file|[Pp]ermission denied|CONFLICT|rejected|[Ff]ailed)\b.*$", re.M),
)
_NOISE = re.compile(r"^\s*(?:\[tool error\]\s*)?(?:Exit code \d+\s*)?$")
_EXIT = re.compile(r"\b[Ee]xit (?:code|status):? ([1-9]\d*)")


def is_output(role: str, content: str) -> bool:
    """Whether a message is a tool's output: a ``tool`` message, or one a renderer marked as a result or error."""
    return role == "tool" or content.startswith(("[tool result]", "[tool error]"))


def commands(text: str) -> list[str | None]:
    """The command each tool call in ``text`` runs (``None`` for a call that runs none), in order."""
    out: list[str | None] = []
    for match in _CALL.finditer(text):
        command: str | None = None
        try:
            args = json.JSONDecoder().raw_decode(match.group(2))[0]
        except ValueError:
            field = _COMMAND_FIELD.search(match.group(2))
            args = {"command": _unescaped(field.group(1))} if field else None
        found = args.get("command", args.get("cmd")) if isinstance(args, dict) else None
        if isinstance(found, list):  # exec-style ["bash", "-lc", "…"]
            found = " ".join(str(part) for part in found)
        if isinstance(found, str) and found.strip():
            command = " ".join(w for w in found.strip().splitlines()[0].split() if w != "2>&1")[:COMMAND_CHARS]
        out.append(command)
    return out


def failure_statement(command: str, output: str) -> str | None:
    """``The assistant ran `COMMAND`, which failed (exit code N): REASON.`` when ``output`` reports a failure."""
    head = output[:FAILURE_SCANNED]
    if not command or FAILURE.search(head) is None:
        return None
    reason = _reason(head)
    code = _EXIT.search(head)
    status = f" (exit code {code.group(1)})" if code else ""
    said = f"The assistant ran `{command}`, which failed{status}"
    if reason:
        said += f": {reason}"
    return said if said.endswith((".", "!", "?")) else said + "."


def _reason(output: str) -> str:
    """The output's line that says what went wrong, or its first line that says anything."""
    lines = [line.strip() for line in output.splitlines() if not _NOISE.match(line)]
    text = "\n".join(lines)
    for pattern in _REASONS:
        found = pattern.findall(text)
        if found:
            line = found[-1] if pattern is _REASONS[0] else found[0]  # a traceback ends with its exception
            return _cut(line)
    return _cut(lines[0]) if lines else ""


def _cut(line: str) -> str:
    line = " ".join(line.replace("[tool error]", "").split())
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1].rstrip() + "…"


def _unescaped(raw: str) -> str:
    try:
        return str(json.loads(f'"{raw}"'))
    except ValueError:  # an escape cut in half
        return raw

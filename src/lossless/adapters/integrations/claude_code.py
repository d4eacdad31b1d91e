"""Claude Code drop-in: hooks that keep a session's transcript in the store, and their installer.

``lcm install claude-code [--project DIR]`` writes, next to the MCP server registration
(``lossless`` → ``lcm mcp``), three hooks into Claude Code's settings file:

* ``SessionStart`` imports the session's transcript (incrementally: an unchanged file costs
  nothing, an appended one only its new lines) and, when the session resumes or was just
  compacted by Claude Code, tells the agent that the whole history is stored and searchable.
* ``PreCompact`` imports the transcript up to now and compacts it into lossless's summary DAG,
  so what Claude Code's own compaction is about to drop stays stored verbatim and reachable
  with ``lcm_grep`` / ``lcm_describe`` / ``lcm_expand_query`` (hooks cannot stop Claude Code's
  compaction; they make it lose nothing).
* ``UserPromptSubmit`` (only with ``--recall-guidance``) keeps the import current and adds the
  recall guidance to a prompt once the session has summaries.

Invariants:

* Install and uninstall touch only what they own: hook entries whose command runs
  ``hook claude-code`` of an ``lcm``, and the ``lossless`` MCP server entry; every other key of
  the files is kept as it was.  Installing twice changes nothing; uninstall removes exactly our
  entries (and a hooks or servers object it leaves empty; a file left empty is removed).
* A hook never fails the user's session: :func:`run_hook` returns the JSON Claude Code reads
  (or nothing) and the CLI exits 0 for any problem with the store, printing it to stderr.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lossless.errors import InputError, LcmError, NotFoundError

if TYPE_CHECKING:
    from lossless.engine import ContextEngine

__all__ = ["HOOK_EVENTS", "MCP_SERVER", "InstallReport", "install", "run_hook", "settings_paths", "uninstall"]

#: The hook events we install, with the argument our hook command takes for each.
HOOK_EVENTS: Mapping[str, str] = {
    "SessionStart": "session-start",
    "PreCompact": "pre-compact",
    "UserPromptSubmit": "user-prompt-submit",
}
#: The name of the MCP server entry we register.
MCP_SERVER = "lossless"
_MARKER = "hook claude-code"

GUIDANCE = (
    "lossless stores this session verbatim, including everything compacted away. To recover an earlier "
    "detail, search with the lcm_grep tool, inspect a summary or stored file with lcm_describe, or ask "
    "lcm_expand_query a question about it; cite the ids you relied on."
)


@dataclass(frozen=True, slots=True)
class InstallReport:
    """What an install or uninstall changed: each file written (or removed) and the entries touched."""

    settings_file: Path
    mcp_file: Path
    changed: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"settings_file": str(self.settings_file), "mcp_file": str(self.mcp_file), "changed": list(self.changed)}


def settings_paths(project: Path | None, home: Path | None = None) -> tuple[Path, Path]:
    """``(settings file, MCP file)``: a project's ``.claude/settings.json`` and ``.mcp.json``, or with
    no project the user's ``~/.claude/settings.json`` and ``~/.claude.json``."""
    if project is not None:
        return project / ".claude" / "settings.json", project / ".mcp.json"
    base = home or Path.home()
    return base / ".claude" / "settings.json", base / ".claude.json"


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path} is not a readable JSON file ({exc}); fix or move it, then try again") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path} does not hold a JSON object; fix or move it, then try again")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    if not data:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".lcm-tmp")
    temporary.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temporary, path)  # atomic: Claude Code never reads half a file


def _ours(hook: object) -> bool:
    return isinstance(hook, dict) and _MARKER in str(hook.get("command", ""))


def _without_ours(groups: object) -> list[Any]:
    kept = []
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            hooks = [h for h in group["hooks"] if not _ours(h)]
            if len(hooks) == len(group["hooks"]):
                kept.append(group)
            elif hooks:
                kept.append({**group, "hooks": hooks})
        else:
            kept.append(group)
    return kept


def install(
    project: Path | None,
    *,
    command: Sequence[str],
    recall_guidance: bool = False,
    home: Path | None = None,
) -> InstallReport:
    """Install the hooks and the MCP server for ``project`` (or the user); ``command`` runs ``lcm`` (with its
    global options, such as ``--database``)."""
    if not command:
        raise InputError("the lcm command to install must not be empty")
    if project is not None and not project.is_dir():
        # A mistyped --project must not grow a folder tree that Claude Code never reads.
        raise InputError(
            f"the project folder {str(project)!r} does not exist (or is not a folder): give the folder Claude "
            "Code runs in, or leave --project out to install for the user; nothing was written"
        )
    settings_file, mcp_file = settings_paths(project, home)
    settings = _read(settings_file)
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InputError(f"{settings_file}: 'hooks' is not an object; fix it, then try again")
    changed: list[str] = []
    line = " ".join(_quote(c) for c in command)
    for event, name in HOOK_EVENTS.items():
        if event == "UserPromptSubmit" and not recall_guidance:
            continue
        groups = _without_ours(hooks.get(event, []))
        entry = {"type": "command", "command": f"{line} {_MARKER} {name}", "timeout": 120}
        groups.append({"hooks": [entry]})  # no matcher: every source / trigger
        if groups != hooks.get(event):
            changed.append(f"hook {event}")
        hooks[event] = groups
    settings["hooks"] = hooks
    _write(settings_file, settings)
    servers_holder = _read(mcp_file)
    servers = servers_holder.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise InputError(f"{mcp_file}: 'mcpServers' is not an object; fix it, then try again")
    server = {"type": "stdio", "command": command[0], "args": [*command[1:], "mcp"]}
    if servers.get(MCP_SERVER) != server:
        changed.append(f"MCP server {MCP_SERVER}")
    servers[MCP_SERVER] = server
    _write(mcp_file, servers_holder)
    return InstallReport(settings_file, mcp_file, tuple(changed))


def uninstall(project: Path | None, *, home: Path | None = None) -> InstallReport:
    """Remove what :func:`install` added (and nothing else)."""
    settings_file, mcp_file = settings_paths(project, home)
    changed: list[str] = []
    settings = _read(settings_file)
    hooks = settings.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            kept = _without_ours(hooks[event])
            if kept != hooks[event]:
                changed.append(f"hook {event}")
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
        if not hooks:
            del settings["hooks"]
        if changed:
            _write(settings_file, settings)
    holder = _read(mcp_file)
    servers = holder.get("mcpServers")
    entry = servers.get(MCP_SERVER) if isinstance(servers, dict) else None
    if isinstance(servers, dict) and isinstance(entry, dict) and list(entry.get("args") or [])[-1:] == ["mcp"]:
        del servers[MCP_SERVER]  # only an entry that runs `… mcp`, as install writes it
        changed.append(f"MCP server {MCP_SERVER}")
        if not servers:
            del holder["mcpServers"]
        _write(mcp_file, holder)
    return InstallReport(settings_file, mcp_file, tuple(changed))


def _quote(word: str) -> str:
    import shlex

    return shlex.quote(word)


# ---------------------------------------------------------------------- the hooks at run time


async def run_hook(engine: ContextEngine, event: str, payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """Handle one Claude Code hook call (``event`` is ``session-start``, ``pre-compact`` or
    ``user-prompt-submit``); returns the JSON to print for Claude Code, or None."""
    if event not in HOOK_EVENTS.values():
        raise InputError(f"unknown hook {event!r}: the hooks are {', '.join(HOOK_EVENTS.values())}")
    transcript = payload.get("transcript_path")
    imported = None
    if isinstance(transcript, str) and transcript:
        try:
            imported = await engine.bootstrap(transcript)
        except (InputError, OSError):  # no transcript yet (a new session), or not one we read
            imported = None
    session = imported.session_id if imported is not None and imported.session_id else payload.get("session_id")
    if event == "pre-compact":
        if isinstance(session, str) and session:
            try:
                await engine.compact(session, force=True)
            except NotFoundError:
                return None
        return None
    if event == "session-start":
        if payload.get("source") in ("resume", "compact") and await _has_history(engine, session):
            return _context("SessionStart", GUIDANCE)
        return None
    if await _has_summaries(engine, session):
        return _context("UserPromptSubmit", GUIDANCE)
    return None


async def _has_history(engine: ContextEngine, session: object) -> bool:
    if not isinstance(session, str) or not session:
        return False
    try:
        return bool(await engine.messages(session, tail=1))
    except LcmError:
        return False


async def _has_summaries(engine: ContextEngine, session: object) -> bool:
    if not isinstance(session, str) or not session:
        return False
    try:
        summaries, _ = await engine.summaries(session)
    except LcmError:
        return False
    return bool(summaries)


def _context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}

"""``lcm install|uninstall claude-code`` and ``lcm hook claude-code EVENT`` (what the installed hooks run).

``install`` writes Claude Code's hooks and the ``lossless`` MCP server into a project's
``.claude/settings.json`` and ``.mcp.json`` (``--project DIR``) or the user's files; the commands it
writes repeat this command's global options (``--database``, ``--config``, ``--agent``) so the
hooks, the MCP server and later ``lcm`` commands open the same store.  ``uninstall`` removes exactly
that.  ``hook`` reads the hook's JSON on stdin; it exits 0 whatever happens to the store (a
problem is printed on stderr), so a hook never breaks the user's Claude Code session.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import click

from lossless.adapters.integrations.claude_code import HOOK_EVENTS, install, run_hook, uninstall
from lossless.cli._common import CliState, emit_json, json_option, open_engine, run_command
from lossless.errors import LcmError

__all__ = ["hook_group", "install_group", "uninstall_group"]

_TARGETS = click.Choice(["claude-code"])


def lcm_argv(state: CliState) -> list[str]:
    """How the hooks run this ``lcm``: its full path when it can be found, with this command's store options."""
    found = shutil.which("lcm")
    here = Path(sys.argv[0])
    argv = [str(here.resolve()) if here.name == "lcm" and here.exists() else found or "lcm"]
    if state.database:
        argv += ["--database", state.database]
    if state.config_file is not None:
        argv += ["--config", str(state.config_file.resolve())]
    if state.agent:
        argv += ["--agent", state.agent]
    return argv


@click.group("install")
def install_group() -> None:
    """Install lossless into an agent host."""


@install_group.command("claude-code")
@click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    help="Install into this project's .claude/settings.json and .mcp.json (default: the user's files).",
)
@click.option("--recall-guidance", is_flag=True, help="Also add recall guidance to prompts once summaries exist.")
@json_option
@click.pass_obj
@run_command
async def install_claude_code(state: CliState, project: Path | None, recall_guidance: bool, as_json: bool) -> None:
    """Add the SessionStart / PreCompact (/ UserPromptSubmit) hooks and the `lossless` MCP server."""
    report = install(project, command=lcm_argv(state), recall_guidance=recall_guidance)
    if as_json:
        emit_json(report.to_dict())
        return
    click.echo(f"hooks:      {report.settings_file}")
    click.echo(f"MCP server: {report.mcp_file}")
    click.echo("changed:    " + (", ".join(report.changed) or "nothing (already installed)"))
    click.echo("undo with:  lcm uninstall claude-code" + (f" --project {project}" if project else ""))


@click.group("uninstall")
def uninstall_group() -> None:
    """Remove what `lcm install` added."""


@uninstall_group.command("claude-code")
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), help="The project it was installed in.")
@json_option
@click.pass_obj
@run_command
async def uninstall_claude_code(state: CliState, project: Path | None, as_json: bool) -> None:
    """Remove lossless's hooks and MCP server entry (nothing else in the files is touched)."""
    report = uninstall(project)
    if as_json:
        emit_json(report.to_dict())
        return
    click.echo("removed: " + (", ".join(report.changed) or "nothing (not installed)"))


@click.group("hook", hidden=True)
def hook_group() -> None:
    """Hook entry points that `lcm install` registers (they read the host's JSON on stdin)."""


@hook_group.command("claude-code")
@click.argument("event", type=click.Choice(sorted(HOOK_EVENTS.values())))
@click.pass_obj
def hook_claude_code(state: CliState, event: str) -> None:
    """Handle one Claude Code hook call; never fails the session (exit 0, problems on stderr)."""
    try:
        payload = json.loads(sys.stdin.read() or "{}")
        if not isinstance(payload, dict):
            raise ValueError("the hook input is not a JSON object")
    except ValueError as exc:
        click.echo(f"lcm hook: {exc}", err=True)
        return

    async def handle() -> dict[str, object] | None:
        async with await open_engine(state, create=True) as engine:
            return await run_hook(engine, event, payload)

    import anyio

    try:
        output = anyio.run(handle)
    except (LcmError, OSError) as exc:
        click.echo(f"lcm hook: {exc}", err=True)
        return
    if output is not None:
        click.echo(json.dumps(output, ensure_ascii=False))

"""The ``lcm`` command.

Commands: ``import``, ``conversations``, ``messages``, ``files``, ``file``, ``compact``,
``summaries``, ``compactions``, ``replay``, ``stats``, ``config show``, ``grep``, ``describe``, ``expand``, ``show``,
``doctor``, ``index``,
``prune``, ``vacuum``, ``migrate``, ``worker``, ``jobs``, ``serve`` (the HTTP API), ``mcp`` (the MCP server)
``grants`` (create, show, revoke expansion grants for ``mcp --grant``), and
``install`` / ``uninstall claude-code`` (hooks and the MCP server for Claude Code).
Every command honours ``--database`` (else ``LCM_DATABASE_URL``, the config file, or SQLite in the
data directory) and prints JSON with ``--json``.
``memory …`` (add, search, explain, list, forget, update, export, import, stats,
maintain, extract, grant, revoke) works on long-term memory.
Exit codes are documented in ``docs/cli.md`` and defined by
:data:`lossless.errors.EXIT_CODES`.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from lossless._version import VERSION
from lossless.cli._state import CliState

__all__ = ["cli", "main"]

#: Each command and the module that defines it: a command's module loads only when that command is
#: looked up, and the engine, the store and everything they import only when it runs (the command
#: modules import them inside their functions), so ``lcm --version``, ``lcm --help`` and
#: ``lcm CMD --help`` start fast, and a command that needs an optional extra costs the others nothing.
COMMANDS: dict[str, str] = {
    "import": "lossless.cli.imports:import_command",
    "migrate": "lossless.cli.migrate:migrate_command",
    "conversations": "lossless.cli.inspect:conversations_command",
    "messages": "lossless.cli.inspect:messages_command",
    "files": "lossless.cli.files:files_command",
    "file": "lossless.cli.files:file_command",
    "stats": "lossless.cli.inspect:stats_command",
    "compact": "lossless.cli.compact:compact_command",
    "summaries": "lossless.cli.compact:summaries_command",
    "compactions": "lossless.cli.compact:compactions_command",
    "replay": "lossless.cli.replay:replay_command",
    "config": "lossless.cli.config_cmd:config_group",
    "doctor": "lossless.cli.doctor:doctor_command",
    "index": "lossless.cli.index:index_command",
    "prune": "lossless.cli.retention:prune_command",
    "vacuum": "lossless.cli.retention:vacuum_command",
    "worker": "lossless.cli.worker:worker_command",
    "jobs": "lossless.cli.worker:jobs_group",
    "serve": "lossless.cli.serve:serve_command",
    "ui": "lossless.cli.serve:ui_command",
    "mcp": "lossless.cli.serve:mcp_command",
    "grants": "lossless.cli.grants:grants_group",
    "grep": "lossless.cli.retrieval:grep_command",
    "describe": "lossless.cli.retrieval:describe_command",
    "expand": "lossless.cli.retrieval:expand_command",
    "show": "lossless.cli.retrieval:show_command",
    "memory": "lossless.cli.memory:memory_group",
    "install": "lossless.cli.integrations:install_group",
    "uninstall": "lossless.cli.integrations:uninstall_group",
    "hook": "lossless.cli.integrations:hook_group",
}


#: The commands that serve metrics (the HTTP API's ``/v1/metrics``, ``worker --metrics-port``) or run
#: for long: every other command run by ``lcm`` records none (it exits with them unread) and so never
#: imports prometheus-client (:func:`lossless.observability.disable_metrics`).
KEEP_METRICS = frozenset({"serve", "ui", "worker", "mcp"})
#: ``ctx.obj`` as :func:`main` starts the group: this process runs one command (not so under a
#: ``CliRunner`` or a host that calls :data:`cli` itself, whose metrics are left as they are).
_OWN_PROCESS = object()


class _LazyGroup(click.Group):
    """A group whose commands are imported by name, on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, name = target.partition(":")
        command = getattr(importlib.import_module(module), name)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(VERSION, prog_name="lcm")
@click.option(
    "--database", "-d", metavar="URL", help="Database URL (default: LCM_DATABASE_URL, else SQLite in the data dir)."
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML config file (default: LCM_CONFIG_FILE, else config.toml in the user config dir).",
)
@click.option("--agent", metavar="ID", help="Agent identity that owns and may read conversations (default: main).")
@click.pass_context
def cli(ctx: click.Context, database: str | None, config_file: Path | None, agent: str | None) -> None:
    """lossless: every message kept, old history compacted into summaries you can always expand back."""
    if ctx.obj is _OWN_PROCESS and ctx.invoked_subcommand not in KEEP_METRICS:
        from lossless.observability import disable_metrics

        disable_metrics()
    ctx.obj = CliState(database, config_file, agent)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="lcm", obj=_OWN_PROCESS)

"""The ``lcm`` command.

Commands: ``import``, ``conversations``, ``messages``, ``files``, ``file``, ``compact``,
``summaries``, ``compactions``, ``replay``, ``stats``, ``config show``, ``grep``, ``describe``, ``expand``, ``doctor``,
``index``, ``prune``, ``vacuum``, ``migrate``, ``worker``, ``jobs``, ``serve`` (the HTTP API), ``mcp`` (the MCP server)
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

from pathlib import Path

import click

from lossless.cli._common import CliState
from lossless.cli.compact import compact_command, compactions_command, summaries_command
from lossless.cli.config_cmd import config_group
from lossless.cli.doctor import doctor_command
from lossless.cli.files import file_command, files_command
from lossless.cli.grants import grants_group
from lossless.cli.imports import import_command
from lossless.cli.index import index_command
from lossless.cli.inspect import conversations_command, messages_command, stats_command
from lossless.cli.integrations import hook_group, install_group, uninstall_group
from lossless.cli.memory import memory_group
from lossless.cli.migrate import migrate_command
from lossless.cli.replay import replay_command
from lossless.cli.retention import prune_command, vacuum_command
from lossless.cli.retrieval import describe_command, expand_command, grep_command
from lossless.cli.serve import mcp_command, serve_command
from lossless.cli.worker import jobs_group, worker_command
from lossless.engine import VERSION

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
    ctx.obj = CliState(database, config_file, agent)


cli.add_command(import_command)
cli.add_command(migrate_command)
cli.add_command(conversations_command)
cli.add_command(messages_command)
cli.add_command(files_command)
cli.add_command(file_command)
cli.add_command(stats_command)
cli.add_command(compact_command)
cli.add_command(summaries_command)
cli.add_command(compactions_command)
cli.add_command(replay_command)
cli.add_command(config_group)
cli.add_command(doctor_command)
cli.add_command(index_command)
cli.add_command(prune_command)
cli.add_command(vacuum_command)
cli.add_command(worker_command)
cli.add_command(jobs_group)
cli.add_command(serve_command)
cli.add_command(mcp_command)
cli.add_command(grants_group)
cli.add_command(grep_command)
cli.add_command(describe_command)
cli.add_command(expand_command)
cli.add_command(memory_group)
cli.add_command(install_group)
cli.add_command(uninstall_group)
cli.add_command(hook_group)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="lcm")

"""``lcm config show``: every setting's effective value and where it came from."""

from __future__ import annotations

import click

from lossless.cli._common import CliState, emit_json, json_option, run_command, stdout, styled

__all__ = ["config_group"]


@click.group("config")
def config_group() -> None:
    """Inspect the configuration."""


@config_group.command("show")
@json_option
@click.pass_obj
@run_command
async def show_command(state: CliState, as_json: bool) -> None:
    """Show every setting, its value, and its source (default, file, env or argument)."""
    from rich.table import Table

    from lossless.config import SETTINGS

    config = state.config()
    values = config.as_dict()
    derived = {
        "database_url": config.resolved_database_url,
        "data_dir": str(config.resolved_data_dir),
        "bootstrap_max_tokens": config.resolved_bootstrap_max_tokens,
    }
    if as_json:
        emit_json(
            {
                s.name: {
                    "value": values[s.name],
                    "effective": derived.get(s.name, values[s.name]),
                    "source": config.sources.get(s.name, "default"),
                    "env": s.env,
                }
                for s in SETTINGS
            }
        )
        return
    table = Table(title="lossless configuration", title_justify="left")
    table.add_column("setting")
    table.add_column("value")
    table.add_column("source")
    for setting in SETTINGS:
        value = derived.get(setting.name, values[setting.name])
        shown = styled("" if value is None else str(value))
        if setting.name in derived and values[setting.name] is None:
            shown.append(" (derived)", style="dim")
        table.add_row(setting.name, shown, config.sources.get(setting.name, "default"))
    stdout().print(table)

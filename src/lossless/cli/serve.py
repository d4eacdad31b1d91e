"""``lcm serve`` (the HTTP API) and ``lcm mcp`` (the MCP server): thin launchers for the adapters.

The adapters are imported only when a command runs, so the rest of ``lcm`` works without the
``server`` and ``mcp`` extras; a missing extra is a :class:`MissingDependencyError` naming it.
"""

from __future__ import annotations

from pathlib import Path

import click

from lossless.cli._common import CliState, run_command

__all__ = ["mcp_command", "serve_command", "ui_command"]


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.pass_obj
@run_command
async def serve_command(state: CliState, host: str, port: int) -> None:
    """Serve the HTTP API (needs the server extra). A non-loopback --host needs api_tokens."""
    from lossless.adapters.http import check_bind, serve

    config = state.config()
    check_bind(config, host)
    await serve(config, host=host, port=port)


@click.command("ui")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--no-browser", is_flag=True, help="Do not open a browser; just print the address.")
@click.pass_obj
@run_command
async def ui_command(state: CliState, port: int, no_browser: bool) -> None:
    """Open the web explorer on this store (lcm serve on 127.0.0.1, then the browser at /ui/)."""
    import webbrowser

    from lossless.adapters.http import listen_socket, serve

    config = state.config()
    sock = listen_socket("127.0.0.1", port)  # the port first: a browser is never sent to another server
    address = f"http://127.0.0.1:{port}/ui/"
    click.echo(f"the explorer is at {address} (Ctrl-C stops it)")
    if not no_browser:
        webbrowser.open(address)
    await serve(config, host="127.0.0.1", port=port, build_index=False, sock=sock)  # the explorer only reads


@click.command("mcp")
@click.option("--http", "over_http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address for --http (loopback only).")
@click.option("--port", default=8766, show_default=True, type=click.IntRange(0, 65535), help="Port for --http.")
@click.option(
    "--follow",
    "follow",
    type=click.Path(exists=True, path_type=Path),
    multiple=True,
    help="Transcript file or folder to import from as it grows (repeatable).",
)
@click.option(
    "--interval",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0.05, 3600),
    help="Seconds between checks of the --follow paths.",
)
@click.option(
    "--grant",
    "grant_id",
    metavar="GRANT_ID",
    help="Serve an expansion sub-agent holding this grant: only lcm_grep, lcm_describe and lcm_expand, "
    "reading within the grant until it is revoked or expires.",
)
@click.pass_obj
@run_command
async def mcp_command(
    state: CliState,
    over_http: bool,
    host: str,
    port: int,
    follow: tuple[Path, ...],
    interval: float,
    grant_id: str | None,
) -> None:
    """Run the MCP server for coding agents (needs the mcp extra): stdio by default."""
    from lossless.adapters.mcp import serve_http, serve_stdio

    config = state.config()
    if over_http:
        await serve_http(config, host=host, port=port, follow=list(follow), interval=interval, grant_id=grant_id)
    else:
        await serve_stdio(config, follow=list(follow), interval=interval, grant_id=grant_id)

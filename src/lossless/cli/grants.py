"""``lcm grants create|show|revoke``: expansion grants for sub-agents that a host runs itself.

``create`` mints a durable grant over some conversations of the ``--agent`` and prints the exact
``lcm … mcp --grant GRANT_ID`` line that starts the sub-agent's MCP server (only ``lcm_grep``,
``lcm_describe`` and ``lcm_expand``, within the grant); ``revoke`` ends it, and the sub-agent's
next call is refused.  The line repeats this command's global options (``--database``,
``--config``) and names the agent, so it opens the same store as the same agent.
"""

from __future__ import annotations

import re
import shlex
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import click

from lossless.cli._common import CliState, emit_json, json_option, open_engine, run_command
from lossless.constants import DEFAULT_GRANT_TTL, MAX_GRANT_TOKEN_CAP, MAX_GRANT_TTL, MIN_GRANT_TTL
from lossless.errors import InputError

if TYPE_CHECKING:
    from lossless.records import Grant, JSONValue

__all__ = ["grants_group", "parse_duration"]

_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str) -> timedelta:
    """``90s``, ``10m``, ``2h``, ``1d`` or a combination like ``1h30m``, from 1 second to 24 hours."""
    found = _DURATION.fullmatch(text.strip().lower())
    if not text.strip() or found is None:
        raise InputError(f"--ttl takes a duration like 90s, 10m, 2h or 1h30m, got {text!r}")
    days, hours, minutes, seconds = (int(part or 0) for part in found.groups())
    if max(days, hours, minutes, seconds) > 10**6:
        raise InputError(f"--ttl must be from 1s to 24h, got {text!r}")
    span = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if not MIN_GRANT_TTL <= span <= MAX_GRANT_TTL:
        raise InputError(f"--ttl must be from 1s to 24h, got {text!r}")
    return span


def _stamp(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat(timespec="seconds")


def _status(grant: Grant, now: datetime) -> str:
    if grant.revoked_at is not None:
        return "expired" if grant.revoke_reason == "expired" else "revoked"
    return "active" if grant.usable(now) else "expired"


def grant_dict(grant: Grant, now: datetime) -> dict[str, JSONValue]:
    return {
        "grant_id": grant.id,
        "agent_id": grant.agent_id,
        "grantee": grant.grantee,
        "conversation_ids": list(grant.conversation_ids),
        "token_cap": grant.token_cap,
        "tokens_used": grant.tokens_used,
        "tokens_left": grant.tokens_left,
        "created_at": _stamp(grant.created_at),
        "expires_at": _stamp(grant.expires_at),
        "revoked_at": _stamp(grant.revoked_at),
        "revoke_reason": grant.revoke_reason,
        "status": _status(grant, now),
    }


def mcp_argv(state: CliState, grant: Grant) -> list[str]:
    """The command that starts the sub-agent's MCP server: this command's store options, its agent, the grant."""
    argv = ["lcm"]
    if state.database:
        argv += ["--database", state.database]
    if state.config_file is not None:
        argv += ["--config", str(state.config_file)]
    return [*argv, "--agent", grant.agent_id, "mcp", "--grant", grant.id]


def _print_grant(grant: Grant, now: datetime) -> None:
    status = _status(grant, now)
    if status != "active" and grant.revoked_at is not None:
        status += f" at {_stamp(grant.revoked_at)} ({grant.revoke_reason or 'revoked'})"
    rows = [
        ("grant", grant.id),
        ("agent", grant.agent_id),
        ("grantee", grant.grantee),
        ("conversations", ", ".join(str(c) for c in grant.conversation_ids)),
        ("token cap", f"{grant.token_cap:,} (used {grant.tokens_used:,}, left {grant.tokens_left:,})"),
        ("created", _stamp(grant.created_at)),
        ("expires", _stamp(grant.expires_at)),
        ("status", status),
    ]
    for name, value in rows:
        click.echo(f"{name:<14}{value}")


@click.group("grants")
def grants_group() -> None:
    """Expansion grants for sub-agents a host runs itself (lcm mcp --grant): create, show, revoke."""


@grants_group.command("create")
@click.argument("conversations", nargs=-1, required=True)
@click.option(
    "--token-cap",
    type=click.IntRange(1, MAX_GRANT_TOKEN_CAP),
    help="Most tokens the sub-agent's expansions may return in all (default: max_expand_tokens).",
)
@click.option(
    "--ttl",
    metavar="DURATION",
    default=f"{int(DEFAULT_GRANT_TTL.total_seconds()) // 60}m",
    show_default=True,
    help="How long the grant lasts: 90s, 10m, 2h, 1h30m … (1s to 24h).",
)
@click.option("--grantee", metavar="NAME", help="Name of the sub-agent holding it (default: a generated one).")
@json_option
@click.pass_obj
@run_command
async def grants_create_command(
    state: CliState,
    conversations: tuple[str, ...],
    token_cap: int | None,
    ttl: str,
    grantee: str | None,
    as_json: bool,
) -> None:
    """Grant a sub-agent read access to CONVERSATION… (ids or session ids) and print how to start its server."""
    from lossless.records import utcnow

    span = parse_duration(ttl)
    async with await open_engine(state) as engine:
        grant = await engine.grant_expansion(list(conversations), token_cap=token_cap, ttl=span, grantee=grantee)
    argv = mcp_argv(state, grant)
    if as_json:
        emit_json({**grant_dict(grant, utcnow()), "mcp_command": shlex.join(argv), "mcp_argv": list(argv)})
        return
    conversation_list = ", ".join(str(c) for c in grant.conversation_ids)
    click.echo(f"created {grant.id}: conversations {conversation_list}, token cap {grant.token_cap:,}")
    click.echo(f"expires {_stamp(grant.expires_at)}; end it sooner with: lcm grants revoke {grant.id}")
    click.echo("start the sub-agent's MCP server with:")
    click.echo(shlex.join(argv))


@grants_group.command("show")
@click.argument("grant_id")
@json_option
@click.pass_obj
@run_command
async def grants_show_command(state: CliState, grant_id: str, as_json: bool) -> None:
    """Show a grant: its conversations, token cap and use, expiry, and whether it was revoked."""
    from lossless.records import utcnow

    async with await open_engine(state) as engine:
        grant = await engine.expansion_grant(grant_id)
    if as_json:
        emit_json(grant_dict(grant, utcnow()))
    else:
        _print_grant(grant, utcnow())


@grants_group.command("revoke")
@click.argument("grant_id")
@json_option
@click.pass_obj
@run_command
async def grants_revoke_command(state: CliState, grant_id: str, as_json: bool) -> None:
    """End a grant now: the sub-agent holding it is refused at its next call."""
    from lossless.records import utcnow

    async with await open_engine(state) as engine:
        revoked = await engine.revoke_expansion_grant(grant_id)
        grant = await engine.expansion_grant(grant_id)
    if as_json:
        emit_json({"revoked": revoked, **grant_dict(grant, utcnow())})
    elif revoked:
        click.echo(f"revoked {grant.id}")
    else:
        click.echo(f"{grant.id} had already ended ({grant.revoke_reason or _status(grant, utcnow())})")

"""``lcm worker`` (run background jobs until SIGTERM) and ``lcm jobs`` (list and queue them)."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

import click

from lossless.cli._common import CliState, emit_json, json_option, open_engine, run_command, stdout

if TYPE_CHECKING:
    import anyio

    from lossless.ports import Job

__all__ = ["jobs_group", "worker_command"]


def _job_dict(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "kind": job.kind,
        "reason": job.reason,
        "conversation_id": job.conversation_id,
        "mode": job.mode,
        "target_tokens": job.target_tokens,
        "state": job.state,
        "attempts": job.attempts,
        "lease_owner": job.lease_owner,
        "requested_at": job.requested_at.isoformat(),
        "finished_at": None if job.finished_at is None else job.finished_at.isoformat(),
        "result": job.result,
        "error": job.error,
    }


async def _stop_on_signals(stop: anyio.Event) -> None:
    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stop.set()
            return


async def _integrity_every(engine: Any, seconds: float, stop: anyio.Event) -> None:
    import anyio

    while not stop.is_set():
        await engine.enqueue_integrity(mode="scan_and_plan")
        with anyio.move_on_after(seconds):
            await stop.wait()


@click.command("worker")
@click.option("--once", is_flag=True, help="Run the queued jobs, then exit (default: run until SIGTERM).")
@click.option("--lease", type=click.FloatRange(1), metavar="SECONDS", help="Job lease (default: worker_lease_ms).")
@click.option(
    "--poll", type=click.FloatRange(0.01), metavar="SECONDS", help="Idle poll interval (default: worker_poll_ms)."
)
@click.option(
    "--grace",
    type=click.FloatRange(0),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="On SIGTERM, how long the running job may take to finish before it is given back.",
)
@click.option(
    "--integrity-every",
    type=click.FloatRange(1),
    metavar="SECONDS",
    help="Also queue a whole-store integrity scan this often.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="Serve Prometheus metrics on this port (needs the metrics extra).",
)
@click.option("--log-format", type=click.Choice(["text", "json"]), help="Log format (default: log_format).")
@click.pass_obj
@run_command
async def worker_command(
    state: CliState,
    once: bool,
    lease: float | None,
    poll: float | None,
    grace: float,
    integrity_every: float | None,
    metrics_port: int | None,
    log_format: str | None,
) -> None:
    """Run compaction and integrity jobs from the queue; several workers may serve one database."""
    import anyio

    from lossless.observability import configure_logging, registry, render_metrics
    from lossless.workers import WorkerSettings

    async with await open_engine(state, create=True) as engine:
        configure_logging(log_format or engine.config.log_format)
        if metrics_port is not None:
            render_metrics()  # raises the install hint when prometheus-client is missing
            import prometheus_client

            prometheus_client.start_http_server(metrics_port, registry=registry())
        settings = WorkerSettings(
            lease_ms=int(lease * 1000) if lease else engine.config.worker_lease_ms,
            poll_ms=int(poll * 1000) if poll else engine.config.worker_poll_ms,
            max_attempts=engine.config.worker_max_attempts,
            grace_s=grace,
        )
        worker = engine.worker(settings)
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(_stop_on_signals, stop)
            if integrity_every and not once:
                group.start_soon(_integrity_every, engine, integrity_every, stop)
            await worker.run(stop, once=once)
            group.cancel_scope.cancel()


@click.group("jobs")
def jobs_group() -> None:
    """List background jobs, or queue one for the workers."""


@jobs_group.command("list")
@click.option(
    "--state",
    "state_filter",
    type=click.Choice(["queued", "running", "done", "failed"]),
    help="Only jobs in this state.",
)
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True)
@json_option
@click.pass_obj
@run_command
async def jobs_list(state: CliState, state_filter: str | None, limit: int, as_json: bool) -> None:
    """Jobs, newest first."""
    from rich.table import Table

    async with await open_engine(state) as engine:
        jobs = await engine.jobs(state=state_filter, limit=limit)  # type: ignore[arg-type]
    if as_json:
        emit_json([_job_dict(j) for j in jobs])
        return
    table = Table(title="Jobs", title_justify="left")
    for column in ("id", "kind", "reason", "conversation", "state", "attempts", "requested", "result / error"):
        table.add_column(column)
    for j in jobs:
        table.add_row(
            str(j.id),
            j.kind + (f" ({j.mode})" if j.mode else ""),
            j.reason,
            "-" if j.conversation_id is None else str(j.conversation_id),
            j.state,
            str(j.attempts),
            j.requested_at.isoformat(timespec="seconds"),
            j.error or ("" if j.result is None else str(j.result)),
        )
    stdout().print(table)


@jobs_group.command("add")
@click.argument("kind", type=click.Choice(["compaction", "integrity"]))
@click.argument("conversation", required=False)
@click.option("--full", is_flag=True, help="Compaction: a full sweep (default: incremental).")
@click.option("--until", type=click.IntRange(0), metavar="TOKENS", help="Compaction: until the context fits TOKENS.")
@click.option("--plan", "with_plan", is_flag=True, help="Integrity: also record the repair plan.")
@click.option(
    "--reason", type=click.Choice(["manual", "maintenance", "threshold"]), default="manual", show_default=True
)
@json_option
@click.pass_obj
@run_command
async def jobs_add(
    state: CliState,
    kind: str,
    conversation: str | None,
    full: bool,
    until: int | None,
    with_plan: bool,
    reason: str,
    as_json: bool,
) -> None:
    """Queue a KIND job (compaction needs a CONVERSATION; integrity checks everything without one)."""
    if full and until is not None:
        raise click.UsageError(
            "--full and --until are alternatives: give one (--full runs every pass there is room for)"
        )
    async with await open_engine(state, create=True) as engine:
        if kind == "compaction":
            if conversation is None:
                raise click.UsageError("a compaction job needs a CONVERSATION")
            mode = "until_under" if until is not None else ("full" if full else "incremental")
            job = await engine.enqueue_compaction(conversation, reason=reason, mode=mode, target_tokens=until)  # type: ignore[arg-type]
        else:
            job = await engine.enqueue_integrity(
                conversation,
                mode="scan_and_plan" if with_plan else "scan",
                reason=reason,  # type: ignore[arg-type]
            )
    if as_json:
        emit_json(_job_dict(job))
    else:
        stdout().print(f"job {job.id} ({job.kind}) is {job.state}")

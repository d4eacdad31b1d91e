"""``lcm doctor``: check the store's integrity, show the repair plan, and apply it when asked.

Exit status: 0 when no problem is found (after ``--apply``: none is left), :data:`PROBLEMS_FOUND`
otherwise.  Nothing is written without ``--apply``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from lossless.cli._common import CliState, emit_json, json_option, open_engine, run_command, stdout, styled

if TYPE_CHECKING:
    from lossless.integrity import IntegrityReport, RepairPlan

__all__ = ["PROBLEMS_FOUND", "doctor_command"]

#: The exit status of ``lcm doctor`` when problems are found (documented in docs/cli.md).
PROBLEMS_FOUND = 10


def _print_report(report: IntegrityReport, title: str) -> None:
    from rich.table import Table

    out = stdout()
    scope = f"conversation {report.conversation_id}" if report.conversation_id is not None else "the whole store"
    out.print(
        styled(
            (title, "bold"),
            f" of {scope}: {report.conversations} conversations, {report.messages} messages, "
            f"{report.summaries} summaries, {report.context_items} context items, {report.files} files"
            + (", search index" if report.search_index_checked else ""),
        )
    )
    if report.fallback_summaries:
        out.print(
            f"{report.fallback_summaries} summaries were made by truncation (no summarizer answered); "
            "--plan shows how to re-make them with the current summarizer"
        )
    for conversation_id, raw in report.stalled:
        out.print(
            f"conversation {conversation_id}: compaction has stalled ({raw:,} tokens of raw history outside the "
            f"fresh tail); catch up with  lcm compact {conversation_id} --full"
        )
    if report.ok:
        out.print(styled(("no problems found", "green")))
        return
    table = Table(title=f"{len(report.problems)} problems", title_justify="left")
    for column in ("kind", "conversation", "where", "what is wrong"):
        table.add_column(column)
    for p in report.problems:
        table.add_row(p.kind, "-" if p.conversation_id is None else str(p.conversation_id), p.subject, p.detail)
    out.print(table)


def _print_plan(plan: RepairPlan) -> None:
    from lossless.integrity import why_unrepairable

    out = stdout()
    if plan.repairs:
        out.print(
            styled((f"{len(plan.repairs)} repairs", "bold"), " (non-destructive; run with --apply to carry them out):")
        )
        for repair in plan.repairs:
            out.print(f"  - {repair.description}")
    else:
        out.print("no repair to propose")
    if plan.unrepairable:
        out.print(styled((f"{len(plan.unrepairable)} problems have no safe repair:", "bold")))
        for problem in plan.unrepairable:
            out.print(f"  - {problem.subject}: {why_unrepairable(problem)}")


@click.command("doctor")
@click.option("--conversation", metavar="ID", help="Check one conversation (id or session id); default: everything.")
@click.option("--plan", "show_plan", is_flag=True, help="Also show the repairs that would fix what was found.")
@click.option("--apply", "apply", is_flag=True, help="Carry out the safe repairs, then check again.")
@json_option
@click.pass_obj
@run_command
async def doctor_command(
    state: CliState, conversation: str | None, show_plan: bool, apply: bool, as_json: bool
) -> None:
    """Check the store's integrity (lineage, context, files, search index); exit 10 if problems are found."""
    from lossless.integrity import plan_repairs

    async with await open_engine(state) as engine:
        report = await engine.check_integrity(conversation)
        plan = plan_repairs(report)
        result: dict[str, Any] = {"report": report.to_dict()}
        if show_plan or apply:
            result["plan"] = plan.to_dict()
        final = report
        if apply and plan.repairs:
            outcome = await engine.repair_integrity(plan)
            final = await engine.check_integrity(conversation)
            result["applied"] = [r.to_dict() for r in outcome.applied]
            result["skipped"] = [r.to_dict() for r in outcome.skipped]
            result["after"] = final.to_dict()
    if as_json:
        emit_json(result)
    else:
        _print_report(report, "Integrity check")
        if show_plan or apply:
            _print_plan(plan)
        if final is not report:
            stdout().print(f"applied {len(result['applied'])} repairs")
            if result["skipped"]:
                stdout().print(
                    f"{len(result['skipped'])} repairs changed nothing (no longer needed, or the summarizer "
                    "gave no proper summary)"
                )
            _print_report(final, "Check after the repairs")
    if not final.ok:
        sys.exit(PROBLEMS_FOUND)

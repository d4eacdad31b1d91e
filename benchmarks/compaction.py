"""Compaction with the offline summarizer: speed, and how many identifiers survive versus plain truncation.

Every transcript of the shared corpus (else the bundled sample session) is imported and compacted with a
full sweep (fresh tail of 8 messages).  Figures:

* **messages summarised per second** — messages covered by the new leaf summaries / compaction time;
* **identifier retention** — for each leaf summary, the identifiers in its source messages (file paths,
  error names such as ``ModuleNotFoundError``, failing test ids) and the share of them found in the
  summary; the baseline is the same source text truncated to the summary's length, in the same run;
* **context reduction** — tokens after / before over all transcripts (the rest is the fresh tails).
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import CORPUS, SAMPLE, Figure, parse_args, report
from lossless import ContextEngine
from lossless.segments import render_messages
from lossless.tokens import truncate_to_tokens

PATH = re.compile(r"(?:[\w.-]+/)+[\w.-]+\.[A-Za-z]\w{0,7}\b")
ERROR_NAME = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b")
FAILED_TEST = re.compile(r"FAILED \S+")


def identifiers(text: str) -> set[str]:
    return set(PATH.findall(text)) | set(ERROR_NAME.findall(text)) | set(FAILED_TEST.findall(text))


async def main() -> None:
    args = parse_args(__doc__ or "")
    sources = [CORPUS] if CORPUS.is_dir() else [SAMPLE]
    with tempfile.TemporaryDirectory() as tmp:
        async with await ContextEngine.open(f"sqlite:///{Path(tmp) / 'c.db'}", fresh_tail_count=8) as engine:
            imported = [r for r in await engine.import_paths(sources) if not isinstance(r, Exception)]
            if args.quick:
                imported = sorted(imported, key=lambda r: r.stored)[-4:]
            before = after = covered = 0
            seconds = 0.0
            found_ours = found_truncated = total_ids = 0
            for result in imported:
                assert result.conversation_id is not None
                started = time.perf_counter()
                done = await engine.compact(result.conversation_id, mode="full")
                seconds += time.perf_counter() - started
                before += done.tokens_before
                after += done.tokens_after
                lineage = await engine.store.get_lineage(result.conversation_id)
                for summary in done.summaries:
                    if summary.kind != "leaf":
                        continue
                    ids = [s for s in lineage[summary.id] if isinstance(s, int)]
                    covered += len(ids)
                    messages = await engine.store.get_messages_by_id(ids)
                    source = render_messages(messages, engine.zone)
                    wanted = identifiers(source)
                    truncated = truncate_to_tokens(source, summary.token_count, engine.tokens)
                    total_ids += len(wanted)
                    found_ours += sum(1 for ident in wanted if ident in summary.content)
                    found_truncated += sum(1 for ident in wanted if ident in truncated)
    ours = found_ours / total_ids if total_ids else 0.0
    truncated_share = found_truncated / total_ids if total_ids else 0.0
    figures = [
        Figure(
            "messages summarised per second (offline)",
            covered / seconds if seconds else 0.0,
            "msg/s",
            note=f"{len(imported)} transcripts, {covered:,} messages under leaf summaries in {seconds:.2f} s",
        ),
        Figure(
            "identifier retention in leaf summaries",
            ours * 100,
            "%",
            baseline=truncated_share * 100,
            goal=2.0,
            goal_op=">=",
            note=f"{total_ids:,} identifiers (paths, error names, failing tests); baseline: truncated to equal length",
        ),
        Figure(
            "context tokens after / before (full sweep)",
            after / before * 100 if before else 0.0,
            "%",
            note=f"{before:,} → {after:,} tokens; what remains is mostly the fresh tails",
        ),
    ]
    report("compaction", figures, args.json)


if __name__ == "__main__":
    anyio.run(main)

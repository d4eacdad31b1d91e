"""Take docs/ui.md's screenshots of the web explorer on a real corpus session.

python scripts/ui_screenshots.py [--session PATH] [--out docs/ui]

Imports one Claude Code session of ``../shared/corpus`` (default: the marot-spotter session, with its
sub-agents) into a scratch store, compacts it (leaf chunks of 3,000 tokens, condensed by threes, so a long
session reaches depth 2 and more), mines memories from it, serves the explorer with ``lcm serve``'s app and saves a
screenshot of every page with Playwright driving Debian's Chromium.  Needs the dev extra and
``apt-get install chromium``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from pathlib import Path

import anyio
import uvicorn
from playwright.sync_api import sync_playwright

from lossless import ContextEngine
from lossless.adapters.http import create_app
from lossless.config import Config, load_config

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT.parent / "shared" / "corpus" / "marot-spotter" / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"


async def seed(config: Config, session: Path) -> dict[str, str]:
    async with await ContextEngine.open(config=config) as engine:
        (imported,) = [r for r in await engine.import_paths([session]) if not isinstance(r, Exception)][:1]
        conversation = imported.conversation_id
        assert conversation is not None
        await engine.compact(conversation, force=True)
        records = await engine.messages(conversation, limit=400)
        await engine.memory().mine(records)
        summaries, _ = await engine.summaries(conversation)
        files = await engine.files(conversation, limit=1)
        deepest = max(summaries, key=lambda s: s.depth)
        print(f"imported {imported.stored} messages; {len(summaries)} summaries, depth {deepest.depth}")
        pages = {
            "conversations": "/ui/",
            "conversation": f"/ui/c/{conversation}?budget=32000",
            "summary": f"/ui/s/{deepest.id}",
            "search": f"/ui/search?q=test+failure&mode=full_text&conversation={conversation}",
            "compactions": f"/ui/c/{conversation}/compactions",
            "replay": f"/ui/c/{conversation}/replay?budget=16000",
            "memories": "/ui/memories",
        }
        if files:
            pages["file"] = f"/ui/f/{files[0].id}"
        return pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", type=Path, default=DEFAULT)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ui")
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("Chromium is not installed: apt-get install chromium")
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(
            {
                "database_url": f"sqlite:///{tmp}/ui.db",
                "data_dir": tmp,
                "leaf_chunk_tokens": 3000,
                "leaf_target_tokens": 500,
                "condensed_target_tokens": 500,
                "condensed_min_fanout": 3,
                "memory_embedder": "hash",
            },
            env={},
        )
        pages = anyio.run(seed, config, args.session)
        server = uvicorn.Server(
            uvicorn.Config(create_app(config), host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        args.out.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            for name, path in pages.items():
                page.goto(base + path)
                page.screenshot(path=str(args.out / f"{name}.png"))
                print(f"{name}: {path}")
            browser.close()
        server.should_exit = True
        thread.join(10)


if __name__ == "__main__":
    main()

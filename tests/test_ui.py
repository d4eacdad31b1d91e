"""The web explorer in a real browser: Playwright driving Debian's Chromium against ``lcm serve``'s app.

Each page's main path is walked with the keyboard and the mouse, agent isolation is checked through
the pages and the API, every ``src``/``href`` of every page is checked to stay on this server, and a
screenshot of each page is saved (to ``LOSSLESS_UI_SCREENSHOTS`` when set: docs/ui.md's pictures).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from lossless import ContextEngine, Message, ToolPart
from lossless.adapters.ui.html import esc, highlight, qs
from lossless.memory.records import MemoryDraft

from .test_http_api import ALICE, BOB, Running, make_config

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (dev extra)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample-session.jsonl"
HOSTILE = "<script>alert(1)</script> [/b] \x1b[31mred\x1b[0m <img src=http://evil.example/x.png>"


async def _seed(config: Any) -> dict[str, Any]:
    async with await ContextEngine.open(config=config.replace(agent_id="alice")) as alice:
        (imported,) = await alice.import_paths([SAMPLE])
        assert not isinstance(imported, Exception)
        conv = imported.conversation_id
        await alice.compact(conv, force=True)
        await alice.ingest("notes", Message.user(f"hostile text stays text: {HOSTILE}"))
        big = "\n".join(f"line {i}: value={i * 7}" for i in range(3000))
        call = Message.from_parts("assistant", [ToolPart(call_id="c1", name="cat", input={"path": "big.log"})])
        await alice.ingest_batch("notes", [call, Message.tool_result("c1", big, name="cat")])
        memory = alice.memory()
        first = await memory.add(MemoryDraft("Alice deploys on Fridays", category="preferences", fact_key="deploy-day"))
        await memory.supersede(first.memory_id, MemoryDraft("Alice deploys on Tuesdays now", category="preferences"))
        files = await alice.files("notes")
        summaries, _ = await alice.summaries(conv)
    async with await ContextEngine.open(config=config.replace(agent_id="bob")) as bob:
        await bob.ingest("bob-private", Message.user("bob's secret plan: BLUEBIRD"))
        bob_conv = (await bob.conversation("bob-private")).id
    return {
        "conversation": conv,
        "summary": max(summaries, key=lambda s: s.depth).id,
        "depth": max(s.depth for s in summaries),
        "file": files[0].id,
        "bob_conversation": bob_conv,
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("ui")
    config = make_config(
        tmp,
        leaf_chunk_tokens=1200,
        leaf_target_tokens=250,
        condensed_target_tokens=250,
        condensed_min_fanout=2,
        large_file_token_threshold=2000,
    )
    seeded = anyio.run(_seed, config)
    with Running(config) as url:
        yield url, seeded


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        yield launched
        launched.close()


def _signed_in(browser: Any, url: str, token: str) -> Any:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/ui/")
    assert page.url.endswith("/ui/login"), "a server with api_tokens asks the browser to sign in"
    page.fill("#token", token)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(f"{url}/ui/")
    return page


def _shot(page: Any, name: str, tmp_path: Path) -> None:
    target = Path(os.environ.get("LOSSLESS_UI_SCREENSHOTS") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / f"{name}.png"), full_page=False)
    assert (target / f"{name}.png").stat().st_size > 5_000


def _links_stay_here(page: Any) -> None:
    refs = page.eval_on_selector_all(
        "[src], [href]", "els => els.map(e => e.getAttribute('src') || e.getAttribute('href'))"
    )
    outside = [r for r in refs if not re.match(r"^(/|#|\?)", r or "")]
    assert outside == [], f"{page.url} links outside the server: {outside}"


def test_every_page_in_a_real_browser(site: tuple[str, dict[str, Any]], browser: Any, tmp_path: Path) -> None:
    url, seeded = site
    page = _signed_in(browser, url, ALICE)
    # Conversations: the imported session with its title and sizes; filter and sort.
    assert page.locator("table tbody tr").count() == 2
    _links_stay_here(page)
    _shot(page, "conversations", tmp_path)
    page.fill("input[name=q]", "notes")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"q=notes"))
    assert page.locator("table tbody tr").count() == 1
    page.goto(f"{url}/ui/?sort=messages")
    first = page.locator("table tbody tr").first.inner_text()
    assert "175" in first  # the sample session has the most messages

    # A conversation: what the model gets, the DAG (depth >= 2), the timeline with context highlighted.
    page.goto(f"{url}/ui/c/{seeded['conversation']}")
    assert "What the model gets now" in page.content()
    assert seeded["depth"] >= 2
    assert page.locator(".dag li").count() >= 3
    assert page.locator("article.msg.in-context").count() >= 1
    page.click("text=8,000")
    page.wait_for_url(re.compile(r"budget=8000"))
    assert "At a budget of 8,000 tokens" in page.content()
    _links_stay_here(page)
    _shot(page, "conversation", tmp_path)
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.classList.contains('msg')")

    # A summary: its text and sources; from there a message and what covers it.
    page.goto(f"{url}/ui/s/{seeded['summary']}")
    assert f"depth {seeded['depth']}" in page.content()
    assert page.locator("ol.sources li").count() >= 2
    _shot(page, "summary", tmp_path)
    page.goto(f"{url}/ui/c/{seeded['conversation']}")
    page.locator("article.msg a[href^='/ui/m/']").first.click()
    assert "Covered by" in page.content()
    page.locator("p:has-text('Covered by') a").first.click()
    assert page.url.startswith(f"{url}/ui/s/sum_")

    # Search: highlighted snippets, each hit opening where it is.
    page.goto(f"{url}/ui/search")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.name") == "q"
    page.fill("input[name=q]", "test")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"q=test"))
    assert page.locator("mark").count() >= 1
    _links_stay_here(page)
    _shot(page, "search", tmp_path)
    page.locator("table tbody tr a").first.click()
    assert page.url.startswith(f"{url}/ui/")

    # Compaction history: the chart and the table of passes.
    page.goto(f"{url}/ui/c/{seeded['conversation']}/compactions")
    assert page.locator("figure.chart svg rect.after").count() >= 2
    _shot(page, "compactions", tmp_path)

    # The conversation replayed turn by turn into a scratch store: tokens sent per turn against the budget.
    page.goto(f"{url}/ui/c/{seeded['conversation']}")
    page.click("text=replay it turn by turn")
    assert page.locator("figure.chart svg line.budget").count() == 1
    assert page.locator("table tbody tr").count() >= 10
    page.click("text=8,000")
    page.wait_for_url(re.compile(r"replay\?budget=8000"))
    assert "0 turns over budget" in page.content()
    _shot(page, "replay", tmp_path)

    # Memories: decay, history of the superseded value, explain scores on a search.
    page.goto(f"{url}/ui/memories")
    assert "Alice deploys on Tuesdays now" in page.content()
    page.locator("details summary:has-text('history')").first.click()
    assert "Alice deploys on Fridays" in page.content()
    page.fill("input[name=q]", "deploys")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"q=deploys"))
    _shot(page, "memories", tmp_path)

    # A stored file: metadata and numbered lines, paged.
    page.goto(f"{url}/ui/f/{seeded['file']}")
    assert "Lines 1–" in page.content() and "line 0: value=0" in page.content()
    page.click("text=later lines →")
    assert page.locator(".lines th").first.inner_text() != "1"
    _shot(page, "file", tmp_path)

    # Stored text is shown, never run: the hostile message renders as text.
    page.goto(f"{url}/ui/search?q=hostile&mode=full_text")
    page.goto(f"{url}/ui/c/notes".replace("notes", str(_conversation_id(url, "notes"))))
    assert page.locator("img").count() == 0 and "<script>alert(1)</script>" in page.inner_text("main")


def _conversation_id(url: str, session: str) -> int:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ALICE}"}) as http:
        return int(http.get(f"/v1/conversations/{session}").json()["id"])


def test_an_agent_sees_only_its_own_pages(site: tuple[str, dict[str, Any]], browser: Any) -> None:
    url, seeded = site
    page = _signed_in(browser, url, BOB)
    assert page.locator("table tbody tr").count() == 1 and "bob-private" in page.content()
    for path in (f"/ui/c/{seeded['conversation']}", f"/ui/s/{seeded['summary']}", f"/ui/f/{seeded['file']}", "/ui/m/1"):
        response = page.goto(f"{url}{path}")
        assert response.status == 404, path
        assert "Not found" in page.content()
    page.goto(f"{url}/ui/search?q=deploy&mode=full_text")
    assert "Fridays" not in page.content()
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {BOB}"}) as http:
        assert http.get(f"/v1/conversations/{seeded['conversation']}").status_code == 404
    # A wrong token is refused at sign-in and the pages stay closed.
    context = browser.new_context()
    stranger = context.new_page()
    stranger.goto(f"{url}/ui/login")
    stranger.fill("#token", "not-a-token")
    stranger.click("button:has-text('Sign in')")
    stranger.wait_for_selector("#login-error:not(:empty)")
    assert stranger.goto(f"{url}/ui/c/{seeded['bob_conversation']}").url.endswith("/ui/login")


def test_sign_in_takes_json_only(site: tuple[str, dict[str, Any]]) -> None:
    url, _ = site
    with httpx.Client(base_url=url) as http:
        assert (
            http.post("/ui/session", content=f"token={ALICE}", headers={"Content-Type": "text/plain"}).status_code
            == 415
        )
        assert http.post("/ui/session", json={"token": "wrong"}).status_code == 401
        done = http.post("/ui/session", json={"token": ALICE})
        assert done.status_code == 204 and "httponly" in done.headers["set-cookie"].lower()
        assert "samesite=strict" in done.headers["set-cookie"].lower()
        assert http.get("/ui/static/app.css").status_code == 200
        assert http.get("/ui/static/../http.py").status_code == 404
    with httpx.Client(base_url=url, cookies={"lcm_ui_token": ALICE}) as http:
        page = http.get("/ui/")
        assert page.status_code == 200 and "default-src 'self'" in page.headers["content-security-policy"]


def test_html_helpers_escape_everything() -> None:
    assert esc("<b>&\x00") == "&lt;b&gt;&amp;\\x00"
    assert highlight("Deploy <now>", ["deploy"]) == "<mark>Deploy</mark> &lt;now&gt;"
    assert qs(a=1, b=None, c="") == "?a=1"

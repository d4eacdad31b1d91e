"""The web explorer served by ``lcm serve`` at ``/ui``: see :mod:`.views` for the pages, :mod:`.html`
for how they are written.

Invariants: the router only translates requests into page calls; the caller's engine comes from
the HTTP API's own identity resolution (``resolve``), so the explorer and the API share identities,
reach and the store.  Assets are the two files in ``static/``, served from the package.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources

from lossless.adapters.ui.html import esc, page
from lossless.adapters.ui.views import PAGES, Page, render
from lossless.engine import ContextEngine

try:
    from fastapi import APIRouter, Request
    from fastapi.responses import HTMLResponse, RedirectResponse, Response
except ImportError as exc:  # pragma: no cover - the server extra brings fastapi
    from lossless.errors import MissingDependencyError

    raise MissingDependencyError("the web explorer (lcm serve)", "server", exc.name or "fastapi") from exc

__all__ = ["COOKIE", "LoginRequired", "ui_router"]

#: The cookie holding an explorer session's bearer token (HttpOnly, SameSite=Strict, path /ui).
COOKIE = "lcm_ui_token"
_ASSETS = {"app.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8"}
_HEADERS = {
    # Only our own assets, no framing, no referrer leaks: a stored message can never pull anything in.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class LoginRequired(Exception):
    """The server has api_tokens and the browser has not signed in (or its token is not valid)."""


Resolve = Callable[[Request], Awaitable[ContextEngine]]


def ui_router(resolve: Resolve, *, token_valid: Callable[[str], bool]) -> APIRouter:
    """The ``/ui`` routes; ``resolve`` gives a request's engine (or raises :class:`LoginRequired`)."""
    router = APIRouter(include_in_schema=False)

    def handler(page_fn: Page) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                engine = await resolve(request)
            except LoginRequired:
                return RedirectResponse("/ui/login", status_code=303, headers=_HEADERS)
            status, body = await render(page_fn, engine, dict(request.query_params), dict(request.path_params))
            return HTMLResponse(body, status_code=status, headers=_HEADERS)

        return endpoint

    for path, page_fn in PAGES.items():
        router.add_api_route(path, handler(page_fn), methods=["GET"], response_class=HTMLResponse)

    @router.get("/ui", response_class=RedirectResponse)
    async def root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=308)

    @router.get("/ui/static/{name}")
    async def asset(name: str) -> Response:
        if name not in _ASSETS:
            return Response("not found", status_code=404, media_type="text/plain")
        data = resources.files("lossless.adapters.ui").joinpath("static", name).read_bytes()
        return Response(data, media_type=_ASSETS[name], headers={**_HEADERS, "Cache-Control": "max-age=300"})

    @router.get("/ui/login", response_class=HTMLResponse)
    async def login() -> HTMLResponse:
        form = (
            "<p>This server asks for a token (its <code>api_tokens</code> setting). The explorer keeps it in a "
            "cookie for this site only and shows what that token's agent may read.</p>"
            '<form id="login" class="filters"><label>Token <input id="token" type="password" required '
            'autocomplete="current-password"></label><button>Sign in</button></form>'
            '<p id="login-error" role="alert"></p>'
        )
        return HTMLResponse(page("Sign in", form), headers=_HEADERS)

    @router.post("/ui/session")
    async def sign_in(request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return Response("send the token as application/json", status_code=415, media_type="text/plain")
        body = await request.json()
        token = body.get("token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token_valid(token):
            return Response(
                "that token is not one of this server's api_tokens", status_code=401, media_type="text/plain"
            )
        response = Response(status_code=204)
        response.set_cookie(
            COOKIE, token, httponly=True, samesite="strict", path="/ui", secure=request.url.scheme == "https"
        )
        return response

    @router.get("/ui/logout", response_class=RedirectResponse)
    async def sign_out() -> RedirectResponse:
        response = RedirectResponse("/ui/login", status_code=303)
        response.delete_cookie(COOKIE, path="/ui")
        return response

    _ = esc
    return router

"""The API's ``/docs`` page: rendered here from the OpenAPI document, with no script and no CDN.

Invariants: the page is one self-contained HTML document (inline CSS only), so it shows the same
offline, behind a firewall or in a browser that blocks third-party scripts; every value taken from
the OpenAPI document is HTML-escaped; it lists every operation with its method, path, summary,
description, parameters, request body schema and responses, and the schemas themselves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from typing import Any

__all__ = ["docs_page"]

_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 62rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
h1 { margin-bottom: 0; } code, pre { font: 13px/1.4 ui-monospace, monospace; }
pre { background: #f5f5f5; padding: .6rem; overflow-x: auto; border-radius: 4px; }
.op { border-top: 1px solid #ddd; padding: .6rem 0; } .method { font-weight: bold; text-transform: uppercase; }
.get { color: #1a7f37; } .post { color: #0550ae; } .delete { color: #cf222e; } .put, .patch { color: #9a6700; }
nav a { margin-right: 1rem; } details summary { cursor: pointer; }
"""


def _ref_name(schema: Mapping[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _schema_link(schema: Mapping[str, Any]) -> str:
    name = _ref_name(schema)
    if name is not None:
        return f'<a href="#schema-{escape(name)}"><code>{escape(name)}</code></a>'
    return f"<code>{escape(json.dumps(schema, ensure_ascii=False))}</code>"


def _operation(path: str, method: str, op: Mapping[str, Any]) -> str:
    out = [
        '<div class="op">',
        f'<span class="method {escape(method)}">{escape(method)}</span> <code>{escape(path)}</code>',
    ]
    if op.get("summary"):
        out.append(f" — {escape(str(op['summary']))}")
    if op.get("description"):
        out.append(f"<p>{escape(str(op['description']))}</p>")
    parameters = op.get("parameters") or []
    if parameters:
        out.append("<p>Parameters:</p><ul>")
        for p in parameters:
            required = " (required)" if p.get("required") else ""
            described = f": {escape(str(p['description']))}" if p.get("description") else ""
            out.append(
                f"<li><code>{escape(str(p.get('name')))}</code> in {escape(str(p.get('in')))}{required}{described}</li>"
            )
        out.append("</ul>")
    body = (op.get("requestBody") or {}).get("content") or {}
    for media, content in body.items():
        out.append(f"<p>Body ({escape(media)}): {_schema_link(content.get('schema') or {})}</p>")
    responses = op.get("responses") or {}
    if responses:
        out.append("<p>Responses:</p><ul>")
        for status, response in responses.items():
            out.append(f"<li><code>{escape(str(status))}</code> {escape(str(response.get('description', '')))}</li>")
        out.append("</ul>")
    out.append("</div>")
    return "".join(out)


def docs_page(spec: Mapping[str, Any]) -> str:
    """The whole ``/docs`` page for ``spec`` (an OpenAPI document)."""
    info = spec.get("info") or {}
    title = escape(f"{info.get('title', 'API')} {info.get('version', '')}".strip())
    parts = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>",
        f"<style>{_STYLE}</style></head><body><h1>{title}</h1>",
        f"<p>{escape(str(info.get('description', '')))}</p>",
        "<nav><a href='/openapi.json'>openapi.json</a><a href='#operations'>operations</a>"
        "<a href='#schemas'>schemas</a></nav><h2 id='operations'>Operations</h2>",
    ]
    for path, methods in (spec.get("paths") or {}).items():
        for method, op in methods.items():
            if isinstance(op, Mapping):
                parts.append(_operation(path, method, op))
    parts.append("<h2 id='schemas'>Schemas</h2>")
    for name, schema in ((spec.get("components") or {}).get("schemas") or {}).items():
        text = escape(json.dumps(schema, indent=2, ensure_ascii=False))
        anchor = escape(name)
        parts.append(
            f"<details id='schema-{anchor}'><summary><code>{anchor}</code></summary><pre>{text}</pre></details>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)

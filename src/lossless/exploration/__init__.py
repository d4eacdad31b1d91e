"""Exploration summaries: a compact, type-aware description of a large file.  Pure; no I/O.

:func:`explore` recognises the content (leading bytes, then the MIME type, then
the file name's extension, then the text itself) and describes it:

========================  =====================================================
JSON, JSON Lines          top-level keys and shapes, array lengths, nesting depth, record keys, a sample
CSV, TSV                  columns with inferred types and examples, row count, sample rows
YAML, TOML                top-level keys (YAML read lightly, without a dependency; TOML with tomllib)
XML, HTML                 root, its children, element and attribute names; title and headings
source code               imports, types, functions with signatures, line count (Python via ast;
                          JavaScript/TypeScript, Go, Rust, Java, C, C++ via line patterns)
logs                      line count, time span, level counts, the most frequent errors and warnings
prose, Markdown           counts, headings, how it begins and ends (an LLM summary is the engine's job)
images, PDF, binary       format, pixel size, pages, leading bytes, hash
========================  =====================================================

Invariants:

* **Never fails.**  Whatever the input, :func:`explore` returns an
  :class:`Exploration`: an explorer that raises (malformed JSON, a Python file
  ``ast`` cannot parse, anything) falls back to the generic text or binary
  summary, and that to one line of counts.
* **Bounded.**  The summary is cut to ``max_tokens`` (400 by default) by
  dropping its least important lines; every explorer runs in time linear in
  the input and keeps only bounded samples besides the parsed document.
* **Deterministic.**  The same bytes, name and MIME type give the same
  summary; nothing here calls a model or the network.
* ``suffix`` (the blob's file extension) depends on the bytes only, so one
  content always maps to one blob name.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass

from lossless.exploration._common import clip, human_size
from lossless.exploration.code import LANGUAGES, explore_code, explore_python
from lossless.exploration.structured import (
    explore_csv,
    explore_html,
    explore_json,
    explore_jsonl,
    explore_toml,
    explore_xml,
    explore_yaml,
)
from lossless.exploration.text import (
    explore_binary,
    explore_image,
    explore_log,
    explore_prose,
    image_format,
    looks_like_log,
)
from lossless.tokens import EstimatingCounter, TokenCounter

__all__ = ["KIND_MIME", "PROSE_KINDS", "Exploration", "detect_kind", "explore"]

#: The MIME type shown for a kind when the caller gave none.
KIND_MIME: dict[str, str] = {
    "json": "application/json",
    "jsonl": "application/jsonl",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
    "yaml": "application/yaml",
    "toml": "application/toml",
    "xml": "application/xml",
    "html": "text/html",
    "python": "text/x-python",
    "javascript": "text/javascript",
    "typescript": "text/x-typescript",
    "go": "text/x-go",
    "rust": "text/x-rust",
    "java": "text/x-java",
    "c": "text/x-c",
    "cpp": "text/x-c++",
    "log": "text/plain",
    "markdown": "text/markdown",
    "text": "text/plain",
    "pdf": "application/pdf",
    "binary": "application/octet-stream",
}
#: Kinds whose best summary is a model's (the engine asks the configured summarizer for these).
PROSE_KINDS = frozenset({"text", "markdown"})

_EXTENSIONS: dict[str, str] = {
    **dict.fromkeys(("json", "geojson", "ipynb"), "json"),
    **dict.fromkeys(("jsonl", "ndjson"), "jsonl"),
    "csv": "csv",
    **dict.fromkeys(("tsv", "tab"), "tsv"),
    **dict.fromkeys(("yaml", "yml"), "yaml"),
    "toml": "toml",
    **dict.fromkeys(("xml", "svg", "xsd", "plist", "csproj", "pom"), "xml"),
    **dict.fromkeys(("html", "htm", "xhtml"), "html"),
    **dict.fromkeys(("py", "pyi", "pyw"), "python"),
    **dict.fromkeys(("js", "mjs", "cjs", "jsx"), "javascript"),
    **dict.fromkeys(("ts", "tsx", "mts", "cts"), "typescript"),
    "go": "go",
    "rs": "rust",
    "java": "java",
    **dict.fromkeys(("c", "h"), "c"),
    **dict.fromkeys(("cc", "cpp", "cxx", "hpp", "hh", "hxx", "c++", "ino"), "cpp"),
    "log": "log",
    **dict.fromkeys(("md", "markdown", "rst", "adoc"), "markdown"),
    **dict.fromkeys(("txt", "text"), "text"),
}
_MIMES: dict[str, str] = {
    "application/json": "json",
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "application/x-jsonlines": "jsonl",
    "text/csv": "csv",
    "text/tab-separated-values": "tsv",
    **dict.fromkeys(("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"), "yaml"),
    **dict.fromkeys(("application/toml", "text/toml", "text/x-toml"), "toml"),
    **dict.fromkeys(("application/xml", "text/xml"), "xml"),
    **dict.fromkeys(("text/html", "application/xhtml+xml"), "html"),
    **dict.fromkeys(("text/x-python", "application/x-python", "text/x-script.python"), "python"),
    **dict.fromkeys(("text/javascript", "application/javascript", "application/x-javascript"), "javascript"),
    **dict.fromkeys(("text/x-typescript", "application/typescript", "text/typescript"), "typescript"),
    **dict.fromkeys(("text/x-go", "text/x-golang"), "go"),
    **dict.fromkeys(("text/x-rust", "text/rust"), "rust"),
    **dict.fromkeys(("text/x-java", "text/x-java-source"), "java"),
    **dict.fromkeys(("text/x-c", "text/x-csrc", "text/x-chdr"), "c"),
    **dict.fromkeys(("text/x-c++", "text/x-c++src", "text/x-c++hdr", "text/x-cpp"), "cpp"),
    **dict.fromkeys(("text/x-log", "text/log"), "log"),
    **dict.fromkeys(("text/markdown", "text/x-markdown", "text/x-rst"), "markdown"),
}

_PYTHON = re.compile(
    r"^(?:from\s+[\w.]+\s+import\s|import\s+[\w.]+\s*$|(?:async\s+)?def\s+\w+\(|class\s+\w+[(:])", re.M
)
_GO = re.compile(r"^package\s+\w+\s*$", re.M)
_RUST = re.compile(r"^\s*(?:pub\s+)?(?:fn\s+\w+|use\s+[\w:{}, *]+;|impl\b|mod\s+\w+;)", re.M)
_JAVA = re.compile(r"^(?:package\s+[\w.]+;|import\s+(?:static\s+)?[\w.*]+;)", re.M)
_C = re.compile(r"^\s*#\s*include\s*[<\"]", re.M)
_CPP = re.compile(r"std::|^\s*(?:class|namespace|template\s*<)", re.M)
_JS = re.compile(
    r"^(?:import\s.{0,200}from\s+['\"]|export\s+(?:default\s+)?(?:function|class|const|interface|type)\b"
    r"|(?:const|let|var)\s+\w+\s*=\s*require\(|function\s+\w+\s*\()",
    re.M,
)
_TS = re.compile(r"^\s*(?:export\s+)?(?:interface|type)\s+\w+|:\s*(?:string|number|boolean)\b", re.M)
_TOML_LINE = re.compile(r"^(?:\[\[?[\w.\-\" ]+\]\]?|[\w.\-\"]+\s*=\s*\S.*)$")
_TOML_TABLE = re.compile(r"\[\[?[\w.\-\" ]+\]\]?[ \t]*\r?\n")
_YAML_LINE = re.compile(r"^(?:---|[\w\"'.\-]+:(?:\s.*)?|\s+\S.*|-\s.*)$")
_MARKDOWN = re.compile(r"^#{1,6} \S|^```|^\* \S|^- \[[ x]\] ", re.M)


@dataclass(frozen=True, slots=True)
class Exploration:
    """What :func:`explore` found: the kind of content, a MIME type for it, the summary, a blob suffix."""

    kind: str
    mime: str
    summary: str
    suffix: str

    @property
    def prose(self) -> bool:
        return self.kind in PROSE_KINDS


def _extension(name: str | None) -> str | None:
    if not name:
        return None
    base = re.split(r"[\\/]", name)[-1]
    return base.rsplit(".", 1)[-1].lower() if "." in base.strip(".") else None


def _code_kind(head: str) -> str | None:
    if len(_PYTHON.findall(head)) >= 2:
        return "python"
    if _GO.search(head):
        return "go"
    if _JAVA.search(head) and ("class " in head or "interface " in head):
        return "java"
    if _C.search(head):
        return "cpp" if _CPP.search(head) else "c"
    if len(_RUST.findall(head)) >= 2:
        return "rust"
    if _JS.search(head):
        return "typescript" if _TS.search(head) else "javascript"
    return None


def _mostly(pattern: re.Pattern[str], lines: list[str]) -> bool:
    return len(lines) >= 2 and sum(1 for line in lines if pattern.match(line)) * 10 >= len(lines) * 8


def _sniff(text: str) -> str:
    head = text[:8192].lstrip("\ufeff \t\r\n")
    if head.startswith("{") or (head.startswith("[") and not _TOML_TABLE.match(head)):
        first, _, rest = head.partition("\n")
        if head.startswith("{") and rest.lstrip().startswith("{"):
            try:
                json.loads(first)
            except ValueError:
                return "json"
            return "jsonl"
        return "json"
    lower = head[:2048].lower()
    if lower.startswith(("<!doctype html", "<html")) or "<html" in lower[:400]:
        return "html"
    if lower.startswith("<?xml") or (head.startswith("<") and text.rstrip().endswith(">")):
        return "xml"
    if looks_like_log(text):
        return "log"
    code = _code_kind(head)
    if code is not None:
        return code
    lines = [line for line in head.splitlines()[:20] if line.strip() and not line.lstrip().startswith("#")]
    for delimiter, kind in (("\t", "tsv"), (",", "csv"), (";", "csv")):
        counts = Counter(line.count(delimiter) for line in lines[:10])
        width, agree = counts.most_common(1)[0] if counts else (0, 0)
        if len(lines) >= 3 and width >= 1 and agree >= max(3, len(lines[:10]) - 1):
            return kind
    if _mostly(_TOML_LINE, lines) and any("=" in line for line in lines):
        return "toml"
    if _mostly(_YAML_LINE, lines) and any(":" in line for line in lines):
        return "yaml"
    return "markdown" if _MARKDOWN.search(head) else "text"


def detect_kind(data: bytes, *, name: str | None = None, mime: str | None = None) -> tuple[str, str | None]:
    """The kind of ``data`` and its text (``None`` for binary content)."""
    found = image_format(data)
    if found is not None:
        return ("image" if found[1].startswith("image/") else "pdf" if found[2] == "pdf" else "binary"), None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "binary", None
    if "\x00" in text[:8192]:
        return "binary", None
    text = text.removeprefix("\ufeff")
    base = (mime or "").split(";", 1)[0].strip().lower()
    kind = _MIMES.get(base)
    if kind is None and base.endswith("+json"):
        kind = "json"
    if kind is None and base.endswith("+xml"):
        kind = "xml"
    if kind is None:
        kind = _EXTENSIONS.get(_extension(name) or "")
    if kind is None or kind == "text":
        kind = _sniff(text)
    return kind, text


def _describe(kind: str, data: bytes, text: str | None) -> list[str]:
    size = len(data)
    if text is None:
        return explore_image(data) if kind == "image" else explore_binary(data)
    if kind == "json":
        return explore_json(text, size)
    if kind == "jsonl":
        return explore_jsonl(text, size)
    if kind in ("csv", "tsv"):
        return explore_csv(text, size, tab=kind == "tsv")
    if kind == "yaml":
        return explore_yaml(text, size)
    if kind == "toml":
        return explore_toml(text, size)
    if kind == "xml":
        return explore_xml(text, size)
    if kind == "html":
        return explore_html(text, size)
    if kind == "python":
        return explore_python(text, size)
    if kind in LANGUAGES:
        return explore_code(text, size, kind)
    if kind == "log":
        return explore_log(text, size)
    return explore_prose(text, size, "Markdown document" if kind == "markdown" else "Text document")


def _fit(lines: list[str], max_tokens: int, counter: TokenCounter) -> str:
    kept = list(lines)
    while len(kept) > 1 and counter.count("\n".join(kept)) > max_tokens:
        kept.pop()
    summary = "\n".join(kept)
    while counter.count(summary) > max_tokens and len(summary) > 40:
        summary = clip(summary, len(summary) * 3 // 4)
    return summary


def explore(
    data: bytes,
    *,
    name: str | None = None,
    mime: str | None = None,
    max_tokens: int = 400,
    counter: TokenCounter | None = None,
) -> Exploration:
    """Describe ``data`` in at most ``max_tokens`` tokens.  Never raises (see the module docstring)."""
    counter = counter or EstimatingCounter()
    try:
        kind, text = detect_kind(data, name=name, mime=mime)
    except Exception:  # never fail: describe it as bytes
        kind, text = "binary", None
    found = image_format(data)
    suffix = found[2] if found else ("txt" if text is not None else "bin")
    guessed = found[1] if found else KIND_MIME.get(kind, "text/plain")
    try:
        lines = _describe(kind, data, text)
    except Exception:  # a malformed file still gets a summary
        fallback = "text" if text is not None else "binary"
        try:
            lines = _describe(fallback, data, text)
            lines[0] = lines[0].rstrip(".") + f" (not readable as {kind}; described as plain {fallback})."
        except Exception:  # the last resort: counts only
            lines = [f"{human_size(len(data))} of {'text' if text is not None else 'binary data'}."]
    return Exploration(kind, guessed, _fit(lines, max_tokens, counter), suffix)

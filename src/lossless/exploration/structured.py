"""Explorers for structured data: JSON, JSON Lines, CSV/TSV, YAML, TOML, XML and HTML.

Each takes the decoded text and its size in bytes and returns summary lines,
most important first.  They may raise on malformed input (the dispatcher falls
back to a generic summary); none of them may take more than linear time or
hold more than a bounded sample besides the parsed document.
"""

from __future__ import annotations

import csv
import io
import json
import re
import tomllib
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

from lossless.exploration._common import clip, count_lines, human_size, plural, preview

__all__ = [
    "explore_csv",
    "explore_html",
    "explore_json",
    "explore_jsonl",
    "explore_toml",
    "explore_xml",
    "explore_yaml",
]

_SAMPLE_ROWS = 2000
_MAX_NODES = 2_000_000


# ---------------------------------------------------------------- JSON


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "array"
    return "object"


def _shape(value: Any) -> str:
    """``object (3 keys)``, ``array[1,200] of object``, ``str`` …"""
    if isinstance(value, dict):
        return f"object ({plural(len(value), 'key')})"
    if isinstance(value, list):
        kinds = Counter(_type_name(v) for v in value[:200])
        inner = "/".join(k for k, _ in kinds.most_common(3)) or "nothing"
        return f"array[{len(value):,}] of {inner}"
    return _type_name(value)


def _depth(value: Any) -> int:
    deepest, seen = 0, 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack and seen < _MAX_NODES:
        node, depth = stack.pop()
        seen += 1
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def _record_keys(items: list[Any]) -> str:
    """Keys of the objects in ``items`` (first 200) with their value types."""
    types: dict[str, Counter[str]] = {}
    for item in items[:200]:
        if isinstance(item, dict):
            for key, value in item.items():
                types.setdefault(str(key), Counter())[_type_name(value)] += 1
    fields = [f"{key} ({'/'.join(t for t, _ in kinds.most_common(2))})" for key, kinds in types.items()]
    return preview(fields, 20)


def _sample(value: Any, limit: int = 240) -> str:
    return clip(json.dumps(value, ensure_ascii=False, default=str), limit)


def explore_json(text: str, size: int) -> list[str]:
    value = json.loads(text)
    lines = [f"JSON {_shape(value)}, {human_size(size)}, nesting depth {_depth(value)}."]
    arrays: list[tuple[str, list[Any]]] = []
    if isinstance(value, dict):
        keys = [f"{json.dumps(str(k), ensure_ascii=False)}: {_shape(v)}" for k, v in value.items()]
        lines.append("Top-level keys: " + preview(keys, 25))
        arrays = [(f"{k}[]", v) for k, v in value.items() if isinstance(v, list) and v]
        nested = [(k, v) for k, v in value.items() if isinstance(v, dict) and v]
        for key, child in nested[:4]:
            lines.append(f"{key}: keys " + preview([str(c) for c in child], 12))
    elif isinstance(value, list):
        arrays = [("[]", value)] if value else []
    for label, items in arrays[:4]:
        if any(isinstance(item, dict) for item in items[:200]):
            lines.append(f"{label} items ({len(items):,}): keys {_record_keys(items)}")
        lines.append(f"Sample {label.removesuffix('[]')}[0]: {_sample(items[0])}")
    if not arrays and not isinstance(value, list):
        lines.append("Sample: " + _sample(value, 400))
    return lines


def explore_jsonl(text: str, size: int) -> list[str]:
    records: list[Any] = []
    for line in io.StringIO(text):
        if line.strip():
            records.append(json.loads(line))
        if len(records) >= 500:
            break
    if not records:
        raise ValueError("no JSON records")
    lines = [f"JSON Lines, {plural(count_lines(text), 'line')}, {human_size(size)}."]
    if any(isinstance(r, dict) for r in records):
        lines.append(f"Record keys (first {len(records):,} records): {_record_keys(records)}")
    lines.append(f"First record: {_sample(records[0], 400)}")
    if len(records) > 1:
        lines.append(f"Second record: {_sample(records[1], 240)}")
    return lines


# ---------------------------------------------------------------- CSV / TSV

_INT = re.compile(r"[+-]?\d{1,18}")
_FLOAT = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
_BOOL = {"true", "false", "yes", "no", "t", "f"}


def _cell_type(cell: str) -> str:
    cell = cell.strip()
    if not cell:
        return "empty"
    if _INT.fullmatch(cell):
        return "int"
    if _FLOAT.fullmatch(cell):
        return "float"
    if cell.lower() in _BOOL:
        return "bool"
    if _DATE.fullmatch(cell):
        return "date"
    if _DATETIME.fullmatch(cell):
        return "datetime"
    return "text"


def _column_type(cells: list[str]) -> str:
    kinds = Counter(_cell_type(c) for c in cells)
    kinds.pop("empty", None)
    if not kinds:
        return "empty"
    if set(kinds) <= {"int", "float"}:
        return "float" if "float" in kinds else "int"
    kind, count = kinds.most_common(1)[0]
    return kind if count == sum(kinds.values()) else f"mostly {kind}"


def _delimiter(text: str, default: str) -> str:
    try:
        return csv.Sniffer().sniff(text[:8192], delimiters=",;\t|").delimiter
    except csv.Error:
        return default


def explore_csv(text: str, size: int, *, tab: bool = False) -> list[str]:
    delimiter = "\t" if tab else _delimiter(text, ",")
    reader = csv.reader(io.StringIO(text[: 4 * 1024 * 1024]), delimiter=delimiter)
    rows = [row for _, row in zip(range(_SAMPLE_ROWS + 1), reader, strict=False) if row]
    if not rows:
        raise ValueError("no rows")
    header, body = rows[0], rows[1:]
    width = max(len(r) for r in rows)
    if len(text) <= 8 * 1024 * 1024:
        total = sum(1 for row in csv.reader(io.StringIO(text), delimiter=delimiter) if row) - 1
        counted = f"{total:,} rows"
    else:
        counted = f"about {max(0, count_lines(text) - 1):,} rows (by line count)"
    label = "TSV" if delimiter == "\t" else f"CSV (delimiter {delimiter!r})"
    lines = [f"{label} table, {plural(width, 'column')}, {counted} plus a header row, {human_size(size)}."]
    columns = []
    for index, name in enumerate(header[:40]):
        cells = [row[index] for row in body if index < len(row)]
        kind = _column_type(cells)
        examples = list(dict.fromkeys(c.strip() for c in cells if c.strip()))[:2]
        detail = f"{kind}" + (f", e.g. {', '.join(clip(e, 24) for e in examples)}" if examples else "")
        if kind in ("int", "float"):
            numbers = [float(c) for c in cells if _FLOAT.fullmatch(c.strip())]
            detail += f"; {min(numbers):g}…{max(numbers):g}" if numbers else ""
        columns.append(f"{clip(name, 40) or f'column {index + 1}'} ({detail})")
    lines.append("Columns: " + preview(columns, 40, len(header)))
    lines.extend("Row: " + clip(delimiter.join(row), 200) for row in body[:3])
    return lines


# ---------------------------------------------------------------- YAML (a light, dependency-free reading)

_YAML_KEY = re.compile(r"""^("[^"]*"|'[^']*'|[^\s#\-?:][^:#]*?)\s*:(?:\s+(.*))?$""")


def explore_yaml(text: str, size: int) -> list[str]:
    lines_all = text.splitlines()[:200_000]
    documents = sum(1 for line in lines_all if line == "---" or line.startswith("--- "))
    first = next((line for line in lines_all if line.strip() and not line.lstrip().startswith("#")), "")
    documents += 0 if first.startswith("---") else 1
    keys: list[str] = []
    items = 0
    current: tuple[str, str] | None = None
    children, indent = 0, 0
    for line in lines_all:
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or line.startswith("---"):
            continue
        if line[0].isspace():
            width = len(line) - len(line.lstrip())
            indent = indent or width
            if current is not None and width == indent and (stripped[0] == "-" or _YAML_KEY.match(stripped)):
                children += 1
            continue
        if current is not None:
            keys.append(_yaml_entry(current, children))
        current, children, indent = None, 0, 0
        if stripped == "-" or line.startswith("- "):
            items += 1
            continue
        match = _YAML_KEY.match(line)
        if match:
            current = (match.group(1).strip("\"'"), (match.group(2) or "").strip())
    if current is not None:
        keys.append(_yaml_entry(current, children))
    if not keys and not items:
        raise ValueError("no top-level keys or items")
    out = [f"YAML, {plural(documents, 'document')}, {plural(len(lines_all), 'line')}, {human_size(size)}."]
    if keys:
        out.append("Top-level keys: " + preview(keys, 30))
    if items:
        out.append(f"Top-level list: {plural(items, 'item')}")
    return out


def _yaml_entry(entry: tuple[str, str], children: int) -> str:
    key, value = entry
    if value and not value.startswith(("|", ">", "&", "#")):
        return f"{clip(key, 40)}: {clip(value, 40)}"
    return f"{clip(key, 40)} ({plural(children, 'entry', 'entries')})"


# ---------------------------------------------------------------- TOML


def explore_toml(text: str, size: int) -> list[str]:
    data = tomllib.loads(text)
    out = [f"TOML, {plural(len(data), 'top-level key')}, {plural(count_lines(text), 'line')}, {human_size(size)}."]
    scalars = [
        f"{k} = {clip(json.dumps(v, default=str), 40)}" for k, v in data.items() if not isinstance(v, dict | list)
    ]
    if scalars:
        out.append("Values: " + preview(scalars, 15))
    for key, value in data.items():
        if isinstance(value, dict):
            out.append(f"[{key}]: " + preview([str(k) for k in value], 12))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            out.append(f"[[{key}]] × {len(value):,}: keys " + preview(sorted({str(k) for v in value for k in v}), 12))
        elif isinstance(value, list):
            out.append(f"{key}: array of {len(value):,}")
    return out[:24]


# ---------------------------------------------------------------- XML and HTML

_XML_TAG = re.compile(r"<([A-Za-z_][\w.:-]*)")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def explore_xml(text: str, size: int) -> list[str]:
    head = text[:65536]
    if "<!ENTITY" in head:
        # Entity declarations can expand without bound: count tags instead of parsing.
        seen = Counter(_XML_TAG.findall(text[: 8 * 1024 * 1024]))
        first = next(iter(seen), "?")
        return [
            f"XML document with entity declarations (not expanded), root <{first}>, {human_size(size)}.",
            "Elements: " + preview([f"{t} ×{n:,}" for t, n in seen.most_common(20)], 20, len(seen)),
        ]
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    depth = deepest = elements = 0
    root: ET.Element | None = None
    children: Counter[str] = Counter()
    tags: Counter[str] = Counter()
    attributes: dict[str, set[str]] = {}
    for offset in range(0, len(text), 1 << 20):
        parser.feed(text[offset : offset + (1 << 20)])
        events: Iterator[tuple[str, object]] = iter(parser.read_events())  # type: ignore[arg-type]
        for event, element in events:
            if not isinstance(element, ET.Element):
                continue
            if event == "start":
                depth += 1
                elements += 1
                deepest = max(deepest, depth)
                tag = _local(element.tag)
                tags[tag] += 1
                if len(attributes) < 200:
                    attributes.setdefault(tag, set()).update(_local(a) for a in element.attrib)
                if root is None:
                    root = element
                elif depth == 2:
                    children[tag] += 1
            else:
                depth -= 1
                if depth >= 1:
                    element.clear()
    parser.close()
    assert root is not None
    root_attrs = ", ".join(f"{_local(k)}={clip(v, 30)!r}" for k, v in list(root.attrib.items())[:8])
    out = [
        f"XML document, root <{_local(root.tag)}>{f' ({root_attrs})' if root_attrs else ''}, "
        f"{plural(elements, 'element')}, depth {deepest}, {human_size(size)}.",
        "Children of the root: " + preview([f"<{t}> ×{n:,}" for t, n in children.most_common(20)], 20, len(children)),
        "Elements: " + preview([f"{t} ×{n:,}" for t, n in tags.most_common(20)], 20, len(tags)),
    ]
    with_attrs = [f"{t}: {', '.join(sorted(a)[:6])}" for t, a in attributes.items() if a]
    if with_attrs:
        out.append("Attributes: " + preview(with_attrs, 10))
    return out


class _HTMLOutline(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.headings: list[str] = []
        self.title = ""
        self._capture: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        if tag in ("title", "h1", "h2", "h3") and self._capture is None:
            self._capture, self._text = tag, []

    def handle_endtag(self, tag: str) -> None:
        if tag == self._capture:
            text = clip(" ".join(self._text), 80)
            if tag == "title":
                self.title = self.title or text
            elif text and len(self.headings) < 15:
                self.headings.append(f"{tag}: {text}")
            self._capture = None

    def handle_data(self, data: str) -> None:
        if self._capture is not None and sum(map(len, self._text)) < 400:
            self._text.append(data)


def explore_html(text: str, size: int) -> list[str]:
    outline = _HTMLOutline()
    outline.feed(text[: 16 * 1024 * 1024])
    outline.close()
    tags = outline.tags
    out = [f"HTML document{f' titled {outline.title!r}' if outline.title else ''}, {human_size(size)}."]
    if outline.headings:
        out.append("Headings: " + "; ".join(outline.headings))
    contents = (("a", "links"), ("img", "images"), ("table", "tables"), ("form", "forms"), ("script", "scripts"))
    counts = [f"{name} {tags[tag]:,}" for tag, name in contents if tags[tag]]
    if counts:
        out.append("Contains: " + ", ".join(counts))
    out.append("Elements: " + preview([f"{t} ×{n:,}" for t, n in tags.most_common(15)], 15, len(tags)))
    return out

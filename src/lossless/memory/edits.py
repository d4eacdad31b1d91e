"""What an agent's file edits changed, as statements a memory can hold.

:func:`edit_statements` reads the tool calls in an assistant's message (``[tool call: Edit] {…}``, as the
transcript readers write them) and says, for each call that changed a file, which file and, where the
call's arguments show it, what by name: ``The assistant edited src/app.py (in login; adding retryDelay).``
A question such as "where did we add the retry delay?" then finds the memory by the name it asks about.

Invariants:

* Pure: no I/O; the same text gives the same statements, in the order of the calls.
* A call whose arguments are not a JSON object, or name no file (or a path with a line break or over
  300 characters), gives nothing; a call that names no code gives the plain ``The assistant edited PATH.``
  A call cut short (a long message kept in part) is read for the fields it holds whole, and for the
  text of the one the cut fell in as far as it goes; a path cut short is no path.
* :func:`code_refs` is what tells two statements about agent work apart where their wording is
  alike: the file paths and code names they hold.  Two memories that name different ones are
  different facts, however near their vectors (``edited …/hooks.go`` and ``edited …/hooks_test.go``).
* Only names the call's own text holds are listed: "in" names a definition the new text holds that the
  old text held too (rewritten); "adding" a name the new text holds and the old did not (at most
  :data:`EDIT_NAMES` of each, in the order they appear; one spelling per name whatever its case).
  A call cut short before its new text edited what its old text holds: "in" names the old text's
  definitions, and nothing is "adding".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

__all__ = ["EDIT_NAMES", "code_refs", "edit_statements"]

_EDIT_CALL = re.compile(
    r"^\[tool call: (Edit|MultiEdit|Write|str_replace_editor|apply_patch|edit_file|write_file)\] (\{.*)$", re.M | re.I
)
#: A definition in code (Go, Python, JavaScript/TypeScript, Rust, …): the name it defines.
_DEFINITION = re.compile(
    r"\b(?:func(?: \([^)]*\))?|def|class|function|interface|type|struct|enum|trait|fn)\s+([A-Za-z_]\w{3,})"
)
#: A name as code writes one: camelCase, PascalCase with a later capital, or snake_case.
_CODE_NAME = re.compile(r"\b(?:[a-z]+[A-Z]\w*|[A-Z][a-z0-9]+[A-Z]\w*|[A-Za-z][a-z0-9]*_\w+)\b")
#: How many names a statement lists, of those the edit rewrote and of those it added.
EDIT_NAMES = 3


def edit_statements(text: str) -> list[tuple[str, str]]:
    """``(statement, path)`` for each file-changing tool call in ``text``, in order."""
    out: list[tuple[str, str]] = []
    for match in _EDIT_CALL.finditer(text):
        cut = False
        try:
            args = json.JSONDecoder().raw_decode(match.group(2))[0]
        except ValueError:  # cut short (a long call kept in part): what its complete fields say
            args, cut = _fields(match.group(2)), True
        if not isinstance(args, dict):
            continue
        path = next((args.get(k) for k in ("file_path", "path", "filename")), None)
        if isinstance(path, str) and 0 < len(path) < 300 and "\n" not in path:
            verb = "wrote" if match.group(1).lower().startswith("write") else "edited"
            out.append((f"The assistant {verb} {path}{_named(args, cut)}.", path))
    return out


#: A string field of a JSON object, to its closing quote or to the end of a text cut short.
_FIELD = re.compile(
    r'"(file_path|path|filename|old_string|new_string|content|old_str|new_str|file_text)"\s*:\s*"((?:[^"\\]|\\.)*)(")?'
)


#: The end of a text cut short: a marker such as "…[truncated]" if any, and the word the cut fell in.
_CUT_END = re.compile(r"\w*\s*(?:(?:…|\.\.\.)\s*(?:\[[^\]\n]*\]?)?\s*)?\Z")


def _fields(cut: str) -> dict[str, object]:
    """The string fields of a JSON object cut short: whole ones as they are; the one the cut fell in as far
    as it goes (never a path: a path cut short names another file)."""
    out: dict[str, object] = {}
    for found in _FIELD.finditer(cut):
        key, raw, closed = found.groups()
        if key in out or (closed is None and key in ("file_path", "path", "filename")):
            continue
        try:
            value = json.loads(f'"{raw}"')
        except ValueError:  # an escape cut in half
            value = raw
        out[key] = value if closed else _CUT_END.sub("", value)  # a word cut in half is no name
    return out


#: A file path (with a directory or an extension) as a statement writes one.
_PATH = re.compile(r"(?<![\w/.])(?:[\w.-]*/[\w./-]*\w|[\w-]{2,}\.[A-Za-z][A-Za-z0-9]{0,4})(?![\w/])")


def code_refs(text: str) -> frozenset[str]:
    """The file paths and code names ``text`` holds (``src/app.py``, ``retryDelay``, ``max_tries``)."""
    return frozenset(_PATH.findall(text)) | frozenset(_CODE_NAME.findall(text))


def _texts(args: Mapping[str, object]) -> tuple[str, str]:
    """The text an edit's arguments put in and the text they take out (all of a multi-edit's)."""
    new: list[str] = []
    old: list[str] = []
    edits = args.get("edits")
    for edit in [args, *(e for e in (edits if isinstance(edits, list) else []) if isinstance(e, Mapping))]:
        new += [v for k in ("new_string", "content", "new_str", "file_text") if isinstance(v := edit.get(k), str)]
        old += [v for k in ("old_string", "old_str") if isinstance(v := edit.get(k), str)]
    return "\n".join(new), "\n".join(old)


def _named(args: Mapping[str, object], cut: bool = False) -> str:
    """`` (in A, B; adding C)``: the definitions the edit rewrote and the names it added, or ``""``.
    A call ``cut`` short before its new text (only the old text kept) edited the definitions the old text holds."""
    new, old = _texts(args)
    before = set(_CODE_NAME.findall(old)) | {m.group(1) for m in _DEFINITION.finditer(old)}
    defined = list(dict.fromkeys(m.group(1) for m in _DEFINITION.finditer(new or (old if cut else ""))))
    changed = [name for name in defined if name in before][:EDIT_NAMES]
    added: list[str] = []
    seen: set[str] = set()
    for name in dict.fromkeys([*defined, *_CODE_NAME.findall(new)]):  # first spelling of each, in order
        if name not in before and name.lower() not in seen:
            seen.add(name.lower())
            added.append(name)
            if len(added) == EDIT_NAMES:
                break
    parts = ([f"in {', '.join(changed)}"] if changed else []) + ([f"adding {', '.join(added)}"] if added else [])
    return f" ({'; '.join(parts)})" if parts else ""

"""Explorers for source code: Python through :mod:`ast`, other languages through line patterns.

The outline is what a reader needs to decide where to look: imports, types,
functions with their signatures (no bodies), and the size.  Line patterns are
applied only to lines of at most :data:`_MAX_LINE` characters and to the first
:data:`_MAX_LINES` lines, and every repetition in them is bounded, so no
input makes them slow.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from lossless.exploration._common import clip, count_lines, human_size, preview

__all__ = ["LANGUAGES", "explore_code", "explore_python"]

_MAX_LINE = 400
_MAX_LINES = 200_000
_SIGNATURE = 150


# ---------------------------------------------------------------- Python


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return clip(f"{prefix} {node.name}({ast.unparse(node.args)}){returns}", _SIGNATURE)


def _imports(tree: ast.Module) -> list[str]:
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names = ", ".join(alias.name for alias in node.names[:6]) + (" …" if len(node.names) > 6 else "")
            found.append(f"{module} ({names})")
    return list(dict.fromkeys(found))


def explore_python(text: str, size: int) -> list[str]:
    tree = ast.parse(text)
    lines = [f"Python module, {count_lines(text):,} lines, {human_size(size)}."]
    doc = ast.get_docstring(tree)
    if doc:
        lines.append("Docstring: " + clip(doc.split("\n\n", 1)[0], 200))
    imports = _imports(tree)
    if imports:
        lines.append("Imports: " + preview(imports, 20))
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    for node in classes[:12]:
        bases = ", ".join(ast.unparse(b) for b in node.bases)
        methods = [
            _signature(child)
            .removeprefix("async ")
            .removeprefix("def ")
            .replace("(self, ", "(")
            .replace("(self)", "()")
            for child in node.body
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        head = f"class {node.name}({bases})" if bases else f"class {node.name}"
        lines.append(head + (": " + preview(methods, 8) if methods else ""))
    if len(classes) > 12:
        lines.append(f"… and {len(classes) - 12:,} more classes")
    functions = [_signature(n) for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    if functions:
        lines.append(f"Functions ({len(functions):,}): " + "; ".join(functions[:20]))
    constants = [
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id.isupper()
    ]
    if constants:
        lines.append("Constants: " + preview(constants, 12))
    if "__main__" in text and any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body):
        lines.append("Runs as a script (if __name__ == '__main__').")
    return lines


# ---------------------------------------------------------------- other languages


@dataclass(frozen=True, slots=True)
class Language:
    """Line patterns for one language: what counts as an import, a type, a function."""

    label: str
    imports: tuple[re.Pattern[str], ...]
    types: tuple[re.Pattern[str], ...]
    functions: tuple[re.Pattern[str], ...]
    #: Applied to the whole text: each match's group 1 holds import paths in quotes (Go's import blocks).
    import_blocks: tuple[re.Pattern[str], ...] = ()


def _patterns(*sources: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(source) for source in sources)


_JS_IMPORTS = _patterns(
    r"^\s*import\s.{1,200}",
    r"^\s*(?:const|let|var)\s+[^=]{1,80}=\s*require\(\s*['\"][^'\"]{1,120}['\"]\s*\)",
    r"^\s*export\s+(?:\*|\{[^}]{0,200}\})\s+from\s.{1,120}",
)
_JS_TYPES = _patterns(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:abstract\s+)?class\s+\w+[^{]{0,120}",
    r"^\s*(?:export\s+)?(?:declare\s+)?(?:interface|type|enum)\s+\w+[^{=]{0,120}",
)
_JS_FUNCTIONS = _patterns(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*\w+\s*(?:<[^>]{0,80}>)?\s*\([^)]{0,200}\)[^{]{0,80}",
    r"^\s*(?:export\s+)?(?:const|let)\s+\w+\s*(?::[^=]{0,80})?=\s*(?:async\s+)?(?:\([^)]{0,200}\)|\w+)"
    r"\s*(?::[^=]{0,80})?=>",
    r"^\s+(?:(?:public|private|protected|static|async|readonly|override)\s+){0,4}"
    r"(?!(?:if|for|while|switch|catch|return|function|else|new)\b)\w+\s*\([^)]{0,200}\)\s*(?::\s*[^{]{1,80})?\{\s*$",
)

LANGUAGES: dict[str, Language] = {
    "javascript": Language("JavaScript", _JS_IMPORTS, _JS_TYPES, _JS_FUNCTIONS),
    "typescript": Language("TypeScript", _JS_IMPORTS, _JS_TYPES, _JS_FUNCTIONS),
    "go": Language(
        "Go",
        _patterns(r"^package\s+\w+", r"^import\s+(?:\w+\s+)?\"[^\"]{1,200}\""),
        _patterns(r"^type\s+\w+(?:\[[^\]]{0,80}\])?\s+(?:struct|interface)\b", r"^type\s+\w+\s+[\w.\[\]*]{1,60}\s*$"),
        _patterns(r"^func\s+(?:\([^)]{0,100}\)\s*)?\w+\s*(?:\[[^\]]{0,100}\])?\([^)]{0,200}\)[^{]{0,120}"),
        _patterns(r"(?m)^import\s*\(([^)]{0,20000})\)"),
    ),
    "rust": Language(
        "Rust",
        _patterns(r"^\s*(?:pub\s+)?use\s+[^;]{1,200};", r"^\s*extern\s+crate\s+\w+", r"^\s*(?:pub\s+)?mod\s+\w+\s*;"),
        _patterns(
            r"^\s*(?:pub(?:\([^)]{0,30}\))?\s+)?(?:struct|enum|trait|type|union)\s+\w+[^{;=]{0,120}",
            r"^\s*impl\b[^{]{0,160}",
        ),
        _patterns(
            r"^\s*(?:pub(?:\([^)]{0,30}\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?"
            r"(?:extern\s+\"[^\"]{0,20}\"\s+)?fn\s+\w+[^{;]{0,240}"
        ),
    ),
    "java": Language(
        "Java",
        _patterns(r"^\s*package\s+[\w.]+\s*;", r"^\s*import\s+(?:static\s+)?[\w.*]+\s*;"),
        _patterns(
            r"^\s*(?:(?:public|protected|private|abstract|final|static|sealed|non-sealed)\s+){0,4}"
            r"(?:class|interface|enum|record|@interface)\s+\w+[^{]{0,160}"
        ),
        _patterns(
            r"^\s*(?:(?:public|protected|private|static|final|abstract|synchronized|native|default)\s+){1,5}"
            r"(?:<[^>]{0,80}>\s+)?[\w<>\[\],.? ]{1,80}\s+\w+\s*\([^)]{0,200}\)"
        ),
    ),
    "c": Language(
        "C",
        _patterns(r"^\s*#\s*include\s*[<\"][^>\"]{1,200}[>\"]", r"^\s*#\s*define\s+\w+"),
        _patterns(r"^\s*(?:typedef\s+)?(?:struct|union|enum)\s+\w+[^;(]{0,120}$"),
        _patterns(
            r"^(?!\s*(?:if|for|while|switch|return|else|do|case|sizeof|typedef)\b)[A-Za-z_][\w*&\s]{0,120}?"
            r"[\s*&]([A-Za-z_]\w*)\s*\([^;{}]{0,200}\)\s*\{?\s*$"
        ),
    ),
    "cpp": Language(
        "C++",
        _patterns(
            r"^\s*#\s*include\s*[<\"][^>\"]{1,200}[>\"]", r"^\s*#\s*define\s+\w+", r"^\s*using\s+namespace\s+[\w:]+"
        ),
        _patterns(
            r"^\s*(?:template\s*<[^>]{0,120}>\s*)?(?:typedef\s+)?(?:struct|class|union|enum(?:\s+class)?|namespace)"
            r"\s+\w+[^;(]{0,120}$"
        ),
        _patterns(
            r"^(?!\s*(?:if|for|while|switch|return|else|do|case|sizeof|typedef|delete|new)\b)"
            r"[A-Za-z_~][\w:<>,*&~\s]{0,120}?[\s*&:]([A-Za-z_~][\w~]*|operator\S{1,3})\s*\([^;{}]{0,200}\)"
            r"\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?\{?\s*$"
        ),
    ),
}


def _tidy(line: str) -> str:
    return clip(line.strip().rstrip("{; \t"), _SIGNATURE)


def explore_code(text: str, size: int, kind: str) -> list[str]:
    language = LANGUAGES[kind]
    found: dict[str, list[str]] = {"imports": [], "types": [], "functions": []}
    for block in language.import_blocks:
        for match in block.finditer(text):
            found["imports"] += re.findall(r"\"([^\"\n]{1,200})\"", match.group(1))
    for index, line in enumerate(text.splitlines()):
        if index >= _MAX_LINES:
            break
        if len(line) > _MAX_LINE or not line.strip():
            continue
        for name, patterns in (
            ("imports", language.imports),
            ("types", language.types),
            ("functions", language.functions),
        ):
            if any(p.match(line) for p in patterns):
                found[name].append(_tidy(line))
                break
    lines = [f"{language.label} source, {count_lines(text):,} lines, {human_size(size)}."]
    for name, label, limit in (("imports", "Imports", 20), ("types", "Types", 20), ("functions", "Functions", 25)):
        items = list(dict.fromkeys(found[name]))
        if items:
            lines.append(
                f"{label} ({len(items):,}): " + "; ".join(items[:limit]) + (" …" if len(items) > limit else "")
            )
    if len(lines) == 1:
        raise ValueError(f"no {language.label} declarations found")
    return lines

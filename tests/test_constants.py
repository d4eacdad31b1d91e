"""lossless.constants: the command line's copies equal their sources, and the module stays a leaf."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import lossless.constants as constants
from lossless.engine import recall
from lossless.large_files import DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES
from lossless.memory.records import CATEGORIES
from lossless.retrieval import dag, grep
from lossless.transcripts import FORMATS


def test_the_transcript_formats_are_those_of_the_readers() -> None:
    assert constants.TRANSCRIPT_FORMATS == FORMATS


def test_the_memory_categories_are_those_of_the_category_type() -> None:
    assert constants.MEMORY_CATEGORIES == CATEGORIES


def test_the_enforcing_modules_re_export_the_limits() -> None:
    assert (grep.MAX_LIMIT, grep.DEFAULT_LIMIT, grep.MAX_CONTEXT) == (200, 50, 5)
    assert grep.MAX_LIMIT is constants.MAX_LIMIT and grep.DEFAULT_LIMIT is constants.DEFAULT_LIMIT
    assert grep.MAX_CONTEXT is constants.MAX_CONTEXT
    assert (dag.DEFAULT_MAX_DEPTH, dag.MAX_DEPTH) == (constants.DEFAULT_MAX_DEPTH, constants.MAX_DEPTH) == (3, 64)
    assert recall.DEFAULT_GRANT_TTL == constants.DEFAULT_GRANT_TTL == timedelta(minutes=10)
    assert constants.MIN_GRANT_TTL < constants.DEFAULT_GRANT_TTL < constants.MAX_GRANT_TTL
    assert (recall.MIN_GRANT_TTL, recall.MAX_GRANT_TTL) == (constants.MIN_GRANT_TTL, constants.MAX_GRANT_TTL)
    assert recall.MAX_GRANT_TOKEN_CAP == constants.MAX_GRANT_TOKEN_CAP
    assert (DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES) == (constants.DEFAULT_PAGE_BYTES, constants.MAX_PAGE_BYTES)
    assert 0 < constants.DEFAULT_PAGE_BYTES <= constants.MAX_PAGE_BYTES


def test_the_module_imports_only_datetime() -> None:
    tree = ast.parse(Path(constants.__file__).read_text())
    imported = {
        alias.name if isinstance(node, ast.Import) else node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported == {"__future__", "datetime"}

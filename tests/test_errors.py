"""The error tree: shape, messages, exit codes."""

from __future__ import annotations

import inspect

import lossless.errors as errors
from lossless.errors import (
    ConfigError,
    ConflictError,
    InputError,
    LcmError,
    MissingDependencyError,
    NotFoundError,
    ProviderAuthError,
    ProviderError,
    ProviderUnavailable,
    SchemaError,
    StoreError,
    TranscriptError,
    exit_code_for,
    redact,
)


def test_every_error_is_an_lcm_error_and_drawn_in_the_docstring() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, Exception)]
    assert classes
    for cls in classes:
        assert issubclass(cls, Warning) or issubclass(cls, LcmError)  # warnings are warned, never raised
        assert cls.__name__ in (errors.__doc__ or ""), f"{cls.__name__} is missing from the tree drawing"


def test_builtin_bases_let_callers_catch_naturally() -> None:
    assert issubclass(InputError, ValueError)
    assert issubclass(NotFoundError, LookupError)
    assert issubclass(MissingDependencyError, ImportError)
    assert issubclass(SchemaError, StoreError) and issubclass(ConflictError, StoreError)
    assert ConflictError.retryable is True
    assert issubclass(ProviderAuthError, ProviderError) and issubclass(ProviderUnavailable, ProviderError)
    error = ProviderError("anthropic", "rate limited", retryable=True, status=429)
    assert (str(error), error.retryable, error.status) == ("anthropic: rate limited", True, 429)


def test_messages_locate_and_explain() -> None:
    error = TranscriptError("/x/s.jsonl", 12, "is not valid JSON")
    assert str(error) == "/x/s.jsonl:12: is not valid JSON"
    assert (error.path, error.line) == ("/x/s.jsonl", 12)
    assert str(TranscriptError("/x/a.json", None, "bad")) == "/x/a.json: bad"
    assert str(NotFoundError("conversation", 7, "try `lcm conversations`")) == (
        "no conversation 7: try `lcm conversations`"
    )
    missing = MissingDependencyError("PostgreSQL", "postgres", "psycopg")
    assert "pip install 'lossless-context[postgres]'" in str(missing)


def test_exit_codes_are_distinct_per_family() -> None:
    assert exit_code_for(TranscriptError("p", 1, "x")) == 3
    assert exit_code_for(InputError("x")) == 3
    assert exit_code_for(ConfigError("x")) == 4
    assert exit_code_for(NotFoundError("x", 1)) == 5
    assert exit_code_for(ConflictError("x")) == 6
    assert exit_code_for(StoreError("x")) == 7
    assert exit_code_for(MissingDependencyError("f", "e", "m")) == 8
    assert exit_code_for(ProviderError("openai", "timed out", retryable=True)) == 9
    assert exit_code_for(LcmError("x")) == 1


def test_redact_hides_secrets() -> None:
    shown = redact("sk-abcdefghijklmnopqrstuvwxyz")
    assert "abcdefghij" not in shown and shown.startswith("sk-a")
    assert redact("abc") == "…(redacted)"

"""One error tree for the whole package.

Every exception that lossless raises on purpose is a :class:`LcmError`.  The
tree is shallow so callers can catch at the level they care about::

    LcmError
    ├── ConfigError                 a setting has an invalid value (names it, the value, the range)
    ├── InputError (ValueError)     a caller passed something unusable (bad role, naive datetime, …)
    │   └── TranscriptError         a transcript file is corrupt (names the file and the line)
    ├── NotFoundError (LookupError) a conversation, message, summary or file id does not exist
    ├── AccessDeniedError           the caller may not reach that conversation, grant or memory scope
    ├── StoreError                  the database failed or is unusable
    │   ├── SchemaError             the schema is newer than this code, or a migration failed
    │   └── ConflictError           another writer holds the lock; safe to retry (``retryable``)
    ├── ProviderError               a model provider failed (``provider``, ``retryable``, ``status``)
    │   ├── ProviderAuthError       the credentials were refused; not retryable
    │   └── ProviderUnavailable     calls are paused (circuit breaker, spend guard) or no provider is set up
    └── MissingDependencyError (ImportError)
                                    an optional extra is not installed (names the pip command)

One warning (``warnings.warn``, not raised): :class:`PartialIndexWarning`, a search by meaning answered
from a semantic index that nothing in this process is building.

Invariants:

* Messages say what was wrong *and what to do about it*; values are shown with
  ``!r`` so whitespace and quoting problems are visible.
* Driver and SDK errors are wrapped, never leaked raw: the original is kept as
  ``__cause__``.
* Errors never include secrets (API keys, tokens); code that formats an error
  from user configuration must pass values through :func:`redact` first.
* Adapters translate this tree exactly once each: the CLI maps it to exit codes
  (see :data:`EXIT_CODES`), the HTTP API to one JSON error shape, MCP to tool
  error results.
* Input that no store can hold never reaches one: :func:`check_unicode` (lone
  surrogates), :func:`check_integer` (numbers beyond a signed 64-bit column)
  and :func:`check_nesting` (structures deeper than :data:`MAX_NESTING`) turn
  it into an :class:`InputError` that says what to fix.
"""

from __future__ import annotations

__all__ = [
    "EXIT_CODES",
    "MAX_INTEGER",
    "MAX_NESTING",
    "AccessDeniedError",
    "ConfigError",
    "ConflictError",
    "InputError",
    "LcmError",
    "MissingDependencyError",
    "NotFoundError",
    "PartialIndexWarning",
    "ProviderAuthError",
    "ProviderError",
    "ProviderUnavailable",
    "SchemaError",
    "StoreError",
    "TranscriptError",
    "check_integer",
    "check_nesting",
    "check_unicode",
    "exit_code_for",
    "redact",
]


class LcmError(Exception):
    """Base class of every error lossless raises on purpose."""


class ConfigError(LcmError):
    """A setting has an invalid value, or the config file cannot be read."""

    def __init__(self, message: str, *, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


class InputError(LcmError, ValueError):
    """The caller passed a value that cannot be stored or used as given."""


class TranscriptError(InputError):
    """A transcript file is corrupt or unreadable.

    ``path`` and ``line`` (1-based; for JSON documents, the entry index is in the
    message instead) locate the problem so the user can look at it directly.
    """

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


class NotFoundError(LcmError, LookupError):
    """A conversation, message, summary or file id does not exist (or is not visible)."""

    def __init__(self, kind: str, ident: object, hint: str = "") -> None:
        message = f"no {kind} {ident!r}"
        if hint:
            message = f"{message}: {hint}"
        super().__init__(message)
        self.kind = kind
        self.ident = ident


#: Where a user lists the conversations, named alike in every interface's "no conversation" answer.
LIST_CONVERSATIONS = "`lcm conversations`, or GET /v1/conversations over HTTP"


class AccessDeniedError(LcmError, PermissionError):
    """The caller may not reach what it asked for: another agent's conversation, a memory scope, or a
    grant that has ended.  The message never says whether the thing exists; it names the caller's
    reach and how to get more."""


class StoreError(LcmError):
    """The database failed, or is in a state this code cannot use."""


class SchemaError(StoreError):
    """The database schema is newer than this code, or a migration failed."""


class ConflictError(StoreError):
    """Another writer holds a lock the operation needs.

    Nothing was written.  ``retryable`` is always true: trying again later is safe.
    """

    retryable = True


class ProviderError(LcmError):
    """A model provider (summarizer, embedder, reranker, sub-agent) failed.

    ``retryable`` says whether the same call may succeed later (timeouts, rate
    limits, 5xx); ``status`` is the HTTP status where there was one.  Messages
    never contain credentials.
    """

    def __init__(self, provider: str, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider
        self.retryable = retryable
        self.status = status


class ProviderAuthError(ProviderError):
    """The provider refused the credentials (HTTP 401/403): fix the key; retrying will not help."""


class ProviderUnavailable(ProviderError):
    """Calls to the provider are paused (circuit breaker open, spend limit reached) or not configured."""


class MissingDependencyError(LcmError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(
            f"{feature} needs the optional package {module!r}: install it with: pip install 'lossless-context[{extra}]'"
        )
        self.extra = extra


class PartialIndexWarning(UserWarning):
    """A ``semantic`` / ``hybrid`` search answered from a partial semantic index (the rest by its words), and
    nothing in this process builds it: call ``await engine.build_index()`` after storing history, or run a
    background worker.  Warned once per engine; a worker in another process makes it moot."""


#: Process exit codes used by the ``lcm`` command, by error class (most specific first).
EXIT_CODES: tuple[tuple[type[LcmError], int], ...] = (
    (TranscriptError, 3),
    (InputError, 3),
    (ConfigError, 4),
    (NotFoundError, 5),
    (AccessDeniedError, 11),
    (ConflictError, 6),
    (StoreError, 7),
    (ProviderError, 9),
    (MissingDependencyError, 8),
    (LcmError, 1),
)


def exit_code_for(error: LcmError) -> int:
    """The ``lcm`` exit code for ``error`` (see :data:`EXIT_CODES`)."""
    for cls, code in EXIT_CODES:
        if isinstance(error, cls):
            return code
    return 1  # pragma: no cover - LcmError is the last row


def redact(value: str, *, keep: int = 4) -> str:
    """Hide a secret for display: ``'sk-abc…'`` becomes ``'sk-a…(redacted, 40 chars)'``."""
    if len(value) <= keep:
        return "…(redacted)"
    return f"{value[:keep]}…(redacted, {len(value)} chars)"


# ---------------------------------------------------------------------- input guards

#: The largest integer a store column holds (SQLite INTEGER and PostgreSQL BIGINT are signed 64-bit).
MAX_INTEGER = 2**63 - 1
#: The deepest nesting of lists and objects accepted in tool inputs, metadata and transcript entries.
MAX_NESTING = 100


def _show_integer(value: int) -> str:
    return str(value) if value.bit_length() <= 256 else f"an integer of {value.bit_length():,} bits"


def check_unicode(value: str, what: str) -> str:
    """``value``, or an :class:`InputError` when it holds a lone surrogate (not valid Unicode; no store takes it)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{what} holds invalid Unicode (a lone surrogate U+{ord(value[exc.start]):04X} at position "
            f"{exc.start}): send valid UTF-8 text"
        ) from None
    return value


def check_integer(value: object, what: str, *, minimum: int = 0, maximum: int = MAX_INTEGER) -> int:
    """``value`` when it is an integer from ``minimum`` to ``maximum``, else an :class:`InputError` naming the range."""
    if type(value) is not int:
        raise InputError(f"{what} must be an integer, got {value!r}")
    if not minimum <= value <= maximum:
        raise InputError(f"{what} must be an integer from {minimum} to {maximum}, got {_show_integer(value)}")
    return value


def check_nesting(value: object, what: str, *, limit: int = MAX_NESTING) -> None:
    """An :class:`InputError` when lists and objects in ``value`` nest deeper than ``limit``.

    Checked without recursion, so even a structure too deep for the JSON encoder gets the clear error.
    """
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list | tuple):
            children = list(item)
        else:
            continue
        if depth + 1 > limit:
            raise InputError(f"{what} nests lists and objects more than {limit} deep: flatten it")
        stack.extend((child, depth + 1) for child in children)

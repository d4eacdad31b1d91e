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
"""

from __future__ import annotations

__all__ = [
    "EXIT_CODES",
    "AccessDeniedError",
    "ConfigError",
    "ConflictError",
    "InputError",
    "LcmError",
    "MissingDependencyError",
    "NotFoundError",
    "ProviderAuthError",
    "ProviderError",
    "ProviderUnavailable",
    "SchemaError",
    "StoreError",
    "TranscriptError",
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
            f"{feature} needs the optional package {module!r}: install it with  pip install 'lossless-context[{extra}]'"
        )
        self.extra = extra


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

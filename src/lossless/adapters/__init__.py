"""Adapters: the HTTP API (``lcm serve``) and the MCP server (``lcm mcp``) over the engine.

They sit beside :mod:`lossless.cli`, above the engine: they translate requests into
engine calls and results into JSON, and own no compaction or lineage logic.  Each
needs an extra (``server``: FastAPI and uvicorn; ``mcp``: the official MCP SDK) and
raises :class:`~lossless.errors.MissingDependencyError` naming it when it is absent.
This package's ``__init__`` imports neither, so ``lossless.adapters.service`` works
without them.
"""

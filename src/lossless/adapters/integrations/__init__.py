"""Drop-ins for agent frameworks: each module plugs the engine into one framework's own extension point.

* :mod:`.openai_agents` — a ``Session`` for the OpenAI Agents SDK (``lossless-context[openai-agents]``).
* :mod:`.langgraph` — a pre-model hook and a ``BaseStore`` for LangGraph (``lossless-context[langgraph]``).
* :mod:`.pydantic_ai` — a history processor and a toolset for Pydantic AI (``lossless-context[pydantic-ai]``).
* :mod:`.claude_code` — Claude Code hooks, installed by ``lcm install claude-code``.

Invariants: every module here translates between a framework's types and the engine's public API
(:mod:`.bridge` holds what they share); none of them decides what is stored, compacted or sent —
the engine does.  Importing this package imports no framework; each module imports its own and
says which extra to install when it is missing.
"""

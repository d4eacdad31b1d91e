"""Properties of the adapters' tool table: any JSON arguments give a result or a clear LcmError.

Whatever a client sends to a tool — well-formed or not — the call either succeeds, or raises an
:class:`LcmError` (which both servers turn into an error result); it never raises anything else,
and a refused call stores nothing.  The isolation property: one agent's calls never reach another's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossless.adapters.service import Engines, call_tool
from lossless.config import load_config
from lossless.errors import LcmError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
roles = st.sampled_from(["user", "assistant", "system", "tool", "robot", ""])
message_like = st.fixed_dictionaries(
    {"role": roles},
    optional={
        "content": st.text(max_size=40) | json_values,
        "parts": st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "tool", "nope"])}), max_size=2)
        | json_values,
        "event_key": st.text(max_size=10) | json_values,
        "created_at": st.sampled_from(["2026-01-01T00:00:00Z", "yesterday", ""]) | json_values,
        "metadata": json_values,
    },
)
ingest_args = st.fixed_dictionaries(
    {},
    optional={
        "session_id": st.text(max_size=10) | json_values,
        "messages": st.lists(message_like | json_values, max_size=3) | json_values,
        "session_key": st.text(max_size=10) | json_values,
        "other": json_values,
    },
)
compact_args = st.fixed_dictionaries(
    {},
    optional={
        "conversation": st.sampled_from(["s", "1", "99999999999999999999999", "", "٣"]) | json_values,
        "force": json_values,
        "target_tokens": st.integers(min_value=-5, max_value=10**12) | json_values,
    },
)
calls = st.lists(
    st.tuples(st.just("lcm_ingest"), ingest_args)
    | st.tuples(st.just("lcm_compact"), compact_args)
    | st.tuples(st.text(max_size=10), st.dictionaries(st.text(max_size=5), json_values, max_size=2)),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=calls)
def test_any_tool_call_succeeds_or_raises_a_clear_error(tmp_path: Path, calls: list[tuple[str, Any]]) -> None:
    async def scenario() -> None:
        config = load_config({"database_url": f"sqlite:///{tmp_path / 'p.db'}", "agent_id": "alice"}, env={})
        engines = await Engines.open(config)
        try:
            alice, bob = engines.for_agent("alice"), engines.for_agent("bob")
            for name, arguments in calls:
                before = (await alice.stats()).messages
                message = None
                try:
                    await call_tool(alice, name, arguments)
                except LcmError as exc:
                    message = str(exc)
                if message is not None:
                    assert message  # says what was wrong
                    assert (await alice.stats()).messages == before  # a refused call stores nothing
            assert await bob.conversations() == []  # nothing alice did is bob's
            for conversation in await alice.conversations():
                assert conversation.agent_id == "alice"
        finally:
            await engines.close()

    anyio.run(scenario)

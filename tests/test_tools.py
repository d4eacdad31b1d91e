"""The shared tool contract: names valid for every provider, object schemas, one definition per name."""

from __future__ import annotations

import pytest

from lossless.tools import TOOLS, ToolSpec, register

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": False}


def test_a_spec_renders_for_openai_and_anthropic() -> None:
    spec = ToolSpec("lcm_demo", "Find things.", SCHEMA)
    assert spec.openai() == {
        "type": "function",
        "function": {"name": "lcm_demo", "description": "Find things.", "parameters": SCHEMA},
    }
    assert spec.anthropic() == {"name": "lcm_demo", "description": "Find things.", "input_schema": SCHEMA}


@pytest.mark.parametrize("name", ["", "Upper", "has space", "9starts", "x" * 65])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="must match"):
        ToolSpec(name, "d", SCHEMA)


def test_schema_must_be_an_object() -> None:
    with pytest.raises(ValueError, match="type 'object'"):
        ToolSpec("lcm_x", "d", {"type": "string"})


def test_register_is_idempotent_but_refuses_a_second_contract() -> None:
    spec = ToolSpec("lcm_test_only_tool", "d", SCHEMA)
    assert register(spec) is spec and register(ToolSpec("lcm_test_only_tool", "d", SCHEMA)) is not None
    assert TOOLS["lcm_test_only_tool"] == spec
    with pytest.raises(ValueError, match="defined twice"):
        register(ToolSpec("lcm_test_only_tool", "other", SCHEMA))
    with pytest.raises(TypeError):
        TOOLS["x"] = spec  # type: ignore[index]


def test_memory_tools_are_defined_with_closed_schemas() -> None:
    names = {"memory_recall", "memory_store", "memory_forget", "memory_update", "memory_list", "memory_stats"}
    assert names <= set(TOOLS)
    for name in names:
        schema = TOOLS[name].input_schema
        assert schema["additionalProperties"] is False
        assert set(schema.get("required", ())) <= set(schema["properties"])
    assert TOOLS["memory_recall"].input_schema["required"] == ["query"]
    assert TOOLS["memory_store"].anthropic()["input_schema"]["properties"]["category"]["enum"][0] == "profile"


def test_every_parameter_of_every_tool_is_described() -> None:
    import lossless.memory.toolcalls  # noqa: F401  (the memory tools' handlers)

    def undescribed(schema: dict[str, object], path: str) -> list[str]:
        missing: list[str] = []
        properties = schema.get("properties")
        assert isinstance(properties, dict)
        for key, value in properties.items():
            if not value.get("description"):
                missing.append(path + key)
            items = value.get("items")
            if value.get("type") == "array" and isinstance(items, dict) and "properties" in items:
                missing += undescribed(items, f"{path}{key}[].")
        return missing

    names = ["lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query", "lcm_ingest", "lcm_compact"]
    names += ["memory_recall", "memory_store", "memory_forget", "memory_update", "memory_list", "memory_stats"]
    for spec in (TOOLS[name] for name in names):
        assert undescribed(dict(spec.input_schema), f"{spec.name}: ") == []
    described = TOOLS["lcm_grep"].input_schema["properties"]["conversation_id"]["description"]
    assert "lcm mcp" in described  # the default is right for a server with no session of its own

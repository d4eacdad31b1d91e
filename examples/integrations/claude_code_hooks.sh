#!/usr/bin/env bash
# Claude Code with lossless: install the hooks and the MCP server into a project, then undo it.
#   bash examples/integrations/claude_code_hooks.sh [PROJECT_DIR]
# Runs offline; it only writes PROJECT_DIR/.claude/settings.json and PROJECT_DIR/.mcp.json.
set -euo pipefail
project="${1:-$(mktemp -d)}"
lcm install claude-code --project "$project" --recall-guidance
echo "--- $project/.claude/settings.json"; cat "$project/.claude/settings.json"
echo "--- $project/.mcp.json"; cat "$project/.mcp.json"
lcm uninstall claude-code --project "$project"

"""The client of `rulegym openenv`: OpenEnv's own MCP tool client (tools `search`,
`get_article`, `answer`; `reset(question_id=..., split=..., index=..., seed=...)`)."""

from openenv.core import MCPToolClient


class RulegymSearchEnv(MCPToolClient):
    """``async with RulegymSearchEnv(base_url="http://127.0.0.1:8000") as env``: reset to a
    question, call the tools with ``env.step(CallToolAction(...))``; ``answer`` ends the
    episode with its exact set F1 as the reward."""

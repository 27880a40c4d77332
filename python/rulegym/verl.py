"""verl adapter.

* :func:`compute_score` is a verl reward function (``custom_reward_function.path`` pointing at
  this file's module, ``name: compute_score``). It needs no verl import and agrees with
  ``rulegym score``: the last ``<answer>...</answer>`` of the response (or the plain text when
  there is none) scored by set F1 after SQuAD normalisation.
* :class:`SearchTool` (available when verl is importable) is a verl ``BaseTool`` searching a
  rulegym index in process: declare it in the tool YAML as
  ``class_name: rulegym.verl.SearchTool`` with ``config: {index_path: ..., top_k: 3}``.
  verl's own ``SearchTool`` also works unchanged against ``rulegym serve`` (Search-R1's
  ``/retrieve`` protocol). The tool logic lives in :class:`SearchToolCore`, which has no verl
  dependency.

verl's package import pulls in torch; rulegym only imports it when ``SearchTool`` is used.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple
from uuid import uuid4

from . import _rulegym


def _answers(ground_truth: Any) -> list:
    if isinstance(ground_truth, dict):
        for key in ("target", "answers", "ground_truth"):
            if key in ground_truth:
                return _answers(ground_truth[key])
        raise ValueError(f"ground_truth dict has none of target/answers: {list(ground_truth)}")
    if isinstance(ground_truth, str):
        return [a.strip() for a in ground_truth.split(",") if a.strip()]
    return [str(a) for a in ground_truth]


def compute_score(
    data_source: Optional[str],
    solution_str: str,
    ground_truth: Any,
    extra_info: Optional[Dict[str, Any]] = None,
) -> float:
    """Set-F1 reward of a response against the gold answers (``ground_truth``: a list, a
    NumPy array, a comma-separated string or ``{"target": [...]}``). ``extra_info.score_mode``
    may select ``phantomwiki`` normalisation; the default is ``squad``."""
    mode = (extra_info or {}).get("score_mode", "squad") if isinstance(extra_info, dict) else "squad"
    return float(_rulegym.score(solution_str, _answers(ground_truth), mode)["f1"])


def format_passages(hits: list) -> str:
    """Search-R1's passage listing: ``Doc 1(Title: "T") text`` lines."""
    lines = []
    for i, h in enumerate(hits):
        title, _, text = h["contents"].partition("\n")
        lines.append(f"Doc {i + 1}(Title: {title}) {text}")
    return "\n".join(lines)


class SearchToolCore:
    """The search tool without verl: async ``create``/``execute``/``calc_reward``/``release``
    with verl's signatures, returning plain text instead of verl's ``ToolResponse``."""

    def __init__(self, config: Dict[str, Any]):
        if not config.get("index_path"):
            raise ValueError("tool config needs index_path (a rulegym index file)")
        self.index = _rulegym.Index(str(config["index_path"]))
        self.top_k = int(config.get("top_k", 3))
        self.instances: Dict[str, Dict[str, Any]] = {}

    async def create(self, instance_id: Optional[str] = None, **kwargs) -> str:
        instance_id = instance_id or str(uuid4())
        self.instances[instance_id] = {"searches": 0}
        return instance_id

    async def execute_text(self, instance_id: str, parameters: Dict[str, Any]) -> Tuple[str, float, dict]:
        queries = parameters.get("query_list") or [parameters.get("query", "")]
        queries = [str(q) for q in queries if str(q).strip()]
        if not queries:
            return "Error: 'query' (or 'query_list') must be a non-empty string.", 0.0, {}
        results = self.index.search(queries, self.top_k)
        state = self.instances.setdefault(instance_id, {"searches": 0})
        state["searches"] += len(queries)
        text = "\n---\n".join(format_passages(hits) for hits in results)
        return text, 0.0, {"queries": len(queries)}

    async def calc_reward(self, instance_id: str, **kwargs) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs) -> None:
        self.instances.pop(instance_id, None)


#: The OpenAI function schema of the search tool.
SEARCH_TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Searches the encyclopedia and returns the top matching articles.",
        "parameters": {
            "type": "object",
            "properties": {
                "query_list": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "One or more search queries.",
                }
            },
            "required": ["query_list"],
        },
    },
}


def _make_search_tool():
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

    class SearchTool(BaseTool):
        """verl ``BaseTool`` over a rulegym index (config: ``index_path``, ``top_k``)."""

        def __init__(self, config: dict, tool_schema: Optional[OpenAIFunctionToolSchema] = None):
            schema = tool_schema or OpenAIFunctionToolSchema.model_validate(SEARCH_TOOL_SCHEMA)
            super().__init__(config, schema)
            self.core = SearchToolCore(config)

        async def create(self, instance_id: Optional[str] = None, **kwargs):
            return await self.core.create(instance_id, **kwargs), ToolResponse()

        async def execute(self, instance_id: str, parameters: dict, **kwargs):
            text, reward, metrics = await self.core.execute_text(instance_id, parameters)
            return ToolResponse(text=text), reward, metrics

        async def calc_reward(self, instance_id: str, **kwargs) -> float:
            return await self.core.calc_reward(instance_id)

        async def release(self, instance_id: str, **kwargs) -> None:
            await self.core.release(instance_id)

    return SearchTool


def __getattr__(name: str):
    if name == "SearchTool":
        cls = _make_search_tool()
        globals()["SearchTool"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

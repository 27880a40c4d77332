"""verl adapter.

* :func:`compute_score` is a verl reward function: ``reward.custom_reward_function.path`` (verl
  0.9; ``custom_reward_function.path`` in 0.7) set to this file's path
  (``<site-packages>/rulegym/verl.py``: verl loads it standalone, outside the package, so this
  module imports only absolute names) or to ``pkg://rulegym.verl``, with ``name:
  compute_score``. It needs no verl import: the last complete ``<answer>...</answer>`` of the
  response scored by set F1 after SQuAD normalisation (as ``rulegym score`` scores it), 0 when
  the response has none.
* :class:`SearchTool` (available when verl is importable) is a verl ``BaseTool`` searching a
  rulegym index in process: declare it in the tool YAML as
  ``class_name: rulegym.verl.SearchTool`` with ``config: {type: native, index_path: ...,
  top_k: 3}``. (verl <= 0.7's own ``verl.tools.search_tool`` also works against ``rulegym
  serve``; verl 0.8 removed it. On verl 0.9 the search environment is the agent loop
  ``rulegym.verl_agent.SearchAgentLoop``.) The tool logic lives in :class:`SearchToolCore`,
  which has no verl dependency.

* :class:`TaskTool` and :class:`UserInteraction` (available when verl is importable) run
  rulegym tool-use tasks in verl's multi-turn agent loop. On verl >= 0.8, which has no
  interactions, :class:`TaskTool` runs inside ``rulegym.verl_agent.ToolUseAgentLoop`` (the
  agent loop plays the simulated user and scores the rubric); on verl 0.7: ``rulegym export --tasks FILE
  --format verl --out train.parquet`` writes the rows plus ``train_tool_config.yaml`` (one
  ``rulegym.verl.TaskTool`` entry per tool, with the task's OpenAI schema) and
  ``train_interaction_config.yaml`` (``rulegym.verl.UserInteraction``, name ``rulegym_user``).
  The interaction starts one episode per verl request (the Rust ``ToolEnv``: world state,
  rule-based simulated user, executable rubric) from ``interaction_kwargs.task``; every tool
  call of that request (``agent_data.request_id``, or the instance id when it is the request
  id) acts on the same episode. When the agent answers (``<answer>``, ``###STOP``) the
  interaction terminates with the rubric reward as its turn score, which :func:`compute_score`
  returns for rows whose ground truth carries a ``task_id``. The logic lives in
  :class:`TaskToolCore` and :class:`UserInteractionCore`, which have no verl dependency.

  What verl shows the model: the tool config is global to a run, and verl's tool agent loop
  renders every tool of it into every prompt, whatever the row's ``tools_kwargs`` (the older
  SGLang rollout shows the tools keyed in ``tools_kwargs``, which in parquet is every tool of
  the export too, since one struct column serves all rows). So the export declares the union of
  the tasks' tools. A tool name that tasks give different schemas (two different
  ``send_email``) is declared once per schema, as ``send_email__<8 hex of the schema's
  SHA-256>``; names without a conflict are kept. A row's ``create_kwargs`` for a renamed tool
  carry ``tool``: the task's own name of it (``""`` when the task does not have that variant),
  and :class:`TaskToolCore` calls the task's tool by that name. A call to a tool that the row's
  task does not have goes to the episode under its exported name and fails there like any
  unknown tool (a ``tool_error`` fact the rubric sees). When a task has fewer tools than the
  config, or renamed ones, its row's system prompt ends with the names of its own tools.

verl's package import pulls in torch; rulegym only imports it when ``SearchTool``, ``TaskTool``
or ``UserInteraction`` is used.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Tuple
from uuid import uuid4

# Absolute, not relative: verl loads this file standalone (custom_reward_function.path), as a
# module without a parent package.
from rulegym import _rulegym
from rulegym._simulation import simulation_dict


def _answers(ground_truth: Any) -> list:
    if isinstance(ground_truth, dict):
        for key in ("target", "answers", "ground_truth"):
            if key in ground_truth:
                return _answers(ground_truth[key])
        raise ValueError(f"ground_truth dict has none of target/answers: {list(ground_truth)}")
    if isinstance(ground_truth, str):
        return [a.strip() for a in ground_truth.split(",") if a.strip()]
    return [str(a) for a in ground_truth]


def tool_reward(extra_info: Optional[Dict[str, Any]]) -> float:
    """The reward of a tool-use rollout: the rubric reward :class:`UserInteraction` reported as
    the score of its terminating turn, i.e. the last of verl's ``turn_scores`` (which verl's
    reward loop merges into ``extra_info``). A rollout that never ended the episode (no answer
    before verl cut it) scores 0."""
    scores = (extra_info or {}).get("turn_scores") if isinstance(extra_info, dict) else None
    if scores is None:
        raise ValueError(
            "rulegym tool-use rows are scored by the interaction: extra_info has no turn_scores "
            "(run them with verl's tool agent loop and the interaction config from rulegym export)"
        )
    scores = list(scores)
    return float(scores[-1]) if scores else 0.0


def compute_score(
    data_source: Optional[str],
    solution_str: str,
    ground_truth: Any,
    extra_info: Optional[Dict[str, Any]] = None,
) -> float:
    """Set-F1 reward of a response's last complete ``<answer>...</answer>`` against the gold
    answers (``ground_truth``: a list, a NumPy array, a comma-separated string or
    ``{"target": [...]}``); a response without one scores 0 (untagged text is not an answer,
    so a policy is never paid for skipping the format). ``extra_info.score_mode`` may select
    ``phantomwiki`` normalisation; the default is ``squad``. Tool-use rows (ground truth
    ``{"task_id": ...}``) get :func:`tool_reward`."""
    if isinstance(ground_truth, dict) and "task_id" in ground_truth:
        return tool_reward(extra_info)
    mode = (extra_info or {}).get("score_mode", "squad") if isinstance(extra_info, dict) else "squad"
    answer = _rulegym.last_answer([solution_str])
    if answer is None:
        return 0.0
    return float(_rulegym.score(answer, _answers(ground_truth), mode, extract=False)["f1"])


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


# ---------------------------------------------------------------------------------------------
# Tool-use tasks: one episode per verl request, shared by the tools and the simulated user.


class _Episode:
    """One rollout of a task: the Rust ``ToolEnv`` (OpenAI protocol) until it ends, then only
    the result (the environment is dropped as soon as the rubric has scored it)."""

    __slots__ = ("task_id", "env", "lock", "result", "reason")

    def __init__(self, task_id: str, env: Any):
        self.task_id = task_id
        self.env = env
        self.lock = threading.Lock()
        self.result: Optional[Dict[str, Any]] = None
        self.reason = ""

    @property
    def done(self) -> bool:
        return self.result is not None

    def record(self, out: Dict[str, Any]) -> None:
        """Keeps the rubric result of a step that ended the episode and drops the env."""
        if out["done"]:
            self.result = out["metadata"].get("rubric") or self.env.score()
            self.reason = str(out["metadata"].get("reason", ""))
            self.env = None

    def reward(self) -> float:
        if self.result is not None:
            return float(self.result["reward"])
        return float(self.env.score()["reward"])


class EpisodeRegistry:
    """Live tool-use episodes of this process, keyed by verl's request id (the tools and the
    interaction of one rollout run in the same agent-loop worker). Holds at most
    ``max_episodes``: the oldest are dropped first (verl does not always finalize an
    interaction, e.g. when it cuts a rollout). Thread-safe."""

    def __init__(self, max_episodes: int = 16384):
        if int(max_episodes) < 1:
            raise ValueError("max_episodes must be at least 1")
        self.max_episodes = int(max_episodes)
        self._episodes: "OrderedDict[str, _Episode]" = OrderedDict()
        self._lock = threading.Lock()
        self._scorer = None

    def scorer(self):
        """One rubric engine per process (start-up ~0.2-0.5 s), shared by every episode."""
        with self._lock:
            if self._scorer is None:
                self._scorer = _rulegym.RubricScorer()
            return self._scorer

    def start(
        self, key: str, task: Any, max_turns: int = 16, simulation: Optional[Dict[str, Any]] = None
    ) -> _Episode:
        """Starts (or restarts) the episode ``key`` of ``task`` (a task dict or its JSON text).
        ``simulation``: the simulated side (a :class:`rulegym.Simulation` config dict: simulator
        ``endpoint``, ``model``, ``user``, ``dir``, ...); every episode of a task in this process
        shares the task's mapping. Default: no LLM, the rule user."""
        text = task if isinstance(task, str) else json.dumps(task)
        env = _rulegym.ToolEnv(text, self.scorer(), "openai", int(max_turns), simulation_dict(simulation))
        env.reset()
        episode = _Episode(str(json.loads(text).get("id", "")), env)
        with self._lock:
            self._episodes.pop(key, None)
            self._episodes[key] = episode
            while len(self._episodes) > self.max_episodes:
                self._episodes.popitem(last=False)
        return episode

    def get(self, key: Optional[str]) -> Optional[_Episode]:
        if key is None:
            return None
        with self._lock:
            return self._episodes.get(key)

    def end(self, key: Optional[str]) -> None:
        with self._lock:
            self._episodes.pop(key, None)

    def __len__(self) -> int:
        return len(self._episodes)


#: The episodes of this process (shared by every :class:`TaskToolCore` and
#: :class:`UserInteractionCore`).
EPISODES = EpisodeRegistry()


def _episode_key(instance_id: Optional[str], kwargs: Dict[str, Any]) -> Optional[str]:
    """verl's agent loop passes ``agent_data`` (whose ``request_id`` the interaction was started
    with) and a throw-away instance id per call; older rollouts use the request id as the
    instance id."""
    agent_data = kwargs.get("agent_data")
    # rulegym's own agent loop (rulegym.verl_agent) names its episode on the trajectory's
    # agent data: verl's request ids repeat across trajectories under full determinism.
    own = getattr(agent_data, "rulegym_episode_key", None)
    if own is not None:
        return str(own)
    request_id = getattr(agent_data, "request_id", None)
    return str(request_id) if request_id is not None else instance_id


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


class TaskToolCore:
    """One tool of a tool-use task without verl: async ``create``/``execute``/``calc_reward``/
    ``release`` with verl's signatures, returning plain text instead of verl's ``ToolResponse``.
    The call goes to the episode of the rollout (see :class:`EpisodeRegistry`) as one assistant
    turn with one OpenAI tool call; the reply is the tool's JSON (``{"error": ...}`` for invalid
    arguments or a failed call, recorded as a ``tool_error`` fact for the rubric). ``name`` is
    the exported name (the tool config's); the call uses the task's own name of the tool when
    the instance's ``create_kwargs`` carry a non-empty ``tool`` (a renamed variant), else
    ``name``."""

    def __init__(
        self,
        name: str,
        config: Optional[Dict[str, Any]] = None,
        episodes: Optional[EpisodeRegistry] = None,
    ):
        if not name:
            raise ValueError("a task tool needs its name (tool_schema.function.name)")
        self.name = str(name)
        self.config = dict(config or {})
        self.episodes = EPISODES if episodes is None else episodes
        self.instances: Dict[str, Dict[str, Any]] = {}

    async def create(self, instance_id: Optional[str] = None, **kwargs) -> str:
        """Registers a tool instance (``create_kwargs``: ``{"task_id"[, "tool"]}`` from the row's
        ``tools_kwargs``; passed nested as ``create_kwargs=`` by the agent loop or spread)."""
        instance_id = instance_id or str(uuid4())
        create_kwargs = dict(kwargs.get("create_kwargs") or {})
        for key in ("task_id", "task", "tool"):
            if key in kwargs:
                create_kwargs[key] = kwargs[key]
        self.instances[instance_id] = create_kwargs
        return instance_id

    def _episode(self, instance_id: str, kwargs: Dict[str, Any]) -> Tuple[Optional[_Episode], str]:
        key = _episode_key(instance_id, kwargs)
        episode = self.episodes.get(key)
        created = self.instances.get(instance_id, {})
        if episode is None and created.get("task") is not None:
            episode = self.episodes.start(key, created["task"], int(self.config.get("max_turns", 16)))
        if episode is None:
            return None, (
                f"Error: no rulegym episode for request {key!r}: the interaction "
                "(rulegym.verl.UserInteraction) starts it; configure "
                "multi_turn.interaction_config_path"
            )
        task_id = created.get("task_id")
        if task_id is not None and episode.task_id and str(task_id) != episode.task_id:
            return None, f"Error: tool instance is for task {task_id!r}, the episode runs {episode.task_id!r}"
        return episode, ""

    def task_tool_name(self, instance_id: str) -> str:
        """The name the task knows this tool by: ``create_kwargs["tool"]`` of the instance when
        non-empty (a variant the export renamed), else the exported name."""
        own = self.instances.get(instance_id, {}).get("tool")
        return str(own) if own else self.name

    async def execute_text(
        self, instance_id: str, parameters: Dict[str, Any], **kwargs
    ) -> Tuple[str, float, dict]:
        """Runs the call in the rollout's episode: ``(tool reply, 0.0, {"turn", "done"})``."""
        episode, error = self._episode(instance_id, kwargs)
        if episode is None:
            return error, 0.0, {}
        with episode.lock:
            if episode.done:
                return "Error: the episode is over.", 0.0, {"done": True}
            if not isinstance(parameters, dict):
                parameters = {}
            out = episode.env.call_tool(self.task_tool_name(instance_id), parameters)
            episode.record(out)
        text = "\n".join(_text(o["content"]) for o in out["observations"])
        if out["done"] and not text:
            text = f"Error: the episode ended ({episode.reason})."
        return text, 0.0, {"turn": out["metadata"].get("turn"), "done": out["done"]}

    async def calc_reward(self, instance_id: str, **kwargs) -> float:
        """The rubric reward of the episode: final once it ended, else of the trajectory so far."""
        episode, _ = self._episode(instance_id, kwargs)
        if episode is None:
            return 0.0
        with episode.lock:
            return episode.reward()

    async def release(self, instance_id: str, **kwargs) -> None:
        """Forgets the instance (the episode lives on until the interaction is finalized)."""
        self.instances.pop(instance_id, None)


class UserInteractionCore:
    """The simulated user of tool-use tasks without verl (verl ``BaseInteraction`` signatures):
    ``start_interaction`` starts the rollout's episode from ``interaction_kwargs`` (``task``: the
    task JSON), ``generate_response`` passes the latest assistant message to the episode and
    returns the rule-based user's reply (it reveals a hidden slot only when asked about it), or
    terminates with the rubric reward when the agent answered, stopped, or used up the episode's
    turns. Config: ``max_turns`` (environment turns: tool calls and user turns, default 16),
    ``max_episodes``, ``simulation`` (the simulator LLM, user and record directory: a
    :class:`rulegym.Simulation` config dict)."""

    def __init__(self, config: Optional[Dict[str, Any]] = None, episodes: Optional[EpisodeRegistry] = None):
        self.config = dict(config or {})
        self.name = str(self.config.get("name", "rulegym_user"))
        self.max_turns = int(self.config.get("max_turns", 16))
        self.simulation = simulation_dict(self.config.get("simulation"))
        if episodes is None:
            episodes = EPISODES
            if "max_episodes" in self.config:
                episodes.max_episodes = max(1, int(self.config["max_episodes"]))
        self.episodes = episodes

    async def start_interaction(self, instance_id: Optional[str] = None, **kwargs) -> str:
        instance_id = instance_id or str(uuid4())
        task = kwargs.get("task")
        if task is None:
            raise ValueError("interaction_kwargs must carry the task (rulegym export --tasks writes it)")
        self.episodes.start(instance_id, task, self.max_turns, self.simulation)
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: List[Dict[str, Any]], **kwargs
    ) -> Tuple[bool, str, float, Dict[str, Any]]:
        episode = self.episodes.get(instance_id)
        if episode is None:
            if kwargs.get("task") is None:
                raise ValueError(f"no rulegym episode {instance_id!r}: start_interaction was not called")
            episode = self.episodes.start(instance_id, kwargs["task"], self.max_turns, self.simulation)
        with episode.lock:
            if not episode.done:
                assistant = [m for m in messages or [] if m.get("role") == "assistant"]
                content = _text(assistant[-1].get("content")) if assistant else ""
                out = episode.env.step(content)
                episode.record(out)
                if not out["done"]:
                    reply = "\n".join(_text(o["content"]) for o in out["observations"])
                    return False, reply, 0.0, {"revealed": list(out["metadata"].get("revealed", []))}
            return True, "", episode.reward(), {"reason": episode.reason, "rubric": episode.result}

    async def calculate_score(self, instance_id: Optional[str] = None, **kwargs) -> float:
        episode = self.episodes.get(instance_id)
        if episode is None:
            return 0.0
        with episode.lock:
            return episode.reward()

    async def finalize_interaction(self, instance_id: Optional[str] = None, **kwargs) -> None:
        self.episodes.end(instance_id)


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


def _make_task_tool():
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import ToolResponse

    class TaskTool(BaseTool):
        """verl ``BaseTool`` for one tool of rulegym tool-use tasks (one entry per tool in the
        tool config written by ``rulegym export --tasks``; the name comes from ``tool_schema``)."""

        def __init__(self, config: dict, tool_schema):
            super().__init__(config, tool_schema)
            self.core = TaskToolCore(self.name, config)

        async def create(self, instance_id: Optional[str] = None, **kwargs):
            return await self.core.create(instance_id, **kwargs), ToolResponse()

        async def execute(self, instance_id: str, parameters: dict, **kwargs):
            text, reward, metrics = await self.core.execute_text(instance_id, parameters, **kwargs)
            return ToolResponse(text=text), reward, metrics

        async def calc_reward(self, instance_id: str, **kwargs) -> float:
            return await self.core.calc_reward(instance_id, **kwargs)

        async def release(self, instance_id: str, **kwargs) -> None:
            await self.core.release(instance_id, **kwargs)

    return TaskTool


def _make_user_interaction():
    from verl.interactions.base import BaseInteraction

    class UserInteraction(BaseInteraction):
        """verl ``BaseInteraction``: rulegym's rule-based simulated user and the episode's
        rubric reward (see :class:`UserInteractionCore`)."""

        def __init__(self, config: dict):
            super().__init__(config)
            self.core = UserInteractionCore(config)

        async def start_interaction(self, instance_id: Optional[str] = None, **kwargs) -> str:
            return await self.core.start_interaction(instance_id, **kwargs)

        async def generate_response(self, instance_id: str, messages: list, **kwargs):
            return await self.core.generate_response(instance_id, messages, **kwargs)

        async def calculate_score(self, instance_id: Optional[str] = None, **kwargs) -> float:
            return await self.core.calculate_score(instance_id, **kwargs)

        async def finalize_interaction(self, instance_id: Optional[str] = None, **kwargs) -> None:
            await self.core.finalize_interaction(instance_id, **kwargs)

    return UserInteraction


_LAZY = {
    "SearchTool": _make_search_tool,
    "TaskTool": _make_task_tool,
    "UserInteraction": _make_user_interaction,
}


def __getattr__(name: str):
    if name in _LAZY:
        cls = _LAZY[name]()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

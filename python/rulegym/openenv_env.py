"""OpenEnv ``Environment`` classes over rulegym's tool sessions, run in process.

:class:`RulegymSearchEnvironment` plays the questions of a dataset (``rulegym generate``) with
the tools ``search``, ``get_article`` and ``answer``; :class:`RulegymToolEnvironment` plays
the tool-use tasks of a task file. Both speak OpenEnv 0.10's MCP conventions:
``step(ListToolsAction())`` answers a ``ListToolsObservation`` and
``step(CallToolAction(tool_name=..., arguments=...))`` a ``CallToolObservation`` whose
``result`` is the tool result ``MCPEnvironment`` gives (FastMCP's ``CallToolResult``); a fault
(unknown tool, bad arguments, a call after the episode ended) is a ``ToolError`` in
``error``, never an exception. ``reward`` is the session's own: 0 until the episode ends, then
rulegym's exact reward (the answer's set F1, the task's rubric score). The same episodes as
``rulegym openenv`` serves over HTTP, with the same ``reset`` arguments: ``seed``,
``episode_id``, ``question_id`` (``task_id``), ``split`` and ``index``.

The episodes come from a ``rulegym.World`` (the Rust ``toolcall::World`` that ``rulegym
openenv`` serves): the same picking (a seed draws the same question), the same sessions.

Hosts that build an environment with no arguments (NeMo Gym 0.4's OpenEnv resources server
calls ``env_class()`` for every rollout, by the dotted path
``rulegym.openenv_env.RulegymSearchEnvironment``) configure it through environment variables:
``RULEGYM_DATASET`` (``RULEGYM_INDEX``, ``RULEGYM_SPLIT``) or ``RULEGYM_TASKS``
(``RULEGYM_SIMULATION``, a JSON object). Every instance of a process shares one loaded
dataset (task file) and one round-robin order, so fresh instances walk the questions in turn.

Only this module imports ``openenv`` (``pip install openenv``); ``import rulegym`` does not.
"""

import json
import os
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional

try:
    from fastmcp.client.client import CallToolResult
    from mcp.types import TextContent
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.mcp_types import (
        CallToolAction,
        CallToolObservation,
        ListToolsAction,
        ListToolsObservation,
        Tool,
        ToolError,
        ToolErrorType,
    )
    from openenv.core.env_server.types import EnvironmentMetadata, Observation, State
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(f"rulegym.openenv_env needs OpenEnv 0.10 (pip install openenv==0.10.0): {e}") from e

import rulegym
from rulegym._simulation import simulation_dict

__all__ = ["RulegymResetObservation", "RulegymSearchEnvironment", "RulegymToolEnvironment"]


class RulegymResetObservation(Observation):
    """The opening of an episode: what the agent is told and the tools it has."""

    prompt: str
    opening: Dict[str, Any]
    tools: List[Tool]


_WORLDS: Dict[Any, Any] = {}
_WORLDS_LOCK = threading.Lock()


def _world(key: Any, load: Any) -> Any:
    """The process's one ``rulegym.World`` of a configuration (loaded once, one round robin)."""
    with _WORLDS_LOCK:
        if key not in _WORLDS:
            _WORLDS[key] = load()
        return _WORLDS[key]


def _setting(value: Any, var: str) -> Any:
    return value if value is not None else os.environ.get(var) or None


class _RulegymEnvironment(Environment):
    """One episode at a time of a ``rulegym.ToolSession`` from a shared ``rulegym.World``."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    _id_key = "question_id"
    _env_name = "rulegym"
    _split: Optional[str] = None

    def __init__(self, world: Any):
        super().__init__()
        self._world = world
        self._session: Optional[Any] = None
        self._episode_id: Optional[str] = None
        self._steps = 0

    def _start(self, request: Optional[Dict[str, Any]] = None) -> None:
        request = {k: v for k, v in (request or {}).items() if v is not None}
        if self._split is not None and not any(k in request for k in ("question_id", "task_id")):
            request.setdefault("split", self._split)
        self._session = self._world.session(request)
        self._episode_id = request.get("episode_id")
        self._steps = 0

    def _reset(self, request: Dict[str, Any]) -> RulegymResetObservation:
        self._start(request)
        opening = self._session.opening()
        return RulegymResetObservation(
            prompt=opening.get("prompt", ""), opening=opening, tools=self._tools(), done=False, reward=None
        )

    def _tools(self) -> List[Tool]:
        return [Tool(name=t["name"], description=t["description"], input_schema=t["input_schema"])
                for t in self._session.tools()]

    def step(self, action: Any, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        """``ListToolsAction`` or ``CallToolAction`` (starting the next episode when none was
        reset); a fault is a ``ToolError`` in the observation."""
        if not isinstance(action, (ListToolsAction, CallToolAction)):
            raise TypeError(f"expected ListToolsAction or CallToolAction, got {type(action).__name__}")
        if self._session is None:
            self._start()
        session = self._session
        self._steps += 1
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=self._tools(), reward=session.reward, done=session.done)
        try:
            out = session.call(action.tool_name, dict(action.arguments))
        except rulegym.ToolCallError as e:
            return CallToolObservation(tool_name=action.tool_name, result=None,
                                       error=ToolError(error_type=ToolErrorType(e.kind), message=str(e)),
                                       reward=session.reward, done=session.done)
        result = CallToolResult(
            content=[TextContent(type="text", text=out["text"])],
            structured_content=out["data"],
            meta={"reward": out["reward"], "done": out["done"]},
            data=out["text"],
            is_error=out["is_error"],
        )
        return CallToolObservation(tool_name=action.tool_name, result=result, reward=out["reward"],
                                   done=out["done"])

    @property
    def state(self) -> State:
        """``episode_id``, ``step_count`` and, within an episode, its id, ``done`` and ``reward``."""
        episode = {}
        if self._session is not None:
            episode = {self._id_key: self._session.id, "done": self._session.done,
                       "reward": self._session.reward}
        return State(episode_id=self._episode_id, step_count=self._steps, **episode)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=self._env_name, description=self._world.description(),
                                   version=rulegym.__version__)

    def close(self) -> None:
        self._session = None


class RulegymSearchEnvironment(_RulegymEnvironment):
    """The questions of a rulegym dataset, answered with the tools search, get_article and
    answer; reward: the exact set F1 of the answer.

    ``dataset``: the directory ``rulegym generate`` wrote; ``index``: its search index
    (default: ``DATASET/index.idx``); ``split``: the split a reset draws from by default
    (default: train); ``config``: search settings (``top_k``, ``max_turns``). Unset, they come
    from ``RULEGYM_DATASET``, ``RULEGYM_INDEX`` and ``RULEGYM_SPLIT``."""

    _env_name = "rulegym_search"

    def __init__(self, dataset: Any = None, index: Any = None, split: Optional[str] = None,
                 config: Optional[Dict[str, Any]] = None):
        dataset = _setting(dataset, "RULEGYM_DATASET")
        if dataset is None:
            raise ValueError("no dataset: pass dataset=DIR or set RULEGYM_DATASET")
        dataset = Path(dataset).resolve()
        index = Path(_setting(index, "RULEGYM_INDEX") or dataset / "index.idx").resolve()
        self._split = _setting(split, "RULEGYM_SPLIT")
        config = dict(config) if config else None
        key = ("search", str(dataset), str(index), json.dumps(config, sort_keys=True))
        super().__init__(_world(key, lambda: rulegym.World.search(str(dataset), str(index), config)))

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              question_id: Optional[str] = None, split: Optional[str] = None, index: Optional[int] = None,
              **kwargs: Any) -> RulegymResetObservation:
        """Starts a question: ``question_id``, else one of ``split`` by ``index``, by ``seed``
        or the next in turn (unknown keys are an error)."""
        return self._reset(dict(kwargs, seed=seed, episode_id=episode_id, question_id=question_id,
                                split=split, index=index))


class RulegymToolEnvironment(_RulegymEnvironment):
    """The tool-use tasks of a task file, played with the task's tools, ask_user and finish;
    reward: the task's rubric score.

    ``tasks``: a JSON file of a task or a list of tasks, or a JSONL file of tasks;
    ``simulation``: the ``rulegym.Simulation`` settings (the task file's ``mappings/``
    directory seeds the mappings when it exists, as in ``rulegym openenv --tasks``);
    ``max_turns``: the turn cap of a task without its own. Unset, ``tasks`` and ``simulation``
    come from ``RULEGYM_TASKS`` and ``RULEGYM_SIMULATION`` (a JSON object)."""

    _id_key = "task_id"
    _env_name = "rulegym_tools"

    def __init__(self, tasks: Any = None, simulation: Optional[Dict[str, Any]] = None, max_turns: int = 16):
        tasks = _setting(tasks, "RULEGYM_TASKS")
        if tasks is None:
            raise ValueError("no tasks: pass tasks=FILE or set RULEGYM_TASKS")
        tasks = Path(tasks).resolve()
        if simulation is None and os.environ.get("RULEGYM_SIMULATION"):
            simulation = json.loads(os.environ["RULEGYM_SIMULATION"])
        simulation = simulation_dict(simulation)
        key = ("tasks", str(tasks), json.dumps(simulation, sort_keys=True), int(max_turns))
        super().__init__(_world(key, lambda: rulegym.World.tasks(str(tasks), simulation, int(max_turns))))

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_id: Optional[str] = None, split: Optional[str] = None, index: Optional[int] = None,
              **kwargs: Any) -> RulegymResetObservation:
        """Starts a task: ``task_id``, else by ``index``, by ``seed`` or the next in turn
        (unknown keys are an error)."""
        return self._reset(dict(kwargs, seed=seed, episode_id=episode_id, task_id=task_id,
                                split=split, index=index))

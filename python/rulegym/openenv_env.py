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

Hosts that build an environment with no arguments (NeMo Gym 0.4's OpenEnv resources server
calls ``env_class()`` for every rollout, by the dotted path
``rulegym.openenv_env.RulegymSearchEnvironment``) configure it through environment variables:
``RULEGYM_DATASET`` (``RULEGYM_INDEX``, ``RULEGYM_SPLIT``) or ``RULEGYM_TASKS``
(``RULEGYM_SIMULATION``, a JSON object). Every instance of a process shares one loaded
dataset (task file) and one round-robin order, so fresh instances walk the questions in turn.

Only this module imports ``openenv`` (``pip install openenv``); ``import rulegym`` does not.
"""

import itertools
import json
import os
import random
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
from rulegym._simulation import shared_scorer, simulation_dict

__all__ = ["RulegymResetObservation", "RulegymSearchEnvironment", "RulegymToolEnvironment"]


class RulegymResetObservation(Observation):
    """The opening of an episode: what the agent is told and the tools it has."""

    prompt: str
    opening: Dict[str, Any]
    tools: List[Tool]


class _World:
    """The records a kind of environment plays (questions or tasks) and the order a reset
    without a choice walks them in (one per process and configuration)."""

    def __init__(self, records: List[Dict[str, Any]], split_of, default_split: str):
        if not records:
            raise ValueError("no questions (tasks) to play")
        self.records = records
        self.split_of = split_of
        self.default_split = default_split
        self.by_id = {str(r["id"]): r for r in records}
        self._next = itertools.count()
        self._lock = threading.Lock()

    def pick(self, record_id, split, index, seed) -> Dict[str, Any]:
        """By id, else within the split (default: train, or the first split there is) by
        index, by seed (a uniform draw) or in turn."""
        if record_id is not None:
            try:
                return self.by_id[str(record_id)]
            except KeyError:
                raise ValueError(f"unknown id {record_id!r}") from None
        splits = list(dict.fromkeys(self.split_of(r) for r in self.records))
        name = split if split is not None else (
            self.default_split if self.default_split in splits else splits[0])
        members = [r for r in self.records if self.split_of(r) == name]
        if not members:
            raise ValueError(f"no split {name!r} (splits: {', '.join(splits)})")
        if index is not None:
            if not 0 <= index < len(members):
                raise ValueError(f"index {index} is out of range (split {name!r} has {len(members)})")
            return members[index]
        if seed is not None:
            return members[random.Random(seed).randrange(len(members))]
        with self._lock:
            return members[next(self._next) % len(members)]


_WORLDS: Dict[Any, _World] = {}
_WORLDS_LOCK = threading.Lock()


def _world(key, load) -> _World:
    with _WORLDS_LOCK:
        if key not in _WORLDS:
            _WORLDS[key] = load()
        return _WORLDS[key]


def _setting(value, var: str):
    return value if value is not None else os.environ.get(var) or None


def _fault_kind(message: str, tools) -> ToolErrorType:
    """OpenEnv's error type of a `RulegymError` a call raised (as `rulegym openenv` reports it)."""
    if message.startswith("unknown tool"):
        return ToolErrorType.TOOL_NOT_FOUND
    if message.startswith("the episode is over"):
        return ToolErrorType.EXECUTION_ERROR
    if message.startswith("invalid arguments") or any(message.startswith(f"{t}: ") for t in tools) or any(
        m in message for m in ("; the limit is ", " must be in ", " must not contain ")
    ):
        return ToolErrorType.INVALID_ARGS
    return ToolErrorType.EXECUTION_ERROR


class _RulegymEnvironment(Environment):
    """One episode at a time of a rulegym `ToolSession` (instances are independent)."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    _id_key = "question_id"
    _env_name = "rulegym"
    _split: Optional[str] = None

    def __init__(self, world: _World):
        super().__init__()
        self._world = world
        self._session: Optional[Any] = None
        self._record: Optional[Dict[str, Any]] = None
        self._episode_id: Optional[str] = None
        self._steps = 0

    def _session_of(self, record: Dict[str, Any]):
        raise NotImplementedError

    def _start(self, seed=None, episode_id=None, record_id=None, split=None, index=None):
        split = split if split is not None else self._split
        record = self._world.pick(record_id, split, index, seed)
        self._session = self._session_of(record)
        self._record = record
        self._episode_id = episode_id
        self._steps = 0

    def _reset(self, seed, episode_id, record_id, split, index, kwargs) -> RulegymResetObservation:
        if kwargs:
            raise TypeError(
                f"unknown reset arguments {sorted(kwargs)} (accepted: seed, episode_id, "
                f"{self._id_key}, split, index)"
            )
        self._start(seed, episode_id, record_id, split, index)
        opening = self._session.opening()
        return RulegymResetObservation(
            prompt=opening.get("prompt", ""), opening=opening, tools=self._tools(), done=False, reward=None
        )

    def _tools(self) -> List[Tool]:
        return [Tool(name=t["name"], description=t["description"], input_schema=t["input_schema"])
                for t in self._session.tools()]

    def step(self, action, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        """`ListToolsAction` or `CallToolAction` (starting the next episode when none was
        reset); a fault is a `ToolError` in the observation."""
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
        except rulegym.RulegymError as e:
            kind = _fault_kind(str(e), [t["name"] for t in session.tools()])
            return CallToolObservation(tool_name=action.tool_name, result=None,
                                       error=ToolError(error_type=kind, message=str(e)),
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
        """`episode_id`, `step_count` and, within an episode, its id, `done` and `reward`."""
        episode = {}
        if self._session is not None:
            episode = {self._id_key: str(self._record["id"]), "done": self._session.done,
                       "reward": self._session.reward}
        return State(episode_id=self._episode_id, step_count=self._steps, **episode)

    def get_metadata(self) -> EnvironmentMetadata:
        description = " ".join((self.__doc__ or "").split("\n\n")[0].split())
        return EnvironmentMetadata(name=self._env_name, description=description, version=rulegym.__version__)

    def close(self) -> None:
        self._session = None


class RulegymSearchEnvironment(_RulegymEnvironment):
    """The questions of a rulegym dataset, answered with the tools search, get_article and
    answer; reward: the exact set F1 of the answer.

    ``dataset``: the directory ``rulegym generate`` wrote (``questions.jsonl``); ``index``:
    its search index (default: ``DATASET/index.idx``); ``split``: the split a reset draws from
    by default (default: train); ``config``: search settings (``top_k``, ``max_turns``).
    Unset, they come from ``RULEGYM_DATASET``, ``RULEGYM_INDEX`` and ``RULEGYM_SPLIT``."""

    _env_name = "rulegym_search"

    def __init__(self, dataset=None, index=None, split=None, config: Optional[Dict[str, Any]] = None):
        dataset = _setting(dataset, "RULEGYM_DATASET")
        if dataset is None:
            raise ValueError("no dataset: pass dataset=DIR or set RULEGYM_DATASET")
        dataset = Path(dataset).resolve()
        index = Path(_setting(index, "RULEGYM_INDEX") or dataset / "index.idx").resolve()
        self._split = _setting(split, "RULEGYM_SPLIT")
        self._config = dict(config) if config else None

        def load():
            lines = (dataset / "questions.jsonl").read_text().splitlines()
            questions = [json.loads(l) for l in lines if l.strip()]
            world = _World(questions, lambda q: q.get("split", "train"), "train")
            world.index = rulegym.Index(str(index))
            return world

        super().__init__(_world(("search", str(dataset), str(index)), load))

    def _session_of(self, q):
        return rulegym.ToolSession.search(self._world.index, q["question"], list(q["answers"]), self._config)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              question_id: Optional[str] = None, split: Optional[str] = None, index: Optional[int] = None,
              **kwargs: Any) -> RulegymResetObservation:
        """Starts a question: ``question_id``, else one of ``split`` by ``index``, by ``seed``
        or the next in turn."""
        return self._reset(seed, episode_id, question_id, split, index, kwargs)


class RulegymToolEnvironment(_RulegymEnvironment):
    """The tool-use tasks of a task file, played with the task's tools, ask_user and finish;
    reward: the task's rubric score.

    ``tasks``: a JSON file of a task or a list of tasks, or a JSONL file of tasks;
    ``simulation``: the `rulegym.Simulation` settings (default: the task file's ``mappings/``
    directory seeds the mappings when it exists, as in ``rulegym openenv --tasks``);
    ``max_turns``: the turn cap of a task without its own. Unset, ``tasks`` and ``simulation``
    come from ``RULEGYM_TASKS`` and ``RULEGYM_SIMULATION`` (a JSON object)."""

    _id_key = "task_id"
    _env_name = "rulegym_tools"

    def __init__(self, tasks=None, simulation: Optional[Dict[str, Any]] = None, max_turns: int = 16):
        tasks = _setting(tasks, "RULEGYM_TASKS")
        if tasks is None:
            raise ValueError("no tasks: pass tasks=FILE or set RULEGYM_TASKS")
        tasks = Path(tasks).resolve()
        if simulation is None and os.environ.get("RULEGYM_SIMULATION"):
            simulation = json.loads(os.environ["RULEGYM_SIMULATION"])
        simulation = dict(simulation_dict(simulation) or {})
        beside = tasks.parent / "mappings"
        if "seed_mappings" not in simulation and beside.is_dir():
            simulation["seed_mappings"] = str(beside)
        self._simulation = simulation or None
        self._max_turns = max_turns

        def load():
            text = tasks.read_text()
            try:
                parsed = json.loads(text)
                records = parsed if isinstance(parsed, list) else [parsed]
            except json.JSONDecodeError:
                records = [json.loads(l) for l in text.splitlines() if l.strip()]
            return _World(records, lambda t: "train", "train")

        super().__init__(_world(("tasks", str(tasks)), load))

    def _session_of(self, task):
        return rulegym.ToolSession.task(task, shared_scorer(), max_turns=self._max_turns,
                                        simulation=self._simulation)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_id: Optional[str] = None, split: Optional[str] = None, index: Optional[int] = None,
              **kwargs: Any) -> RulegymResetObservation:
        """Starts a task: ``task_id``, else by ``index``, by ``seed`` or the next in turn."""
        return self._reset(seed, episode_id, task_id, split, index, kwargs)

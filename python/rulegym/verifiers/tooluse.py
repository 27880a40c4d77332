"""``rulegym-tools-v1``: rulegym's tool-use tasks as a verifiers v1 taskset."""

import json
from pathlib import Path
from typing import Any, Dict, Iterator

import verifiers.v1 as vf

from rulegym.verifiers.task_tools import TaskState, TaskToolset

__all__ = ["RulegymToolsTaskset"]


class ToolTaskData(vf.TaskData):
    """One task (its JSON, as in the task file), the simulation it is played with and its cap."""

    task_id: str
    task: str
    simulation: Dict[str, Any] = {}
    max_turns: int = 16


class ToolTask(vf.Task[ToolTaskData, TaskState]):
    """A task; the reward is its rubric score (``1[no forbidden] x mean(sub-goals,
    interactions)``), computed by rulegym's tool-use environment in the rollout's tool server."""

    @property
    def key(self) -> str:
        return self.data.task_id

    @classmethod
    def toolsets(cls, config: Any) -> list:
        return [TaskToolset(vf.ToolsetConfig())]

    @vf.reward(weight=1.0)
    async def rubric(self, trace: vf.Trace) -> float:
        return float(trace.state.reward)

    @vf.metric
    async def finished(self, trace: vf.Trace) -> float:
        return float(trace.state.done)

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(trace.state.calls)


class RulegymToolsConfig(vf.TasksetConfig):
    """The task file and how its tasks are simulated."""

    #: A task file (.jsonl, or .json with one task or an array).
    tasks: str = ""
    #: A ``rulegym.Simulation`` config; ``seed_mappings`` defaults to ``mappings/`` beside the file.
    simulation: Dict[str, Any] = {}
    max_turns: int = 16


def _read_tasks(path: Path) -> list:
    text = path.read_text()
    if path.suffix == ".jsonl":
        return [json.loads(l) for l in text.splitlines() if l.strip()]
    data = json.loads(text)
    return data if isinstance(data, list) else [data]


class RulegymToolsTaskset(vf.Taskset[ToolTask, RulegymToolsConfig]):
    """The tasks of a rulegym task file, each with its own tools."""

    def load(self) -> Iterator[ToolTask]:
        c = self.config
        if not c.tasks:
            raise ValueError("rulegym-tools-v1: give `tasks` (a rulegym task file)")
        path = Path(c.tasks)
        simulation = dict(c.simulation)
        beside = path.parent / "mappings"
        if "seed_mappings" not in simulation and beside.is_dir():
            simulation["seed_mappings"] = str(beside.resolve())
        for task in _read_tasks(path):
            data = ToolTaskData(id=task["id"], task_id=task["id"], task=json.dumps(task),
                                prompt=task["instruction"], simulation=simulation,
                                max_turns=c.max_turns)
            yield ToolTask(data, self.config.task)

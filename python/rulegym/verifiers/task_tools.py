"""A tool-use task's tool server for verifiers (``python -m rulegym.verifiers.task_tools``, one
process per rollout, started by verifiers): the task's own tools, ``ask_user`` and ``finish``,
played in rulegym's tool-use environment (state-backed tools, mapping simulator, simulated user,
rubric). The episode's reward and end live in the rollout's :class:`TaskState`, which verifiers
syncs with the host."""

import inspect
import json
from typing import Any, Callable, Dict, Optional

import verifiers.v1 as vf

import rulegym.trl as rt


class TaskState(vf.State):
    """One rollout's tool-use episode, as the host sees it."""

    reward: float = 0.0
    done: bool = False
    calls: int = 0


class TaskToolset(vf.Toolset[vf.ToolsetConfig, TaskState]):
    """The tools of one task; its episode lives in this process for the rollout."""

    TOOL_PREFIX = None

    async def setup_task(self, task) -> None:
        row = {"environment": "task", "task": json.loads(task.task)}
        env_cls = next(iter(rt.tool_environments([row], max_turns=task.max_turns,
                                                 simulation=task.simulation or None).values()))
        self._env = env_cls()
        self._env.reset(task=row["task"])

    def _tool(self, name: str, method: Callable[..., str]) -> Callable[..., Any]:
        """An async tool calling ``method`` that records the episode's reward and end."""

        async def call(**kwargs: Any) -> str:
            text = method(**{k: v for k, v in kwargs.items() if v is not None})
            self.state.calls += 1
            self.state.reward = float(self._env.get_reward())
            self.state.done = bool(self._env.done)
            return text

        call.__signature__ = inspect.signature(method)
        call.__annotations__ = dict(getattr(method, "__annotations__", {}))
        call.__name__ = name
        call.__doc__ = method.__doc__
        return call

    def register(self, mcp) -> None:
        for name in (t["name"] for t in self._env._session.tools()):
            method = getattr(self._env, name)
            description = (method.__doc__ or name).strip().split("\n\n")[0]
            mcp.add_tool(self._with_state(self._tool(name, method)), name=name, description=description)


if __name__ == "__main__":
    TaskToolset.run()

"""Hugging Face TRL adapter: reward functions for ``GRPOTrainer(reward_funcs=...)`` and
environments for ``GRPOTrainer(environment_factory=...)``, over rows written by
``rulegym export --format trl``.

Single turn (the completion is one turn of the search environment)::

    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer
    from rulegym.trl import f1_reward, format_reward

    data = load_dataset("json", data_files="train.jsonl", split="train")
    trainer = GRPOTrainer(model, reward_funcs=[f1_reward, format_reward],
                          args=GRPOConfig(..., reward_weights=[1.0, 0.0]), train_dataset=data)

``f1_reward`` is exactly the search environment's reward for a turn that ends the episode (its
first complete ``<search>`` or ``<answer>`` tag is acted on, as in :class:`rulegym.SearchEnv`);
``format_reward`` says whether the environment took the turn as an answer. Weight it 0 to have it
logged (``rewards/format_reward/mean``) apart from the task reward.

Multi-turn, tool calling (TRL runs the tool loop; the environment scores the episode)::

    from rulegym.trl import SearchEnvironment
    trainer = GRPOTrainer(model, environment_factory=SearchEnvironment, train_dataset=data, ...)

Tool-use tasks (``rulegym export --tasks FILE --format trl``): each row's ``environment`` names
the tool set of its task, and :func:`tool_environments` gives one factory per tool set::

    trainer = GRPOTrainer(model, environment_factory=tool_environments(data), train_dataset=data)

Rows are checked before training starts (:func:`check_rows`): missing answers, an index that does
not exist or an unknown environment are errors naming the row.
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

from rulegym import _rulegym
from rulegym._simulation import shared_scorer

__all__ = [
    "SearchEnvironment",
    "ToolEnvironment",
    "check_rows",
    "completion_text",
    "f1_reward",
    "format_reward",
    "tool_environments",
]

#: ``environment`` of the search rows ``rulegym export --format trl`` writes.
SEARCH_ENVIRONMENT = "rulegym_search"


class RowError(ValueError):
    """A dataset row the adapter cannot train on (the message names the row and the field)."""


def completion_text(completion: Any) -> str:
    """The text of a completion: a string as is; a conversational completion (a list of
    messages) gives the content of its last assistant message."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        for message in reversed(list(completion)):
            if isinstance(message, Mapping) and message.get("role") == "assistant":
                content = message.get("content") or ""
                if isinstance(content, list):  # content blocks
                    content = "".join(
                        part.get("text", "") for part in content if isinstance(part, Mapping)
                    )
                return str(content)
        return ""
    raise TypeError(f"a completion is a string or a list of messages, got {type(completion).__name__}")


def _answers(value: Any, where: str) -> List[str]:
    if value is None or isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise RowError(f"{where}: `answers` must be a list of gold answers, got {value!r}")
    answers = [str(a) for a in value]
    if not answers:
        raise RowError(f"{where}: `answers` is empty (every rulegym question has a gold answer)")
    return answers


def _env_config(value: Any) -> Optional[Dict[str, Any]]:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return json.loads(value)
    return dict(value)


def _final_turn(text: str, answers: List[str], question: str, env_config: Any) -> Dict[str, Any]:
    """One turn of a search environment without a corpus: the step's result."""
    env = _rulegym.SearchEnv(None, question, answers, None, _env_config(env_config))
    env.reset()
    return env.step(text)


def _column(kwargs: Mapping[str, Any], name: str, n: int) -> List[Any]:
    value = kwargs.get(name)
    if value is None:
        return [None] * n
    return list(value)


def f1_reward(completions: List[Any], answers: List[Any], **kwargs: Any) -> List[float]:
    """TRL reward function: the set-F1 reward the search environment gives each completion as
    the turn that ends the episode (0 when it answers nothing, or searches first). Reads the
    rows' ``answers``, and ``question`` and ``env_config`` when present (score mode, action
    token budget)."""
    n = len(completions)
    questions = _column(kwargs, "question", n)
    configs = _column(kwargs, "env_config", n)
    rewards = []
    for i, (completion, gold) in enumerate(zip(completions, answers)):
        step = _final_turn(completion_text(completion), _answers(gold, f"row {i}"), questions[i] or "", configs[i])
        rewards.append(float(step["reward"]) if step["done"] else 0.0)
    return rewards


def format_reward(completions: List[Any], answers: Optional[List[Any]] = None, **kwargs: Any) -> List[float]:
    """TRL reward function: 1.0 when the search environment takes the completion as an answer
    (its first complete tag is ``<answer>...</answer>``), else 0.0. Weight it 0 to log it apart
    from the task reward."""
    n = len(completions)
    gold = answers if answers is not None else [["-"]] * n
    configs = _column(kwargs, "env_config", n)
    out = []
    for i, completion in enumerate(completions):
        step = _final_turn(completion_text(completion), _answers(gold[i], f"row {i}"), "", configs[i])
        out.append(1.0 if "answer" in step["metadata"] else 0.0)
    return out


def check_rows(rows: Iterable[Mapping[str, Any]], environments: Optional[Iterable[str]] = None) -> int:
    """Checks TRL rows before training: search rows need ``answers`` and, for the multi-turn
    environment, an ``index_path`` that exists; tool rows need a ``task``; with
    ``environments``, every row's ``environment`` must be one of them. Returns the row count;
    raises :class:`RowError` naming the first bad row."""
    known = None if environments is None else set(environments)
    n = 0
    for i, row in enumerate(rows):
        where = f"row {i} (id {row.get('id', row.get('task_id'))!r})"
        env = row.get("environment")
        if known is not None and env not in known:
            raise RowError(f"{where}: environment {env!r} is not one of {sorted(known)}")
        if env is None or env == SEARCH_ENVIRONMENT:
            _answers(row.get("answers"), where)
            path = row.get("index_path")
            if known is not None and not path:
                raise RowError(f"{where}: no `index_path` (export with --index, or a dataset with index.idx)")
            if path and not os.path.isfile(path):
                raise RowError(f"{where}: index_path {path!r} does not exist")
        elif not row.get("task"):
            raise RowError(f"{where}: tool-use rows carry their `task` (rulegym export --tasks)")
        n += 1
    return n


_OVER = "The episode is over (an answer was given, or the turn limit is reached)."


class SearchEnvironment:
    """The search environment for ``GRPOTrainer(environment_factory=SearchEnvironment)``: tools
    ``search``, ``get_article`` and ``answer`` over the row's index, rulegym's exact set-F1
    reward once ``answer`` is called (0 without an answer), the environment's turn cap (each
    tool call is a turn; beyond the cap a tool says the episode is over). ``reset(**row)``
    takes a row of ``rulegym export --format trl``; ``index`` overrides the rows'
    ``index_path``."""

    def __init__(self, index: Optional[str] = None):
        self._index_override = index
        self._env = None
        self._index = None
        self._reward = 0.0
        self._done = False
        self.turns = 0

    def reset(self, **row: Any) -> None:
        """Starts the episode of ``row`` (its ``answers``, ``question``, ``index_path`` and
        optional ``env_config``); the prompt is the row's own."""
        where = f"row {row.get('id')!r}"
        answers = _answers(row.get("answers"), where)
        path = self._index_override or row.get("index_path")
        if not path:
            raise RowError(f"{where}: no index (the row has no index_path; pass SearchEnvironment(index=...))")
        if not os.path.isfile(path):
            raise RowError(f"{where}: index {path!r} does not exist")
        self._index = _rulegym.Index(path)
        self._env = _rulegym.SearchEnv(self._index, str(row.get("question") or ""), answers, None,
                                       _env_config(row.get("env_config")))
        self._env.reset()
        self._reward = 0.0
        self._done = False
        self.turns = 0
        return None

    def _turn(self) -> bool:
        """Counts a tool call against the turn cap; False once the episode is over (then the
        reward stays what it was: 0 unless an answer was scored)."""
        if self._env is None:
            raise RuntimeError("reset() first")
        if self._done:
            return False
        if self.turns >= self._env.max_turns:
            self._done = True
            return False
        self.turns += 1
        return True

    def _step(self, action: str) -> Optional[Dict[str, Any]]:
        if not self._turn():
            return None
        out = self._env.step(action)
        if out["done"]:
            self._done = True
            self._reward = float(out["reward"])
        return out

    def search(self, query: str) -> str:
        """Searches the encyclopedia for passages about a query.

        Args:
            query: What to look for, such as a person's name and a relation.

        Returns:
            The best-matching passages, each with its article title.
        """
        out = self._step(f"<search>{query}</search>")
        if out is None or out["done"]:
            return _OVER
        text = "".join(m["content"] for m in out["observations"]).strip()
        # The passages without Search-R1's <information> wrapper (a function call's response).
        return text.removeprefix("<information>").removesuffix("</information>").strip()

    def get_article(self, title: str) -> str:
        """Reads the whole article with this title (a person's name).

        Args:
            title: The article's title, such as a person's full name.

        Returns:
            The article's text, or a note that no article has this title.
        """
        if not self._turn():
            return _OVER
        doc = self._index.article(title)
        if doc is None:
            return f"No article is titled {title!r}."
        return doc["contents"]

    def answer(self, answer: str) -> str:
        """Gives the final answer and ends the episode.

        Args:
            answer: The answer; several answers separated by commas.

        Returns:
            A confirmation.
        """
        if self._step(f"<answer>{answer}</answer>") is None:
            return _OVER
        return "Answer recorded."

    def get_reward(self) -> float:
        """rulegym's reward of the episode: the set F1 of the answer, 0 without one."""
        return self._reward


class ToolEnvironment:
    """A tool-use episode for TRL: the task's own tools (one method each, added by
    :func:`tool_environments`), ``ask_user`` (the simulated user answers) and ``finish``; the
    reward is the task's rubric score of the trajectory (``get_reward``). ``reset(**row)``
    takes a row of ``rulegym export --tasks FILE --format trl``."""

    #: Settings of every episode (set on the classes :func:`tool_environments` makes).
    max_turns: int = 16
    simulation: Optional[Dict[str, Any]] = None

    def __init__(self) -> None:
        self._env = None
        self._calls = 0

    def reset(self, **row: Any) -> None:
        """Starts the episode of the row's ``task`` (a task dict or its JSON text)."""
        task = row.get("task")
        if not task:
            raise RowError(f"row {row.get('task_id')!r}: no `task` (rulegym export --tasks ... --format trl)")
        self._env = _rulegym.ToolEnv(task, shared_scorer(), "openai", int(self.max_turns), self.simulation)
        self._env.reset()
        self._calls = 0
        return None

    def _send(self, message: Dict[str, Any]) -> str:
        if self._env is None:
            raise RuntimeError("reset() first")
        if self._env.done:
            return _OVER
        out = self._env.step_message(message)
        text = "\n".join(m["content"] for m in out["observations"])
        if out["done"]:
            return text or _OVER
        return text

    def _call(self, name: str, arguments: Dict[str, Any]) -> str:
        self._calls += 1
        call = {"id": f"call_{self._calls}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}
        return self._send({"role": "assistant", "content": "", "tool_calls": [call]})

    def ask_user(self, question: str) -> str:
        """Asks the user one question about their request.

        Args:
            question: The question for the user.

        Returns:
            The user's reply.
        """
        return self._send({"role": "assistant", "content": question})

    def finish(self, summary: str) -> str:
        """Ends the episode once the request is done.

        Args:
            summary: A short summary of what was done.

        Returns:
            A confirmation.
        """
        self._send({"role": "assistant", "content": f"<answer>{summary}</answer>"})
        return "Done."

    def get_reward(self) -> float:
        """The task's rubric reward of the trajectory so far (the final one once it ended)."""
        if self._env is None:
            return 0.0
        return float(self._env.score()["reward"])


_PY_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}
_RESERVED = {"reset", "get_reward", "ask_user", "finish"}


def _tool_method(schema: Mapping[str, Any]) -> Callable[..., str]:
    """A method calling the task tool of this OpenAI function schema, with the signature, type
    hints and Google-style docstring TRL (through transformers' ``get_json_schema``) renders."""
    function = schema["function"]
    name = function["name"]
    if name in _RESERVED or name.startswith("_"):
        raise ValueError(f"tool {name!r} clashes with the environment's own methods")
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: Dict[str, Any] = {"return": str}
    lines = []
    for arg, spec in properties.items():
        if not arg.isidentifier():
            raise ValueError(f"tool {name!r}: argument {arg!r} is not a Python identifier, so TRL cannot expose it")
        kind = spec.get("type")
        hint = _PY_TYPES.get(kind[0] if isinstance(kind, list) else kind, str)
        if arg not in required:
            hint = Optional[hint]
        annotations[arg] = hint
        default = inspect.Parameter.empty if arg in required else None
        params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        description = " ".join(str(spec.get("description") or arg).split())
        if "enum" in spec:
            description += " One of: " + ", ".join(json.dumps(v) for v in spec["enum"]) + "."
        lines.append(f"    {arg}: {description}")

    def method(self: ToolEnvironment, **kwargs: Any) -> str:
        return self._call(name, {k: v for k, v in kwargs.items() if v is not None})

    doc = " ".join(str(function.get("description") or name).split())
    if lines:
        doc += "\n\nArgs:\n" + "\n".join(lines)
    doc += "\n\nReturns:\n    The tool's response."
    method.__name__ = name
    method.__qualname__ = name
    method.__doc__ = doc
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(params, return_annotation=str)
    return method


def tool_environments(
    rows: Iterable[Mapping[str, Any]],
    max_turns: int = 16,
    simulation: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Callable[[], ToolEnvironment]]:
    """``environment_factory`` for TRL tool-use rows: one :class:`ToolEnvironment` class per
    distinct ``environment`` of the rows (tasks with the same tools share one), with a method
    per tool of that environment's tasks. ``simulation`` is a :class:`rulegym.Simulation`
    config (the simulator LLM of mapping tools, the LLM user, where the world is recorded)."""
    classes: Dict[str, type] = {}
    sim = dict(simulation) if simulation is not None else None
    for i, row in enumerate(rows):
        env = row.get("environment")
        if not env or not row.get("task"):
            raise RowError(f"row {i}: tool-use rows carry `environment` and `task` (rulegym export --tasks ... --format trl)")
        if env in classes:
            continue
        task = row["task"]
        task = json.loads(task) if isinstance(task, str) else task
        members: Dict[str, Any] = {"max_turns": int(max_turns), "simulation": sim,
                                   "__doc__": f"TRL environment {env}: " + ", ".join(t["name"] for t in task["tools"])}
        for tool in task["tools"]:
            schema = {"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                                       "parameters": tool.get("parameters") or {}}}
            members[tool["name"]] = _tool_method(schema)
        classes[env] = type(env, (ToolEnvironment,), members)
    if not classes:
        raise RowError("no tool-use rows")
    return classes

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

Curriculum (the environment owns the data: no dataset rows; each GRPO group of ``num_generations``
rollouts shares one question drawn by a :class:`rulegym.Curriculum`, whose level follows the
rewards reported back)::

    env = curriculum_environment(rulegym.Curriculum({"seed": 1}), num_generations=4)
    trainer = GRPOTrainer(model, environment_factory=env, args=GRPOConfig(..., max_steps=N),
                          train_dataset=Dataset.from_list(env.placeholder_rows(rows_per_step)))

(``train_dataset`` may be left out; the system prompt then goes into the user message, see
:func:`curriculum_environment`.)

Rows are checked before training starts (:func:`check_rows`): missing answers, an index that does
not exist or an unknown environment are errors naming the row.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

from rulegym import _rulegym
from rulegym._simulation import shared_scorer

__all__ = [
    "SearchEnvironment",
    "ToolEnvironment",
    "check_rows",
    "completion_text",
    "curriculum_environment",
    "f1_reward",
    "format_reward",
    "search_tool_schemas",
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


def search_tool_schemas() -> List[Dict[str, Any]]:
    """The OpenAI function schemas of the search tools (``search``, ``get_article``,
    ``answer``), as rulegym defines them once (``_rulegym.search_tools()``): what
    :class:`SearchEnvironment`'s methods render to through ``transformers.utils.get_json_schema``
    (which is what TRL puts in the chat template's ``tools``)."""
    return [dict(t) for t in _rulegym.search_tools()]


def _load_index(value: Any, where: str) -> Any:
    """An ``_rulegym.Index``: as given, or loaded from a path (the Rust side caches loaded
    indexes per path and process)."""
    if isinstance(value, _rulegym.Index):
        return value
    path = os.fspath(value)
    if not os.path.isfile(path):
        raise RowError(f"{where}: index {path!r} does not exist")
    return _rulegym.Index(path)


class _SessionEnvironment:
    """A TRL environment over one ``rulegym.ToolSession`` per episode: each tool method is one
    ``call`` of the session (the text it returns is what the policy sees; an unknown tool, a
    call after the episode ended or bad arguments raise, which TRL shows the policy as
    ``{"error": ...}``), and ``get_reward`` is the session's exact reward."""

    _session: Any = None

    def _call(self, name: str, arguments: Dict[str, Any]) -> str:
        if self._session is None:
            raise RuntimeError("reset() first")
        return self._session.call(name, arguments)["text"]

    @property
    def done(self) -> bool:
        """Whether the episode is over."""
        return self._session is not None and bool(self._session.done)

    _done = done  # the name scripts/train-trl-cpu.py reads

    @property
    def turns(self) -> int:
        """Tool calls taken in this episode."""
        return 0 if self._session is None else int(self._session.turns)

    def get_reward(self) -> float:
        """rulegym's reward of the episode so far (the final one once it ended)."""
        return 0.0 if self._session is None else float(self._session.reward)


_SESSION_MEMBERS = ("reset", "get_reward", "done", "turns")


class SearchEnvironment(_SessionEnvironment):
    """The search environment for ``GRPOTrainer(environment_factory=SearchEnvironment)``: tools
    ``search``, ``get_article`` and ``answer`` over the row's index, rulegym's exact set-F1
    reward once ``answer`` is called (0 without an answer), the environment's turn cap (each
    tool call is a turn). ``reset(**row)`` takes a row of ``rulegym export --format trl``;
    ``index`` (a path or an ``rulegym.Index``) overrides the rows' ``index_path``.

    The episode is a ``rulegym.ToolSession`` (the session MCP and OpenEnv serve): the tools,
    their schemas (the methods' docstrings are generated from them, see
    :func:`search_tool_schemas`) and the texts they return are rulegym's, the same the SFT
    demonstrations of ``rulegym oracle --format sft`` show."""

    def __init__(self, index: Any = None):
        self._index_override = index
        self._session = None

    def reset(self, **row: Any) -> None:
        """Starts the episode of ``row`` (its ``answers``, ``question``, ``index_path`` or
        ``index`` (an ``rulegym.Index``), and optional ``env_config``); the prompt is the
        row's own."""
        where = f"row {row.get('id')!r}"
        answers = _answers(row.get("answers"), where)
        index = self._index_override
        if index is None:
            given = row.get("index")
            index = given if isinstance(given, (_rulegym.Index, str, os.PathLike)) and given else row.get("index_path")
        if not index:
            raise RowError(f"{where}: no index (the row has no index_path; pass SearchEnvironment(index=...))")
        self._start(_load_index(index, where), str(row.get("question") or ""), answers, row.get("env_config"))
        return None

    def _start(self, index: Any, question: str, answers: List[str], env_config: Any) -> None:
        self._session = _rulegym.ToolSession.search(index, question, answers, _env_config(env_config))


class _Draws:
    """The questions of one curriculum environment class, shared by all its instances (TRL
    makes one instance per rollout of a generation batch and resets them in order): a new
    draw every ``num_generations`` resets, so each GRPO group shares its question."""

    def __init__(self, curriculum: Any, num_generations: int, on_draw: Optional[Callable[[Dict[str, Any]], None]]):
        if int(num_generations) < 1:
            raise ValueError(f"num_generations must be at least 1, got {num_generations}")
        self.curriculum = curriculum
        self.num_generations = int(num_generations)
        self.on_draw = on_draw
        self.resets = 0  # reset() calls so far
        self.group = -1  # the current group (draw) number
        self.draw: Optional[Dict[str, Any]] = None
        self.level = int(curriculum.level)
        self.reports = 0
        self.rewards: List[tuple] = []  # (group, level at draw, reward) of reported episodes, not yet taken
        self._draw_level = self.level

    def next(self) -> tuple:
        if self.resets % self.num_generations == 0:
            self.draw = self.curriculum.draw()
            self.group += 1
            self._draw_level = int(self.draw.get("level", self.curriculum.level))
            if self.on_draw is not None:
                self.on_draw(self.draw)
        self.resets += 1
        return self.group, self._draw_level, self.draw

    def report(self, group: int, level: int, reward: float) -> None:
        self.level = int(self.curriculum.report(float(reward)))
        self.reports += 1
        self.rewards.append((group, level, float(reward)))

    def take(self) -> List[tuple]:
        """The (group, level, reward) reported since the last call."""
        out, self.rewards = self.rewards, []
        return out


def _check_single_process() -> None:
    # A group is split across processes under data parallelism, and each process would draw its
    # own question for its share: the count of resets is per process.
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        raise RuntimeError("curriculum_environment draws per process: train it in a single process")


def curriculum_environment(
    curriculum: Any,
    num_generations: int,
    system_prompt: Optional[str] = None,
    on_draw: Optional[Callable[[Dict[str, Any]], None]] = None,
) -> type:
    """An ``environment_factory`` for TRL training without dataset rows: the environment owns
    the data. Every ``num_generations`` consecutive ``reset()`` calls (one GRPO group: TRL
    resets the batch's environments in order, a group's rollouts adjacent) get the same
    question, drawn from ``curriculum`` (a :class:`rulegym.Curriculum`); ``get_reward()`` is
    the episode's reward and is reported to the curriculum once per episode
    (``curriculum.report``), which moves its level.

    ``reset()`` returns the question's user message: TRL appends it to the last (user) message
    of the row's prompt. Without a ``train_dataset`` that prompt is TRL's placeholder (one
    empty user message, no system message), and the system prompt (``system_prompt``, else
    the draw's) is put before the question in the user message. To give the model the system
    message as its own message (as in SFT data and evaluation), pass
    ``train_dataset=Dataset.from_list(cls.placeholder_rows(n))``: rows of the system message
    and an empty user message (TRL cycles them; ``n`` = generation batch / ``num_generations``).

    ``on_draw(draw)`` is called with each new draw (e.g. to check it against held-out data).
    The class exposes ``cls.draws`` (``.level``: the curriculum's level after the last report;
    ``.take()``: the (group, level, reward) of episodes reported since the last call;
    ``.group``, ``.resets``, ``.reports``) and ``cls.curriculum``. Single process only (a
    data-parallel run splits groups across processes)."""
    draws = _Draws(curriculum, num_generations, on_draw)

    class CurriculumSearchEnvironment(SearchEnvironment):
        __doc__ = f"Search episodes drawn from a curriculum, {draws.num_generations} rollouts per question."

        def __init__(self) -> None:
            super().__init__()
            self.draw: Optional[Dict[str, Any]] = None
            self._group = -1
            self._level = draws.level
            self._reported = True

        def reset(self, **row: Any) -> str:
            """Starts the next rollout of the current group (a new question every
            ``num_generations`` resets); returns the question's user message."""
            _check_single_process()
            self._group, self._level, draw = draws.next()
            self.draw = draw
            where = f"draw {draw.get('id')!r}"
            self._start(_load_index(draw["index"], where), str(draw["question"]),
                        _answers(draw.get("answers"), where), draw.get("env_config"))
            self._reported = False
            system, user = _split_prompt(draw, system_prompt)
            prompt = row.get("prompt")
            has_system = isinstance(prompt, Sequence) and any(
                isinstance(m, Mapping) and m.get("role") == "system" for m in prompt)
            if system and not has_system:
                return f"{system}\n\n{user}"
            return user

        def get_reward(self) -> float:
            """The episode's reward; the first call of an episode reports it to the curriculum."""
            reward = super().get_reward()
            if not self._reported and self._session is not None:
                self._reported = True
                draws.report(self._group, self._level, reward)
            return reward

        @classmethod
        def placeholder_rows(cls, n: int) -> List[Dict[str, Any]]:
            """``n`` dataset rows holding only the prompt frame: the system message and an
            empty user message, which ``reset()`` fills with the question."""
            system = system_prompt if system_prompt is not None else _rulegym.SEARCH_TOOL_SYSTEM_PROMPT
            frame = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": ""}]
            return [{"prompt": [dict(m) for m in frame]} for _ in range(int(n))]

    CurriculumSearchEnvironment.draws = draws
    CurriculumSearchEnvironment.curriculum = curriculum
    return CurriculumSearchEnvironment


def _split_prompt(draw: Mapping[str, Any], system_prompt: Optional[str]) -> tuple:
    """(system text or None, user text) of a draw's prompt; ``system_prompt`` overrides."""
    prompt = list(draw.get("prompt") or [])
    system = next((m.get("content") for m in prompt if m.get("role") == "system"), None)
    user = next((m.get("content") for m in reversed(prompt) if m.get("role") == "user"), None)
    if user is None:
        user = str(draw.get("question") or "")
    return (system_prompt if system_prompt is not None else system), str(user)


class ToolEnvironment(_SessionEnvironment):
    """A tool-use episode for TRL: the task's own tools, ``ask_user`` (the simulated user
    answers) and ``finish``, one method each (added by :func:`tool_environments` from the
    session's tool list); the reward is the task's rubric score of the trajectory
    (``get_reward``). ``reset(**row)`` takes a row of ``rulegym export --tasks FILE --format
    trl``. The episode is a ``rulegym.ToolSession``, the session MCP and OpenEnv serve."""

    #: Settings of every episode (set on the classes :func:`tool_environments` makes).
    max_turns: int = 16
    simulation: Optional[Dict[str, Any]] = None

    def __init__(self) -> None:
        self._session = None

    def reset(self, **row: Any) -> None:
        """Starts the episode of the row's ``task`` (a task dict or its JSON text)."""
        task = row.get("task")
        if not task:
            raise RowError(f"row {row.get('task_id')!r}: no `task` (rulegym export --tasks ... --format trl)")
        self._session = _rulegym.ToolSession.task(task, shared_scorer(), int(self.max_turns), self.simulation)
        return None


def _function_schema(tool: Mapping[str, Any]) -> Dict[str, Any]:
    """A session tool (``ToolSession.tools()``) as an OpenAI function schema."""
    return {"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                             "parameters": tool.get("input_schema") or {},
                                             "return": {"type": "string", "description": tool.get("returns", "")}}}


_PY_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}
def _tool_method(schema: Mapping[str, Any], reserved: Iterable[str] = _SESSION_MEMBERS,
                 positional: bool = False) -> Callable[..., str]:
    """A method calling ``self._call(name, arguments)`` for the tool of this OpenAI function
    schema, with the signature, type hints and Google-style docstring TRL (through
    transformers' ``get_json_schema``) renders back into the schema: its description, each
    argument's, and ``Returns:`` from the schema's ``return`` description (``returns`` text;
    else "The tool's response."). Arguments are keyword-only unless ``positional``."""
    function = schema["function"]
    name = function["name"]
    if name in set(reserved) or name.startswith("_"):
        raise ValueError(f"tool {name!r} clashes with the environment's own methods")
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    kind_of_arg = inspect.Parameter.POSITIONAL_OR_KEYWORD if positional else inspect.Parameter.KEYWORD_ONLY
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
        params.append(inspect.Parameter(arg, kind_of_arg, default=default, annotation=hint))
        description = " ".join(str(spec.get("description") or arg).split())
        if "enum" in spec:
            description += " One of: " + ", ".join(json.dumps(v) for v in spec["enum"]) + "."
        lines.append(f"    {arg}: {description}")
    signature = inspect.Signature(params, return_annotation=str)

    def method(self: Any, *args: Any, **kwargs: Any) -> str:
        arguments = signature.bind(self, *args, **kwargs).arguments
        return self._call(name, {k: v for k, v in arguments.items() if k != "self" and v is not None})

    returns = function.get("return")
    returns = returns.get("description") if isinstance(returns, Mapping) else function.get("returns")
    doc = " ".join(str(function.get("description") or name).split())
    if lines:
        doc += "\n\nArgs:\n" + "\n".join(lines)
    doc += "\n\nReturns:\n    " + (" ".join(str(returns).split()) if returns else "The tool's response.")
    method.__name__ = name
    method.__qualname__ = name
    method.__doc__ = doc
    method.__annotations__ = annotations
    method.__signature__ = signature
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
        tools = _rulegym.ToolSession.task(row["task"], shared_scorer(), int(max_turns), None).tools()
        members: Dict[str, Any] = {"max_turns": int(max_turns), "simulation": sim,
                                   "__doc__": f"TRL environment {env}: " + ", ".join(t["name"] for t in tools)}
        for tool in tools:
            # Positional too when every argument is required (ask_user, finish; a signature
            # cannot put a required positional argument after an optional one).
            schema = tool.get("input_schema") or {}
            positional = set(schema.get("required") or []) == set(schema.get("properties") or {})
            members[tool["name"]] = _tool_method(_function_schema(tool), positional=positional)
        classes[env] = type(env, (ToolEnvironment,), members)
    if not classes:
        raise RowError("no tool-use rows")
    return classes


# SearchEnvironment's tools, generated from rulegym's schemas (methods on the class, where TRL
# looks for them: every public function but reset and get_reward is a tool).
for _schema in search_tool_schemas():
    setattr(SearchEnvironment, _schema["function"]["name"],
            _tool_method(_schema, positional=True))
del _schema

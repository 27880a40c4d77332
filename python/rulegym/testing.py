"""Property tests of answer reward functions against rulegym's exact reward.

Two ways in, over the one Rust case generator that ``rulegym reward-check`` uses:

* :func:`check_reward` runs every property on a reward function in process and returns the
  report (the same JSON ``rulegym reward-check`` writes)::

      from rulegym.testing import check_reward
      report = check_reward(my_reward)                      # my_reward(response, answers) -> float
      report = check_reward(compute_score, signature="verl")  # verl's custom reward signature
      report = check_reward(reward_func, signature="trl")     # TRL's reward_funcs signature
      assert report["passed"], report["failures"]

* Hypothesis strategies for ``@given`` tests of your own reward code: :func:`universes`,
  :func:`questions`, :func:`responses` (each response carries rulegym's exact reward and the
  property it tests; ``case.holds(reward)`` judges a reward of it)::

      from hypothesis import given
      from rulegym.testing import responses, universe

      WORLD = universe(seed=7, trees=10)

      @given(responses(WORLD))
      def test_my_reward(case):
          if case.base_response is None:
              assert case.holds(my_reward(case.response, case.answers)), case

Signatures:

* ``"plain"``: ``fn(response, answers) -> float``;
* ``"verl"``: verl's ``compute_score(data_source, solution_str, ground_truth, extra_info)``
  called with ``data_source="searchR1_rulegym"``, ``ground_truth={"target": answers}`` (the
  Search-R1 shape) and ``extra_info={"question": ...}``; a dict result's ``"score"`` is the
  reward;
* ``"trl"``: TRL's ``reward_funcs(prompts, completions, **columns)`` called once per batch with
  ``completions`` as strings and the columns ``answers`` and ``question``.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

from ._rulegym import audit_rewards as _audit_rewards
from ._rulegym import (
    Case,
    CaseSource,
    ToolCase,
    ToolCaseSource,
    reward_check,
    reward_check_tools,
    reward_properties,
    tool_reward_properties,
)

__all__ = [
    "RewardAudit",
    "audit_rewards",
    "audit_trl_completions",
    "Case",
    "CaseSource",
    "PROPERTIES",
    "Question",
    "TOOL_PROPERTIES",
    "ToolCase",
    "ToolCaseSource",
    "check_reward",
    "check_tool_reward",
    "questions",
    "responses",
    "tool_tasks",
    "trajectories",
    "universe",
    "universes",
]

#: The generated properties, in the order :meth:`CaseSource.case` indexes them.
PROPERTIES: List[str] = list(reward_properties())
#: The tool-use properties, in the order :meth:`ToolCaseSource.case` indexes them.
TOOL_PROPERTIES: List[str] = list(tool_reward_properties())


def _reward_value(value: Any) -> Optional[float]:
    """A reward as a float: a number (or a ``{"score": number}`` dict, verl's shape), ``None``
    for no reward. Text and booleans are errors, as on the CLI: ``float("1")`` would hide a
    reward function that returns strings."""
    if isinstance(value, dict):
        value = value.get("score")
    if value is None:
        return None
    if isinstance(value, (str, bytes, bool)) or not hasattr(value, "__float__"):
        raise TypeError(f"a reward must be a number, got {type(value).__name__} {value!r}")
    return float(value)


def _batch_fn(fn: Callable[..., Any], signature: str) -> Callable[[List[dict]], List[Optional[float]]]:
    if signature == "plain":
        return lambda batch: [_reward_value(fn(x["response"], list(x["answers"]))) for x in batch]
    if signature == "verl":
        return lambda batch: [
            _reward_value(
                fn(
                    data_source="searchR1_rulegym",
                    solution_str=x["response"],
                    ground_truth={"target": list(x["answers"])},
                    extra_info={"question": x["question"]},
                )
            )
            for x in batch
        ]
    if signature == "trl":

        def call(batch: List[dict]) -> List[Optional[float]]:
            out = fn(
                prompts=[x["question"] for x in batch],
                completions=[x["response"] for x in batch],
                answers=[list(x["answers"]) for x in batch],
                question=[x["question"] for x in batch],
            )
            return [_reward_value(v) for v in out]

        return call
    raise ValueError(f"unknown signature {signature!r} (plain, verl, trl)")


def check_reward(
    fn: Callable[..., Any],
    signature: str = "plain",
    *,
    seed: int = 1,
    cases: int = 1200,
    trees: int = 30,
    source: Optional[CaseSource] = None,
    dataset: Optional[str] = None,
) -> dict:
    """Runs every reward-check property on ``fn`` and returns the report dict (``passed``,
    ``properties`` with cases tried and failed, ``failures`` with one shrunk counterexample per
    failed property). Cases come from ``source``, the dataset directory ``dataset``, or a fresh
    universe of ``trees`` family trees from ``seed``."""
    if source is None and dataset is not None:
        source = CaseSource.load(dataset)
    return reward_check(_batch_fn(fn, signature), source=source, seed=seed, cases=cases, trees=trees)


@functools.lru_cache(maxsize=64)
def universe(seed: int = 1, trees: int = 10) -> CaseSource:
    """A universe built in memory from ``seed`` (cached): its questions and wrong-answer pools."""
    return CaseSource.generate(seed=seed, trees=trees)


@dataclass(frozen=True)
class Question:
    """A question of a universe, with its index there (for :func:`responses`)."""

    source: CaseSource
    index: int
    id: str
    question: str
    answers: Sequence[str]


def _st():
    try:
        from hypothesis import strategies
    except ImportError as e:  # pragma: no cover - exercised only without hypothesis
        raise ImportError("rulegym.testing's strategies need Hypothesis: pip install hypothesis") from e
    return strategies


def universes(trees: int = 10):
    """Hypothesis strategy: fresh universes (a seed in 1..2**32; built and cached per seed)."""
    st = _st()
    return st.integers(min_value=1, max_value=2**32).map(lambda seed: universe(seed, trees))


def questions(source: Optional[CaseSource] = None):
    """Hypothesis strategy: the questions (with gold answers) of ``source`` (default: the
    universe of seed 1)."""
    st = _st()
    src = source if source is not None else universe()
    rows = src.questions()
    return st.integers(min_value=0, max_value=len(rows) - 1).map(
        lambda i: Question(src, i, rows[i]["id"], rows[i]["question"], tuple(rows[i]["answers"]))
    )


def responses(of: Any = None):
    """Hypothesis strategy: responses (:class:`Case`) to any question of a universe
    (``of`` a :class:`CaseSource`, default the universe of seed 1) or to one
    :class:`Question`. Each has ``response``, ``answers``, ``property``, ``expected`` (rulegym's
    exact reward), ``base_response`` for the monotonicity properties and ``holds(got,
    base_got=None)``."""
    st = _st()
    if isinstance(of, Question):
        source, question = of.source, of.index
    else:
        source, question = (of if of is not None else universe()), None
    draws = st.tuples(st.integers(0, len(PROPERTIES) - 1), st.integers(0, 2**63 - 1))
    return draws.map(lambda d: source.case(d[0], d[1], question=question)).filter(lambda c: c is not None)


def check_tool_reward(
    fn: Callable[[dict, list], Any],
    *,
    seed: int = 1,
    cases: int = 200,
    trees: int = 30,
    source: Optional[ToolCaseSource] = None,
) -> dict:
    """Runs the tool-use properties on a rubric reward ``fn(task, messages) -> float`` (a task
    dict and an OpenAI message list): trajectories of rule-generated tasks whose rubric score is
    known (the reference solution: 1; plus a forbidden action: 0; a skipped sub-goal or no
    question to the user: below 1). Returns the report dict."""

    def batch(rows: List[dict]) -> List[Optional[float]]:
        return [_reward_value(fn(r["task"], r["messages"])) for r in rows]

    return reward_check_tools(batch, source=source, seed=seed, cases=cases, trees=trees)


@functools.lru_cache(maxsize=16)
def tool_tasks(seed: int = 1, trees: int = 30, tasks: int = 24) -> ToolCaseSource:
    """Rule-generated tool-use tasks of a universe built from ``seed`` (cached)."""
    return ToolCaseSource.generate(seed=seed, trees=trees, tasks=tasks)


def trajectories(source: Optional[ToolCaseSource] = None, task: Optional[int] = None):
    """Hypothesis strategy: trajectories (:class:`ToolCase`) of the tasks of ``source`` (default
    :func:`tool_tasks`), or of task index ``task`` only, each with ``property``, ``task``,
    ``messages``, ``expected`` (rulegym's rubric reward) and ``holds(got)``."""
    st = _st()
    src = source if source is not None else tool_tasks()
    n = len(src.tasks())
    tasks = st.just(task) if task is not None else st.integers(0, n - 1)
    draws = st.tuples(st.integers(0, len(TOOL_PROPERTIES) - 1), tasks)
    return draws.map(lambda d: src.case(d[0], d[1])).filter(lambda c: c is not None)


def audit_rewards(rollouts, dataset=None, tolerance: float = 1e-6) -> dict:
    """Audits logged rewards against rulegym's exact reward, as ``rulegym reward-check --audit``
    does: ``rollouts`` are dicts (``{"id" or "question" or "prompt", "response", "reward"[,
    "answers"][, "step"]}``, or verl's dump lines ``{"input", "output", "gts", "score",
    "step"}``) or their JSON texts; the gold answers of an id, a question text or the question
    a prompt asks come from ``dataset`` (a directory of ``rulegym generate``). Returns the
    report: ``rollouts``, ``agree``, ``diverge``, ``overpaid`` (reward paid beyond the exact
    one), ``by_property`` (divergences grouped by the property they break, with counts and
    examples), ``errors`` (rollouts that could not be audited, by position, 1-based) and, when
    the rollouts name their ``step``, ``by_step`` (``step``, ``rollouts``, ``diverge``,
    ``overpaid`` of each)."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rollouts]
    return _audit_rewards(lines, None if dataset is None else str(dataset), tolerance)


class RewardAudit:
    """A training loop's reward monitor: ``record`` each rollout's response and the reward the
    trainer paid; every ``every`` calls of ``step()`` the recorded rollouts are audited
    (:func:`audit_rewards`), the report is kept in ``reports`` and passed to ``on_report``, and
    the buffer starts again. ``raise_on_divergence`` turns a divergence into an error, to stop a
    run that is paying for an exploit."""

    def __init__(self, dataset=None, every: int = 1, tolerance: float = 1e-6,
                 on_report: Optional[Callable[[dict], Any]] = None, raise_on_divergence: bool = False):
        if every < 1:
            raise ValueError(f"every={every}: audit at least every step")
        self.dataset, self.every, self.tolerance = dataset, every, tolerance
        self.on_report, self.raise_on_divergence = on_report, raise_on_divergence
        self.pending: List[dict] = []
        self.reports: List[dict] = []
        self.steps = 0

    def record(self, response: str, reward: float, *, id: Optional[str] = None,
               question: Optional[str] = None, answers: Optional[Sequence[str]] = None) -> None:
        row: dict = {"response": response, "reward": reward}
        for key, value in (("id", id), ("question", question), ("answers", answers)):
            if value is not None:
                row[key] = list(value) if key == "answers" else value
        self.pending.append(row)

    def step(self) -> Optional[dict]:
        """Counts a training step; on every ``every``-th, audits what was recorded since."""
        self.steps += 1
        if self.steps % self.every or not self.pending:
            return None
        report = audit_rewards(self.pending, self.dataset, self.tolerance)
        report["step"] = self.steps
        self.pending = []
        self.reports.append(report)
        if self.on_report is not None:
            self.on_report(report)
        if self.raise_on_divergence and report["diverge"]:
            classes = ", ".join(f"{k} ({v['count']})" for k, v in report["by_property"].items())
            raise RuntimeError(f"step {self.steps}: {report['diverge']} rewards diverge from "
                               f"rulegym's exact reward: {classes}")
        return report


#: Columns of TRL's completions table that are not reward columns: TRL's own (``step``,
#: ``prompt``, ``completion``, ``advantage``) and the gold columns the audit reads when a reward
#: function logs them with ``log_extra`` (``id``, ``question``, ``answers``).
TRL_COLUMNS = ("step", "prompt", "completion", "advantage")
GOLD_COLUMNS = ("id", "question", "answers")

_TRL_FILE = re.compile(r"completions_(\d+)\.parquet$")


def _trl_files(path) -> List[Path]:
    """The ``completions_*.parquet`` files of a TRL output_dir, its ``completions/`` folder or
    one file, in step order."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or directory")
    folder = path / "completions" if (path / "completions").is_dir() else path
    files = [f for f in folder.iterdir() if _TRL_FILE.search(f.name)]
    if not files:
        raise FileNotFoundError(
            f"{folder}: no completions_*.parquet (TRL writes them under output_dir/completions/ "
            "when GRPOConfig(log_completions=True))")
    return sorted(files, key=lambda f: (int(_TRL_FILE.search(f.name).group(1)), f.name))


def _plain(value: Any) -> Any:
    """A parquet cell as plain Python: NumPy arrays (pandas' lists) as lists, recursively."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return [_plain(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value


def _read_parquet(file: Path) -> List[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        pq = None
    if pq is not None:
        return pq.read_table(file).to_pylist()
    try:
        import pandas
    except ImportError:
        raise ImportError("audit_trl_completions reads TRL's parquet logs with pyarrow "
                          "(pip install pyarrow), or pandas with a parquet engine") from None
    return [{k: _plain(v) for k, v in row.items()} for row in pandas.read_parquet(file).to_dict("records")]


def _message_text(content: Any) -> str:
    if isinstance(content, list):  # content blocks
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _prompt_text(prompt: Any) -> str:
    """A logged prompt's text: a string as is; of a list of messages, the last user message."""
    if prompt is None or isinstance(prompt, str):
        return prompt or ""
    messages = [m for m in prompt if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    if users:
        return _message_text(users[-1].get("content"))
    return "\n".join(_message_text(m.get("content")) for m in messages)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _trl_row(row: dict, column: str, step: Any, have_dataset: bool):
    """A plain audit line of one logged completion (the gold answers found by the audit from
    its ``answers``, ``id``, ``question`` or prompt), or the reason it cannot be audited."""
    from .trl import completion_text

    reward = row.get(column)
    if reward is None or (isinstance(reward, float) and math.isnan(reward)):
        return None, (f"{column} is {'None' if reward is None else 'NaN'}: the reward function "
                      "paid nothing for this completion (TRL logs NaN where it returned None)")
    completion = row.get("completion")
    try:
        response = completion_text(completion if completion is not None else "")
    except TypeError as e:
        return None, str(e)
    out = {"response": response, "reward": reward, "prompt": _prompt_text(row.get("prompt"))}
    if step is not None:
        out["step"] = step
    rid, question, answers = (row.get(k) for k in GOLD_COLUMNS)
    if answers is not None and not (isinstance(answers, float) and math.isnan(answers)):
        out["answers"] = [str(a) for a in answers] if isinstance(answers, list) else str(answers)
    elif not have_dataset:
        return None, ("no gold answers: pass dataset= (the `rulegym generate` directory), or log "
                      "an `answers` column with log_extra")
    if rid is not None:
        out["id"] = str(rid)
    if isinstance(question, str):
        out["question"] = question
    return out, None


def audit_trl_completions(path, dataset=None, reward: Optional[str] = None,
                          tolerance: float = 1e-6) -> dict:
    """Audits the rewards TRL's ``GRPOTrainer`` logged (``GRPOConfig(log_completions=True)``:
    ``output_dir/completions/completions_{step:05d}.parquet``) against rulegym's exact reward.

    ``path`` is the output_dir, its ``completions/`` folder or one parquet file; the files are
    read in step order (pyarrow, else pandas). ``reward`` names the reward column to audit: TRL
    writes one per reward function (named by the function's ``__name__``; an environment's by its
    class name). Reward columns are the columns holding numbers that are neither TRL's own
    (``step``, ``prompt``, ``completion``, ``advantage``) nor a gold column (``id``, ``question``,
    ``answers``); ``log_extra`` columns of text are not, a numeric one is, so with several the
    column must be named.

    Each logged row is audited as a plain log line (:func:`audit_rewards`): the response is the
    completion's text (a string as is; a list of messages gives its last assistant message, the
    text ``rulegym.trl.f1_reward`` scores); the gold answers come from the row's ``answers``
    column, else its ``id`` or ``question`` looked up in ``dataset`` (a ``rulegym generate``
    directory), else the dataset question the prompt (its last user message) asks: the one
    that occurs in it and ends last, the longest first. A None or NaN reward (TRL's record of a
    reward function returning None) is an error of the report, not skipped.

    The report is :func:`audit_rewards`'s, its ``line`` numbers counting the logged rows of the
    files read, in step order (1-based), each example and error with the ``step`` and ``row`` (1-based
    in that step's file) it came from; plus ``reward_column``, ``steps`` (the steps read),
    ``repeated_steps`` (files skipped because they repeat the previous step's rows: TRL logs the
    same generation batch again when it is reused, ``num_iterations > 1``) and ``by_step``
    (``rollouts``, ``diverge``, ``overpaid`` of each step)."""
    if dataset is not None:
        dataset = Path(dataset)
        if dataset.name == "questions.jsonl" and dataset.is_file():
            dataset = dataset.parent
        if not (dataset / "questions.jsonl").is_file():
            raise FileNotFoundError(f"{dataset}: no questions.jsonl (give a `rulegym generate` directory)")
    tables = []
    for file in _trl_files(path):
        rows = _read_parquet(file)
        match = _TRL_FILE.search(file.name)
        step = rows[0].get("step") if rows and _is_number(rows[0].get("step")) else (
            int(match.group(1)) if match else None)
        tables.append((step, rows))

    columns: List[str] = []
    for _, rows in tables:
        for row in rows:
            columns.extend(k for k in row if k not in columns)
    candidates = [c for c in columns if c not in TRL_COLUMNS + GOLD_COLUMNS]
    rewards = [c for c in candidates
               if all(_is_number(r.get(c)) or r.get(c) is None for _, rows in tables for r in rows)
               and any(_is_number(r.get(c)) for _, rows in tables for r in rows)]
    if reward is None:
        if len(rewards) != 1:
            found = ", ".join(rewards) if rewards else "none"
            raise ValueError(f"{path}: name the reward column to audit with reward= "
                             f"(reward columns: {found})")
        reward = rewards[0]
    elif reward not in rewards:
        what = ("is TRL's own or a gold column" if reward in TRL_COLUMNS + GOLD_COLUMNS
                else "holds no numbers" if reward in columns else "is not a column")
        raise ValueError(f"{path}: {reward!r} {what}: not a reward column "
                         f"(reward columns: {', '.join(rewards) or 'none'})")

    lines, origins, errors, steps, repeated = [], [], [], [], []
    previous, n = None, 0
    for step, rows in tables:
        body = json.dumps([{k: v for k, v in r.items() if k != "step"} for r in rows], default=str)
        if previous is not None and body == previous:
            repeated.append(step)
            continue
        previous = body
        steps.append(step)
        for i, row in enumerate(rows, 1):
            n += 1
            line, problem = _trl_row(row, reward, step, dataset is not None)
            where = {"line": n, "step": step, "row": i}
            if problem is not None:
                errors.append({**where, "message": problem})
                continue
            lines.append(json.dumps(line))
            origins.append(where)

    report = audit_rewards(lines, dataset, tolerance)
    for cls in report["by_property"].values():
        for example in cls["examples"]:
            example.update(origins[example["line"] - 1])
    for error in report["errors"]:
        error.update(origins[error["line"] - 1])
    report["errors"] = sorted(report["errors"] + errors, key=lambda e: e["line"])
    report["reward_column"] = reward
    report["steps"] = steps
    report["repeated_steps"] = repeated
    counted = {s.pop("step"): s for s in report.get("by_step", [])}
    report["by_step"] = {step: counted.get(step, {"rollouts": 0, "diverge": 0, "overpaid": 0.0})
                         for step in steps}
    return report

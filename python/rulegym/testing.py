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
from dataclasses import dataclass
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
    does: ``rollouts`` are dicts (``{"id" or "question", "response", "reward"[, "answers"]}``,
    or verl's dump lines ``{"input", "output", "gts", "score"}``) or their JSON texts; the gold
    answers of an id or a question text come from ``dataset`` (a directory of
    ``rulegym generate``). Returns the report: ``rollouts``, ``agree``, ``diverge``,
    ``overpaid`` (reward paid beyond the exact one), ``by_property`` (divergences grouped by the
    property they break, with counts and examples) and ``errors`` (rollouts that could not be
    audited, by position, 1-based)."""
    import json

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

"""``rulegym-search-v1``: rulegym's search environment as a verifiers v1 taskset."""

import itertools
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List

import verifiers.v1 as vf

from rulegym import _rulegym
from rulegym.verifiers.tools import SearchState, SearchToolset

__all__ = ["RulegymSearchTaskset"]

PROMPT = (
    "Answer the question about a fictional universe of people. Use `search` to find passages, "
    "`get_article` to read a person's article, and `answer` (all answers, separated by commas) to "
    "give your final answer; then reply with the answer.\n\nQuestion: {question}"
)


class SearchData(vf.TaskData):
    """One question: its text, gold answers (the engine's) and the index its tools search."""

    question_id: str
    question: str
    answers: List[str]
    split: str
    index_path: str
    top_k: int = 3
    max_turns: int = 10


class SearchTask(vf.Task[SearchData, SearchState]):
    """A question; the reward is rulegym's exact set F1 of the ``answer`` call (0 without one).
    A task drawn from a curriculum reports its reward to it (``curriculum``, set by the taskset)."""

    curriculum: Any = None

    @property
    def key(self) -> str:
        return self.data.question_id

    @classmethod
    def toolsets(cls, config: Any) -> list:
        return []

    async def setup(self, trace: vf.Trace, runtime: Any) -> None:
        trace.state.index_path = self.data.index_path
        trace.state.top_k = self.data.top_k
        trace.state.max_turns = self.data.max_turns

    @vf.reward(weight=1.0)
    async def f1(self, trace: vf.Trace) -> float:
        answer = trace.state.answer
        reward = 0.0 if answer is None else exact_reward(answer, self.data.answers, self.data.question)
        if self.curriculum is not None:
            self.curriculum.report(reward)
        return reward

    @vf.metric
    async def turns(self, trace: vf.Trace) -> float:
        return float(trace.state.turns)

    @vf.metric
    async def answered(self, trace: vf.Trace) -> float:
        return float(trace.state.answer is not None)


def exact_reward(answer: str, answers: List[str], question: str = "") -> float:
    """The search environment's reward for ``answer`` as the turn that ends the episode."""
    env = _rulegym.SearchEnv(None, question, list(answers), None, None)
    env.reset()
    return float(env.step(f"<answer>{answer}</answer>")["reward"])


class RulegymSearchConfig(vf.TasksetConfig):
    """Where the questions come from, and the environment's limits."""

    #: A dataset directory written by ``rulegym generate`` (``""`` with ``infinite``).
    dataset: str = ""
    #: Its search index [default: ``DATASET/index.idx``].
    index: str = ""
    #: ``train``, ``val``, or ``""`` for both.
    split: str = "train"
    #: An endless stream of fresh universes (seeds ``seed``, ``seed+1``, ...) instead of a dataset.
    infinite: bool = False
    #: First seed of the stream.
    seed: int = 1
    #: Universe and question settings of the stream (``rulegym.generate_dataset``).
    universe: Dict[str, Any] = {"num_family_trees": 8, "max_family_tree_size": 10}
    questions: Dict[str, Any] = {"families": ["base", "hops"], "per_template": 2, "max_hops": 4}
    #: With ``infinite``: draw each question from a ``rulegym.Curriculum`` with this config
    #: (``{"seed": 7, "window": 8, ...}``: fresh universes at a level that follows the rewards
    #: the tasks report) instead of whole universes in seed order.
    curriculum: Dict[str, Any] = {}
    #: Where the stream's universes are written [default: a temporary directory].
    cache_dir: str = ""
    top_k: int = 3
    max_turns: int = 10
    tools: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class RulegymSearchTaskset(vf.Taskset[SearchTask, RulegymSearchConfig]):
    """Questions of a rulegym dataset (or of an endless stream of universes)."""

    def __init__(self, config: RulegymSearchConfig) -> None:
        super().__init__(config)
        self.INFINITE = bool(config.infinite)
        if not config.infinite and not config.dataset:
            raise ValueError("rulegym-search-v1: give `dataset` (a rulegym generate directory) or `infinite: true`")

    @classmethod
    def toolsets(cls, config: RulegymSearchConfig) -> list:
        return [SearchToolset(config.tools)]

    def _tasks(self, directory: Path, index: Path) -> Iterator[SearchTask]:
        if not index.is_file():
            raise FileNotFoundError(f"rulegym-search-v1: index {index} does not exist")
        split = self.config.split
        for line in (directory / "questions.jsonl").read_text().splitlines():
            q = json.loads(line)
            if split and q["split"] != split:
                continue
            data = SearchData(id=q["id"], question_id=q["id"], question=q["question"],
                              prompt=PROMPT.format(question=q["question"]), answers=q["answers"],
                              split=q["split"], index_path=str(index.resolve()),
                              top_k=self.config.top_k, max_turns=self.config.max_turns)
            yield SearchTask(data, self.config.task)

    def load(self) -> Iterator[SearchTask]:
        c = self.config
        if not c.infinite:
            directory = Path(c.dataset)
            yield from self._tasks(directory, Path(c.index) if c.index else directory / "index.idx")
            return
        root = Path(c.cache_dir or tempfile.mkdtemp(prefix="rulegym-stream-"))
        if c.curriculum:
            yield from self._curriculum_tasks(root)
            return
        for seed in itertools.count(c.seed):
            out = root / f"seed-{seed}"
            if not (out / "questions.jsonl").is_file():
                _rulegym.generate_dataset(str(out), {**c.universe, "seed": seed}, dict(c.questions))
            index = out / "index.idx"
            if not index.is_file():
                _rulegym.build_index(str(out / "articles.jsonl"), str(index))
            yield from self._tasks(out, index)

    def _curriculum_tasks(self, root: Path) -> Iterator[SearchTask]:
        """Endless draws of ``rulegym.Curriculum(config.curriculum)``; each draw's universe index
        is written once under ``root`` for the tool server, and each task reports its reward."""
        import rulegym

        self.curriculum = rulegym.Curriculum(dict(self.config.curriculum))
        root.mkdir(parents=True, exist_ok=True)
        for n in itertools.count():
            d = self.curriculum.draw()
            index = root / f"universe-{d['universe_seed']}.idx"
            if not index.is_file():
                d["index"].save(str(index))
            qid = f"curriculum-{n}-level{d['level']}"
            data = SearchData(id=qid, question_id=qid, question=d["question"],
                              prompt=PROMPT.format(question=d["question"]), answers=list(d["answers"]),
                              split="train", index_path=str(index.resolve()),
                              top_k=self.config.top_k, max_turns=self.config.max_turns)
            task = SearchTask(data, self.config.task)
            task.curriculum = self.curriculum
            yield task

"""Type stubs of the Rust extension module ``rulegym._rulegym``."""

from os import PathLike
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str
INVALID_ACTION: str
DEFAULT_PROMPT: str

_Path = Union[str, PathLike[str]]
Message = Dict[str, str]

class RulegymError(ValueError):
    """An error reported by rulegym's Rust core (the message is the Rust error's)."""

class Index:
    """A search index file (``rulegym index``), loaded once per path and process; thread-safe."""

    def __init__(self, path: _Path) -> None: ...
    def search(self, queries: Sequence[str], k: int = 3) -> List[List[Dict[str, Any]]]:
        """Top-``k`` ``{"id", "contents", "score"}`` per query, best first."""
    def article(self, title: str) -> Optional[Dict[str, str]]:
        """The document titled ``title`` (exactly, else ignoring case): ``{"id", "contents"}``."""
    def __len__(self) -> int: ...
    def save(self, path: _Path) -> None:
        """Writes the index to ``path`` atomically (``Index(path)`` loads it)."""

class SearchEnv:
    """One search episode (Search-R1 protocol, set-F1 reward); usable from any thread. With
    ``index=None`` a search returns no passages (scoring a single turn needs no corpus)."""

    def __init__(
        self,
        index: Union[Index, _Path, None],
        question: str,
        answers: Sequence[str],
        gold_docs: Optional[Sequence[str]] = None,
        config: Optional[Dict[str, Any]] = None,
    ) -> None: ...
    def reset(self) -> List[Message]:
        """Starts the episode; returns the prompt messages."""
    def step(self, action: str) -> Dict[str, Any]:
        """``{"observations", "reward", "done", "metadata", "env_spans"}``."""
    def step_reward(self, action: str) -> float:
        """A step returning only the reward (overhead measurements)."""
    @property
    def max_turns(self) -> int: ...

class RubricScorer:
    """Scores tool-use trajectories against a task's executable rubric (one warm engine)."""

    def __init__(self, variant: str = "paper", item_inferences: int = 200000, max_rubrics: int = 1024) -> None: ...
    def score(self, task: Union[Dict[str, Any], str], trajectory: Dict[str, Any]) -> Dict[str, Any]:
        """``{"reward", "variant", "forbidden_violated", "subgoal_fraction",
        "interaction_fraction", "items"}``."""

class Simulation:
    """The simulated side of tool-use episodes: the simulator LLM (tools the task's mapping
    lacks, the LLM user), one mapping per task shared by every ToolEnv built with it, and the
    record of the run (``dir/mappings/<id>.json``, ``dir/llm-cache/``)."""

    def __init__(
        self,
        config: Optional[Dict[str, Any]] = None,
        llm: Optional[Callable[[List[Message]], str]] = None,
    ) -> None: ...
    @staticmethod
    def shared(config: Optional[Dict[str, Any]] = None) -> "Simulation":
        """The process-wide simulation of ``config`` (one per distinct config)."""
    @property
    def config(self) -> Dict[str, Any]: ...
    def mapping(self, task_id: str) -> List[Dict[str, Any]]:
        """The task's recorded mapping entries (``tool``, ``args``, ``response``, ``same_as``?)."""

class ToolEnv:
    """One tool-use episode (state tools, simulated mapping tools, simulated user, rubric
    reward)."""

    def __init__(
        self,
        task: Union[Dict[str, Any], str],
        scorer: RubricScorer,
        protocol: str = "hermes",
        max_turns: int = 16,
        simulation: Optional[Union[Simulation, Dict[str, Any]]] = None,
    ) -> None: ...
    def reset(self) -> List[Message]: ...
    def step(self, action: str) -> Dict[str, Any]:
        """``{"observations", "reward", "done", "metadata", "env_spans"}``."""
    def step_message(self, message: Dict[str, Any]) -> Dict[str, Any]:
        """A step from an OpenAI assistant message (``tool_calls``)."""
    def call_tool(self, name: str, arguments: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """A step that makes one tool call (id ``call_<n>`` in the episode's order): the turn a
        task ``ToolSession`` plays for a call."""
    def request_tools(self) -> List[Dict[str, Any]]: ...
    def result(self) -> Optional[Dict[str, Any]]:
        """The rubric result once the episode is over."""
    def score(self) -> Dict[str, Any]:
        """The rubric result of the trajectory so far (the final one once the episode is over)."""
    @property
    def done(self) -> bool:
        """Whether the episode is over."""

def generate_universe(config: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``{"config", "people", "articles", "facts"}`` of a generated universe."""
def generate_questions(
    universe: Optional[Dict[str, Any]] = None, questions: Optional[Dict[str, Any]] = None
) -> List[Dict[str, Any]]:
    """Engine-verified questions (``questions.jsonl`` records)."""
def generate_questions_jsonl(
    universe: Optional[Dict[str, Any]] = None,
    questions: Optional[Dict[str, Any]] = None,
    shard: int = 0,
    num_shards: int = 1,
) -> bytes:
    """The exact ``questions.jsonl`` bytes, or shard ``shard`` of ``num_shards`` of them
    (contiguous parts: concatenated in shard order they are the unsharded bytes)."""
def generate_dataset(
    out: _Path,
    universe: Optional[Dict[str, Any]] = None,
    questions: Optional[Dict[str, Any]] = None,
    force: bool = False,
) -> int:
    """Writes a dataset directory like ``rulegym generate``; returns the question count."""
def generate_datasets(
    out: _Path,
    seeds: str,
    universe: Optional[Dict[str, Any]] = None,
    questions: Optional[Dict[str, Any]] = None,
    force: bool = False,
    workers: int = 0,
    engine_budget_mib: int = 0,
) -> List[Dict[str, Any]]:
    """One dataset directory per seed of ``seeds`` ("A..B" or "A..=B") under ``out``
    (``out/seed-S``), each identical to :func:`generate_dataset` of that seed, like
    ``rulegym generate --seeds``; one dict per universe (seed, dir, people, questions, seconds)."""
EXAMPLE_TASK: str
"""A tool-use task as JSON (the suite's trip task: search_flights, book_flight, get_booking,
refund_booking), for trying ToolEnv without a checkout."""
def audit_rewards(rollouts: Sequence[str], dataset: Optional[_Path] = None, tolerance: float = 1e-6) -> Dict[str, Any]:
    """A log's rewards beside rulegym's exact reward (``reward-check --audit``'s report)."""
    ...
def run_cli(argv: Sequence[str]) -> int:
    """Runs the ``rulegym`` command line (argv[0] is the program name); its exit status."""
    ...
def build_index(corpus: _Path, out: _Path) -> int:
    """Builds a flat built-in-encoder index over a Search-R1 JSONL corpus; returns its size."""
def oracle(dataset: _Path, index: _Path, top_k: int = 3) -> List[Dict[str, Any]]:
    """Proof-derived oracle trajectories replayed in the search environment."""
def bench_rust_steps(env: SearchEnv, actions: Sequence[str], steps: int) -> float:
    """Nanoseconds per Rust-only step (no Python objects built)."""
def score(
    prediction: str, answers: Sequence[str], mode: str = "squad", extract: bool = True
) -> Dict[str, float]:
    """``{"f1", "em", "precision", "recall"}`` of a prediction."""
def last_answer(turns: Sequence[str]) -> Optional[str]:
    """The last complete ``<answer>`` of the turns."""
def normalize_answer(text: str) -> str:
    """SQuAD normalisation."""
def grpo_bytes_copied() -> int:
    """Bytes the GRPO bindings copied from input arrays so far."""
def group_advantages(
    rewards: npt.NDArray[np.float32],
    group_size: int,
    out: npt.NDArray[np.float32],
    config: Optional[Dict[str, Any]] = None,
) -> None:
    """Group-normalised advantages written into ``out``."""
def policy_loss(
    logp_old: npt.NDArray[np.float32],
    logp_new: npt.NDArray[np.float32],
    mask: Union[npt.NDArray[np.uint8], npt.NDArray[np.bool_]],
    offsets: Union[npt.NDArray[np.uint64], npt.NDArray[np.int64]],
    advantages: npt.NDArray[np.float32],
    grad: npt.NDArray[np.float32],
    config: Optional[Dict[str, Any]] = None,
) -> Dict[str, float]:
    """Ragged-batch loss and metrics; the gradient is written into ``grad``."""
def policy_loss_padded(
    logp_old: npt.NDArray[np.float32],
    logp_new: npt.NDArray[np.float32],
    mask: npt.NDArray[np.uint8],
    advantages: npt.NDArray[np.float32],
    grad: npt.NDArray[np.float32],
    config: Optional[Dict[str, Any]] = None,
) -> Dict[str, float]:
    """Padded-batch (rows x cols) loss and metrics; the gradient is written into ``grad``."""

class ToolCallError(RulegymError):
    """A tool call that was not carried out; ``kind`` is OpenEnv's error type."""

    kind: str

class World:
    """What a server serves: a dataset's questions or a file of tool-use tasks."""

    @staticmethod
    def search(
        dataset: Union[str, PathLike],
        index: Optional[Union[str, PathLike]] = None,
        config: Optional[Dict[str, Any]] = None,
        name: str = "rulegym_search",
    ) -> "World": ...
    @staticmethod
    def tasks(
        file: Union[str, PathLike],
        simulation: Optional[Dict[str, Any]] = None,
        max_turns: int = 16,
        name: str = "rulegym_tools",
    ) -> "World": ...
    def session(self, request: Optional[Dict[str, Any]] = None) -> "ToolSession": ...
    @property
    def name(self) -> str: ...
    def description(self) -> str: ...
    def splits(self) -> List[str]: ...
    def __len__(self) -> int: ...

class ToolSession:
    """One episode driven by tool calls (a scored search question or a tool-use task): the
    session MCP and OpenEnv serve. Faults (unknown tool, ended episode, bad arguments) raise
    ``RulegymError`` and take no turn."""

    @staticmethod
    def search(
        index: Union[Index, str, PathLike],
        question: str,
        answers: List[str],
        config: Optional[Dict[str, Any]] = None,
    ) -> "ToolSession": ...
    @staticmethod
    def task(
        task: Union[Dict[str, Any], str],
        scorer: RubricScorer,
        max_turns: int = 16,
        simulation: Optional[Union[Simulation, Dict[str, Any]]] = None,
    ) -> "ToolSession": ...
    def tools(self) -> List[Dict[str, Any]]:
        """``[{"name", "description", "input_schema", "returns"}]``."""
    def call(self, name: str, arguments: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """``{"text", "data", "is_error", "done", "reward"}``."""
    def instructions(self) -> str: ...
    def opening(self) -> Dict[str, Any]: ...
    @property
    def done(self) -> bool: ...
    @property
    def reward(self) -> float: ...
    @property
    def turns(self) -> int: ...
    @property
    def kind(self) -> str:
        """``"search"``, ``"browse"`` or ``"task"``."""
    @property
    def id(self) -> Optional[str]: ...

class CaseSource:
    """A universe's questions and wrong-answer pools: the source of reward-check cases."""
    @staticmethod
    def generate(seed: int = 1, trees: int = 30) -> CaseSource: ...
    @staticmethod
    def load(dir: _Path) -> CaseSource: ...
    def questions(self) -> List[Dict[str, Any]]: ...
    def names(self) -> List[str]: ...
    def case(
        self, property: int, index: int, question: Optional[int] = None, seed: int = 0
    ) -> Optional[Case]: ...
class Case:
    """A response, its gold answers, the property it tests and rulegym's exact reward for it."""
    property: str
    question: str
    answers: List[str]
    response: str
    base_response: Optional[str]
    expected: float
    def expectation(self, base_got: Optional[float] = None) -> str: ...
    def holds(self, got: float, base_got: Optional[float] = None) -> bool: ...
def reward_check(
    batch_fn: Any,
    source: Optional[CaseSource] = None,
    seed: int = 1,
    cases: int = 1200,
    batch: int = 2000,
    trees: int = 30,
) -> Dict[str, Any]:
    """Every reward-check property on a batch reward function; the report dict."""
def reward_properties() -> List[str]:
    """The generated properties' names."""
class ToolCaseSource:
    """Rule-generated tool-use tasks: the source of tool-use reward-check trajectories."""
    @staticmethod
    def generate(seed: int = 1, trees: int = 30, tasks: int = 24) -> ToolCaseSource: ...
    def tasks(self) -> List[Dict[str, Any]]: ...
    def case(self, property: int, task: int) -> Optional[ToolCase]: ...
    def exact_reward(self, task: Dict[str, Any], messages: List[Dict[str, Any]]) -> float: ...
class ToolCase:
    """A tool-use trajectory and rulegym's rubric reward for it."""
    property: str
    task: Dict[str, Any]
    messages: List[Dict[str, Any]]
    expected: float
    def holds(self, got: float) -> bool: ...
def reward_check_tools(
    batch_fn: Any,
    source: Optional[ToolCaseSource] = None,
    seed: int = 1,
    cases: int = 200,
    trees: int = 30,
) -> Dict[str, Any]:
    """The tool-use reward-check properties on a batch rubric reward; the report dict."""
def tool_reward_properties() -> List[str]:
    """The tool-use properties' names."""

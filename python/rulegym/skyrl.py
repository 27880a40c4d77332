"""SkyRL-gym adapter: :class:`SearchEnv` is a ``skyrl_gym`` ``BaseTextEnv`` over rulegym's Rust
search environment (Search-R1 protocol, set-F1 reward against engine-verified answers).

Usage inside a SkyRL training entry point::

    import rulegym.skyrl
    rulegym.skyrl.register()          # registers "rulegym-search-v1" and "rulegym-tool-v1"

Dataset rows (``env_class: rulegym-search-v1``) carry ``reward_spec: {"ground_truth": [answers]}``
(a list, a comma-separated string, or Search-R1's ``{"target": [...]}``), and optionally
``extra_info: {"question": ..., "gold_docs": [...], "index_path": ...}`` and ``max_turns``.

Where the index comes from: SkyRL's generator builds each environment with
``skyrl_gym.make(env_class, env_config=getattr(cfg.environment.skyrl_gym, env_class, {}),
extras=<the row's other columns>)``, and SkyRL's typed config (``SkyRLGymConfig``) accepts no
key it does not declare, so no ``environment.skyrl_gym.<id>`` setting can reach a rulegym
environment. The row carries it instead: ``rulegym export --dataset D --format skyrl`` records
the absolute path of the dataset's index (or ``--index``) in every row's
``extra_info.index_path``. An ``env_config`` passed directly (``skyrl_gym.make(...,
env_config={"index_path": ...})``, outside SkyRL's trainer) wins over the row; it may also set
``top_k``, ``max_turns``, ``end_on_invalid``, ``score_mode``, ``max_action_tokens``,
``max_context_tokens``. Rows exported with an environment preset or a prompt file
(``rulegym export --preset phantomenvs``) carry the whole environment configuration as JSON in
``extra_info.env_config`` (the termination rule, turn cap and token budgets travel with the
prompt); ``env_config`` keys win over it.

The tool-use environment is :class:`ToolEnv` (``rulegym-tool-v1``): the task comes with the row.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from rulegym import _rulegym
from rulegym._simulation import shared_scorer, simulation_dict

#: Environment ids registered by :func:`register` (the version bumps when outputs change).
SEARCH_ENV_ID = "rulegym-search-v1"


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    """Reads ``key`` from a dict, an OmegaConf ``DictConfig`` or an attribute-style config."""
    if cfg is None:
        return default
    if isinstance(cfg, Mapping):
        return cfg.get(key, default)
    try:
        return cfg.get(key, default)  # DictConfig
    except AttributeError:
        return getattr(cfg, key, default)


def ground_truth_answers(ground_truth: Any) -> List[str]:
    """Normalises a dataset row's ground truth to a list of answer strings: a list (or NumPy
    array), a comma-separated string, or a dict with ``target`` (Search-R1) or ``answers``."""
    if isinstance(ground_truth, Mapping):
        for key in ("target", "answers", "ground_truth"):
            if key in ground_truth:
                return ground_truth_answers(ground_truth[key])
        raise ValueError(f"ground_truth dict has none of target/answers: {list(ground_truth)}")
    if isinstance(ground_truth, str):
        return [a.strip() for a in ground_truth.split(",") if a.strip()]
    if ground_truth is None:
        raise ValueError("ground_truth is required")
    return [str(a) for a in ground_truth]


class SearchEnv(BaseTextEnv):
    """One search episode per instance (SkyRL builds one per trajectory; construction is cheap:
    the index is loaded once per process and shared). ``step`` releases the GIL while Rust
    retrieves and scores, so SkyRL's thread pool runs steps in parallel."""

    def __init__(self, env_config: Any = None, extras: Optional[Dict[str, Any]] = None):
        super().__init__()
        extras = extras or {}
        reward_spec = extras.get("reward_spec")
        if not reward_spec or "ground_truth" not in reward_spec:
            raise ValueError("extras must carry reward_spec.ground_truth")
        extra_info = extras.get("extra_info") or {}
        index_path = _get(env_config, "index_path") or _get(extra_info, "index_path")
        if not index_path:
            raise ValueError(
                "no rulegym index: rows from `rulegym export --dataset D --format skyrl` carry "
                "extra_info.index_path (pass --index when the dataset has no index.idx), or pass "
                "env_config={'index_path': ...}"
            )
        row_config = _get(extra_info, "env_config")
        config: Dict[str, Any] = json.loads(row_config) if row_config else {}
        for key in ("top_k", "max_turns", "end_on_invalid", "score_mode", "prompt", "system_prompt",
                    "max_action_tokens", "max_context_tokens"):
            value = _get(env_config, key)
            if value is not None:
                config[key] = value
        if extras.get("max_turns") is not None:
            config["max_turns"] = int(extras["max_turns"])
        self.answers = ground_truth_answers(reward_spec["ground_truth"])
        self._env = _rulegym.SearchEnv(
            str(index_path),
            str(_get(extra_info, "question", "") or ""),
            self.answers,
            [str(d) for d in (_get(extra_info, "gold_docs") or [])],
            config or None,
        )
        self.max_turns = self._env.max_turns
        self._last_metadata: Dict[str, Any] = {}
        self._reward = 0.0

    def init(self, prompt: List[Dict[str, str]]) -> Tuple[List[Dict[str, str]], Dict[str, Any]]:
        """Returns the dataset row's prompt unchanged (or, when empty, rulegym's Search-R1
        prompt for ``extra_info.question``)."""
        messages = self._env.reset()
        return (prompt if prompt else messages), {}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Applies the model's turn: a search returns an ``<information>`` observation, an
        answer ends the episode with its set-F1 reward, anything else gets Search-R1's invalid
        action message; the turn cap ends the episode with reward 0."""
        self.turns += 1
        out = self._env.step(action)
        self._last_metadata = out["metadata"]
        if out["done"]:
            self._reward = out["reward"]
        return BaseTextEnvStepOutput(
            observations=out["observations"],
            reward=out["reward"],
            done=out["done"],
            metadata=out["metadata"],
            postprocessed_action=None,
        )

    def get_metrics(self) -> Dict[str, Any]:
        """Per-episode metrics: turns, searches, final reward."""
        return {
            "turns": self.turns,
            "searches": self._last_metadata.get("searches", 0),
            "reward": self._reward,
        }

    def close(self) -> None:
        """Nothing to release (the shared index stays loaded for the next episode)."""
        self._env = None


def register() -> List[str]:
    """Registers rulegym's environments with ``skyrl_gym`` (call it in the training entry
    point, before the trainer builds environments); returns the ids registered."""
    import skyrl_gym

    if SEARCH_ENV_ID not in skyrl_gym.registry:
        skyrl_gym.register(id=SEARCH_ENV_ID, entry_point="rulegym.skyrl:SearchEnv")
    return [SEARCH_ENV_ID, register_tool_env()]


#: Id of the tool-use environment registered by :func:`register_tool_env`.
TOOL_ENV_ID = "rulegym-tool-v1"


class ToolEnv(BaseTextEnv):
    """A tool-use episode (rulegym's Rust ToolEnv: executed state tools, simulated mapping
    tools, simulated user, executable rubric reward at the end). The task comes from
    ``extras["extra_info"]["task"]`` (or ``extras["task"]``), a task dict or its JSON text;
    ``env_config`` may set ``protocol`` (``hermes`` default), ``max_turns`` and ``simulation``
    (a :class:`rulegym.Simulation` config dict: the simulator LLM's ``endpoint`` and ``model``,
    ``user`` ``rule`` or ``llm``, ``dir`` where the world is recorded; every rollout of a task
    in this process shares the task's mapping). Default: no LLM, the rule user."""

    def __init__(self, env_config: Any = None, extras: Optional[Dict[str, Any]] = None):
        super().__init__()
        extras = extras or {}
        task = _get(extras.get("extra_info") or {}, "task") or extras.get("task")
        if task is None:
            raise ValueError("extras must carry the task (extra_info.task or task)")
        max_turns = extras.get("max_turns") or _get(env_config, "max_turns") or 16
        self._env = _rulegym.ToolEnv(
            task,
            shared_scorer(),
            str(_get(env_config, "protocol", "hermes")),
            int(max_turns),
            simulation_dict(_get(env_config, "simulation")),
        )
        self.max_turns = int(max_turns)

    def init(self, prompt):
        messages = self._env.reset()
        return (prompt if prompt else messages), {}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        out = self._env.step(action)
        return BaseTextEnvStepOutput(
            observations=out["observations"], reward=out["reward"], done=out["done"],
            metadata=out["metadata"], postprocessed_action=None,
        )

    def close(self) -> None:
        self._env = None


def register_tool_env() -> str:
    """Registers :class:`ToolEnv` with ``skyrl_gym`` under :data:`TOOL_ENV_ID`."""
    import skyrl_gym

    if TOOL_ENV_ID not in skyrl_gym.registry:
        skyrl_gym.register(id=TOOL_ENV_ID, entry_point="rulegym.skyrl:ToolEnv")
    return TOOL_ENV_ID

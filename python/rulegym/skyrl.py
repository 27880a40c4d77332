"""SkyRL-gym adapter: :class:`SearchEnv` is a ``skyrl_gym`` ``BaseTextEnv`` over rulegym's Rust
search environment (Search-R1 protocol, set-F1 reward against engine-verified answers).

Usage inside a SkyRL training entry point::

    import rulegym.skyrl
    rulegym.skyrl.register()          # registers "rulegym-search-v1"

Dataset rows (``env_class: rulegym-search-v1``) carry ``reward_spec: {"ground_truth": [answers]}``
(a list, a comma-separated string, or Search-R1's ``{"target": [...]}``), and optionally
``extra_info: {"question": ..., "gold_docs": [...]}`` and ``max_turns``. The environment config
(``env_config``, e.g. ``environment.skyrl_gym.rulegym``) names the index file: ``index_path``,
plus optional ``top_k``, ``max_turns``, ``end_on_invalid``, ``score_mode``.

Tool-use environment: not exposed yet (the Rust tool-use environment is not in this build).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from . import _rulegym

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
        index_path = _get(env_config, "index_path")
        if not index_path:
            raise ValueError("env_config.index_path (a rulegym index file) is required")
        extra_info = extras.get("extra_info") or {}
        config: Dict[str, Any] = {}
        for key in ("top_k", "max_turns", "end_on_invalid", "score_mode", "prompt", "system_prompt"):
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

    ids = []
    if SEARCH_ENV_ID not in skyrl_gym.registry:
        skyrl_gym.register(id=SEARCH_ENV_ID, entry_point="rulegym.skyrl:SearchEnv")
    ids.append(SEARCH_ENV_ID)
    return ids

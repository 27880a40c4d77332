"""The shipped training recipes load in each trainer's own config classes (no GPU needed):

* ``configs/skyrl/phantomenvs_grpo.yaml`` with SkyRL's strict typed config
  (``SkyRLTrainConfig.from_dict_config``: unknown keys are errors) and SkyRL's batch-size checks;
* ``configs/verl/synthagent_grpo.yaml`` through Hydra exactly as ``verl.trainer.main_ppo`` composes
  it (``--config-path configs/verl --config-name synthagent_grpo``), and merged in struct mode onto
  verl's generated trainer config (unknown keys are errors), then turned into verl's own
  dataclasses (``FSDPActorConfig``, ``RolloutConfig``, ``AlgoConfig``).

Each test checks the papers' numbers survive the trainer's own parsing. The tests skip (loudly)
only when the trainer is not installed (scripts/test-requirements.txt installs both).
"""

from pathlib import Path

import pytest
from conftest import skip_loudly

REPO = Path(__file__).resolve().parents[2]
SKYRL_RECIPE = REPO / "configs" / "skyrl" / "phantomenvs_grpo.yaml"
VERL_RECIPE = REPO / "configs" / "verl" / "synthagent_grpo.yaml"


def need(module: str):
    try:
        return __import__(module, fromlist=["_"])
    except Exception as e:  # ImportError or a broken dependency
        skip_loudly(f"{module} is not importable here ({type(e).__name__}: {e})")


def test_skyrl_recipe_loads_with_skyrl_typed_config():
    need("skyrl.train.config.config")
    from omegaconf import OmegaConf
    from skyrl.train.config.config import SkyRLTrainConfig
    from skyrl.train.utils.utils import validate_batch_sizes

    cfg = SkyRLTrainConfig.from_dict_config(OmegaConf.load(SKYRL_RECIPE))
    t, g, a = cfg.trainer, cfg.generator, cfg.trainer.algorithm
    opt = t.policy.optimizer_config
    # PhantomEnvironments: GRPO, 8 rollouts per prompt, no KL, token-level loss, ratio cap 2.0.
    assert a.advantage_estimator == "grpo"
    assert g.n_samples_per_prompt == 8
    assert a.use_kl_loss is False and a.use_kl_in_reward is False
    assert a.loss_reduction == "token_mean" and a.policy_loss_type == "regular"
    assert a.clip_ratio_c == 2.0
    # AdamW lr 1e-6, grad clip 1.0, 10% warm-up of one epoch of ~55K questions at 256 per step.
    assert opt.lr == 1e-6 and opt.max_grad_norm == 1.0
    assert opt.num_warmup_steps == round(0.1 * (55_000 // 256))
    assert t.train_batch_size == 256 and t.epochs == 1
    # Turn cap 10 in training, ~500 tokens per turn, 8,192-token prompt budget.
    assert g.max_turns == 10
    assert g.sampling_params.max_generate_length == 500
    assert g.max_input_length == 8192 and t.max_prompt_length == 8192
    assert list(g.sampling_params.stop) == ["</search>", "</answer>"]
    assert cfg.environment.env_class == "rulegym-search-v1"
    # SkyRL's own batch-size validation (8 GPUs, as a typical node).
    t.placement.policy_num_gpus_per_node = 8
    validate_batch_sizes(cfg)


def test_skyrl_recipe_typo_is_rejected():
    """The strictness the test above relies on: a misspelt key is an error, not a default."""
    need("skyrl.train.config.config")
    from omegaconf import OmegaConf
    from skyrl.train.config.config import SkyRLTrainConfig

    raw = OmegaConf.load(SKYRL_RECIPE)
    raw.trainer.algorithm["clip_ratio_cap"] = 2.0
    with pytest.raises(Exception) as err:
        SkyRLTrainConfig.from_dict_config(raw)
    assert "clip_ratio_cap" in str(err.value)


def check_verl(cfg):
    from verl.trainer.config import AlgoConfig
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import FSDPActorConfig, RolloutConfig

    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    algo = omega_conf_to_dataclass(cfg.algorithm)
    assert isinstance(actor, FSDPActorConfig)
    assert isinstance(rollout, RolloutConfig)
    assert isinstance(algo, AlgoConfig)
    # SynthAgent: GRPO, batch 128, mini-batch 16, 16 rollouts, 13K response tokens, 2 epochs,
    # clip 0.2 / 0.28, up to 16 turns.
    assert algo.adv_estimator == "grpo"
    assert cfg.data.train_batch_size == 128
    assert actor.ppo_mini_batch_size == 16
    assert rollout.n == 16
    assert rollout.response_length == 13000 and cfg.data.max_response_length == 13000
    assert cfg.trainer.total_epochs == 2
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.28)
    assert rollout.multi_turn.enable and rollout.multi_turn.max_assistant_turns == 16
    assert rollout.multi_turn.format == "hermes"
    assert rollout.agent.default_agent_loop == "rulegym_tool_agent"


def test_verl_recipe_composes_like_main_ppo():
    need("verl.trainer.config")
    need("hydra")
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(VERL_RECIPE.parent), version_base=None):
        cfg = compose(config_name=VERL_RECIPE.stem)
    GlobalHydra.instance().clear()
    check_verl(cfg)


def test_verl_recipe_merges_strictly_onto_verls_generated_config():
    verl = need("verl")
    need("verl.trainer.config")
    import os

    from omegaconf import OmegaConf

    base = OmegaConf.load(os.path.join(os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml"))
    recipe = OmegaConf.load(VERL_RECIPE)
    for hydra_only in ("hydra", "defaults"):
        recipe.pop(hydra_only)
    OmegaConf.set_struct(base, True)
    cfg = OmegaConf.merge(base, recipe)  # a key verl does not know raises here
    check_verl(cfg)
    typo = OmegaConf.create({"actor_rollout_ref": {"actor": {"clip_ratio_hi": 0.28}}})
    with pytest.raises(Exception) as err:
        OmegaConf.merge(base, typo)
    assert "clip_ratio_hi" in str(err.value)

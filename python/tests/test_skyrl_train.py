"""rulegym's SkyRL environments in SkyRL's own trainer code (the `skyrl` 0.4.0 wheel from PyPI:
``skyrl.train``), not only through ``skyrl_gym.make``.

* SkyRL's typed config (``SkyRLGymConfig``) rejects an ``environment.skyrl_gym.rulegym-search-v1``
  section: no config key can carry rulegym's index path. The exported rows carry it instead
  (``extra_info.index_path``).
* SkyRL's dataset class (``PromptDataset``) reads the exported parquet, and SkyRL's generator
  (``SkyRLGymGenerator.agent_loop``) builds each environment exactly as in training
  (``skyrl_gym.make(env_class, env_config=getattr(cfg, env_class, {}), extras=row)``) and runs
  the episode: the proof-derived oracle gets reward 1, garbage 0.

STAND-INS, only for what needs a GPU or a model download: the inference engine client
(``generate`` returns the tokens of a scripted policy's turn) and the model's tokenizer
(chat_tokenizer.py, built locally).
"""

import asyncio

import pytest

import rulegym
from chat_tokenizer import make_tokenizer
from conftest import import_or_skip, run_cli


@pytest.fixture(scope="module")
def skyrl_config():
    """SkyRL's typed config module."""
    import_or_skip("skyrl.train.config.config")


@pytest.fixture(scope="module")
def skyrl_train():
    """SkyRL's generator. skyrl 0.4.0 requires Python >= 3.12 (pip does not install it on
    3.11): the test is then skipped with the import error, loudly (a failure under CI)."""
    import_or_skip("skyrl.train.generators.skyrl_gym_generator")
    import rulegym.skyrl as rs

    rs.register()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    import_or_skip("transformers")
    return make_tokenizer(tmp_path_factory.mktemp("tokenizer"))


class ScriptedEngine:
    """STAND-IN for SkyRL's inference engine client (the GPU part)."""

    def __init__(self, tokenizer, turns):
        self.tokenizer, self.turns = tokenizer, list(turns)

    async def generate(self, engine_input, model=None):
        text = self.turns.pop(0) if self.turns else "I give up."
        ids = self.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
        return {"responses": [text], "response_ids": [ids], "stop_reasons": ["stop"],
                "response_logprobs": None, "prompt_logprobs": None, "rollout_expert_indices": None,
                "rollout_sample_support": None}

    async def finish_session(self, session_id):
        """Session-aware routing has nothing to release here."""


def total(reward):
    """The episode's reward: SkyRL returns a float, or per-token rewards (the last one set)."""
    return float(reward) if isinstance(reward, (int, float)) else float(sum(reward))


def test_typed_config_rejects_an_env_section_for_rulegym(skyrl_config):
    from omegaconf import OmegaConf
    from skyrl.train.config.config import SkyRLGymConfig

    with pytest.raises(Exception) as err:
        SkyRLGymConfig.from_dict_config(OmegaConf.create({"rulegym-search-v1": {"index_path": "x"}}))
    assert "rulegym-search-v1" in str(err.value)
    cfg = SkyRLGymConfig.from_dict_config(OmegaConf.create({"max_env_workers": 0}))
    assert getattr(cfg, "rulegym-search-v1", {}) == {}  # what the generator passes as env_config


def test_exported_rows_run_in_skyrl_generator(skyrl_train, dataset, cli, tokenizer, tmp_path):
    from omegaconf import OmegaConf
    from skyrl.train.config.config import GeneratorConfig, SkyRLGymConfig
    from skyrl.train.dataset.dataset import PromptDataset
    from skyrl.train.generators.skyrl_gym_generator import SkyRLGymGenerator

    out = tmp_path / "skyrl.parquet"
    # As the README says: the dataset's own index is recorded in every row.
    run_cli(cli, "export", "--dataset", str(dataset["dir"]), "--index", str(dataset["index"]),
            "--format", "skyrl", "--out", str(out))
    rows = PromptDataset([str(out)], tokenizer, max_prompt_length=100000, num_workers=1)
    trajectories = {t["id"]: t for t in rulegym.oracle(str(dataset["dir"]), str(dataset["index"]))}
    skyrl_gym_cfg = SkyRLGymConfig.from_dict_config(OmegaConf.create({"max_env_workers": 0}))
    generator_cfg = GeneratorConfig(max_turns=12)

    def episode(item, turns):
        prompt, env_class, env_extras, _uid = item
        gen = SkyRLGymGenerator(generator_cfg, skyrl_gym_cfg, ScriptedEngine(tokenizer, turns), tokenizer)
        return asyncio.run(gen.agent_loop(prompt, env_class, env_extras, max_tokens=200000,
                                          max_input_length=200000))

    n = min(len(rows), 10)
    for i in range(n):
        item = rows[i]
        prompt, env_class, env_extras, _ = item
        assert env_class == "rulegym-search-v1"
        assert env_extras["extra_info"]["index_path"] == str(dataset["index"].resolve())
        t = trajectories[env_extras["extra_info"]["id"]]
        actions = [m["content"] for m in t["messages"] if m["role"] == "assistant"]
        result = episode(item, actions)
        assert total(result.reward) == 1.0, (t["id"], result.reward, result.stop_reason)
        garbage = episode(rows[i], ["hello", "<answer> nobody at all </answer>"])
        assert total(garbage.reward) == 0.0

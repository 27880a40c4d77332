"""rulegym.trl over the Rust search session and the curriculum: the tools' docstrings render
back (through transformers' `get_json_schema`, what TRL puts in the chat template) to exactly
the schemas rulegym defines (`_rulegym.search_tools()`); `curriculum_environment` gives every
GRPO group one question and reports each episode's reward once; and TRL 1.16's own
GRPOTrainer trains on it without dataset rows (the environment owns the data), the policy
being the scripted tiny model of test_trl.py."""

import json

import pytest

import rulegym
from rulegym import _rulegym
from conftest import import_or_skip, skip_loudly

NEW_API = ("ToolSession", "search_tools", "Curriculum", "SEARCH_TOOL_SYSTEM_PROMPT")


@pytest.fixture(autouse=True)
def _new_api():
    missing = [name for name in NEW_API if not hasattr(_rulegym, name)]
    if missing:
        skip_loudly(f"the installed rulegym wheel lacks {', '.join(missing)} (rebuild it with maturin)")


def small_curriculum(**over):
    """A curriculum of small universes (4 trees, one-hop questions): fast to draw from."""
    config = {"seed": 3, "ladder": [{"families": ["hops"], "min_hops": 1, "max_hops": 1, "num_family_trees": 4}],
              "window": 4, "questions_per_universe": 8}
    config.update(over)
    return rulegym.Curriculum(config)


class Recording:
    """A curriculum that records what passes through it (the binding's class is frozen)."""

    def __init__(self, inner):
        self.inner = inner
        self.draws = []
        self.reports = []

    @property
    def level(self):
        return self.inner.level

    def draw(self):
        d = self.inner.draw()
        self.draws.append(d)
        return d

    def report(self, reward):
        self.reports.append(reward)
        return self.inner.report(reward)


def test_tool_docstrings_render_rusts_schemas():
    from transformers.utils import get_json_schema

    from rulegym.trl import SearchEnvironment, curriculum_environment, search_tool_schemas

    schemas = _rulegym.search_tools()
    assert [s["function"]["name"] for s in schemas] == ["answer", "get_article", "search"]  # TRL lists methods by name
    assert search_tool_schemas() == schemas
    for cls in (SearchEnvironment, curriculum_environment(small_curriculum(), 2)):
        env = cls()
        for schema in schemas:
            rendered = get_json_schema(getattr(env, schema["function"]["name"]))
            assert rendered == schema, (rendered, schema)
    # TRL exposes every public function of the class but reset and get_reward as a tool.
    import inspect

    tools = {n for n, _ in inspect.getmembers(SearchEnvironment, predicate=inspect.isfunction)
             if not n.startswith("_")} - {"reset", "get_reward"}
    assert tools == {"search", "get_article", "answer"}


def test_search_environment_runs_the_rust_session(dataset):
    from rulegym.trl import SearchEnvironment

    questions = [json.loads(line) for line in (dataset["dir"] / "questions.jsonl").read_text().splitlines()]
    q = questions[0]
    index = rulegym.Index(str(dataset["index"]))
    for given in ({"index_path": str(dataset["index"])}, {"index": index}):
        env = SearchEnvironment()
        assert env.reset(question=q["question"], answers=q["answers"], id=q["id"], **given) is None
        assert not env.done and env.turns == 0
        assert "Doc 1(Title:" in env.search(q["question"])
        assert env.answer(answer=", ".join(q["answers"])).startswith("Episode over. Score (F1): 1 ")
        assert env.done and env.turns == 2 and env.get_reward() == 1.0
        with pytest.raises(rulegym.RulegymError, match="episode is over"):
            env.get_article("Anyone")
    # Bad calls are errors (TRL shows the model {"error": ...}) and take no turn.
    env.reset(question=q["question"], answers=q["answers"], index=index)
    with pytest.raises(Exception, match="must be a string"):
        env._call("search", {"query": 3})
    with pytest.raises(TypeError):
        env.search(text="x")
    assert env.turns == 0


def test_groups_share_a_question_and_each_episode_reports_once():
    from rulegym.trl import curriculum_environment

    curriculum = Recording(small_curriculum())
    seen = []
    cls = curriculum_environment(curriculum, num_generations=3, on_draw=seen.append)
    envs = [cls() for _ in range(6)]  # two groups, reset in order as TRL does
    prompts = [e.reset(prompt=[{"role": "system", "content": "s"}, {"role": "user", "content": ""}]) for e in envs]
    assert len(curriculum.draws) == 2 and seen == curriculum.draws
    first, second = curriculum.draws
    assert first["question"] != second["question"]
    assert prompts == [first["question"]] * 3 + [second["question"]] * 3
    assert [e.draw["id"] for e in envs] == [first["id"]] * 3 + [second["id"]] * 3
    for i, e in enumerate(envs):
        gold = e.draw["answers"]
        e.answer(", ".join(gold) if i % 2 == 0 else "Nobody Atall")
    rewards = [e.get_reward() for e in envs] + [e.get_reward() for e in envs]  # twice: one report each
    assert rewards[:6] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0] and rewards[6:] == rewards[:6]
    assert curriculum.reports == rewards[:6]
    taken = cls.draws.take()
    assert [(g, r) for g, _, r in taken] == [(0, 1.0), (0, 0.0), (0, 1.0), (1, 0.0), (1, 1.0), (1, 0.0)]
    assert cls.draws.take() == [] and cls.draws.reports == 6 and cls.draws.level == curriculum.level
    # A rollout that never answered reports 0 once; a fresh reset starts a new report.
    envs[0].reset(prompt=[{"role": "user", "content": ""}])
    assert envs[0].get_reward() == 0.0 and envs[0].get_reward() == 0.0
    assert curriculum.reports[6:] == [0.0]
    # Without a system message in the row's prompt (TRL's dataset-free placeholder), the
    # system prompt leads the user message.
    before = envs[0].draw
    assert envs[0].reset(prompt=[{"role": "user", "content": ""}]) == (
        f"{_rulegym.SEARCH_TOOL_SYSTEM_PROMPT}\n\n{envs[0].draw['question']}")
    assert before is envs[0].draw  # still the same group (3 resets per question)
    rows = cls.placeholder_rows(2)
    assert rows == [{"prompt": [{"role": "system", "content": _rulegym.SEARCH_TOOL_SYSTEM_PROMPT},
                                {"role": "user", "content": ""}]}] * 2


def test_curriculum_level_moves_with_reports():
    from rulegym.trl import curriculum_environment

    ladder = [{"families": ["hops"], "min_hops": h, "max_hops": h, "num_family_trees": 2 + 2 * h} for h in (1, 2)]
    cls = curriculum_environment(small_curriculum(ladder=ladder, window=4), num_generations=2)
    envs = [cls() for _ in range(4)]
    for e in envs:
        e.reset()
        e.answer(", ".join(e.draw["answers"]))
        assert e.get_reward() == 1.0
    assert cls.draws.level == 1 == cls.curriculum.level
    envs[0].reset()
    assert envs[0].draw["level"] == 1 and envs[0].draw["hops"] == 2


@pytest.mark.parametrize("rows", [False, True], ids=["dataset-free", "placeholder-rows"])
def test_one_grpo_step_without_dataset_rows(tmp_path, rows):
    torch = import_or_skip("torch")
    import_or_skip("trl")
    import_or_skip("transformers")
    datasets = import_or_skip("datasets")
    from trl import GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    from rulegym.trl import curriculum_environment
    from test_trl import grpo_config, logged, scripted_model, tiny_tokenizer

    gold = {}
    cls = curriculum_environment(small_curriculum(), num_generations=2,
                                 on_draw=lambda d: gold.__setitem__(d["question"], d["answers"]))
    contexts = []

    def script(context):
        question = max((q for q in gold if q in context), key=context.rfind)
        contexts.append(context)
        if "<tool_response>" in context:
            return "Done."
        # Alternate gold and wrong answers: each group of 2 has one of each.
        answer = ", ".join(gold[question]) if len(contexts) % 2 else "Nobody Atall"
        return f'<tool_call>\n{{"name": "answer", "arguments": {json.dumps({"answer": answer})}}}\n</tool_call>'

    tok = tiny_tokenizer(tmp_path / "tok", qwen2_5_chat_template)
    model = scripted_model(tok, script)
    data = datasets.Dataset.from_list(cls.placeholder_rows(2)) if rows else None
    trainer = GRPOTrainer(model=model, args=grpo_config(tmp_path, max_completion_length=3000),
                          train_dataset=data, processing_class=tok, environment_factory=cls)
    trainer.train()
    # One generation batch of 4 rollouts: two groups, two questions, four reports.
    assert cls.draws.resets == 4 and cls.draws.group == 1 and cls.draws.reports == 4
    assert len(gold) == 2
    firsts = [c for c in contexts if "<tool_response>" not in c]
    assert len(firsts) == 4
    system = _rulegym.SEARCH_TOOL_SYSTEM_PROMPT
    for c in firsts:
        if rows:  # the system message is the chat template's system turn
            assert c.count(system) == 1 and "You are Qwen" not in c
        else:  # folded into the user message, the template adds its default system turn
            assert f"<|im_start|>user\n{system}\n\n" in c
    assert logged(trainer, f"rewards/{cls.__name__}/mean") == pytest.approx(0.5)
    assert [r for _, _, r in cls.draws.take()] == [1.0, 0.0, 1.0, 0.0]
    del torch

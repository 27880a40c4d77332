"""rulegym: verifiable RL environments for small LLM agents.

Rule-generated universes of people held in an embedded Prolog engine, multi-hop questions with
engine-verified answers, a search environment speaking the Search-R1 protocol, exact answer
rewards and GRPO math over NumPy arrays. The core is Rust (``rulegym._rulegym``); adapters for
SkyRL-gym (:mod:`rulegym.skyrl`), verl (:mod:`rulegym.verl`) and Ray (:mod:`rulegym.ray`) are
plain Python modules imported on demand, so ``import rulegym`` stays fast.
"""

from ._rulegym import (
    DEFAULT_PROMPT,
    INVALID_ACTION,
    SEARCH_TOOL_SYSTEM_PROMPT,
    Curriculum,
    Index,
    RubricScorer,
    RulegymError,
    SearchEnv,
    Simulation,
    ToolEnv,
    ToolSession,
    __version__,
    bench_rust_steps,
    build_index,
    demonstrations,
    generate_dataset,
    generate_datasets,
    generate_questions,
    generate_questions_jsonl,
    generate_universe,
    grpo_bytes_copied,
    group_advantages,
    last_answer,
    normalize_answer,
    oracle,
    policy_loss,
    policy_loss_padded,
    score,
    search_tools,
)

__all__ = [
    "DEFAULT_PROMPT",
    "INVALID_ACTION",
    "SEARCH_TOOL_SYSTEM_PROMPT",
    "Curriculum",
    "Index",
    "RubricScorer",
    "RulegymError",
    "SearchEnv",
    "Simulation",
    "ToolEnv",
    "ToolSession",
    "__version__",
    "bench_rust_steps",
    "build_index",
    "demonstrations",
    "generate_dataset",
    "generate_datasets",
    "generate_questions",
    "generate_questions_jsonl",
    "generate_universe",
    "grpo_bytes_copied",
    "group_advantages",
    "last_answer",
    "normalize_answer",
    "oracle",
    "policy_loss",
    "policy_loss_padded",
    "score",
    "search_tools",
]

"""rulegym's agent loops for verl >= 0.8 (tested on verl 0.9.1).

verl 0.8 removed interactions (``verl.interactions``, ``interaction_config_path``, the
INTERACTING state of its tool agent loop) and ``verl.tools.search_tool``. The extension point
verl offers instead is a registered agent loop (``verl.experimental.agent_loop``:
``AgentLoopBase`` and ``register``), selected per dataset row by its ``agent_name`` and
declared to the workers with ``actor_rollout_ref.rollout.agent.agent_loop_config_path``, a
YAML list of ``{name, _target_, ...}`` that verl instantiates with hydra (extra keys become
constructor arguments). ``rulegym export`` writes that file (``<stem>_agent_loop_config.yaml``)
and sets ``agent_name`` in every row:

* :class:`ToolUseAgentLoop` (``rulegym_tool_agent``) runs a tool-use task: verl's own tool agent
  loop (tokenisation, tool-call parsing, the tool config's :class:`rulegym.verl.TaskTool`
  instances) plus what interactions used to do: a model turn without tool calls goes to the
  task's simulated user (rule-based, or an LLM), whose reply is appended as a user message; an answer (or
  ``###STOP``, or the episode's turn cap) ends the episode and the task's executable rubric
  scores it. The reward is the trajectory's ``reward_score`` (verl then skips its reward
  function) and the last of ``turn_scores``. Each trajectory has its own episode.
* :class:`SearchAgentLoop` (``rulegym_search_agent``) runs the search environment (Search-R1
  protocol: ``<search>``, ``<information>``, ``<answer>``) over a rulegym index in process, no
  retrieval server and no ``verl.tools.search_tool``; the reward is the environment's set F1.

Importing this module imports verl (and so torch); :mod:`rulegym.verl` does not.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import AgentState, ToolAgentLoop
from verl.utils.profiler import simple_timer

from rulegym import _rulegym
from rulegym.verl import EPISODES, _text

logger = logging.getLogger(__name__)

#: ``agent_name`` of tool-use rows (``rulegym export --tasks --format verl``).
TOOL_AGENT = "rulegym_tool_agent"
#: ``agent_name`` of search rows (``rulegym export --format verl``).
SEARCH_AGENT = "rulegym_search_agent"


def _task_of(kwargs: Dict[str, Any]) -> Any:
    """The task of a tool-use row: ``extra_info.interaction_kwargs.task`` (as exported)."""
    extra_info = kwargs.get("extra_info") or {}
    task = (extra_info.get("interaction_kwargs") or {}).get("task") or extra_info.get("task")
    if task is None:
        raise ValueError(
            "a rulegym_tool_agent row needs its task in extra_info.interaction_kwargs.task "
            "(rows from `rulegym export --tasks FILE --format verl` carry it)"
        )
    return task


@register(TOOL_AGENT)
class ToolUseAgentLoop(ToolAgentLoop):
    """verl's tool agent loop with rulegym's simulated user and rubric reward (see the module
    documentation). Constructor arguments beyond verl's (from the agent loop config):
    ``max_turns`` (environment turns per episode: tool calls and user turns; a task's own
    ``max_turns`` wins) and ``simulation`` (a :class:`rulegym.Simulation` config: the simulator
    LLM's ``endpoint`` and ``model``, ``user`` ``rule`` or ``llm``, and ``dir`` where the world
    is recorded; every rollout of a task in this worker shares the task's mapping, and other
    workers share it through ``dir``)."""

    def __init__(self, *args, max_turns: int = 16, simulation: Optional[Dict[str, Any]] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_turns = int(max_turns)
        self.simulation = simulation
        self._task: Any = None
        self._key: Optional[str] = None
        self._reward = 0.0
        self._reason = ""

    @property
    def episode(self):
        return EPISODES.get(self._key)

    async def run(self, sampling_params: Dict[str, Any], **kwargs) -> AgentLoopOutput:
        self._task = _task_of(kwargs)
        self._key = f"rulegym-{uuid4().hex}"
        try:
            output = await super().run(sampling_params, **kwargs)
        finally:
            EPISODES.end(self._key)
        output.reward_score = self._reward
        output.extra_fields["rulegym"] = {"reward": self._reward, "reason": self._reason}
        return output

    async def _handle_pending_state(self, agent_data, sampling_params):
        agent_data.rulegym_episode_key = self._key
        EPISODES.start(self._key, self._task, self.max_turns, self.simulation)
        return await super()._handle_pending_state(agent_data, sampling_params)

    def _finish(self, agent_data) -> AgentState:
        """Ends the trajectory with the episode's reward (0 when verl cut it before the episode
        ended: no answer, no reward)."""
        episode = self.episode
        if episode is not None and episode.done:
            with episode.lock:
                self._reward = episode.reward()
            self._reason = episode.reason
        else:
            self._reward, self._reason = 0.0, "cut by verl before the episode ended"
        agent_data.turn_scores.append(self._reward)
        return AgentState.TERMINATED

    async def _handle_generating_state(self, agent_data, sampling_params, ignore_termination=False):
        before = len(agent_data.messages)
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        if state != AgentState.TERMINATED:
            return state
        episode = self.episode
        if episode is None or episode.done:
            return self._finish(agent_data)
        if len(agent_data.messages) == before or agent_data.tool_calls:
            # verl ended the turn (response length, turn caps) before parsing it.
            return self._finish(agent_data)
        # The model spoke without calling a tool: the simulated user answers it.
        with episode.lock:
            out = episode.env.step(_text(agent_data.messages[-1].get("content")))
            episode.record(out)
        if out["done"]:
            return self._finish(agent_data)
        reply = "\n".join(_text(o["content"]) for o in out["observations"])
        previous = list(agent_data.messages)
        agent_data.messages.append({"role": "user", "content": reply})
        schemas = getattr(agent_data, "_active_tool_schemas", self.tool_schemas)
        merge, mask, logprobs = await self.ct_merge_context_msg(
            previous,
            agent_data.messages,
            agent_data.prompt_ids,
            agent_data.response_mask,
            agent_data.response_logprobs if agent_data.response_logprobs else None,
            tools=schemas,
        )
        if len(mask) >= self.response_length:
            return self._finish(agent_data)
        agent_data.prompt_ids = merge.token_ids
        agent_data.response_mask = mask
        if agent_data.response_logprobs:
            agent_data.response_logprobs = logprobs or []
        agent_data.user_turns += 1
        return AgentState.GENERATING

    async def _handle_processing_tools_state(self, agent_data):
        state = await super()._handle_processing_tools_state(agent_data)
        episode = self.episode
        if state == AgentState.TERMINATED or (episode is not None and episode.done):
            return self._finish(agent_data)
        return state


def _answers(ground_truth: Any) -> List[str]:
    from rulegym.verl import _answers as answers

    return answers(ground_truth)


@register(SEARCH_AGENT)
class SearchAgentLoop(AgentLoopBase):
    """The search environment as a verl agent loop. Constructor arguments (from the agent loop
    config): ``index_path`` (a rulegym index file; default: the row's ``extra_info.index_path``,
    which ``rulegym export --dataset`` records), and the environment's ``top_k``, ``max_turns``,
    ``score_mode``, ``end_on_invalid``. Rows: ``rulegym export --format verl`` (prompt,
    ``reward_model.ground_truth.target``, ``extra_info.question``)."""

    def __init__(self, *args, index_path: Optional[str] = None, top_k: int = 3, max_turns: int = 10,
                 score_mode: str = "squad", end_on_invalid: bool = False, **kwargs):
        kwargs.pop("tools", None)
        super().__init__(*args, **kwargs)
        self.index_path = str(index_path) if index_path else None
        self.env_config = {"top_k": int(top_k), "max_turns": int(max_turns), "score_mode": str(score_mode),
                           "end_on_invalid": bool(end_on_invalid)}
        self.response_length = self.rollout_config.response_length

    async def run(self, sampling_params: Dict[str, Any], **kwargs) -> AgentLoopOutput:
        messages = list(kwargs["raw_prompt"])
        extra_info = kwargs.get("extra_info") or {}
        reward_model = kwargs.get("reward_model") or {}
        index_path = self.index_path or extra_info.get("index_path")
        if not index_path:
            raise ValueError(
                "rulegym_search_agent has no index: set index_path in its agent loop config, or "
                "export the rows with `rulegym export --dataset D --index FILE`"
            )
        env = _rulegym.SearchEnv(
            str(index_path),
            str(extra_info.get("question", "") or ""),
            _answers(reward_model.get("ground_truth")),
            [str(d) for d in (extra_info.get("gold_docs") or [])],
            self.env_config,
        )
        env.reset()
        metrics: Dict[str, Any] = {}
        request_id = uuid4().hex
        prompt_ids = await self.ct_build_initial_tokens(messages)
        runtime_ids, mask, logprobs = list(prompt_ids), [], []
        reward, turns, done, meta = 0.0, 0, False, {}
        while not done:
            with simple_timer("generate_sequences", metrics):
                out = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=runtime_ids, sampling_params=sampling_params
                )
            turns += 1
            merge, mask, lp = await self.ct_merge_assistant_token(
                runtime_ids, out.token_ids, mask, logprobs if (logprobs or out.log_probs) else None,
                assistant_logprobs=out.log_probs if out.log_probs else None,
            )
            runtime_ids = merge.token_ids
            logprobs = lp or []
            if len(mask) >= self.response_length:
                break
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            with simple_timer("tool_calls", metrics):
                step = env.step(text)
            meta = step["metadata"]
            if step["done"]:
                reward, done = float(step["reward"]), True
                break
            previous = messages + [{"role": "assistant", "content": text}]
            messages = previous + [dict(o) for o in step["observations"]]
            merge, merged_mask, lp = await self.ct_merge_context_msg(
                previous, messages, runtime_ids, mask, logprobs or None
            )
            if len(merged_mask) >= self.response_length:
                break  # the observation does not fit: end with the response so far
            runtime_ids, mask = merge.token_ids, merged_mask
            logprobs = lp or []
        response_ids = runtime_ids[len(runtime_ids) - len(mask):] if mask else []
        return AgentLoopOutput(
            prompt_ids=runtime_ids[: len(runtime_ids) - len(mask)],
            response_ids=response_ids[: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            reward_score=reward,
            num_turns=2 * turns + 1,
            metrics=metrics,
            extra_fields={"rulegym": {"reward": reward, "done": done, "searches": meta.get("searches", 0),
                                      "f1": meta.get("f1", 0.0)}},
        )

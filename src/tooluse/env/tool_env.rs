//! The [`ToolEnv`] type: its parts, accessors, reset and scoring at the end of an episode.

use super::config::{Protocol, ToolEnvConfig};
use super::prompt::system_prompt;
use super::recorder::Recorder;
use crate::env::{Environment, Step};
use crate::llm::{ChatMessage, Role};
use crate::tooluse::mock_tools::{MappingSimulator, state_hash};
use crate::tooluse::rubric::{ItemJudge, RubricResult, RubricScorer, Trajectory};
use crate::tooluse::task::CompiledTask;
use crate::tooluse::user::UserSimulator;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The tool-use environment: one per episode.
pub struct ToolEnv {
    pub(super) world: Arc<CompiledTask>,
    pub(super) mapping: Option<Arc<MappingSimulator>>,
    pub(super) user: Box<dyn UserSimulator>,
    pub(super) scorer: Arc<RubricScorer>,
    pub(super) judge: Option<Arc<dyn ItemJudge>>,
    pub(super) config: ToolEnvConfig,
    pub(super) tokens: Arc<dyn crate::env::tokens::TokenCounter>,
    pub(super) response_tokens: usize,
    pub(super) recorder: Recorder,
    pub(super) transcript: Vec<ChatMessage>,
    pub(super) turn: u32,
    /// Tool calls made through [`ToolEnv::call_tool`] this episode (their ids' numbers).
    pub(super) tool_calls: u64,
    pub(super) done: bool,
    pub(super) result: Option<RubricResult>,
}

impl ToolEnv {
    /// An episode of `world` with these simulators and scorer.
    pub fn new(
        world: Arc<CompiledTask>,
        mapping: Option<Arc<MappingSimulator>>,
        user: Box<dyn UserSimulator>,
        scorer: Arc<RubricScorer>,
        config: ToolEnvConfig,
    ) -> Self {
        ToolEnv {
            recorder: Recorder::new(world.clone()),
            world,
            mapping,
            user,
            scorer,
            judge: None,
            config,
            tokens: Arc::new(crate::env::tokens::ApproxTokenCounter),
            response_tokens: 0,
            transcript: Vec::new(),
            turn: 0,
            tool_calls: 0,
            done: false,
            result: None,
        }
    }

    /// Counts `max_response_tokens` with `counter` (a real tokenizer) instead of the `ceil(chars
    /// / 4)` approximation.
    pub fn with_token_counter(
        mut self,
        counter: Arc<dyn crate::env::tokens::TokenCounter>,
    ) -> Self {
        self.tokens = counter;
        self
    }

    /// Adds an LLM judge for rubric items without a rule.
    pub fn with_judge(mut self, judge: Arc<dyn ItemJudge>) -> Self {
        self.judge = Some(judge);
        self
    }

    /// The task being played.
    pub fn task(&self) -> &CompiledTask {
        &self.world
    }

    /// The conversation so far (OpenAI messages, including the prompt).
    pub fn transcript(&self) -> &[ChatMessage] {
        &self.transcript
    }

    /// The facts recorded so far.
    pub fn trajectory(&self) -> Trajectory {
        self.recorder.trajectory(self.turn)
    }

    /// The rubric result, once the episode is over.
    pub fn result(&self) -> Option<&RubricResult> {
        self.result.as_ref()
    }

    /// Whether the episode is over.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The OpenAI `tools` list to send with requests (empty for the Hermes protocol, whose
    /// tools are in the system prompt).
    pub fn request_tools(&self) -> Vec<Value> {
        match self.config.protocol {
            Protocol::OpenAi => self.world.openai_tools(),
            Protocol::Hermes => Vec::new(),
        }
    }

    pub(super) fn max_turns(&self) -> u32 {
        self.world.task.max_turns.unwrap_or(self.config.max_turns)
    }

    /// The system prompt.
    pub fn system_prompt(&self) -> String {
        system_prompt(&self.world.task, self.config.protocol)
    }

    pub(super) fn finish(
        &mut self,
        reason: &str,
        mut meta: BTreeMap<String, Value>,
    ) -> crate::Result<Step> {
        self.done = true;
        let trajectory = self.recorder.trajectory(self.turn);
        let result = self
            .scorer
            .score(&self.world.program, &trajectory, self.judge.as_deref())?;
        meta.insert("reason".into(), json!(reason));
        if let Some(state) = &trajectory.final_state {
            meta.insert("state_hash".into(), json!(state_hash(state)));
        }
        meta.insert(
            "rubric".into(),
            serde_json::to_value(&result).unwrap_or(Value::Null),
        );
        let reward = result.reward;
        self.result = Some(result);
        Ok(Step {
            observations: Vec::new(),
            reward,
            done: true,
            metadata: meta,
            env_spans: Vec::new(),
        })
    }
}

impl Environment for ToolEnv {
    fn reset(&mut self) -> crate::Result<Vec<ChatMessage>> {
        self.recorder = Recorder::new(self.world.clone());
        self.response_tokens = 0;
        self.turn = 0;
        self.tool_calls = 0;
        self.done = false;
        self.result = None;
        self.transcript = vec![
            ChatMessage::text(Role::System, self.system_prompt()),
            ChatMessage::text(Role::User, self.world.task.instruction.clone()),
        ];
        Ok(self.transcript.clone())
    }

    fn step(&mut self, action: &str) -> crate::Result<Step> {
        self.step_message(&ChatMessage::text(Role::Assistant, action))
    }
}

//! Stage `rollouts`: the teacher (the generating model behind the `teacher` prompt) plays each
//! task at least twice in the mock environment: [`ToolEnv`] with the mapping tool simulator
//! (one mapping shared by the task's rollouts, so tool answers stay consistent) and the
//! simulated user (LLM or rule-based). Rollouts of a task run one after another, so the
//! simulator's requests, and therefore the whole run, are deterministic given the cache.
//!
//! A rollout is usable when it ended with an answer (or the user's `###STOP`), called at least
//! one tool, and at most `max_tool_error_fraction` of its calls failed (malformed calls, invalid
//! arguments, simulator failures). A task with fewer than two usable rollouts is dropped.

use super::parse::{Reject, RejectReason};
use super::prompt::TEACHER;
use super::{Ctx, ItemError, Outcome, SynthItem, SynthStage, missing};
use crate::llm::{ChatMessage, ChatRequest, ChatResponse, LlmBackend, LlmError};
use crate::tooluse::env::{Protocol, ToolEnv, ToolEnvConfig, play_episode};
use crate::tooluse::mock_tools::{MappingConfig, MappingSimulator};
use crate::tooluse::rubric::{Event, Trajectory};
use crate::tooluse::task::{Rubric, RubricItem, ValidateOptions};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One teacher episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rollout {
    /// The seed of its requests.
    pub seed: u64,
    /// Why it ended (`answer`, `user_stop`, `turn_cap`, ...).
    pub reason: String,
    /// Whether it is usable as rubric evidence.
    pub usable: bool,
    /// The conversation (OpenAI messages, with the environment's system prompt).
    pub messages: Vec<ChatMessage>,
    /// Its facts, as the rubric reads them.
    pub trajectory: Trajectory,
}

/// The rubric the environment needs while teacher rollouts run: one always-true sub-goal. It
/// scores nothing that is kept; the real rubric is extracted from the rollouts afterwards.
pub fn scaffold_rubric() -> Rubric {
    Rubric {
        subgoals: vec![RubricItem {
            id: "rollout_scaffold".into(),
            description: "placeholder while teacher rollouts run (never a task's rubric)".into(),
            rule: Some("true".into()),
        }],
        ..Rubric::default()
    }
}

/// The teacher: the environment's system prompt wrapped in the `teacher` prompt.
struct Teacher {
    inner: Arc<dyn LlmBackend>,
}

impl LlmBackend for Teacher {
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut request = request.clone();
        if let Some(first) = request
            .messages
            .first_mut()
            .filter(|m| m.role == crate::llm::Role::System)
        {
            let wrapped = TEACHER.render(&[("env_system", first.content_str())]);
            first.content = Some(wrapped);
        }
        self.inner.chat(&request)
    }
}

/// (tool calls, failed tool calls) of a trajectory.
fn call_counts(trajectory: &Trajectory) -> (usize, usize) {
    let calls = trajectory
        .events
        .iter()
        .filter(|e| matches!(e, Event::ToolCall { .. }))
        .count();
    let errors = trajectory
        .events
        .iter()
        .filter(|e| matches!(e, Event::ToolError { .. }))
        .count();
    (calls, errors)
}

pub(super) fn run(ctx: &Ctx, item: &SynthItem) -> Result<Outcome, ItemError> {
    if item.instruction.is_empty() || item.hidden_context.is_none() {
        return Err(missing(
            SynthStage::Rollouts,
            "instruction or hidden_context",
        ));
    }
    let config = &ctx.config;
    let task = item.to_task(scaffold_rubric(), config.max_turns);
    let world = match task.compile(ValidateOptions::default()) {
        Ok(w) => Arc::new(w),
        Err(e) => return Ok(Err(Reject::new(RejectReason::InvalidTask, e.to_string()))),
    };
    let scorer = ctx.scorer().map_err(|e| e.to_string())?;
    let sim_model = config.sim_model().to_owned();
    let mapping = Arc::new(
        MappingSimulator::new(
            &item.id,
            None,
            Some(ctx.backend.clone()),
            MappingConfig {
                model: sim_model.clone(),
                seed: Some(config.seed),
                ..MappingConfig::default()
            },
        )
        .map_err(|e| e.to_string())?,
    );
    let teacher = Teacher {
        inner: ctx.backend.clone(),
    };
    let mut rollouts = Vec::new();
    for r in 0..u64::from(config.rollouts) {
        let seed = config.seed.wrapping_add(r);
        let user = config
            .user
            .simulator(&world.task, ctx.backend.clone(), &sim_model, Some(seed));
        let mut env = ToolEnv::new(
            world.clone(),
            Some(mapping.clone()),
            user,
            scorer.clone(),
            ToolEnvConfig {
                max_turns: config.max_turns,
                protocol: Protocol::OpenAi,
                ..ToolEnvConfig::default()
            },
        );
        let episode = play_episode(
            &mut env,
            &teacher,
            &config.model,
            Some(config.teacher_temperature),
            Some(seed),
        )
        .map_err(|e| format!("teacher rollout {r}: {e}"))?;
        let trajectory = env.trajectory();
        let (calls, errors) = call_counts(&trajectory);
        let finished = matches!(episode.reason.as_str(), "answer" | "user_stop");
        let usable =
            finished && calls > 0 && errors as f64 <= config.max_tool_error_fraction * calls as f64;
        rollouts.push(Rollout {
            seed,
            reason: episode.reason,
            usable,
            messages: episode.messages,
            trajectory,
        });
    }
    let usable = rollouts.iter().filter(|r| r.usable).count();
    if usable < 2 {
        let summary: Vec<String> = rollouts
            .iter()
            .map(|r| {
                let (calls, errors) = call_counts(&r.trajectory);
                format!("ended by {}, {errors}/{calls} tool calls failed", r.reason)
            })
            .collect();
        return Ok(Err(Reject::new(
            RejectReason::RolloutsUnusable,
            format!(
                "{usable} usable teacher rollout(s), 2 needed: {}",
                summary.join("; ")
            ),
        )));
    }
    Ok(Ok(SynthItem {
        rollouts,
        mapping: mapping.entries(),
        ..item.clone()
    }))
}

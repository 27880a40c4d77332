//! Replays of scripts in the tool environment (rule-based user, state-backed tools).

use super::{RuleGenError, ScriptStep, oracle_script, step_message};
use crate::tooluse::env::{Episode, ToolEnv, ToolEnvConfig};
use crate::tooluse::rubric::RubricScorer;
use crate::tooluse::task::{CompiledTask, Task, ValidateOptions};
use crate::tooluse::user::RuleUser;
use std::sync::Arc;

/// Plays `steps` in the tool environment (rule-based user, state-backed tools) and returns the
/// scored episode. The script must end the episode.
pub fn replay(
    world: Arc<CompiledTask>,
    scorer: Arc<RubricScorer>,
    steps: &[ScriptStep],
) -> Result<Episode, RuleGenError> {
    let id = world.task.id.clone();
    let fail = |message: String| RuleGenError::Replay {
        task: id.clone(),
        message,
    };
    let user = Box::new(RuleUser::new(&world.task));
    let mut env = ToolEnv::new(world.clone(), None, user, scorer, ToolEnvConfig::default());
    use crate::env::Environment;
    env.reset().map_err(|e| fail(e.to_string()))?;
    let mut reason = String::new();
    for (turn, step) in steps.iter().enumerate() {
        let out = env
            .step_message(&step_message(step, turn + 1))
            .map_err(|e| fail(e.to_string()))?;
        if out.done {
            reason = out.metadata["reason"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            break;
        }
    }
    let result = env
        .result()
        .cloned()
        .ok_or_else(|| fail("the script did not end the episode".into()))?;
    Ok(Episode {
        id,
        messages: env.transcript().to_vec(),
        reward: result.reward,
        result,
        reason,
        simulation_errors: Vec::new(),
    })
}

/// Validates `task`, reads its reference solution and replays it.
pub fn replay_oracle(task: Task, scorer: Arc<RubricScorer>) -> Result<Episode, RuleGenError> {
    let id = task.id.clone();
    let steps = oracle_script(&task)?;
    let world = task
        .compile(ValidateOptions::default())
        .map_err(|e| RuleGenError::Replay {
            task: id,
            message: e.to_string(),
        })?;
    replay(Arc::new(world), scorer, &steps)
}

/// A task's replayed reference solution as a row for TRL's `SFTTrainer` (tool calling):
/// `messages` in the chat-template form that trainers tokenise (each call's `arguments` a JSON
/// object rather than a string, no `null` content), the simulated user's replies included, and
/// `tools`, the task's function schemas; `id` and `reward` beside them. The messages are the
/// environment's own transcript, so the row teaches exactly what the rubric paid for.
pub fn sft_row(task: &Task, episode: &Episode) -> serde_json::Value {
    use serde_json::{Value, json};
    let messages: Vec<Value> = episode
        .messages
        .iter()
        .map(|m| {
            let mut m = serde_json::to_value(m).unwrap_or(Value::Null);
            if m.get("content").is_some_and(Value::is_null) {
                m["content"] = json!("");
            }
            if let Some(calls) = m.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for call in calls {
                    let args = &mut call["function"]["arguments"];
                    if let Some(text) = args.as_str()
                        && let Ok(parsed @ Value::Object(_)) = serde_json::from_str(text)
                    {
                        *args = parsed;
                    }
                }
            }
            m
        })
        .collect();
    let tools: Vec<Value> = task.tools.iter().map(|t| t.openai_schema()).collect();
    json!({"id": episode.id, "messages": messages, "tools": tools, "reward": episode.reward})
}

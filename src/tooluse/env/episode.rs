//! An agent model played through one episode, and the finished [`Episode`].

use super::tool_env::ToolEnv;
use crate::env::Environment;
use crate::llm::{ChatMessage, ChatRequest, LlmBackend};
use crate::tooluse::rubric::RubricResult;
use serde_json::{Value, json};

/// One finished episode.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Episode {
    /// Task id.
    pub id: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// The reward.
    pub reward: f64,
    /// The rubric result.
    pub result: RubricResult,
    /// Why it ended.
    pub reason: String,
    /// Failed simulations, in order (`{"turn", "tool", "error"}` for a tool, `{"turn",
    /// "user": error}` for the user): each was answered to the agent as a tool error or an
    /// unanswered question.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub simulation_errors: Vec<Value>,
}

/// Runs an agent model through one episode: the transcript goes to `agent` each turn (with the
/// tools for the OpenAI protocol) until the episode ends.
pub fn play_episode(
    env: &mut ToolEnv,
    agent: &dyn LlmBackend,
    model: &str,
    temperature: Option<f64>,
    seed: Option<u64>,
) -> crate::Result<Episode> {
    env.reset()?;
    let mut reason = String::new();
    let mut simulation_errors = Vec::new();
    while !env.is_done() {
        let mut request = ChatRequest::new(model, env.transcript().to_vec());
        request.tools = env.request_tools();
        request.temperature = temperature;
        request.seed = seed;
        let response = agent.chat(&request)?;
        let step = env.step_message(&response.message)?;
        let turn = step.metadata.get("turn").cloned().unwrap_or(Value::Null);
        for failure in step
            .metadata
            .get("simulation_errors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let mut failure = failure.clone();
            failure["turn"] = turn.clone();
            simulation_errors.push(failure);
        }
        if let Some(e) = step.metadata.get("user_error") {
            simulation_errors.push(json!({"turn": turn, "user": e}));
        }
        if step.done {
            reason = step.metadata["reason"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
        }
    }
    let result = env
        .result()
        .cloned()
        .expect("a finished episode has a result");
    Ok(Episode {
        id: env.world.task.id.clone(),
        messages: env.transcript().to_vec(),
        reward: result.reward,
        result,
        reason,
        simulation_errors,
    })
}

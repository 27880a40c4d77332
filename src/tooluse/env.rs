//! The tool-use environment (SynthAgent's mock world with executable rubrics).
//!
//! Each agent turn is routed: `###STOP` / `###TRANSFER_TO_HUMAN` end the episode; `<answer>`
//! ends it; tool calls (OpenAI `tool_calls` or Hermes `<tool_call>{"name", "arguments"}</tool_call>`
//! text) go to the tools, each answered in order (OpenAI: `tool` messages; Hermes:
//! `<tool_response>` text); any other text (or a `<question>`) goes to the simulated user. Tool
//! arguments are validated against the tool's `parameters`: a violation, an unknown tool or a
//! tool-side failure is answered with `{"error": ...}` and becomes a `tool_error` fact. At the
//! end the trajectory's facts are scored by the task's rubric ([`crate::tooluse::rubric`]).
//!
//! The same parsing serves [`trajectory_from_messages`], which rebuilds the facts of a saved
//! conversation (state-backed tools are replayed), so `rulegym tools score` and the environment
//! agree.

use super::simulator::{MappingSimulator, canonical_json, execute_state_tool, state_hash};
use super::user::{USER_UNAVAILABLE, UserReply, UserSimulator, revealed_slots};
use crate::env::{Environment, Span, Step};
use crate::llm::{
    ChatMessage, ChatRequest, FunctionCall, LlmBackend, ParsedCall, Role, ToolCall,
    parse_tool_calls,
};
use crate::tooluse::rubric::{
    Event, ItemJudge, RubricResult, RubricScorer, StopMarker, Trajectory,
};
use crate::tooluse::task::{CompiledTask, Task, ToolBackend, WorldState};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Environment id; bumped whenever outputs for a fixed input change.
pub const ENV_ID: &str = "tool-use-v1";

/// How tool calls and their replies are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// OpenAI `tool_calls` in, `tool` messages out; tools passed in the request.
    #[default]
    #[cfg_attr(feature = "clap", value(name = "openai"))]
    OpenAi,
    /// Hermes text: `<tool_call>` in assistant text, `<tool_response>` user turns out; tools
    /// listed in the system prompt.
    Hermes,
}

/// Environment options.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolEnvConfig {
    /// Agent turns before the episode is cut (a task's `max_turns` overrides it).
    pub max_turns: u32,
    /// Wire protocol.
    pub protocol: Protocol,
    /// Assistant tokens per episode (text plus tool-call names and arguments): the episode
    /// ends with reason `response_budget` (and is scored as it stands) once the assistant has
    /// written more [off; SynthAgent 13,000]. Counted by the episode's token counter
    /// (`ceil(chars / 4)` unless [`ToolEnv::with_token_counter`] gives a real tokenizer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_response_tokens: Option<u32>,
}

impl Default for ToolEnvConfig {
    fn default() -> Self {
        ToolEnvConfig {
            max_turns: 16,
            protocol: Protocol::OpenAi,
            max_response_tokens: None,
        }
    }
}

impl ToolEnvConfig {
    /// Checks every knob.
    pub fn validate(&self) -> crate::Result<()> {
        if !(1..=1000).contains(&self.max_turns) {
            return Err(crate::Error::Config(format!(
                "max_turns must be in 1..=1000, got {}",
                self.max_turns
            )));
        }
        if let Some(v) = self.max_response_tokens
            && !(1..=10_000_000).contains(&v)
        {
            return Err(crate::Error::Config(format!(
                "max_response_tokens must be in 1..=10000000, got {v}"
            )));
        }
        Ok(())
    }
}

/// An assistant turn, parsed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedTurn {
    /// Text outside tool-call blocks, trimmed.
    pub text: String,
    /// Tool calls in order.
    pub calls: Vec<ParsedCall>,
    /// The `<answer>` content.
    pub answer: Option<String>,
    /// A stop marker.
    pub marker: Option<StopMarker>,
}

impl ParsedTurn {
    /// What the user is asked: the `<question>` content, or all the free text.
    pub fn question(&self) -> &str {
        tag(&self.text, "question").unwrap_or(&self.text).trim()
    }
}

/// The content of the first `<name>...</name>` (an unclosed tag runs to the end).
fn tag<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = text.find(&open)? + open.len();
    let rest = &text[start..];
    Some(rest.find(&close).map_or(rest, |end| &rest[..end]))
}

/// Parses an assistant message: OpenAI `tool_calls` and Hermes `<tool_call>` blocks (both are
/// accepted whatever the protocol), `<answer>`, stop markers.
pub fn parse_assistant(message: &ChatMessage, turn: u32) -> ParsedTurn {
    let content = message.content_str();
    let (text, calls) = parse_tool_calls(message, turn);
    let marker = if content.contains("###TRANSFER_TO_HUMAN") {
        Some(StopMarker::TransferToHuman)
    } else if content.contains("###STOP") {
        Some(StopMarker::Stop)
    } else {
        None
    };
    ParsedTurn {
        answer: tag(&text, "answer").map(|a| a.trim().to_owned()),
        text,
        calls,
        marker,
    }
}

/// The world's side of an episode: state, facts, and the user's revealed slots.
struct Recorder {
    world: Arc<CompiledTask>,
    state: Option<WorldState>,
    events: Vec<Event>,
    revealed: BTreeSet<String>,
}

/// Answers a mapping tool: `Ok(Some(response))`, `Ok(None)` when unknown, or an error text.
type MappedFn<'a> = dyn FnMut(&str, &Value) -> Result<Option<Value>, String> + 'a;

/// What a tool call produced: the response text.
struct CallOutcome {
    content: String,
}

impl Recorder {
    fn new(world: Arc<CompiledTask>) -> Self {
        Recorder {
            state: world.task.initial_state.clone(),
            world,
            events: Vec::new(),
            revealed: BTreeSet::new(),
        }
    }

    fn error(&mut self, step: u32, tool: &str, reason: String) -> CallOutcome {
        self.events.push(Event::ToolError {
            step,
            tool: tool.to_owned(),
            reason: reason.clone(),
        });
        CallOutcome {
            content: canonical_json(&json!({ "error": reason })),
        }
    }

    /// Validates and runs one call. `mapped` answers mapping tools: `Ok(Some(response))`,
    /// `Ok(None)` when the response is not known (reading saved messages: taken from the
    /// conversation), or a simulator error.
    fn call(
        &mut self,
        step: u32,
        call: &ParsedCall,
        mapped: &mut MappedFn<'_>,
    ) -> Option<CallOutcome> {
        let args = match &call.args {
            Ok(a) => a.clone(),
            Err(reason) => {
                self.events.push(Event::ToolCall {
                    step,
                    tool: call.name.clone(),
                    args: Value::String(call.raw.clone()),
                });
                return Some(self.error(step, &call.name, reason.clone()));
            }
        };
        self.events.push(Event::ToolCall {
            step,
            tool: call.name.clone(),
            args: args.clone(),
        });
        let world = self.world.clone();
        let Some(tool) = world.task.tool(&call.name) else {
            let names: Vec<&str> = world.task.tools.iter().map(|t| t.name.as_str()).collect();
            return Some(self.error(
                step,
                &call.name,
                format!(
                    "unknown tool {:?}; available: {}",
                    call.name,
                    names.join(", ")
                ),
            ));
        };
        if let Err(e) = world.params[&tool.name].validate(&args) {
            return Some(self.error(step, &tool.name, format!("invalid arguments: {e}")));
        }
        let result = match &tool.backend {
            ToolBackend::State { .. } => {
                let state = self.state.get_or_insert_with(WorldState::new);
                let map = args.as_object().cloned().unwrap_or_default();
                execute_state_tool(tool, &map, state).map(Some)
            }
            ToolBackend::Mapping => mapped(&tool.name, &args),
        };
        match result {
            Ok(Some(response)) => {
                self.events.push(Event::ToolResult {
                    step,
                    tool: tool.name.clone(),
                    result: response.clone(),
                });
                Some(CallOutcome {
                    content: canonical_json(&response),
                })
            }
            Ok(None) => None,
            Err(reason) => Some(self.error(step, &tool.name, reason)),
        }
    }

    /// Records a tool message read back from a conversation (mapping tools).
    fn tool_message(&mut self, step: u32, tool: &str, content: &str) {
        let body = tag(content, "tool_response").unwrap_or(content).trim();
        match serde_json::from_str::<Value>(body) {
            Ok(Value::Object(map)) if map.len() == 1 && map.contains_key("error") => {
                let reason = match &map["error"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                self.events.push(Event::ToolError {
                    step,
                    tool: tool.to_owned(),
                    reason,
                });
            }
            Ok(v) => self.events.push(Event::ToolResult {
                step,
                tool: tool.to_owned(),
                result: v,
            }),
            Err(_) => self.events.push(Event::ToolResult {
                step,
                tool: tool.to_owned(),
                result: Value::String(body.to_owned()),
            }),
        }
    }

    fn user_reply(&mut self, step: u32, text: &str, revealed: &[String]) {
        self.events.push(Event::UserSaid {
            step,
            text: text.to_owned(),
        });
        for slot in revealed {
            self.revealed.insert(slot.clone());
            self.events.push(Event::UserRevealed {
                step,
                slot: slot.clone(),
            });
        }
    }

    fn trajectory(&self, turns: u32) -> Trajectory {
        let state_matches = match (&self.world.task.expected_state, &self.state) {
            (Some(expected), Some(state)) => Some(same_state(expected, state)),
            (Some(_), None) => Some(false),
            _ => None,
        };
        Trajectory {
            events: self.events.clone(),
            final_state: self.state.clone(),
            state_matches,
            turns,
        }
    }
}

/// Whether two world states are equal as canonical JSON (tables that are empty count as absent).
pub fn same_state(a: &WorldState, b: &WorldState) -> bool {
    let strip = |s: &WorldState| {
        let kept: WorldState = s
            .iter()
            .filter(|(_, r)| !r.is_empty())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        state_hash(&kept)
    };
    strip(a) == strip(b)
}

/// Why an episode ended.
fn end_reason(marker: StopMarker) -> &'static str {
    match marker {
        StopMarker::Stop => "stop",
        StopMarker::TransferToHuman => "transfer_to_human",
    }
}

/// The tool-use environment: one per episode.
pub struct ToolEnv {
    world: Arc<CompiledTask>,
    mapping: Option<Arc<MappingSimulator>>,
    user: Box<dyn UserSimulator>,
    scorer: Arc<RubricScorer>,
    judge: Option<Arc<dyn ItemJudge>>,
    config: ToolEnvConfig,
    tokens: Arc<dyn crate::env::tokens::TokenCounter>,
    response_tokens: usize,
    recorder: Recorder,
    transcript: Vec<ChatMessage>,
    turn: u32,
    done: bool,
    result: Option<RubricResult>,
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

    fn max_turns(&self) -> u32 {
        self.world.task.max_turns.unwrap_or(self.config.max_turns)
    }

    /// The system prompt.
    pub fn system_prompt(&self) -> String {
        system_prompt(&self.world.task, self.config.protocol)
    }

    /// Applies one assistant message (OpenAI `tool_calls` or text with Hermes blocks).
    pub fn step_message(&mut self, message: &ChatMessage) -> crate::Result<Step> {
        if self.done {
            return Err(crate::Error::EpisodeOver);
        }
        if self.transcript.is_empty() {
            self.reset()?;
        }
        self.turn += 1;
        let step = self.turn;
        let mut assistant = message.clone();
        assistant.role = Role::Assistant;
        self.transcript.push(assistant);
        let parsed = parse_assistant(message, step);
        let mut meta = BTreeMap::from([
            ("turn".to_owned(), json!(step)),
            ("env".to_owned(), json!(ENV_ID)),
        ]);
        let over_budget = match self.config.max_response_tokens {
            Some(budget) => {
                let mut n = self.tokens.count(message.content_str());
                for call in &message.tool_calls {
                    n += self.tokens.count(&call.function.name);
                    n += self.tokens.count(&call.function.arguments);
                }
                self.response_tokens += n;
                meta.insert("response_tokens".into(), json!(self.response_tokens));
                self.response_tokens > budget as usize
            }
            None => false,
        };
        if !parsed.text.is_empty() {
            self.recorder.events.push(Event::Said {
                step,
                text: parsed.text.clone(),
            });
        }
        if over_budget {
            // The generation was cut by the response budget: what was written is not acted on.
            return self.finish("response_budget", meta);
        }
        if let Some(marker) = parsed.marker {
            self.recorder.events.push(Event::Stopped { step, marker });
            return self.finish(end_reason(marker), meta);
        }
        if let Some(answer) = &parsed.answer {
            self.recorder.events.push(Event::Answered {
                step,
                text: answer.clone(),
            });
            return self.finish("answer", meta);
        }
        let mut observations = Vec::new();
        if !parsed.calls.is_empty() {
            let mapping = self.mapping.clone();
            let world = self.world.clone();
            let mut failures = Vec::new();
            let mut mapped = |tool: &str, args: &Value| -> Result<Option<Value>, String> {
                let spec = world.task.tool(tool).expect("known tool");
                match &mapping {
                    Some(sim) => sim
                        .lookup(spec, &world.outputs[tool], args)
                        .map(Some)
                        .map_err(|e| {
                            // A failed simulation is the agent's tool error, never a crash.
                            log::warn!(
                                "task {}: tool {tool}: simulation failed: {e}",
                                world.task.id
                            );
                            failures.push(json!({"tool": tool, "error": e.to_string()}));
                            e.to_string()
                        }),
                    None => Err("no tool simulator configured".into()),
                }
            };
            let mut ids = Vec::new();
            for call in &parsed.calls {
                let outcome = self
                    .recorder
                    .call(step, call, &mut mapped)
                    .expect("the environment always answers");
                ids.push(call.id.clone());
                let (message, chat) = match self.config.protocol {
                    Protocol::OpenAi => (
                        ChatMessage::text(Role::Tool, outcome.content.clone()),
                        ChatMessage {
                            role: Role::Tool,
                            content: Some(outcome.content),
                            tool_calls: Vec::new(),
                            tool_call_id: Some(call.id.clone()),
                        },
                    ),
                    Protocol::Hermes => {
                        let text =
                            format!("<tool_response>\n{}\n</tool_response>", outcome.content);
                        (
                            ChatMessage::text(Role::User, text.clone()),
                            ChatMessage::text(Role::User, text),
                        )
                    }
                };
                observations.push(message);
                self.transcript.push(chat);
            }
            meta.insert("tool_call_ids".into(), json!(ids));
            if !failures.is_empty() {
                meta.insert("simulation_errors".into(), json!(failures));
            }
        } else {
            let question = parsed.question().to_owned();
            self.recorder.events.push(Event::AskedUser {
                step,
                text: question.clone(),
            });
            let reply = match self.user.reply(&question) {
                Ok(reply) => reply,
                Err(e) => {
                    // A failed user simulation leaves the question unanswered, never a crash.
                    log::warn!("task {}: user simulation failed: {e}", self.world.task.id);
                    meta.insert("user_error".into(), json!(e.to_string()));
                    UserReply {
                        text: USER_UNAVAILABLE.into(),
                        revealed: Vec::new(),
                    }
                }
            };
            let revealed = revealed_slots(
                &self.world.task.hidden_context.slots,
                &self.recorder.revealed,
                &reply.text,
            );
            self.recorder.user_reply(step, &reply.text, &revealed);
            meta.insert("revealed".into(), json!(revealed));
            self.transcript
                .push(ChatMessage::text(Role::User, reply.text.clone()));
            let marker = if reply.text.contains("###TRANSFER_TO_HUMAN") {
                Some(StopMarker::TransferToHuman)
            } else if reply.text.contains("###STOP") {
                Some(StopMarker::Stop)
            } else {
                None
            };
            if let Some(marker) = marker {
                self.recorder.events.push(Event::Stopped { step, marker });
                return self.finish(&format!("user_{}", end_reason(marker)), meta);
            }
            observations.push(ChatMessage::text(Role::User, reply.text));
        }
        if step >= self.max_turns() {
            meta.insert("observations_dropped".into(), json!(observations.len()));
            return self.finish("turn_cap", meta);
        }
        let mut spans = Vec::new();
        let mut offset = 0;
        for o in &observations {
            spans.push(Span {
                start: offset,
                end: offset + o.content_str().len(),
            });
            offset += o.content_str().len();
        }
        Ok(Step {
            observations,
            reward: 0.0,
            done: false,
            metadata: meta,
            env_spans: spans,
        })
    }

    fn finish(&mut self, reason: &str, mut meta: BTreeMap<String, Value>) -> crate::Result<Step> {
        self.done = true;
        let trajectory = self.recorder.trajectory(self.turn);
        let result = self.scorer.score(
            &self.world.task,
            &self.world.program,
            &trajectory,
            self.judge.as_deref(),
        )?;
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

/// The system prompt of an episode of `task` (what [`ToolEnv`]'s `reset` starts with): the
/// instructions, plus the tool signatures for the Hermes protocol.
pub fn system_prompt(task: &Task, protocol: Protocol) -> String {
    let mut s = String::from(
        "You are a helpful assistant that completes the user's request with the tools \
         available. The request may be missing details: ask the user for them (one \
         question per turn, optionally inside <question></question>). Do not guess missing \
         details. When the request is done, reply with <answer>a short summary</answer>.",
    );
    if protocol == Protocol::Hermes {
        s.push_str(
            "\n\n# Tools\n\nYou may call one or more functions. Function signatures are \
             inside <tools></tools>:\n<tools>\n",
        );
        for tool in task.tools.iter().map(|t| t.openai_schema()) {
            s.push_str(&canonical_json(&tool));
            s.push('\n');
        }
        s.push_str(
            "</tools>\n\nFor each function call, write a JSON object with the function \
             name and arguments inside <tool_call></tool_call>:\n<tool_call>\n{\"name\": \
             <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
        );
    }
    s
}

/// Rebuilds the facts of a saved conversation (OpenAI messages; tool calls as `tool_calls` or
/// Hermes text). State-backed tools are replayed on the task's initial state; mapping tools'
/// results are read from the `tool` messages (or `<tool_response>` user turns); user replies are
/// matched against the hidden slots exactly as the environment does.
pub fn trajectory_from_messages(
    world: &Arc<CompiledTask>,
    messages: &[ChatMessage],
) -> crate::Result<Trajectory> {
    let mut rec = Recorder::new(world.clone());
    let mut turn = 0;
    // Tool calls of the latest assistant turn waiting for their response message: (id, tool,
    // whether the message holds the result; state-backed results come from the replay).
    let mut pending: Vec<(String, String, bool)> = Vec::new();
    let mut asked = false;
    let mut seen_instruction = false;
    for message in messages {
        match message.role {
            Role::System | Role::Developer => {}
            Role::Assistant => {
                turn += 1;
                pending.clear();
                asked = false;
                let parsed = parse_assistant(message, turn);
                if !parsed.text.is_empty() {
                    rec.events.push(Event::Said {
                        step: turn,
                        text: parsed.text.clone(),
                    });
                }
                if let Some(marker) = parsed.marker {
                    rec.events.push(Event::Stopped { step: turn, marker });
                    break;
                }
                if let Some(answer) = &parsed.answer {
                    rec.events.push(Event::Answered {
                        step: turn,
                        text: answer.clone(),
                    });
                    break;
                }
                if parsed.calls.is_empty() {
                    rec.events.push(Event::AskedUser {
                        step: turn,
                        text: parsed.question().to_owned(),
                    });
                    asked = true;
                }
                for call in &parsed.calls {
                    let mut unknown = |_: &str, _: &Value| Ok(None);
                    let needs_message = rec.call(turn, call, &mut unknown).is_none();
                    pending.push((call.id.clone(), call.name.clone(), needs_message));
                }
            }
            Role::Tool => {
                let index = match &message.tool_call_id {
                    Some(id) => pending.iter().position(|(p, _, _)| p == id),
                    None if pending.is_empty() => None,
                    None => Some(0),
                };
                if let Some(i) = index {
                    let (_, tool, needs_message) = pending.remove(i);
                    if needs_message {
                        rec.tool_message(turn, &tool, message.content_str());
                    }
                }
            }
            Role::User => {
                let content = message.content_str();
                if !seen_instruction && turn == 0 {
                    seen_instruction = true;
                } else if content.trim_start().starts_with("<tool_response>") {
                    if !pending.is_empty() {
                        let (_, tool, needs_message) = pending.remove(0);
                        if needs_message {
                            rec.tool_message(turn, &tool, content);
                        }
                    }
                } else if asked {
                    let revealed =
                        revealed_slots(&world.task.hidden_context.slots, &rec.revealed, content);
                    rec.user_reply(turn, content, &revealed);
                    if content.contains("###TRANSFER_TO_HUMAN") {
                        rec.events.push(Event::Stopped {
                            step: turn,
                            marker: StopMarker::TransferToHuman,
                        });
                        break;
                    } else if content.contains("###STOP") {
                        rec.events.push(Event::Stopped {
                            step: turn,
                            marker: StopMarker::Stop,
                        });
                        break;
                    }
                    asked = false;
                }
            }
        }
    }
    Ok(rec.trajectory(turn))
}

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

/// An OpenAI tool call (for scripted agents and tests).
pub fn openai_call(id: &str, name: &str, args: &Value) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        kind: "function".into(),
        function: FunctionCall {
            name: name.to_owned(),
            arguments: args.to_string(),
        },
    }
}

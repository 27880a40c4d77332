//! The step logic: one assistant message routed to the tools, the simulated user or the end
//! of the episode.

use super::ENV_ID;
use super::config::Protocol;
use super::parse::parse_assistant;
use super::tool_env::ToolEnv;
use crate::env::{Environment, Span, Step};
use crate::llm::{ChatMessage, Role};
use crate::tooluse::rubric::{Event, StopMarker};
use crate::tooluse::user::{USER_UNAVAILABLE, UserReply, revealed_slots};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Why an episode ended.
fn end_reason(marker: StopMarker) -> &'static str {
    match marker {
        StopMarker::Stop => "stop",
        StopMarker::TransferToHuman => "transfer_to_human",
    }
}

impl ToolEnv {
    /// One assistant turn that makes one OpenAI tool call of `name` with `args`, its id
    /// `call_<n>` numbered in the episode's order: how every tool-call surface (the task
    /// [`crate::toolcall::ToolSession`], verl's task tools) plays a call.
    pub fn call_tool(&mut self, name: &str, args: &Value) -> crate::Result<Step> {
        self.tool_calls += 1;
        let id = format!("call_{}", self.tool_calls);
        let message = ChatMessage {
            role: Role::Assistant,
            content: None,
            tool_calls: vec![super::parse::openai_call(&id, name, args)],
            tool_call_id: None,
        };
        self.step_message(&message)
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
}

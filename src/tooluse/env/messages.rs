//! The reader of saved conversations: the facts of a finished episode rebuilt from its messages.

use super::parse::parse_assistant;
use super::recorder::Recorder;
use crate::llm::{ChatMessage, Role};
use crate::tooluse::rubric::{Event, StopMarker, Trajectory};
use crate::tooluse::task::CompiledTask;
use crate::tooluse::user::revealed_slots;
use serde_json::Value;
use std::sync::Arc;

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

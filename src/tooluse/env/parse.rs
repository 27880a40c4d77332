//! An assistant turn read: tool calls (either wire form), `<answer>`, stop markers; and the
//! OpenAI tool call written for scripted agents.

use crate::llm::{ChatMessage, FunctionCall, ParsedCall, ToolCall, parse_tool_calls};
use crate::tooluse::rubric::StopMarker;
use serde_json::Value;

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
pub(super) fn tag<'a>(text: &'a str, name: &str) -> Option<&'a str> {
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

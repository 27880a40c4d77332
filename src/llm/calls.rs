//! Tool calls in an assistant message, in either wire form: OpenAI `tool_calls` entries and
//! Hermes `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks in the text. Both are
//! read whatever protocol the conversation uses (small models mix them); a call that cannot be
//! read keeps its raw text and says why, so the environment answers it with a tool error.

use super::ChatMessage;
use serde_json::{Value, json};

/// One tool call as parsed from an assistant turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    /// Call id (the OpenAI id, or `call_<turn>_<i>` when the message has none, as in Hermes).
    pub id: String,
    /// Tool name (empty when it could not be read).
    pub name: String,
    /// Arguments, or why they could not be read.
    pub args: Result<Value, String>,
    /// The raw argument text (for the facts of unreadable calls).
    pub raw: String,
}

/// Splits an assistant message into its text outside `<tool_call>` blocks (trimmed) and its tool
/// calls in order: first the OpenAI `tool_calls`, then the Hermes blocks of the text (an
/// unclosed block runs to the end). `turn` numbers the ids of calls that have none.
pub fn parse_tool_calls(message: &ChatMessage, turn: u32) -> (String, Vec<ParsedCall>) {
    let mut calls = Vec::new();
    for (i, call) in message.tool_calls.iter().enumerate() {
        calls.push(ParsedCall {
            id: if call.id.is_empty() {
                format!("call_{turn}_{i}")
            } else {
                call.id.clone()
            },
            name: call.function.name.clone(),
            args: parse_arguments_text(&call.function.arguments),
            raw: call.function.arguments.clone(),
        });
    }
    let mut text = String::new();
    let mut rest = message.content_str();
    while let Some(start) = rest.find("<tool_call>") {
        text.push_str(&rest[..start]);
        let after = &rest[start + "<tool_call>".len()..];
        let (body, next) = match after.find("</tool_call>") {
            Some(end) => (&after[..end], &after[end + "</tool_call>".len()..]),
            None => (after, ""),
        };
        let i = calls.len();
        calls.push(parse_hermes_call(body.trim(), format!("call_{turn}_{i}")));
        rest = next;
    }
    text.push_str(rest);
    (text.trim().to_owned(), calls)
}

fn parse_arguments_text(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str::<Value>(text).map_err(|e| format!("arguments are not valid JSON: {e}"))
}

fn parse_hermes_call(body: &str, id: String) -> ParsedCall {
    let parsed: Result<Value, String> =
        serde_json::from_str(body).map_err(|e| format!("tool call is not valid JSON: {e}"));
    let (name, args) = match parsed {
        Ok(Value::Object(map)) => {
            let name = map
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let args = match map.get("arguments") {
                None => Ok(json!({})),
                Some(Value::String(s)) => parse_arguments_text(s),
                Some(v) => Ok(v.clone()),
            };
            let args = if name.is_empty() {
                Err("tool call has no \"name\"".to_owned())
            } else {
                args
            };
            (name, args)
        }
        Ok(_) => (String::new(), Err("tool call must be a JSON object".into())),
        Err(e) => (String::new(), Err(e)),
    };
    ParsedCall {
        id,
        name,
        args,
        raw: body.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{FunctionCall, Role, ToolCall};

    #[test]
    fn openai_and_hermes_calls_are_read_in_order() {
        let mut message = ChatMessage::text(
            Role::Assistant,
            "Looking. <tool_call>{\"name\": \"find\", \"arguments\": {\"q\": 1}}</tool_call> \
             then <tool_call>{\"name\": \"get\", \"arguments\": \"{\\\"id\\\": 2}\"}",
        );
        message.tool_calls.push(ToolCall {
            id: "abc".into(),
            kind: "function".into(),
            function: FunctionCall {
                name: "lookup".into(),
                arguments: "{\"x\": true}".into(),
            },
        });
        let (text, calls) = parse_tool_calls(&message, 3);
        assert_eq!(text, "Looking.  then");
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["lookup", "find", "get"]);
        assert_eq!(calls[0].id, "abc");
        assert_eq!(calls[1].id, "call_3_1");
        assert_eq!(calls[1].args, Ok(json!({"q": 1})));
        assert_eq!(calls[2].args, Ok(json!({"id": 2})));
    }

    #[test]
    fn unreadable_calls_say_why_and_keep_their_text() {
        let message = ChatMessage::text(
            Role::Assistant,
            "<tool_call>not json</tool_call><tool_call>[1]</tool_call><tool_call>{\"arguments\": {}}</tool_call>",
        );
        let (text, calls) = parse_tool_calls(&message, 1);
        assert_eq!(text, "");
        assert_eq!(calls.len(), 3);
        assert!(
            calls[0]
                .args
                .as_ref()
                .unwrap_err()
                .contains("not valid JSON")
        );
        assert_eq!(calls[0].raw, "not json");
        assert_eq!(
            calls[1].args,
            Err("tool call must be a JSON object".to_owned())
        );
        assert_eq!(calls[2].args, Err("tool call has no \"name\"".to_owned()));
    }
}

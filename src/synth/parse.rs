//! Strict parsing of stage answers, and the reject records: an answer is ONE `<tag>` block
//! holding a JSON object of the stage's exact shape; anything else drops the item with a reason.

use crate::llm::{ChatResponse, parse_json_answer};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why an item was dropped. Stable snake_case codes (`missing_tag`, `rule_rejected`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// The answer was cut off: an unclosed tag, or no tag and finish reason `length`.
    Truncated,
    /// The answer has no `<tag>` block, or more than one.
    MissingTag,
    /// The JSON inside the tag ends early.
    TruncatedJson,
    /// The text inside the tag is not JSON.
    InvalidJson,
    /// The JSON does not have the stage's shape (missing, unknown or mistyped fields).
    InvalidShape,
    /// The workflow does not have 5-7 sub-goals.
    WorkflowSize,
    /// The draft does not have 3-5 tools.
    ToolCount,
    /// A tool has no `parameters` or no `outputs` schema.
    ToolWithoutSchema,
    /// A tool schema does not compile, or `parameters` is not an object schema.
    InvalidToolSchema,
    /// A tool name is invalid or repeated.
    InvalidToolName,
    /// Two draft tools share a category.
    ToolCategories,
    /// The forbidden behaviour does not name a tool of the task, or lacks its action or reason.
    ForbiddenBehaviour,
    /// The tool check kept a tool the draft did not have, or lost one without dropping it.
    ToolMismatch,
    /// A tool's outputs are not simulatable (not an object of at most 2 fields).
    OutputsNotSimulatable,
    /// The tool check did not add 1-2 distractor tools.
    DistractorCount,
    /// The tool check dropped the tool of the forbidden behaviour.
    ForbiddenToolDropped,
    /// The instruction is not one sentence.
    InstructionNotOneSentence,
    /// The instruction gives away a hidden slot's value (no information gap).
    InstructionLeaksSlot,
    /// No slots, or a slot with an invalid name, an empty value or no keywords, or a duplicate.
    InvalidSlots,
    /// The assembled task does not validate.
    InvalidTask,
    /// Fewer usable teacher rollouts than required (unfinished, or too many failed tool calls).
    RolloutsUnusable,
    /// A rubric list is empty, an item has no rule, or item ids are invalid or repeated.
    InvalidRubric,
    /// A sub-goal item names no workflow step, or one out of range.
    WorkflowLink,
    /// A rule body does not parse or calls a predicate outside the whitelist.
    RuleRejected,
    /// The compiled rubric could not be loaded into the rubric engine.
    RubricLoad,
    /// Scoring a teacher rollout raised an error (inference limit, Prolog error).
    RubricError,
    /// The teacher rollouts leave too much of the workflow unexecuted.
    WorkflowUnexecuted,
    /// The teacher's best rollout does not pass the rubric.
    BestRolloutFails,
}

/// A dropped item: a line of `<stage>.rejects.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reject {
    /// Item id.
    pub id: String,
    /// The stage that dropped it.
    pub stage: String,
    /// The stage's version.
    pub version: String,
    /// Why, as a code.
    pub reason: RejectReason,
    /// Why, in words.
    pub detail: String,
    /// The LLM answer that was rejected, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The pipeline's fingerprint of what produced the record (prompt, settings, input).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fingerprint: String,
}

impl Reject {
    /// A reject of the current item (id, stage and version are filled in by the runner).
    pub(crate) fn new(reason: RejectReason, detail: impl Into<String>) -> Box<Self> {
        Box::new(Reject {
            id: String::new(),
            stage: String::new(),
            version: String::new(),
            reason,
            detail: detail.into(),
            answer: None,
            fingerprint: String::new(),
        })
    }

    /// The same reject, recording the answer it is about.
    pub(crate) fn with_answer(mut self: Box<Self>, answer: &str) -> Box<Self> {
        self.answer = Some(answer.to_owned());
        self
    }
}

/// The JSON object in the single `<tag>...</tag>` block of an answer (text outside the block is
/// ignored; a fenced ```` ```json ```` block inside it is accepted).
pub(crate) fn tagged_object(response: &ChatResponse, tag: &str) -> Result<Value, Box<Reject>> {
    let text = response.message.content_str();
    let cut = response.finish_reason.as_deref() == Some("length");
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let reject = |reason, detail: String| Err(Reject::new(reason, detail).with_answer(text));
    match text.matches(&open).count() {
        0 if cut => {
            return reject(
                RejectReason::Truncated,
                format!("no {open} block and the answer was cut at the token limit"),
            );
        }
        0 => return reject(RejectReason::MissingTag, format!("no {open} block")),
        1 => {}
        n => {
            return reject(
                RejectReason::MissingTag,
                format!("{n} {open} blocks; exactly one expected"),
            );
        }
    }
    let start = text.find(&open).map_or(0, |i| i + open.len());
    let rest = &text[start..];
    let Some(end) = rest.find(&close) else {
        return reject(RejectReason::Truncated, format!("{open} is never closed"));
    };
    let value = match parse_json_answer(&rest[..end]) {
        Ok(v) => v,
        Err(e) if e.contains("EOF while parsing") || e.contains("unterminated code fence") => {
            return reject(RejectReason::TruncatedJson, e);
        }
        Err(e) => return reject(RejectReason::InvalidJson, e),
    };
    if !value.is_object() {
        return reject(
            RejectReason::InvalidShape,
            format!("{open} must hold a JSON object"),
        );
    }
    Ok(value)
}

/// `value` as the stage's answer type (strict: the types deny unknown fields).
pub(crate) fn shape<T: DeserializeOwned>(value: Value, answer: &str) -> Result<T, Box<Reject>> {
    serde_json::from_value(value)
        .map_err(|e| Reject::new(RejectReason::InvalidShape, e.to_string()).with_answer(answer))
}

/// Parses the stage's answer: the tagged object, then its shape.
pub(crate) fn answer<T: DeserializeOwned>(
    response: &ChatResponse,
    tag: &str,
) -> Result<T, Box<Reject>> {
    let value = tagged_object(response, tag)?;
    shape(value, response.message.content_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::assistant_text;

    fn reason(text: &str) -> RejectReason {
        tagged_object(&assistant_text(text), "task")
            .unwrap_err()
            .reason
    }

    #[test]
    fn classifies_bad_answers() {
        assert_eq!(reason("{\"a\": 1}"), RejectReason::MissingTag);
        assert_eq!(
            reason("<task>{}</task><task>{}</task>"),
            RejectReason::MissingTag
        );
        assert_eq!(reason("<task>{\"a\": 1"), RejectReason::Truncated);
        assert_eq!(reason("<task>{\"a\": </task>"), RejectReason::TruncatedJson);
        assert_eq!(reason("<task>{a: 1}</task>"), RejectReason::InvalidJson);
        assert_eq!(reason("<task>[1]</task>"), RejectReason::InvalidShape);
        let mut cut = assistant_text("Let me think about");
        cut.finish_reason = Some("length".into());
        assert_eq!(
            tagged_object(&cut, "task").unwrap_err().reason,
            RejectReason::Truncated
        );
        let ok = tagged_object(
            &assistant_text("Here:\n<task>\n```json\n{\"a\": 1}\n```\n</task>"),
            "task",
        )
        .unwrap();
        assert_eq!(ok["a"], 1);
    }
}

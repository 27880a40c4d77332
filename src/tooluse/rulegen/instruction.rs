//! What the user says and what they keep back: the instruction and the hidden slots.

use super::{Action, RuleTask};
use crate::relations::Relation;
use crate::tooluse::task::Slot;

/// The instruction: who the user is (unless hidden) and what to do, the target named only
/// through the relation path.
pub(super) fn instruction(w: &RuleTask, phrase: &str, hide_user: bool, hide_value: bool) -> String {
    let mut instruction = String::new();
    if !hide_user {
        instruction.push_str(&format!("I'm {}. ", w.user));
    }
    instruction.push_str(&match (&w.action, hide_value) {
        (Action::Update { field }, true) => format!("Please update my {phrase}'s {field}."),
        (Action::Update { field }, false) => {
            format!("Please change my {phrase}'s {field} to {}.", w.value)
        }
        (Action::Message, true) => format!("Please send my {phrase} a message from me."),
        (Action::Message, false) => {
            format!("Please send my {phrase} this message: {}", w.value)
        }
    });
    instruction
}

/// The hidden slots (the user's name, which relative, the new value; each only when hidden or
/// ambiguous) and the question that asks for the value.
pub(super) fn slots(
    w: &RuleTask,
    path: &[&Relation],
    hide_user: bool,
    hide_value: bool,
) -> (Vec<Slot>, String) {
    let ambiguous = w.candidates.len() > 1;
    let mut slots = Vec::new();
    if hide_user {
        slots.push(Slot {
            name: "user_name".into(),
            value: w.user.clone(),
            keywords: vec!["your name".into(), "who are you".into()],
            description: "your full name".into(),
        });
    }
    if ambiguous {
        slots.push(Slot {
            name: "target".into(),
            value: w.target.clone(),
            keywords: vec!["which".into()],
            description: format!("which {} you mean", path.last().expect("path").singular),
        });
    }
    let (value_kw, value_desc, ask_value) = match &w.action {
        Action::Update { field } if field == "hobby" => (
            vec!["hobby".to_owned()],
            "the new hobby".to_owned(),
            "What should the new hobby be?".to_owned(),
        ),
        Action::Update { .. } => (
            vec!["occupation".into(), "job".into()],
            "the new occupation".into(),
            "What should the new occupation be?".into(),
        ),
        Action::Message => (
            vec!["message".into()],
            "the message text".into(),
            "What message should I send?".into(),
        ),
    };
    if hide_value {
        slots.push(Slot {
            name: "value".into(),
            value: w.value.clone(),
            keywords: value_kw,
            description: value_desc,
        });
    }
    (slots, ask_value)
}

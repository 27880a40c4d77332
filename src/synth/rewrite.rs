//! Stage `rewrite`, the information gap: the detailed task becomes a one-sentence
//! underspecified instruction (what the agent sees) and a hidden user context of structured
//! slots (what only the simulated user knows). An instruction that contains a slot's value is
//! rejected: the environment would count that value as already revealed.

use super::parse::{Reject, RejectReason, answer};
use super::prompt::{REWRITE, ask};
use super::rollout::scaffold_rubric;
use super::{Ctx, ItemError, Outcome, SynthItem, SynthStage, missing, numbered};
use crate::tooluse::task::{HiddenContext, Slot, ValidateOptions, valid_ident};
use crate::tooluse::user::revealed_slots;
use serde::Deserialize;
use std::collections::BTreeSet;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    instruction: String,
    slots: Vec<Slot>,
    #[serde(default)]
    context: String,
}

/// Slots a rewrite may hide.
pub const SLOT_COUNT: std::ops::RangeInclusive<usize> = 1..=5;
/// Longest instruction, in characters.
pub const MAX_INSTRUCTION_CHARS: usize = 400;

pub(super) fn run(ctx: &Ctx, item: &SynthItem) -> Result<Outcome, ItemError> {
    if item.tools.is_empty() || item.workflow.is_empty() {
        return Err(missing(SynthStage::Rewrite, "tools or workflow"));
    }
    let tools: Vec<String> = item
        .tools
        .iter()
        .map(|t| format!("{} ({})", t.name, t.description))
        .collect();
    let response = ask(
        ctx,
        &REWRITE,
        &[
            ("persona", &item.persona),
            ("task", &item.task),
            ("workflow", &numbered(&item.workflow)),
            ("tools", &tools.join("; ")),
        ],
    )?;
    let text = response.message.content_str();
    let answer: Answer = match answer(&response, "rewrite") {
        Ok(a) => a,
        Err(reject) => return Ok(Err(reject)),
    };
    Ok(check(ctx, item, answer).map_err(|r| r.with_answer(text)))
}

/// Whether `text` is one sentence: no sentence end (`.`, `!`, `?`) followed by more text.
fn one_sentence(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    !chars
        .windows(3)
        .any(|w| matches!(w[0], '.' | '!' | '?') && w[1].is_whitespace() && !w[2].is_whitespace())
        && !text.contains('\n')
}

fn check(ctx: &Ctx, item: &SynthItem, a: Answer) -> Result<SynthItem, Box<Reject>> {
    let reject = |reason, detail: String| Err(Reject::new(reason, detail));
    let instruction = a.instruction.trim().to_owned();
    if instruction.is_empty()
        || instruction.chars().count() > MAX_INSTRUCTION_CHARS
        || !one_sentence(&instruction)
    {
        return reject(
            RejectReason::InstructionNotOneSentence,
            format!("the instruction must be one sentence (<= {MAX_INSTRUCTION_CHARS} chars)"),
        );
    }
    if !SLOT_COUNT.contains(&a.slots.len()) {
        return reject(
            RejectReason::InvalidSlots,
            format!("1-5 slots expected, got {}", a.slots.len()),
        );
    }
    let mut names = BTreeSet::new();
    let mut slots = Vec::new();
    for s in a.slots {
        let keywords: Vec<String> = s.keywords.iter().map(|k| k.trim().to_lowercase()).collect();
        if !valid_ident(&s.name)
            || !names.insert(s.name.clone())
            || s.value.trim().is_empty()
            || keywords.is_empty()
            || keywords.iter().any(String::is_empty)
        {
            return reject(
                RejectReason::InvalidSlots,
                format!(
                    "slot {:?}: needs a unique [a-z][a-z0-9_]* name, a value and keywords",
                    s.name
                ),
            );
        }
        slots.push(Slot {
            value: s.value.trim().to_owned(),
            keywords,
            description: s.description.trim().to_owned(),
            ..s
        });
    }
    let leaked = revealed_slots(&slots, &BTreeSet::new(), &instruction);
    if !leaked.is_empty() {
        return reject(
            RejectReason::InstructionLeaksSlot,
            format!("the instruction gives away slot(s) {}", leaked.join(", ")),
        );
    }
    let next = SynthItem {
        instruction,
        hidden_context: Some(HiddenContext {
            slots,
            text: a.context.trim().to_owned(),
        }),
        ..item.clone()
    };
    let task = next.to_task(scaffold_rubric(), ctx.config.max_turns);
    if let Err(e) = task.validate(ValidateOptions::default()) {
        return reject(RejectReason::InvalidTask, e.to_string());
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_sentence() {
        assert!(super::one_sentence("Book me a flight for my trip."));
        assert!(super::one_sentence("Pay the 3.5 EUR invoice, please!"));
        assert!(!super::one_sentence("Book a flight. Then pay."));
        assert!(!super::one_sentence("Book a flight?\nThanks"));
    }
}

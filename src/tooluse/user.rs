//! User simulators for the tool environment: a rule-based one that reveals one hidden slot per
//! turn, only when the question asks about it ("I don't know." otherwise, never a hint about
//! tools), and an LLM one with SynthAgent's constraints (one sentence, gradual disclosure).
//! Which slots a reply revealed is decided by one function, [`revealed_slots`], for both, and
//! for trajectories read back from messages.

use super::mock_tools::SimError;
use crate::llm::{ChatMessage, ChatRequest, LlmBackend, Role};
use crate::tooluse::task::{Slot, Task};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Which user simulator answers the agent's questions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum UserKind {
    /// The rule-based user: reveals a slot when a question names one of its keywords (no LLM,
    /// microseconds per turn; `RuleUser`).
    #[default]
    Rule,
    /// SynthAgent's LLM user (`LlmUser`).
    Llm,
}

impl UserKind {
    /// A fresh user of this kind for one episode of `task`; the LLM user asks `model` through
    /// `backend` with `seed`.
    pub fn simulator(
        self,
        task: &Task,
        backend: Arc<dyn LlmBackend>,
        model: &str,
        seed: Option<u64>,
    ) -> Box<dyn UserSimulator> {
        match self {
            UserKind::Llm => Box::new(LlmUser::new(task, backend, model, seed)),
            UserKind::Rule => Box::new(RuleUser::new(task)),
        }
    }
}

impl std::str::FromStr for UserKind {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "rule" => Ok(UserKind::Rule),
            "llm" => Ok(UserKind::Llm),
            other => Err(format!("unknown user simulator {other:?} (rule, llm)")),
        }
    }
}

/// What the agent sees when the user simulator failed (the failure itself goes to the step's
/// metadata and the log, not into the policy's context).
pub const USER_UNAVAILABLE: &str = "(The user did not answer.)";

/// A user's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserReply {
    /// The text the agent sees.
    pub text: String,
    /// Slots the reply revealed for the first time.
    pub revealed: Vec<String>,
}

/// A simulated user. One per episode.
pub trait UserSimulator: Send {
    /// Replies to the agent's question.
    fn reply(&mut self, question: &str) -> Result<UserReply, SimError>;
}

/// The reply when the question asks about nothing the user knows (or already said).
pub const DONT_KNOW: &str = "I don't know.";

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether `question` mentions one of the slot's keywords (whole words; multi-word keywords as
/// a word sequence).
pub fn asks_about(slot: &Slot, question: &str) -> bool {
    let q = words(question);
    slot.effective_keywords().iter().any(|k| {
        let kw = words(k);
        !kw.is_empty() && q.windows(kw.len()).any(|w| w == kw.as_slice())
    })
}

/// Slots (in task order) whose value appears in `reply` (case-insensitive) and that are not in
/// `already`.
pub fn revealed_slots(slots: &[Slot], already: &BTreeSet<String>, reply: &str) -> Vec<String> {
    let lower = reply.to_lowercase();
    slots
        .iter()
        .filter(|s| !already.contains(&s.name) && lower.contains(&s.value.to_lowercase()))
        .map(|s| s.name.clone())
        .collect()
}

/// The rule-based user.
pub struct RuleUser {
    slots: Vec<Slot>,
    revealed: BTreeSet<String>,
}

impl RuleUser {
    /// A user who knows `task`'s hidden slots.
    pub fn new(task: &Task) -> Self {
        RuleUser {
            slots: task.hidden_context.slots.clone(),
            revealed: BTreeSet::new(),
        }
    }
}

impl UserSimulator for RuleUser {
    fn reply(&mut self, question: &str) -> Result<UserReply, SimError> {
        let asked: Vec<&Slot> = self
            .slots
            .iter()
            .filter(|s| asks_about(s, question))
            .collect();
        // One new slot per turn, in task order; a slot asked again is repeated.
        let pick = asked
            .iter()
            .find(|s| !self.revealed.contains(&s.name))
            .or_else(|| asked.first());
        let Some(slot) = pick else {
            return Ok(UserReply {
                text: DONT_KNOW.into(),
                revealed: Vec::new(),
            });
        };
        let text = format!("{}.", slot.value.trim_end_matches('.'));
        let revealed = revealed_slots(&self.slots, &self.revealed, &text);
        self.revealed.extend(revealed.iter().cloned());
        Ok(UserReply { text, revealed })
    }
}

/// The LLM user: persona, hidden context and the conversation so far go to the backend.
pub struct LlmUser {
    backend: Arc<dyn LlmBackend>,
    model: String,
    seed: Option<u64>,
    slots: Vec<Slot>,
    revealed: BTreeSet<String>,
    history: Vec<ChatMessage>,
}

impl LlmUser {
    /// A user for `task` answering through `backend`.
    pub fn new(task: &Task, backend: Arc<dyn LlmBackend>, model: &str, seed: Option<u64>) -> Self {
        let mut system = format!(
            "You are a user talking to an assistant. Persona: {}\nYour request: {}\n",
            task.persona, task.instruction
        );
        system.push_str("What you know (the assistant does not):\n");
        for slot in &task.hidden_context.slots {
            let label = if slot.description.is_empty() {
                &slot.name
            } else {
                &slot.description
            };
            system.push_str(&format!("- {label}: {}\n", slot.value));
        }
        if !task.hidden_context.text.is_empty() {
            system.push_str(&format!("{}\n", task.hidden_context.text));
        }
        system.push_str(
            "Rules: answer in ONE short sentence; reveal only what the assistant asks about, one \
             piece at a time; if asked about something you do not know, say you don't know; \
             never mention tools, APIs or how to solve the task; when the assistant has done \
             what you wanted, reply exactly ###STOP; if you want a human agent, reply \
             ###TRANSFER_TO_HUMAN.",
        );
        LlmUser {
            backend,
            model: model.to_owned(),
            seed,
            slots: task.hidden_context.slots.clone(),
            revealed: BTreeSet::new(),
            history: vec![ChatMessage::text(Role::System, system)],
        }
    }
}

impl UserSimulator for LlmUser {
    fn reply(&mut self, question: &str) -> Result<UserReply, SimError> {
        // Roles are swapped: the agent's questions are "user" turns of the simulator's chat.
        self.history.push(ChatMessage::text(Role::User, question));
        let mut request = ChatRequest::new(&self.model, self.history.clone());
        request.temperature = Some(0.0);
        request.seed = self.seed;
        let answer = match self.backend.chat(&request) {
            Ok(answer) => answer,
            Err(e) => {
                // The question stays unanswered: the next one starts from the same history.
                self.history.pop();
                return Err(e.into());
            }
        };
        let text = answer.message.content_str().trim().to_owned();
        self.history
            .push(ChatMessage::text(Role::Assistant, text.clone()));
        let revealed = revealed_slots(&self.slots, &self.revealed, &text);
        self.revealed.extend(revealed.iter().cloned());
        Ok(UserReply { text, revealed })
    }
}

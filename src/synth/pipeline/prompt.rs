//! The versioned stage prompts (`prompts/synth/<stage>.v<N>.md`, embedded at compile time) and
//! the one way stages ask the LLM. A prompt is changed by adding a new version file and pointing
//! the constant at it, so recorded outputs always name the prompt that produced them.

use super::{Ctx, ItemError};
use crate::synth::llm::{ChatMessage, ChatRequest, ChatResponse};

/// A stage prompt: Markdown with `{{name}}` placeholders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prompt {
    /// `<stage>.v<N>`, recorded in every record the stage writes.
    pub version: &'static str,
    /// The template.
    pub text: &'static str,
}

impl Prompt {
    /// The template with every `{{name}}` replaced by its value.
    pub fn render(&self, vars: &[(&str, &str)]) -> String {
        let mut out = self.text.to_owned();
        for (name, value) in vars {
            out = out.replace(&format!("{{{{{name}}}}}"), value);
        }
        out
    }

    /// The placeholder names of the template, in order of first use.
    pub fn placeholders(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        let mut rest = self.text;
        while let Some(start) = rest.find("{{") {
            let after = &rest[start + 2..];
            let Some(end) = after.find("}}") else { break };
            let name = &after[..end];
            if !names.contains(&name) {
                names.push(name);
            }
            rest = &after[end + 2..];
        }
        names
    }
}

/// Persona -> task, workflow, tools, forbidden behaviour.
pub const DRAFT: Prompt = Prompt {
    version: "draft.v1",
    text: include_str!("../../../prompts/synth/draft.v1.md"),
};
/// The tool check.
pub const TOOLS: Prompt = Prompt {
    version: "tools.v1",
    text: include_str!("../../../prompts/synth/tools.v1.md"),
};
/// The fuzzy rewrite.
pub const REWRITE: Prompt = Prompt {
    version: "rewrite.v1",
    text: include_str!("../../../prompts/synth/rewrite.v1.md"),
};
/// The teacher's system prompt (wraps the environment's).
pub const TEACHER: Prompt = Prompt {
    version: "teacher.v1",
    text: include_str!("../../../prompts/synth/teacher.v1.md"),
};
/// Rubric extraction.
pub const RUBRIC: Prompt = Prompt {
    version: "rubric.v1",
    text: include_str!("../../../prompts/synth/rubric.v1.md"),
};

/// Every prompt, in stage order.
pub const PROMPTS: [Prompt; 5] = [DRAFT, TOOLS, REWRITE, TEACHER, RUBRIC];

/// Sends `prompt` rendered with `vars` as one user message with the generation settings. An
/// endpoint or cache failure is an item error (not recorded; a rerun retries it).
pub(crate) fn ask(
    ctx: &Ctx,
    prompt: &Prompt,
    vars: &[(&str, &str)],
) -> Result<ChatResponse, ItemError> {
    let mut request = ChatRequest::new(
        &ctx.config.model,
        vec![ChatMessage::text("user", prompt.render(vars))],
    );
    request.temperature = Some(ctx.config.temperature);
    request.seed = Some(ctx.config.seed);
    request.max_tokens = ctx.config.max_tokens;
    ctx.backend
        .chat(&request)
        .map_err(|e| format!("{}: {e}", prompt.version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prompt_is_versioned_and_its_placeholders_are_the_stages() {
        let expected: [&[&str]; 5] = [
            &["persona"],
            &["task", "workflow", "forbidden", "tools"],
            &["persona", "task", "workflow", "tools"],
            &["env_system"],
            &[
                "task",
                "workflow",
                "forbidden",
                "tools",
                "slots",
                "rollouts",
            ],
        ];
        for (prompt, want) in PROMPTS.iter().zip(expected) {
            let stage = prompt.version.split('.').next().unwrap();
            assert!(
                prompt
                    .text
                    .starts_with(&format!("# rulegym synth: {stage} (")),
                "{}",
                prompt.version
            );
            let mut got = prompt.placeholders();
            got.sort_unstable();
            let mut want = want.to_vec();
            want.sort_unstable();
            assert_eq!(got, want, "{}", prompt.version);
        }
        let r = DRAFT.render(&[("persona", "a baker")]);
        assert!(r.contains("a baker") && !r.contains("{{"));
    }
}

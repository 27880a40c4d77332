//! The versioned stage prompts (`prompts/synth/<stage>.v<N>.md`, embedded at compile time) and
//! the one way stages ask the LLM. A prompt is changed by adding a new version file and pointing
//! the constant at it, so recorded outputs always name the prompt that produced them.

use super::{Ctx, ItemError};
use crate::llm::{ChatMessage, ChatRequest, ChatResponse, Role};

/// A stage prompt: Markdown with `{{name}}` placeholders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prompt {
    /// `<stage>.v<N>`, recorded in every record the stage writes.
    pub version: &'static str,
    /// The template.
    pub text: &'static str,
}

impl Prompt {
    /// The template with every `{{name}}` of `vars` replaced by its value, in one pass: a value
    /// that itself contains `{{...}}` (a persona, an LLM's task text) is inserted verbatim.
    pub fn render(&self, vars: &[(&str, &str)]) -> String {
        let mut out = String::with_capacity(self.text.len());
        let mut rest = self.text;
        while let Some(start) = rest.find("{{") {
            let after = &rest[start + 2..];
            let value = after.find("}}").and_then(|end| {
                let name = &after[..end];
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v, end + 2))
            });
            match value {
                Some((value, skip)) => {
                    out.push_str(&rest[..start]);
                    out.push_str(value);
                    rest = &after[skip..];
                }
                None => {
                    out.push_str(&rest[..start + 2]);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
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

/// A prompt file `prompts/synth/<stage>.<version>.md`, embedded, versioned by its file name.
macro_rules! prompt_file {
    ($stage:literal, $version:literal) => {
        Prompt {
            version: concat!($stage, ".", $version),
            text: include_str!(concat!(
                "../../prompts/synth/",
                $stage,
                ".",
                $version,
                ".md"
            )),
        }
    };
}

/// Persona -> task, workflow, tools, forbidden behaviour.
pub const DRAFT: Prompt = prompt_file!("draft", "v1");
/// The tool check.
pub const TOOLS: Prompt = prompt_file!("tools", "v1");
/// The fuzzy rewrite.
pub const REWRITE: Prompt = prompt_file!("rewrite", "v1");
/// The teacher's system prompt (wraps the environment's).
pub const TEACHER: Prompt = prompt_file!("teacher", "v1");
/// Rubric extraction.
pub const RUBRIC: Prompt = prompt_file!("rubric", "v1");

/// Every prompt, in stage order.
pub const PROMPTS: [Prompt; 5] = [DRAFT, TOOLS, REWRITE, TEACHER, RUBRIC];

/// Sends `prompt` rendered with `vars` as one user message with the generation settings. An
/// endpoint or cache failure is an item error (not recorded; a rerun retries it).
pub(crate) fn ask(
    ctx: &Ctx,
    prompt: &Prompt,
    vars: &[(&str, &str)],
) -> Result<ChatResponse, ItemError> {
    ask_seeded(ctx, prompt, vars, ctx.config.seed)
}

/// [`ask`] with the request's seed given (per-trajectory rubric extraction asks with each
/// rollout's seed, so the requests of rollouts with the same facts are still distinct samples).
pub(crate) fn ask_seeded(
    ctx: &Ctx,
    prompt: &Prompt,
    vars: &[(&str, &str)],
    seed: u64,
) -> Result<ChatResponse, ItemError> {
    let mut request = ChatRequest::new(
        &ctx.config.model,
        vec![ChatMessage::text(Role::User, prompt.render(vars))],
    );
    request.temperature = Some(ctx.config.temperature);
    request.seed = Some(seed);
    request.max_tokens = ctx.config.max_tokens;
    ctx.backend
        .chat(&request)
        .map_err(|e| format!("{}: {e}", prompt.version))
}

/// A JSON value as the one-line canonical text used in prompts.
pub(crate) fn json_line(value: &serde_json::Value) -> String {
    crate::tooluse::mock_tools::canonical_json(value)
}

/// A numbered list, one line per entry (`1. ...`), as prompts show workflows.
pub(crate) fn numbered(lines: &[String]) -> String {
    lines
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}. {s}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
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

    #[test]
    fn values_are_inserted_verbatim_not_rendered_again() {
        let p = Prompt {
            version: "t.v1",
            text: "A {{persona}} B {{task}} C {{unknown}} D {{",
        };
        let r = p.render(&[("persona", "baker of {{task}}"), ("task", "bread")]);
        assert_eq!(r, "A baker of {{task}} B bread C {{unknown}} D {{");
        // Same bytes as plain substitution when no value holds a placeholder.
        let vars = [
            ("task", "t"),
            ("workflow", "1. w"),
            ("forbidden", "f"),
            ("tools", "x"),
        ];
        let mut plain = TOOLS.text.to_owned();
        for (name, value) in vars {
            plain = plain.replace(&format!("{{{{{name}}}}}"), value);
        }
        assert_eq!(TOOLS.render(&vars), plain);
    }
}

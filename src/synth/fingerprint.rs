//! What a record was produced from: the [`stage_key`] of a stage (pipeline version, prompt,
//! settings) and the [`fingerprint`] of a record (the key and its input record), by which a rerun
//! keeps or recomputes it.

use super::{
    Extraction, PIPELINE_VERSION, PipelineConfig, PipelineError, Prompt, SynthItem, SynthStage,
    filter, json_line, prompt, rubric_extract,
};

/// What `stage`'s records depend on besides their input record, as one canonical JSON line:
/// the pipeline version, the stage's prompt (version and SHA-256 of its text; the filter's rule
/// version) and exactly the settings the stage reads.
pub(crate) fn stage_key(config: &PipelineConfig, stage: SynthStage) -> String {
    let prompt = |p: &Prompt| {
        serde_json::json!({
            "version": p.version,
            "sha256": crate::io::sha256_hex(p.text.as_bytes()),
        })
    };
    let c = config;
    let generate = serde_json::json!({
        "model": c.model, "temperature": c.temperature, "seed": c.seed,
        "max_tokens": c.max_tokens,
    });
    let (prompt, settings) = match stage {
        SynthStage::Draft => (prompt(&prompt::DRAFT), generate),
        SynthStage::Tools => (prompt(&prompt::TOOLS), generate),
        SynthStage::Rewrite => {
            let mut s = generate;
            s["max_turns"] = c.max_turns.into();
            (prompt(&prompt::REWRITE), s)
        }
        SynthStage::Rollouts => (
            prompt(&prompt::TEACHER),
            serde_json::json!({
                "model": c.model, "sim_model": c.sim_model(),
                "teacher_temperature": c.teacher_temperature, "seed": c.seed,
                "rollouts": c.rollouts, "max_turns": c.max_turns, "user": c.user,
                "max_tool_error_fraction": c.max_tool_error_fraction,
            }),
        ),
        SynthStage::Rubric => {
            let mut s = generate;
            s["max_turns"] = c.max_turns.into();
            // Only a non-default mode is named, so records of runs made before the setting
            // existed (all joint) stay current.
            if c.extraction != Extraction::Joint {
                s["extraction"] = c.extraction.name().into();
                s["merge"] = rubric_extract::MERGE_VERSION.into();
            }
            (prompt(&prompt::RUBRIC), s)
        }
        SynthStage::Filter => (
            serde_json::json!({"version": filter::VERSION}),
            serde_json::json!({
                "max_turns": c.max_turns, "min_workflow_coverage": c.min_workflow_coverage,
                "min_best_reward": c.min_best_reward,
            }),
        ),
    };
    json_line(&serde_json::json!({
        "pipeline": PIPELINE_VERSION, "stage": stage.name(), "prompt": prompt,
        "settings": settings,
    }))
}

/// The fingerprint a record of a stage has when it was produced from `input` under the stage's
/// key (the pipeline version, the stage's prompt and the settings it reads): the SHA-256 of the
/// key and the input record's JSON.
pub fn fingerprint(
    config: &PipelineConfig,
    stage: SynthStage,
    input: &SynthItem,
) -> Result<String, PipelineError> {
    fingerprint_with(&stage_key(config, stage), input)
}

pub(crate) fn fingerprint_with(key: &str, input: &SynthItem) -> Result<String, PipelineError> {
    let record = serde_json::to_string(input).map_err(|e| PipelineError::Io {
        context: format!("serialising record {}", input.id),
        message: e.to_string(),
    })?;
    Ok(crate::io::sha256_hex(format!("{key}\n{record}").as_bytes()))
}

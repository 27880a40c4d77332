//! `rulegym synth`: the SynthAgent task-synthesis pipeline (persona -> draft -> tool check ->
//! rewrite -> teacher rollouts -> rubric -> filter) against an OpenAI-compatible endpoint, with
//! every exchange recorded for offline replay. See [`rulegym::synth`].

use rulegym::Result;
use rulegym::llm::LlmBackend;
use rulegym::llm::openai::{OpenAiBackend, OpenAiConfig, api_key_from_env};
use rulegym::synth::{self, Extraction, PipelineConfig, Stage};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a rerun into the same output directory does (shown after the flags in `--help`).
const RESUME_HELP: &str = "\
Resuming: rerunning into the same --out continues where the last run stopped. Every record \
carries a fingerprint of what produced it (the stage's prompt version and text, the settings \
the stage uses: --model, --sim-model, --temperature, --teacher-temperature, --seed, \
--max-tokens, --rollouts, --max-turns, --user, --extraction, whether set by a flag or by \
--preset, and the exact record it was made from). A \
stage keeps the records whose fingerprint matches the current input and settings, recomputes \
the others (an identical LLM request is answered from the cache), and drops the records of \
ids that are no longer in its input (e.g. another --personas file). The filter stage \
(--min-workflow-coverage, --min-best-reward) always recomputes. The files of stages before \
the first one in --stages must match the current settings, or the run stops before writing \
anything. To keep the results of an earlier run, use a fresh --out.";

/// Flags of `rulegym synth`.
#[derive(clap::Args, Debug)]
#[command(after_help = RESUME_HELP)]
pub struct Args {
    /// Personas: one per line, plain text or JSON {"persona": ..., "id": ...} (draft stage).
    #[arg(long)]
    personas: Option<PathBuf>,
    /// OpenAI-compatible endpoint (`http://host:8000/v1`); not needed with --replay-only.
    #[arg(long)]
    endpoint: Option<String>,
    /// Model of the generating stages and the teacher.
    #[arg(long)]
    model: String,
    /// Model of the tool and user simulators (default: --model, same endpoint).
    #[arg(long)]
    sim_model: Option<String>,
    /// Output directory (stage files, tasks.jsonl, mappings/, manifest.json); an existing one
    /// is resumed, with records made under other inputs or settings recomputed (see below).
    #[arg(long)]
    out: PathBuf,
    /// Stages to run, comma-separated, in order (draft,tools,rewrite,rollouts,rubric,filter).
    #[arg(long, value_delimiter = ',')]
    stages: Vec<String>,
    /// Record/replay cache directory (default OUT/llm-cache).
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Only replay recorded answers from the cache (no network; a miss fails its item).
    #[arg(long)]
    replay_only: bool,
    /// Items processed at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// A synthesis preset (`presets/synth/<name>.json`): synthagent gives the paper's 4 teacher
    /// rollouts, per-trajectory rubric extraction, LLM user, 16 turns and coverage-only filter
    /// (--min-best-reward 0). Flags below override it.
    #[arg(long)]
    preset: Option<String>,
    /// Teacher rollouts per task, at least 2 [2, or the preset's].
    #[arg(long)]
    rollouts: Option<u32>,
    /// Rubric extraction: joint (one request over all usable rollouts) or per-trajectory (one
    /// request per usable rollout, merged) [joint, or the preset's].
    #[arg(long)]
    extraction: Option<String>,
    /// User simulator of teacher rollouts: llm or rule [llm, or the preset's].
    #[arg(long)]
    user: Option<String>,
    /// Sampling temperature of the generating stages [0.7, or the preset's].
    #[arg(long)]
    temperature: Option<f64>,
    /// Sampling temperature of the teacher [0.7, or the preset's].
    #[arg(long)]
    teacher_temperature: Option<f64>,
    /// Seed passed to the endpoint.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Agent turns per teacher rollout, also the tasks' max_turns [16, or the preset's].
    #[arg(long)]
    max_turns: Option<u32>,
    /// Drop tasks whose teacher rollouts execute less of the workflow on average [0.6, or the
    /// preset's].
    #[arg(long)]
    min_workflow_coverage: Option<f64>,
    /// Drop tasks whose best teacher rollout scores less under the extracted rubric [1.0, or
    /// the preset's].
    #[arg(long)]
    min_best_reward: Option<f64>,
    /// Maximum tokens per generation request.
    #[arg(long)]
    max_tokens: Option<u32>,
    /// Name of an environment variable holding the API key.
    #[arg(long)]
    api_key_env: Option<String>,
    /// No progress bars.
    #[arg(long, short)]
    quiet: bool,
}

/// The API key in the environment variable `var` (an unset or empty variable is an error, not
/// an unauthenticated run).
/// The pipeline configuration of `args`: the defaults, then the preset's values, then the
/// flags given.
fn pipeline_config(args: &Args) -> Result<PipelineConfig> {
    let stages = if args.stages.is_empty() {
        Stage::ALL.to_vec()
    } else {
        args.stages
            .iter()
            .map(|s| Stage::parse(s))
            .collect::<std::result::Result<Vec<_>, _>>()?
    };
    let mut config = match &args.preset {
        Some(name) => PipelineConfig::from_preset(name)?,
        None => PipelineConfig::default(),
    };
    if let Some(user) = &args.user {
        config.user = user.parse().map_err(rulegym::Error::Config)?;
    }
    if let Some(extraction) = &args.extraction {
        config.extraction = Extraction::parse(extraction)?;
    }
    if let Some(v) = args.rollouts {
        config.rollouts = v;
    }
    if let Some(v) = args.temperature {
        config.temperature = v;
    }
    if let Some(v) = args.teacher_temperature {
        config.teacher_temperature = v;
    }
    if let Some(v) = args.max_turns {
        config.max_turns = v;
    }
    if let Some(v) = args.min_workflow_coverage {
        config.min_workflow_coverage = v;
    }
    if let Some(v) = args.min_best_reward {
        config.min_best_reward = v;
    }
    Ok(PipelineConfig {
        out: args.out.clone(),
        cache: args.cache.clone(),
        replay_only: args.replay_only,
        model: args.model.clone(),
        sim_model: args.sim_model.clone(),
        stages,
        concurrency: args.concurrency,
        seed: args.seed,
        max_tokens: args.max_tokens,
        progress: !args.quiet,
        ..config
    })
}

/// Runs `rulegym synth`.
pub fn run(args: Args) -> Result<()> {
    let config = pipeline_config(&args)?;
    let inner: Option<Arc<dyn LlmBackend>> = match (&args.endpoint, args.replay_only) {
        (_, true) => None,
        (Some(endpoint), false) => Some(Arc::new(OpenAiBackend::new(OpenAiConfig {
            endpoint: endpoint.clone(),
            api_key: args
                .api_key_env
                .as_deref()
                .map(|var| api_key_from_env("--api-key-env", var))
                .transpose()?,
            timeout: Duration::from_secs(300),
            max_concurrency: config.concurrency.max(1) * 2,
            ..OpenAiConfig::default()
        })?)),
        (None, false) => {
            return Err(rulegym::Error::Config(
                "--endpoint is required unless --replay-only".into(),
            ));
        }
    };
    let report = synth::run(&config, args.personas.as_deref(), inner)?;
    let stages: Vec<_> = report
        .stages
        .iter()
        .map(|s| {
            json!({"stage": s.stage, "input": s.input, "kept": s.kept, "rejected": s.rejected,
                   "processed": s.processed, "recomputed": s.recomputed,
                   "orphaned": s.orphaned, "reasons": s.reasons})
        })
        .collect();
    println!(
        "{}",
        json!({"stages": stages, "tasks": report.tasks, "out": config.out})
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use rulegym::synth::UserKind;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn config(flags: &[&str]) -> Result<PipelineConfig> {
        let mut argv = vec!["rulegym", "--model", "m", "--out", "o"];
        argv.extend_from_slice(flags);
        pipeline_config(&Cli::try_parse_from(argv).unwrap().args)
    }

    #[test]
    fn synth_flags_override_the_preset_which_overrides_the_defaults() {
        let plain = config(&[]).unwrap();
        assert_eq!(
            (plain.rollouts, plain.extraction, plain.min_best_reward),
            (2, Extraction::Joint, 1.0)
        );
        let preset = config(&["--preset", "synthagent"]).unwrap();
        assert_eq!(
            PipelineConfig {
                out: "o".into(),
                model: "m".into(),
                ..PipelineConfig::from_preset("synthagent").unwrap()
            },
            preset
        );
        assert_eq!(
            (preset.rollouts, preset.extraction, preset.min_best_reward),
            (4, Extraction::PerTrajectory, 0.0)
        );
        let overridden = config(&[
            "--preset",
            "synthagent",
            "--rollouts",
            "3",
            "--extraction",
            "joint",
            "--min-best-reward",
            "0.5",
            "--max-turns",
            "8",
            "--user",
            "rule",
        ])
        .unwrap();
        assert_eq!(
            overridden,
            PipelineConfig {
                rollouts: 3,
                extraction: Extraction::Joint,
                min_best_reward: 0.5,
                max_turns: 8,
                user: UserKind::Rule,
                ..preset.clone()
            }
        );
        // Without a preset a flag changes only its knob.
        let flag = config(&["--extraction", "per-trajectory"]).unwrap();
        assert_eq!(
            flag,
            PipelineConfig {
                extraction: Extraction::PerTrajectory,
                ..plain
            }
        );
    }

    #[test]
    fn synth_unknown_preset_and_extraction_names_are_errors_naming_the_valid_ones() {
        let err = config(&["--preset", "synth-agent"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown synth preset") && err.contains("valid: synthagent"),
            "{err}"
        );
        let err = config(&["--extraction", "per-rollout"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("joint, per-trajectory"), "{err}");
    }
}

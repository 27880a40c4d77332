//! `rulegym synth`: the SynthAgent task-synthesis pipeline (persona -> draft -> tool check ->
//! rewrite -> teacher rollouts -> rubric -> filter) against an OpenAI-compatible endpoint, with
//! every exchange recorded for offline replay. See [`crate::synth`].

use crate::Result;
use crate::llm::LlmBackend;
use crate::llm::openai::{OpenAiBackend, OpenAiConfig};
use crate::synth::{self, PipelineConfig, Stage, UserKind};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a rerun into the same output directory does (shown after the flags in `--help`).
const RESUME_HELP: &str = "\
Resuming: rerunning into the same --out continues where the last run stopped. Every record \
carries a fingerprint of what produced it (the stage's prompt version and text, the settings \
the stage uses: --model, --sim-model, --temperature, --teacher-temperature, --seed, \
--max-tokens, --rollouts, --max-turns, --user, and the exact record it was made from). A \
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
    /// Teacher rollouts per task (at least 2).
    #[arg(long, default_value_t = 2)]
    rollouts: u32,
    /// User simulator of teacher rollouts: llm or rule.
    #[arg(long, default_value = "llm")]
    user: String,
    /// Sampling temperature of the generating stages.
    #[arg(long, default_value_t = 0.7)]
    temperature: f64,
    /// Sampling temperature of the teacher.
    #[arg(long, default_value_t = 0.7)]
    teacher_temperature: f64,
    /// Seed passed to the endpoint.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Agent turns per teacher rollout (also the tasks' max_turns).
    #[arg(long, default_value_t = 16)]
    max_turns: u32,
    /// Drop tasks whose teacher rollouts execute less of the workflow on average.
    #[arg(long, default_value_t = 0.6)]
    min_workflow_coverage: f64,
    /// Drop tasks whose best teacher rollout scores less under the extracted rubric.
    #[arg(long, default_value_t = 1.0)]
    min_best_reward: f64,
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
fn api_key(var: &str) -> Result<String> {
    match std::env::var(var) {
        Ok(key) if !key.trim().is_empty() => Ok(key),
        _ => Err(crate::Error::Config(format!(
            "--api-key-env {var}: the variable is not set or empty"
        ))),
    }
}

/// Runs `rulegym synth`.
pub fn run(args: Args) -> Result<()> {
    let stages = if args.stages.is_empty() {
        Stage::ALL.to_vec()
    } else {
        args.stages
            .iter()
            .map(|s| Stage::parse(s))
            .collect::<std::result::Result<Vec<_>, _>>()?
    };
    let user = match args.user.as_str() {
        "llm" => UserKind::Llm,
        "rule" => UserKind::Rule,
        other => {
            return Err(crate::Error::Config(format!(
                "unknown user simulator {other:?} (llm, rule)"
            )));
        }
    };
    let config = PipelineConfig {
        out: args.out,
        cache: args.cache,
        replay_only: args.replay_only,
        model: args.model,
        sim_model: args.sim_model,
        stages,
        concurrency: args.concurrency,
        rollouts: args.rollouts,
        temperature: args.temperature,
        teacher_temperature: args.teacher_temperature,
        seed: args.seed,
        max_turns: args.max_turns,
        user,
        min_workflow_coverage: args.min_workflow_coverage,
        min_best_reward: args.min_best_reward,
        max_tokens: args.max_tokens,
        progress: !args.quiet,
        ..PipelineConfig::default()
    };
    let inner: Option<Arc<dyn LlmBackend>> = match (&args.endpoint, args.replay_only) {
        (_, true) => None,
        (Some(endpoint), false) => Some(Arc::new(OpenAiBackend::new(OpenAiConfig {
            endpoint: endpoint.clone(),
            api_key: args.api_key_env.as_deref().map(api_key).transpose()?,
            timeout: Duration::from_secs(300),
            max_concurrency: config.concurrency.max(1) * 2,
            ..OpenAiConfig::default()
        })?)),
        (None, false) => {
            return Err(crate::Error::Config(
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

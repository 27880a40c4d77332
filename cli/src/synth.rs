//! `rulegym synth`: the SynthAgent task-synthesis pipeline (persona -> draft -> tool check ->
//! rewrite -> teacher rollouts -> rubric -> filter) against an OpenAI-compatible endpoint, with
//! every exchange recorded for offline replay. See [`rulegym::synth`].

use indicatif::{ProgressBar, ProgressStyle};
use rulegym::Result;
use rulegym::llm::ClientConfig;
use rulegym::synth::preset::Knobs;
use rulegym::synth::{self, Extraction, PipelineConfig, SynthEvent, SynthStage, UserKind};
use serde_json::json;
use std::path::PathBuf;

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
    /// The endpoint, key, retries and record/replay cache [cache: OUT/llm-cache].
    #[command(flatten)]
    llm: crate::llm::LlmArgs,
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
    #[arg(long, value_delimiter = ',', value_parser = stage_name)]
    stages: Vec<SynthStage>,
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
    #[arg(long, value_enum)]
    extraction: Option<Extraction>,
    /// User simulator of teacher rollouts: llm or rule [llm, or the preset's].
    #[arg(long, value_enum)]
    user: Option<UserKind>,
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
    /// No progress bars.
    #[arg(long, short)]
    quiet: bool,
}

/// A stage name of `--stages` (spaces around it allowed, as in `draft, tools`).
fn stage_name(name: &str) -> std::result::Result<SynthStage, String> {
    <SynthStage as clap::ValueEnum>::from_str(name.trim(), false).map_err(|_| {
        let valid: Vec<&str> = SynthStage::ALL.iter().map(|s| s.name()).collect();
        format!(
            "unknown stage {:?} (valid: {})",
            name.trim(),
            valid.join(", ")
        )
    })
}

/// The pipeline configuration of `args`: the defaults, then the preset's values, then the
/// flags given.
fn pipeline_config(args: &Args) -> Result<PipelineConfig> {
    let stages = if args.stages.is_empty() {
        SynthStage::ALL.to_vec()
    } else {
        args.stages.clone()
    };
    let config = PipelineConfig::tuned(
        args.preset.as_deref(),
        &Knobs {
            rollouts: args.rollouts,
            extraction: args.extraction,
            user: args.user,
            temperature: args.temperature,
            teacher_temperature: args.teacher_temperature,
            max_turns: args.max_turns,
            min_workflow_coverage: args.min_workflow_coverage,
            min_best_reward: args.min_best_reward,
        },
    )?;
    Ok(PipelineConfig {
        out: args.out.clone(),
        cache: args.llm.client(ClientConfig::default(), None).cache,
        replay_only: args.llm.replay_only,
        model: args.model.clone(),
        sim_model: args.sim_model.clone(),
        stages,
        concurrency: args.concurrency,
        seed: args.seed,
        max_tokens: args.max_tokens,
        ..config
    })
}

/// Runs `rulegym synth`.
pub fn run(args: Args) -> Result<()> {
    let config = pipeline_config(&args)?;
    let client = args.llm.client(
        ClientConfig {
            timeout_s: 300.0,
            max_concurrency: (config.concurrency.max(1) * 2).min(1024),
            ..ClientConfig::default()
        },
        Some(&config.cache_dir()),
    );
    let inner = client.http()?;
    if inner.is_none() && !client.replay_only {
        return Err(rulegym::Error::Config(
            "--endpoint is required unless --replay-only".into(),
        ));
    }
    let quiet = args.quiet;
    let mut bar = ProgressBar::hidden();
    let report =
        synth::run_observed(
            &config,
            args.personas.as_deref(),
            inner,
            &mut |event| match event {
                SynthEvent::Started { stage, items } if !quiet => {
                    bar = ProgressBar::new(items as u64);
                    let style = ProgressStyle::with_template(
                        "{prefix:>8} [{bar:30}] {pos}/{len} {elapsed}",
                    )
                    .map(|s| s.progress_chars("=> "));
                    if let Ok(style) = style {
                        bar.set_style(style);
                    }
                    bar.set_prefix(stage.name());
                }
                SynthEvent::Item => bar.inc(1),
                SynthEvent::Finished(_) => bar.finish_and_clear(),
                _ => {}
            },
        );
    bar.finish_and_clear();
    let report = report?;
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
        // Stage lists may have spaces after the commas.
        let staged = config(&["--stages", "draft, tools"]).unwrap();
        assert_eq!(staged.stages, [SynthStage::Draft, SynthStage::Tools]);
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
        let argv = [
            "rulegym",
            "--model",
            "m",
            "--out",
            "o",
            "--extraction",
            "per-rollout",
        ];
        let err = Cli::try_parse_from(argv).err().unwrap().to_string();
        assert!(err.contains("joint, per-trajectory"), "{err}");
    }
}

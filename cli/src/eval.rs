//! `rulegym eval`: play the search environment against an OpenAI-compatible chat endpoint and
//! write trajectories, a JSON report, SVG plots and report.html.

use crate::oracle::SearchData;
use rulegym::Result;
use rulegym::eval::{
    EndpointPolicy, EvalConfig, EvalReport, EvalSettings, RunInfo, compare, evaluate, report,
    write_comparison, write_outputs,
};
use rulegym::llm::ClientConfig;
use rulegym::llm::openai::completions_url;
use rulegym::preset::Stage;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Flags of `rulegym eval`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    data: SearchData,
    /// The model's endpoint, key, retries and record/replay cache.
    #[command(flatten)]
    llm: crate::llm::LlmArgs,
    /// The `model` of the requests.
    #[arg(long)]
    model: String,
    /// Output directory (trajectories.jsonl, report.json, *.svg, report.html).
    #[arg(long)]
    out: PathBuf,
    /// Episodes in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// An environment preset (`presets/env/<name>.json`): phantomenvs gives the paper's prompt,
    /// system message, termination rule, turn cap and token budgets at --stage (eval: 20 turns,
    /// ~500 tokens per turn, a 32,768-token context). Flags below override it.
    #[arg(long)]
    preset: Option<String>,
    /// The preset's stage: eval (default) or train.
    #[arg(long, value_enum, default_value_t = Stage::Eval, requires = "preset")]
    stage: Stage,
    /// Turn cap per episode [20, or the preset's] (the paper evaluates with 20).
    #[arg(long)]
    max_turns: Option<usize>,
    /// Passages per search [3, or the preset's].
    #[arg(long)]
    top_k: Option<usize>,
    /// The conversation's token budget: an episode that would exceed it ends with reward 0
    /// [none, or the preset's: 32,768 at eval].
    #[arg(long)]
    max_context_tokens: Option<usize>,
    /// A Hugging Face tokenizer.json (or a directory holding one) that counts the token budgets;
    /// without it they are approximated as ceil(chars / 4).
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// A model-family sampling preset (`presets/sampling.json`): qwen (T 1.0, top-p 1.0),
    /// llama (0.6, 0.9) or phi (0.8, 0.95). --temperature / --top-p override it.
    #[arg(long)]
    sampling_preset: Option<String>,
    /// Also score answers by token-level F1 (SQuAD/HotpotQA style) beside set F1.
    #[arg(long)]
    token_f1: bool,
    /// The run's label in reports and comparisons [the model name].
    #[arg(long)]
    label: Option<String>,
    /// Only questions of this split (train or val); all by default.
    #[arg(long, value_enum)]
    split: Option<rulegym::question::Split>,
    /// At most this many questions (the first ones, in file order).
    #[arg(long)]
    limit: Option<usize>,
    /// Sampling temperature, in [0, 2] [0, or the sampling preset's].
    #[arg(long)]
    temperature: Option<f64>,
    /// Nucleus sampling top-p, in (0, 1] [not sent, or the sampling preset's].
    #[arg(long)]
    top_p: Option<f64>,
    /// Generated tokens per turn (the requests' max_tokens) [1024, or the environment preset's
    /// per-turn cap: 500 for phantomenvs].
    #[arg(long)]
    max_tokens: Option<u32>,
    /// The `seed` field of the requests.
    #[arg(long)]
    seed: Option<u64>,
}

/// Runs `rulegym eval`; exits with an error naming the first failure when episodes failed
/// against the endpoint: after writing the outputs when some succeeded, without writing
/// anything when none did.
pub fn run(args: Args) -> Result<()> {
    let backend = args
        .llm
        .client(
            ClientConfig {
                max_retries: 5,
                max_concurrency: args.concurrency.clamp(1, 1024),
                ..ClientConfig::default()
            },
            None,
        )
        .backend()?;
    let (env, sampling) = EvalSettings {
        model: args.model.clone(),
        env_preset: args.preset.clone(),
        stage: args.stage,
        sampling_preset: args.sampling_preset.clone(),
        max_turns: args.max_turns,
        top_k: args.top_k,
        max_context_tokens: args.max_context_tokens,
        temperature: args.temperature,
        top_p: args.top_p,
        max_tokens: args.max_tokens,
        seed: args.seed,
    }
    .resolve()?;
    let tokens = rulegym::env::tokens::counter(args.tokenizer.as_deref())?;
    let client = EndpointPolicy::new(backend, sampling.clone())?;
    let config = EvalConfig {
        env,
        concurrency: args.concurrency,
        token_f1: args.token_f1,
        tokens: Some(tokens.clone()),
    };
    let (universe, set, index) = args.data.load()?;
    let mut questions = set.questions;
    if let Some(split) = args.split {
        questions.retain(|q| q.split == split);
    }
    if let Some(limit) = args.limit {
        questions.truncate(limit);
    }
    let done = AtomicUsize::new(0);
    let total = questions.len();
    let progress = |_: &rulegym::eval::EpisodeRecord| {
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(50) || n == total {
            eprintln!("{n}/{total} episodes");
        }
    };
    let records = evaluate(&universe, &questions, index, &client, &config, &progress)?;
    // Every episode failed: the endpoint is unusable, and a report of zeros would mislead.
    if let Some(first) = records.first().and_then(|r| r.error.as_deref())
        && records.iter().all(|r| r.error.is_some())
    {
        return Err(rulegym::eval::EvalError::AllEpisodesFailed {
            episodes: records.len(),
            first: first.to_owned(),
        }
        .into());
    }
    let url = args
        .llm
        .endpoint
        .as_deref()
        .map_or_else(|| "(replayed)".to_owned(), completions_url);
    let run = RunInfo {
        label: args.label.clone().unwrap_or_else(|| args.model.clone()),
        sampling_preset: args.sampling_preset.clone(),
        temperature: sampling.temperature,
        top_p: sampling.top_p,
        max_tokens: sampling.max_tokens,
        seed: sampling.seed,
        env_preset: args.preset.clone(),
        stage: args.preset.as_ref().map(|_| args.stage.to_string()),
        top_k: config.env.top_k,
        end_on_invalid: config.env.end_on_invalid,
        max_action_tokens: config.env.max_action_tokens,
        max_context_tokens: config.env.max_context_tokens,
        token_counter: tokens.describe(),
        universe_people: universe.people.len(),
        universe_seed: universe.config.seed,
        questions_sha256: Some(set.sha256),
    };
    let summary = report(&records, &args.model, &url, config.env.max_turns, run);
    write_outputs(&args.out, &records, &summary)?;
    let o = &summary.overall;
    println!(
        "{} episodes: F1 {:.3} ± {:.3}, EM {:.3}, {:.2} searches/question (proof needs {:.2}); wrote {}",
        o.n,
        o.f1,
        o.f1_se,
        o.em,
        o.searches,
        o.oracle_searches,
        args.out.join("report.html").display()
    );
    if o.errors > 0 {
        return Err(rulegym::Error::Config(format!(
            "{} of {} episodes failed against the endpoint (see trajectories.jsonl); the first: {}",
            o.errors,
            o.n,
            records
                .iter()
                .find_map(|r| r.error.as_deref())
                .unwrap_or("")
        )));
    }
    Ok(())
}

/// Flags of `rulegym eval-compare`.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// A run: GROUP=DIR, DIR an `eval --out` directory (its report.json). Runs sharing a GROUP
    /// are seeds of one configuration (mean ± standard error over seeds and over questions);
    /// runs are also grouped by universe size. Repeat for several runs.
    #[arg(long = "run", required = true)]
    runs: Vec<String>,
    /// A group every other group is compared against: F1 gap (group minus baseline) ± its
    /// standard error, overall and per difficulty (e.g. the knowledge-advantage gap: real-world
    /// minus fictional training, `--baseline fictional`).
    #[arg(long)]
    baseline: Option<String>,
    /// Output directory (comparison.json, search_scaling.svg, universe_size.svg,
    /// comparison.html).
    #[arg(long)]
    out: PathBuf,
}

/// Runs `rulegym eval-compare`.
pub fn run_compare(args: CompareArgs) -> Result<()> {
    let mut runs = Vec::new();
    for spec in &args.runs {
        let (group, dir) = spec
            .split_once('=')
            .ok_or_else(|| rulegym::Error::Config(format!("--run {spec:?}: expected GROUP=DIR")))?;
        if group.is_empty() {
            return Err(rulegym::Error::Config(format!(
                "--run {spec:?}: the group name is empty"
            )));
        }
        let path = std::path::Path::new(dir).join("report.json");
        let bytes = std::fs::read(&path).map_err(|source| rulegym::Error::Io {
            context: format!("reading {}", path.display()),
            source,
        })?;
        let report: EvalReport =
            serde_json::from_slice(&bytes).map_err(|source| rulegym::Error::Json {
                context: format!("parsing {}", path.display()),
                source,
            })?;
        runs.push((group.to_owned(), report));
    }
    let comparison = compare(&runs, args.baseline.as_deref())?;
    write_comparison(&args.out, &comparison)?;
    for g in &comparison.groups {
        let o = &g.overall;
        println!(
            "{}: {} run(s), F1 {:.3} ± {:.3} (seeds) ± {:.3} (questions), {:.2} searches/question",
            g.group, o.runs, o.f1, o.f1_se_seeds, o.f1_se_questions, o.searches
        );
    }
    for g in &comparison.gaps {
        println!(
            "{} - {}: F1 gap {:+.3} ± {:.3}",
            g.group, g.baseline, g.overall.f1_gap, g.overall.f1_gap_se
        );
    }
    println!("wrote {}", args.out.join("comparison.html").display());
    Ok(())
}

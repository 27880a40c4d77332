//! `rulegym eval`: play the search environment against an OpenAI-compatible chat endpoint and
//! write trajectories, a JSON report, SVG plots and report.html.

use crate::Result;
use crate::cli::oracle::SearchData;
use crate::env::eval::{EndpointPolicy, EvalConfig, Sampling, evaluate, report, write_outputs};
use crate::env::search::SearchEnvConfig;
use crate::llm::openai::{OpenAiBackend, OpenAiConfig};
use crate::llm::{CacheMode, CachedBackend, LlmBackend};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Flags of `rulegym eval`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    data: SearchData,
    /// OpenAI-compatible endpoint: base URL (`http://host:8000/v1`) or full chat-completions URL.
    #[arg(long)]
    endpoint: String,
    /// The `model` of the requests.
    #[arg(long)]
    model: String,
    /// Output directory (trajectories.jsonl, report.json, *.svg, report.html).
    #[arg(long)]
    out: PathBuf,
    /// Episodes in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Turn cap per episode (the paper evaluates with 20).
    #[arg(long, default_value_t = 20)]
    max_turns: usize,
    /// Passages per search.
    #[arg(long, default_value_t = 3)]
    top_k: usize,
    /// Only questions of this split (train or val); all by default.
    #[arg(long)]
    split: Option<String>,
    /// At most this many questions (the first ones, in file order).
    #[arg(long)]
    limit: Option<usize>,
    /// Sampling temperature.
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Tokens per turn.
    #[arg(long, default_value_t = 1024)]
    max_tokens: u32,
    /// The `seed` field of the requests.
    #[arg(long)]
    seed: Option<u64>,
    /// Seconds per request before it counts as failed (and is retried).
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
    /// Retries per request on connection errors, timeouts, 408, 429 and 5xx.
    #[arg(long, default_value_t = 5)]
    retries: u32,
    /// First retry backoff in milliseconds (doubled per retry).
    #[arg(long, default_value_t = 500)]
    backoff_ms: u64,
    /// Environment variable holding the API key (sent as a bearer token when set).
    #[arg(long, default_value = "OPENAI_API_KEY")]
    api_key_env: String,
    /// Record every exchange in this directory (one file per request hash) and reuse recorded
    /// answers, so a run can be replayed offline.
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Only recorded answers from --cache (no endpoint is called; a miss is an error).
    #[arg(long)]
    replay_only: bool,
}

/// Runs `rulegym eval`; exits with an error (after writing the outputs) when episodes failed
/// against the endpoint.
pub fn run(args: Args) -> Result<()> {
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(crate::Error::Config(format!(
            "--timeout must be a positive number of seconds, got {}",
            args.timeout
        )));
    }
    let http: Arc<dyn LlmBackend> = Arc::new(OpenAiBackend::new(OpenAiConfig {
        endpoint: args.endpoint.clone(),
        api_key: std::env::var(&args.api_key_env)
            .ok()
            .filter(|k| !k.is_empty()),
        timeout: Duration::from_secs_f64(args.timeout),
        max_retries: args.retries,
        backoff: Duration::from_millis(args.backoff_ms),
        max_concurrency: args.concurrency.max(1),
    })?);
    let backend: Arc<dyn LlmBackend> = match &args.cache {
        Some(dir) => {
            let mode = if args.replay_only {
                CacheMode::Replay
            } else {
                CacheMode::Record
            };
            let inner = (!args.replay_only).then_some(http);
            Arc::new(CachedBackend::new(inner, dir, mode))
        }
        None if args.replay_only => {
            return Err(crate::Error::Config(
                "--replay-only needs --cache DIR (the recorded exchanges)".into(),
            ));
        }
        None => http,
    };
    let client = EndpointPolicy::new(
        backend,
        Sampling {
            model: args.model.clone(),
            temperature: args.temperature,
            max_tokens: args.max_tokens,
            seed: args.seed,
        },
    )?;
    let config = EvalConfig {
        env: SearchEnvConfig {
            top_k: args.top_k,
            max_turns: args.max_turns,
            ..SearchEnvConfig::default()
        },
        concurrency: args.concurrency,
    };
    config.env.validate()?;
    let (universe, mut questions, index) = args.data.load()?;
    if let Some(split) = &args.split {
        questions.retain(|q| &q.split == split);
    }
    if let Some(limit) = args.limit {
        questions.truncate(limit);
    }
    let done = AtomicUsize::new(0);
    let total = questions.len();
    let progress = |_: &crate::env::eval::EpisodeRecord| {
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(50) || n == total {
            eprintln!("{n}/{total} episodes");
        }
    };
    let records = evaluate(&universe, &questions, index, &client, &config, &progress)?;
    let url = crate::llm::openai::completions_url(&args.endpoint);
    let summary = report(&records, &args.model, &url, args.max_turns);
    write_outputs(&args.out, &records, &summary)?;
    let o = &summary.overall;
    println!(
        "{} episodes: F1 {:.3}, EM {:.3}, {:.2} searches/question (proof needs {:.2}); wrote {}",
        o.n,
        o.f1,
        o.em,
        o.searches,
        o.oracle_searches,
        args.out.join("report.html").display()
    );
    if o.errors > 0 {
        return Err(crate::Error::Config(format!(
            "{} of {} episodes failed against the endpoint (see trajectories.jsonl)",
            o.errors, o.n
        )));
    }
    Ok(())
}

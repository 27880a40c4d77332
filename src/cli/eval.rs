//! `rulegym eval`: play the search environment against an OpenAI-compatible chat endpoint and
//! write trajectories, a JSON report, SVG plots and report.html.

use crate::Result;
use crate::cli::oracle::SearchData;
use crate::env::eval::{ChatClient, ClientConfig, EvalConfig, evaluate, report, write_outputs};
use crate::env::search::SearchEnvConfig;
use std::path::PathBuf;
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
    /// Retries per request on connection errors, timeouts, 429 and 5xx.
    #[arg(long, default_value_t = 5)]
    retries: u32,
    /// First retry backoff in milliseconds (doubled per retry).
    #[arg(long, default_value_t = 500)]
    backoff_ms: u64,
    /// Environment variable holding the API key (sent as a bearer token when set).
    #[arg(long, default_value = "OPENAI_API_KEY")]
    api_key_env: String,
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
    let client = ChatClient::new(ClientConfig {
        endpoint: args.endpoint.clone(),
        model: args.model.clone(),
        api_key: std::env::var(&args.api_key_env)
            .ok()
            .filter(|k| !k.is_empty()),
        temperature: args.temperature,
        max_tokens: args.max_tokens,
        seed: args.seed,
        timeout: Duration::from_secs_f64(args.timeout),
        retries: args.retries,
        backoff: Duration::from_millis(args.backoff_ms),
    })?;
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
    let summary = report(&records, &args.model, client.url(), args.max_turns);
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

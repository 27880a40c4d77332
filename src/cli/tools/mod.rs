//! `rulegym tools`: score a saved tool-use conversation against its task's rubric, or play an
//! agent model (OpenAI-compatible endpoint) through tool-use tasks.

use crate::Result;
use crate::llm::openai::{OpenAiBackend, OpenAiConfig};
use crate::llm::{CacheMode, CachedBackend, ChatMessage, LlmBackend};
use crate::tooluse::env::{ToolEnv, ToolEnvConfig, play_episode, trajectory_from_messages};
use crate::tooluse::rubric::{RewardVariant, RubricScorer, ScoreConfig};
use crate::tooluse::simulator::{MappingConfig, MappingSimulator};
use crate::tooluse::task::{TaskError, ValidateOptions, load_tasks};
use crate::tooluse::user::{LlmUser, RuleUser, UserSimulator};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

mod generate;

/// Flags of `rulegym tools`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Score a conversation (JSON array of OpenAI messages) against a task's rubric; prints the
    /// reward and every item as JSON.
    Score(ScoreArgs),
    /// Run an agent model through tasks; writes trajectories.jsonl and prints the rewards.
    Play(PlayArgs),
    /// Generate tool-use tasks from a universe's records (rule-generated tool worlds).
    Generate(generate::GenerateArgs),
    /// Replay the reference solution of generated tasks in the tool environment.
    Oracle(generate::OracleArgs),
}

/// Flags of `rulegym tools score`.
#[derive(clap::Args, Debug)]
pub struct ScoreArgs {
    /// Task file (.jsonl, or .json with one task or an array).
    #[arg(long)]
    tasks: PathBuf,
    /// Task id.
    #[arg(long)]
    id: String,
    /// Conversation: a JSON array of messages, or an object with a "messages" array.
    #[arg(long)]
    trajectory: PathBuf,
    /// Reward variant: paper, peer-weighted or peer-strict.
    #[arg(long, default_value = "paper")]
    variant: String,
}

/// Flags of `rulegym tools play`.
#[derive(clap::Args, Debug)]
pub struct PlayArgs {
    /// Task file.
    #[arg(long)]
    tasks: PathBuf,
    /// OpenAI-compatible endpoint of the agent (`http://host:8000/v1`).
    #[arg(long)]
    endpoint: String,
    /// Agent model name.
    #[arg(long)]
    model: String,
    /// Output directory (trajectories.jsonl, mappings/, llm-cache/).
    #[arg(long)]
    out: PathBuf,
    /// An environment preset (`presets/env/<name>.json`): synthagent (Hermes protocol, 16
    /// turns, 13,000 response tokens per episode). --protocol and --max-turns override it.
    #[arg(long)]
    preset: Option<String>,
    /// The preset's stage: eval (default) or train.
    #[arg(long, default_value = "eval", requires = "preset")]
    stage: String,
    /// Wire protocol: openai (tool_calls) or hermes (<tool_call> text) [openai, or the
    /// preset's].
    #[arg(long)]
    protocol: Option<String>,
    /// User simulator: rule (reveals slots on keywords) or llm.
    #[arg(long, default_value = "rule")]
    user: String,
    /// Endpoint of the simulator LLM (tool and LLM user); defaults to --endpoint.
    #[arg(long)]
    sim_endpoint: Option<String>,
    /// Simulator model; defaults to --model.
    #[arg(long)]
    sim_model: Option<String>,
    /// Name of an environment variable holding the API key.
    #[arg(long)]
    api_key_env: Option<String>,
    /// Agent turns per episode (a task's max_turns overrides) [16, or the preset's].
    #[arg(long)]
    max_turns: Option<u32>,
    /// Agent sampling temperature.
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Seed passed to the endpoints.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Replay only from OUT/llm-cache (no network; a miss is an error).
    #[arg(long)]
    replay: bool,
    /// Episodes in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Reward variant: paper, peer-weighted or peer-strict.
    #[arg(long, default_value = "paper")]
    variant: String,
}

fn variant(name: &str) -> Result<RewardVariant> {
    serde_json::from_value(json!(name)).map_err(|_| {
        crate::Error::Config(format!(
            "unknown reward variant {name:?} (paper, peer-weighted, peer-strict)"
        ))
    })
}

/// Runs `rulegym tools`.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Score(a) => score(a),
        Command::Play(a) => play(a),
        Command::Generate(a) => generate::run_generate(a),
        Command::Oracle(a) => generate::run_oracle(a),
    }
}

fn read_messages(path: &PathBuf) -> Result<Vec<ChatMessage>> {
    let text = std::fs::read_to_string(path).map_err(|source| crate::Error::Io {
        context: format!("reading {}", path.display()),
        source,
    })?;
    let json_err = |source| crate::Error::Json {
        context: format!("parsing {}", path.display()),
        source,
    };
    let value: Value = serde_json::from_str(&text).map_err(json_err)?;
    let messages = match value {
        Value::Object(mut map) => map.remove("messages").unwrap_or(Value::Null),
        other => other,
    };
    serde_json::from_value(messages).map_err(json_err)
}

fn score(args: ScoreArgs) -> Result<()> {
    let tasks = load_tasks(&args.tasks, ValidateOptions::default())?;
    let task = tasks
        .into_iter()
        .find(|t| t.id == args.id)
        .ok_or_else(|| TaskError::NotFound(args.id.clone()))?;
    let world = Arc::new(task.compile(ValidateOptions::default())?);
    let messages = read_messages(&args.trajectory)?;
    let trajectory = trajectory_from_messages(&world, &messages)?;
    let scorer = RubricScorer::new(ScoreConfig {
        variant: variant(&args.variant)?,
        ..ScoreConfig::default()
    })?;
    let result = scorer.score(&world.task, &world.program, &trajectory, None)?;
    let out = json!({
        "id": world.task.id,
        "reward": result.reward,
        "result": result,
        "facts": trajectory,
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    Ok(())
}

fn play(args: PlayArgs) -> Result<()> {
    let stage: crate::preset::Stage = args.stage.parse()?;
    let mut env_config = match &args.preset {
        Some(name) => crate::preset::EnvPreset::named(name)?.tooluse(stage)?,
        None => ToolEnvConfig::default(),
    };
    if let Some(name) = &args.protocol {
        env_config.protocol = serde_json::from_value(json!(name)).map_err(|_| {
            crate::Error::Config(format!("unknown protocol {name:?} (openai, hermes)"))
        })?;
    }
    if let Some(t) = args.max_turns {
        env_config.max_turns = t;
    }
    env_config.validate()?;
    if args.user != "rule" && args.user != "llm" {
        return Err(crate::Error::Config(format!(
            "unknown user simulator {:?} (rule, llm)",
            args.user
        )));
    }
    let tasks = load_tasks(&args.tasks, ValidateOptions::default())?;
    let api_key = args
        .api_key_env
        .as_ref()
        .and_then(|var| std::env::var(var).ok());
    let client = |endpoint: &str| -> Result<Arc<dyn LlmBackend>> {
        Ok(Arc::new(OpenAiBackend::new(OpenAiConfig {
            endpoint: endpoint.to_owned(),
            api_key: api_key.clone(),
            timeout: Duration::from_secs(300),
            max_concurrency: args.concurrency.max(1) * 2,
            ..OpenAiConfig::default()
        })?))
    };
    let mode = if args.replay {
        CacheMode::Replay
    } else {
        CacheMode::Record
    };
    let cache_dir = args.out.join("llm-cache");
    let online = |endpoint: &str| -> Result<Option<Arc<dyn LlmBackend>>> {
        if args.replay {
            Ok(None)
        } else {
            client(endpoint).map(Some)
        }
    };
    let agent: Arc<dyn LlmBackend> = Arc::new(CachedBackend::new(
        online(&args.endpoint)?,
        &cache_dir,
        mode,
    ));
    let sim_endpoint = args.sim_endpoint.clone().unwrap_or(args.endpoint.clone());
    let sim_model = args.sim_model.clone().unwrap_or(args.model.clone());
    let sim: Arc<dyn LlmBackend> =
        Arc::new(CachedBackend::new(online(&sim_endpoint)?, &cache_dir, mode));
    let scorer = Arc::new(RubricScorer::new(ScoreConfig {
        variant: variant(&args.variant)?,
        ..ScoreConfig::default()
    })?);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.concurrency.max(1))
        .build()
        .map_err(|e| crate::Error::Config(format!("thread pool: {e}")))?;
    let episodes: Vec<Result<Value>> = pool.install(|| {
        use rayon::prelude::*;
        tasks
            .into_par_iter()
            .map(|task| {
                let id = task.id.clone();
                let world = Arc::new(task.compile(ValidateOptions::default())?);
                let mapping = Arc::new(MappingSimulator::new(
                    &id,
                    Some(args.out.join("mappings").join(format!("{id}.json"))),
                    Some(sim.clone()),
                    MappingConfig {
                        model: sim_model.clone(),
                        seed: Some(args.seed),
                        ..MappingConfig::default()
                    },
                )?);
                let user: Box<dyn UserSimulator> = if args.user == "llm" {
                    Box::new(LlmUser::new(
                        &world.task,
                        sim.clone(),
                        &sim_model,
                        Some(args.seed),
                    ))
                } else {
                    Box::new(RuleUser::new(&world.task))
                };
                let mut env = ToolEnv::new(
                    world,
                    Some(mapping),
                    user,
                    scorer.clone(),
                    env_config.clone(),
                );
                let episode = play_episode(
                    &mut env,
                    agent.as_ref(),
                    &args.model,
                    Some(args.temperature),
                    Some(args.seed),
                )?;
                Ok(serde_json::to_value(&episode).unwrap_or(Value::Null))
            })
            .collect()
    });
    let mut lines = String::new();
    let mut rewards = Vec::new();
    for episode in episodes {
        let episode = episode?;
        rewards.push(episode["reward"].as_f64().unwrap_or(0.0));
        lines.push_str(&episode.to_string());
        lines.push('\n');
    }
    let path = args.out.join("trajectories.jsonl");
    crate::io::write_file_atomic(&path, lines.as_bytes())?;
    let mean = if rewards.is_empty() {
        0.0
    } else {
        rewards.iter().sum::<f64>() / rewards.len() as f64
    };
    println!(
        "{}",
        json!({"episodes": rewards.len(), "mean_reward": mean, "rewards": rewards, "out": path})
    );
    Ok(())
}

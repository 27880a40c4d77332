//! `rulegym tools`: score a saved tool-use conversation against its task's rubric, or play an
//! agent model (OpenAI-compatible endpoint) through tool-use tasks.

use rulegym::Result;
use rulegym::llm::openai::{OpenAiBackend, OpenAiConfig, api_key_from_env};
use rulegym::llm::{CacheMode, CachedBackend, ChatMessage, LlmBackend, SchemaFormat};
use rulegym::tooluse::env::{ToolEnvConfig, play_episode, trajectory_from_messages};
use rulegym::tooluse::rubric::agreement::AgreementReport;
use rulegym::tooluse::rubric::judge::LlmJudge;
use rulegym::tooluse::rubric::{ItemJudge, RewardVariant, RubricScorer, ScoreBy, ScoreConfig};
use rulegym::tooluse::simulation::{Simulation, SimulationConfig};
use rulegym::tooluse::task::{TaskError, ValidateOptions, load_tasks};
use rulegym::tooluse::user::UserKind;
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
    Play(Box<PlayArgs>),
    /// Generate tool-use tasks from a universe's records (rule-generated tool worlds).
    Generate(generate::GenerateArgs),
    /// Replay the reference solution of generated tasks in the tool environment.
    Oracle(generate::OracleArgs),
    /// Score recorded episodes with both the Prolog rubric and SynthAgent's LLM judge and report
    /// their agreement (confusion matrices, Cohen's kappa).
    Agree(AgreeArgs),
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
    /// Turn SynthAgent's semantic-equivalence check off (a new call is then always answered
    /// with a new response; exact canonical repeats still reuse theirs).
    #[arg(long)]
    no_semantic_equivalence: bool,
    /// How answer schemas (the simulator's, the judge's) are sent as `response_format`:
    /// json-schema (OpenAI, vLLM, SGLang, llama.cpp), json-object (llama-cpp-python's server)
    /// or off.
    #[arg(long, default_value = "json-schema")]
    schema_format: String,
    /// Start each task's mapping from DIR/<id>.json when OUT has none (e.g. the mappings/ that
    /// `rulegym synth` wrote: the teacher's tool responses).
    #[arg(long)]
    seed_mappings: Option<PathBuf>,
    /// Who decides the reward: rules (the rubric's Prolog rules; default) or judge
    /// (SynthAgent's LLM judge over the whole rubric, recorded in OUT/llm-cache).
    #[arg(long, default_value = "rules")]
    reward: String,
    /// Endpoint of the judge (--reward judge, and rubric items without a rule); defaults to
    /// the simulator's.
    #[arg(long)]
    judge_endpoint: Option<String>,
    /// Judge model; defaults to the simulator's.
    #[arg(long)]
    judge_model: Option<String>,
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
    /// Replay only from OUT (llm-cache/ and mappings/; no network; a miss is an error for the
    /// agent, a tool error or an unanswered question for the simulators).
    #[arg(long, visible_alias = "replay-only")]
    replay: bool,
    /// Episodes in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Reward variant: paper, peer-weighted or peer-strict.
    #[arg(long, default_value = "paper")]
    variant: String,
}

/// Flags of `rulegym tools agree`.
#[derive(clap::Args, Debug)]
pub struct AgreeArgs {
    /// Task file.
    #[arg(long)]
    tasks: PathBuf,
    /// Recorded episodes: the trajectories.jsonl of `tools play` (one JSON object per line with
    /// "id" and "messages").
    #[arg(long)]
    trajectories: PathBuf,
    /// OpenAI-compatible endpoint of the judge; not needed with --replay-only.
    #[arg(long)]
    judge_endpoint: Option<String>,
    /// Judge model.
    #[arg(long)]
    judge_model: String,
    /// Output directory: agreement.json and llm-cache/ (the judge's recorded answers).
    #[arg(long)]
    out: PathBuf,
    /// Only replay the judge's answers from OUT/llm-cache.
    #[arg(long)]
    replay_only: bool,
    /// Name of an environment variable holding the API key.
    #[arg(long)]
    api_key_env: Option<String>,
    /// Seed sent to the judge.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How the judge's verdict schema is sent as `response_format`: json-schema, json-object
    /// (llama-cpp-python's server) or off.
    #[arg(long, default_value = "json-schema")]
    schema_format: String,
    /// Reward variant: paper, peer-weighted or peer-strict.
    #[arg(long, default_value = "paper")]
    variant: String,
}

fn variant(name: &str) -> Result<RewardVariant> {
    serde_json::from_value(json!(name)).map_err(|_| {
        rulegym::Error::Config(format!(
            "unknown reward variant {name:?} (paper, peer-weighted, peer-strict)"
        ))
    })
}

/// Runs `rulegym tools`.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Score(a) => score(a),
        Command::Play(a) => play(*a),
        Command::Generate(a) => generate::run_generate(a),
        Command::Oracle(a) => generate::run_oracle(a),
        Command::Agree(a) => agree(a),
    }
}

fn read_messages(path: &PathBuf) -> Result<Vec<ChatMessage>> {
    let text = std::fs::read_to_string(path).map_err(|source| rulegym::Error::Io {
        context: format!("reading {}", path.display()),
        source,
    })?;
    let json_err = |source| rulegym::Error::Json {
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

/// The HTTP client of an endpoint (the one LLM client), with the API key from `api_key_env`.
fn client(
    endpoint: &str,
    api_key_env: Option<&str>,
    max_concurrency: usize,
    schema_format: SchemaFormat,
) -> Result<Arc<dyn LlmBackend>> {
    let api_key = api_key_env
        .map(|var| api_key_from_env("--api-key-env", var))
        .transpose()?;
    Ok(Arc::new(OpenAiBackend::new(OpenAiConfig {
        endpoint: endpoint.to_owned(),
        api_key,
        timeout: Duration::from_secs(300),
        max_concurrency: max_concurrency.max(1),
        schema_format,
        ..OpenAiConfig::default()
    })?))
}

fn score_config(variant_name: &str, by: &str) -> Result<ScoreConfig> {
    let by = match by {
        "rules" => ScoreBy::Rules,
        "judge" => ScoreBy::Judge,
        other => {
            return Err(rulegym::Error::Config(format!(
                "unknown reward source {other:?} (rules, judge)"
            )));
        }
    };
    Ok(ScoreConfig {
        variant: variant(variant_name)?,
        by,
        ..ScoreConfig::default()
    })
}

fn play(args: PlayArgs) -> Result<()> {
    let stage: rulegym::preset::Stage = args.stage.parse()?;
    let mut env_config = match &args.preset {
        Some(name) => {
            <rulegym::preset::EnvPreset as rulegym::preset::Shipped>::named(name)?.tooluse(stage)?
        }
        None => ToolEnvConfig::default(),
    };
    if let Some(name) = &args.protocol {
        env_config.protocol = serde_json::from_value(json!(name)).map_err(|_| {
            rulegym::Error::Config(format!("unknown protocol {name:?} (openai, hermes)"))
        })?;
    }
    if let Some(t) = args.max_turns {
        env_config.max_turns = t;
    }
    env_config.validate()?;
    let user: UserKind = args.user.parse().map_err(rulegym::Error::Config)?;
    let score = score_config(&args.variant, &args.reward)?;
    let tasks = load_tasks(&args.tasks, ValidateOptions::default())?;
    let connections = args.concurrency.max(1) * 2;
    let schema_format: SchemaFormat = args.schema_format.parse()?;
    let online = |endpoint: &str| -> Result<Option<Arc<dyn LlmBackend>>> {
        if args.replay {
            Ok(None)
        } else {
            client(
                endpoint,
                args.api_key_env.as_deref(),
                connections,
                schema_format,
            )
            .map(Some)
        }
    };
    let mode = if args.replay {
        CacheMode::Replay
    } else {
        CacheMode::Record
    };
    let cache_dir = args.out.join("llm-cache");
    let agent: Arc<dyn LlmBackend> = Arc::new(CachedBackend::new(
        online(&args.endpoint)?,
        &cache_dir,
        mode,
    ));
    let sim_endpoint = args.sim_endpoint.clone().unwrap_or(args.endpoint.clone());
    let sim_model = args.sim_model.clone().unwrap_or(args.model.clone());
    let simulation = Simulation::with_backend(
        SimulationConfig {
            endpoint: Some(sim_endpoint.clone()),
            model: sim_model.clone(),
            user,
            dir: Some(args.out.clone()),
            seed_mappings: args.seed_mappings.clone(),
            replay_only: args.replay,
            semantic_equivalence: !args.no_semantic_equivalence,
            schema_format,
            max_concurrency: connections,
            seed: args.seed,
            ..SimulationConfig::default()
        },
        online(&sim_endpoint)?,
    )?;
    let judge: Arc<dyn ItemJudge> = Arc::new(LlmJudge::new(
        Arc::new(CachedBackend::new(
            online(args.judge_endpoint.as_deref().unwrap_or(&sim_endpoint))?,
            &cache_dir,
            mode,
        )),
        args.judge_model.as_deref().unwrap_or(&sim_model),
        Some(args.seed),
    ));
    let scorer = Arc::new(RubricScorer::new(score)?);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.concurrency.max(1))
        .build()
        .map_err(|e| rulegym::Error::Config(format!("thread pool: {e}")))?;
    let episodes: Vec<Result<Value>> = pool.install(|| {
        use rayon::prelude::*;
        tasks
            .into_par_iter()
            .map(|task| {
                let world = Arc::new(task.compile(ValidateOptions::default())?);
                let mut env = simulation
                    .env(world, scorer.clone(), env_config.clone())?
                    .with_judge(judge.clone());
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
    let mut failed_simulations = 0;
    for episode in episodes {
        let episode = episode?;
        rewards.push(episode["reward"].as_f64().unwrap_or(0.0));
        failed_simulations += episode["simulation_errors"].as_array().map_or(0, Vec::len);
        lines.push_str(&episode.to_string());
        lines.push('\n');
    }
    let path = args.out.join("trajectories.jsonl");
    rulegym::io::write_file_atomic(&path, lines.as_bytes())?;
    let mean = if rewards.is_empty() {
        0.0
    } else {
        rewards.iter().sum::<f64>() / rewards.len() as f64
    };
    println!(
        "{}",
        json!({"episodes": rewards.len(), "mean_reward": mean, "rewards": rewards,
               "failed_simulations": failed_simulations, "out": path})
    );
    Ok(())
}

fn agree(args: AgreeArgs) -> Result<()> {
    let tasks = load_tasks(&args.tasks, ValidateOptions::default())?;
    /// A line of the trajectories file: a task's id and its conversation.
    #[derive(serde::Deserialize)]
    struct Episode {
        id: String,
        messages: Vec<ChatMessage>,
    }
    let episodes: Vec<Episode> = rulegym::io::read_jsonl(&args.trajectories)?;
    let inner = match (&args.judge_endpoint, args.replay_only) {
        (_, true) => None,
        (Some(endpoint), false) => Some(client(
            endpoint,
            args.api_key_env.as_deref(),
            4,
            args.schema_format.parse()?,
        )?),
        (None, false) => {
            return Err(rulegym::Error::Config(
                "--judge-endpoint is required unless --replay-only".into(),
            ));
        }
    };
    let mode = if args.replay_only {
        CacheMode::Replay
    } else {
        CacheMode::Record
    };
    let judge = LlmJudge::new(
        Arc::new(CachedBackend::new(inner, &args.out.join("llm-cache"), mode)),
        &args.judge_model,
        Some(args.seed),
    );
    let rules = RubricScorer::new(score_config(&args.variant, "rules")?)?;
    let judged = RubricScorer::new(score_config(&args.variant, "judge")?)?;
    let mut report = AgreementReport::default();
    for Episode { id, messages } in &episodes {
        let task = tasks
            .iter()
            .find(|t| &t.id == id)
            .ok_or_else(|| TaskError::NotFound(id.clone()))?;
        let world = Arc::new(task.clone().compile(ValidateOptions::default())?);
        let trajectory = trajectory_from_messages(&world, messages)?;
        let by_rules = rules.score(&world.task, &world.program, &trajectory, None)?;
        let by_judge = judged.score(&world.task, &world.program, &trajectory, Some(&judge));
        report.add(id, &by_rules, by_judge.map_err(|e| e.to_string()));
    }
    let json = serde_json::to_vec_pretty(&report).unwrap_or_default();
    rulegym::io::write_file_atomic(&args.out.join("agreement.json"), &json)?;
    println!("{}", report.markdown());
    Ok(())
}

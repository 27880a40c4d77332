//! `rulegym openenv`: serve a dataset's search environment, or tool-use tasks, over OpenEnv's
//! protocol (feature `openenv`, part of `cli`).

use rulegym::Result;
use std::path::PathBuf;

/// Flags of `rulegym openenv`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("world").required(true).args(["dataset", "tasks"])))]
pub struct Args {
    /// A dataset directory written by `rulegym generate`: each episode is one of its
    /// questions, answered with the tools `search`, `get_article` and `answer`.
    #[arg(long)]
    dataset: Option<PathBuf>,
    /// Search index [default: the dataset's own `index.idx`].
    #[arg(long, conflicts_with = "tasks")]
    index: Option<PathBuf>,
    /// Passages one `search` returns.
    #[arg(long, default_value_t = 3, conflicts_with = "tasks")]
    top_k: usize,
    /// A tool-use task file (.jsonl, or .json with one task or an array): each episode is one
    /// task, played with its tools, `ask_user` and `finish`.
    #[arg(long, conflicts_with = "dataset")]
    tasks: Option<PathBuf>,
    /// Tool calls per episode [default: the search environment's cap (10); 16 for tool-use
    /// tasks, whose own max_turns overrides it].
    #[arg(long)]
    max_turns: Option<u32>,
    /// Simulation of the tool-use tasks (mappings, simulator LLM, user), as in `tools play`.
    #[command(flatten)]
    simulation: super::SimulationArgs,
    /// The environment's name (OpenEnv's env_name, in the task-listing routes)
    /// [default: rulegym_search or rulegym_tools].
    #[arg(long)]
    name: Option<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// TCP port (0 picks a free one, printed on stderr).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Largest request body or WebSocket message, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    max_message_bytes: usize,
    /// Seconds one reset or tool call may run before it is answered with an error.
    #[arg(long, default_value_t = 120.0)]
    call_timeout: f64,
    /// Session bounds (WebSocket and HTTP sessions; the same cap bounds connections).
    #[command(flatten)]
    sessions: super::SessionArgs,
}

/// Runs `rulegym openenv` until the process is stopped.
pub fn run(args: Args) -> Result<()> {
    use rulegym::openenv::ServerConfig;
    use rulegym::search::SearchEnvConfig;
    use rulegym::toolcall::{SearchWorld, TaskWorld, World, WorldKind};
    use rulegym::tooluse::env::ToolEnvConfig;
    let (name, worlds) = match (&args.dataset, &args.tasks) {
        (Some(dir), _) => {
            let mut config = SearchEnvConfig {
                top_k: args.top_k,
                ..SearchEnvConfig::default()
            };
            if let Some(t) = args.max_turns {
                config.max_turns = t as usize;
            }
            let world = SearchWorld::load(dir, args.index.as_deref(), config)?;
            ("rulegym_search", WorldKind::Search(world))
        }
        (None, Some(file)) => {
            let config = ToolEnvConfig {
                max_turns: args.max_turns.unwrap_or(16),
                ..ToolEnvConfig::default()
            };
            let world = TaskWorld::load(file, args.simulation.config()?, config)?;
            ("rulegym_tools", WorldKind::Tasks(world))
        }
        (None, None) => unreachable!("clap requires --dataset or --tasks"),
    };
    let call_timeout = std::time::Duration::try_from_secs_f64(args.call_timeout)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            rulegym::Error::Config(format!(
                "--call-timeout {} is not a positive number of seconds",
                args.call_timeout
            ))
        })?;
    if args.max_message_bytes == 0 {
        return Err(rulegym::Error::Config(
            "--max-message-bytes must be positive".into(),
        ));
    }
    let cfg = ServerConfig {
        sessions: args.sessions.limits()?,
        max_message_bytes: args.max_message_bytes,
        call_timeout,
        ..ServerConfig::default()
    };
    let world = World::new(args.name.unwrap_or_else(|| name.to_owned()), worlds);
    let addr = format!("{}:{}", args.host, args.port);
    rulegym::openenv::serve_blocking(world, &addr, cfg, |local| {
        eprintln!("serving OpenEnv on http://{local} (WebSocket /ws, JSON-RPC /mcp, GET /health)");
    })
}

//! `rulegym export`: the search tasks of a dataset, or tool-use tasks, as verl or SkyRL training
//! rows (plus verl's tool and interaction configs for tool-use tasks).

use rulegym::Result;
use rulegym::export::tooluse::{ToolExportOptions, export_tasks};
use rulegym::export::{ExportFormat, ExportOptions, export};
use rulegym::preset::{self, Stage};
use rulegym::search::SearchEnvConfig;
use rulegym::tooluse::task::{ValidateOptions, load_tasks};
use std::path::PathBuf;

/// Flags of `rulegym export`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A directory written by `rulegym generate` (reads its questions.jsonl).
    #[arg(long, required_unless_present = "tasks", conflicts_with = "tasks")]
    dataset: Option<PathBuf>,
    #[command(flatten)]
    questions: crate::QuestionFile,
    /// A tool-use task file (.jsonl, e.g. from `rulegym tools generate`, or .json). verl's
    /// tool config is global, so it holds every task's tools; a name that tasks give different
    /// schemas is exported once per schema as `<name>__<8 hex of the schema hash>`, and each
    /// row's create_kwargs map it back to the task's name (see python/rulegym/verl.py).
    #[arg(long)]
    tasks: Option<PathBuf>,
    /// verl, skyrl or trl (Hugging Face TRL's GRPOTrainer: flat columns, `environment`).
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// Output file: parquet, or JSON lines when the name ends in `.jsonl`. For tool-use tasks
    /// in verl format, `<stem>_tool_config.yaml` and `<stem>_interaction_config.yaml` are
    /// written next to it.
    #[arg(long)]
    out: PathBuf,
    /// Questions: only this split (train or val; all by default). Tool-use tasks: the split
    /// label of every row (default train).
    #[arg(long)]
    split: Option<String>,
    /// `data_source` of every row (default rulegym_search, or rulegym_tools with --tasks).
    #[arg(long)]
    data_source: Option<String>,
    /// SkyRL `env_class` of every row: the id `rulegym.skyrl.register()` registers (default
    /// rulegym-search-v1, or rulegym-tool-v1 with --tasks; SkyRL's own search environment is
    /// `search`).
    #[arg(long)]
    env_class: Option<String>,
    /// Questions: the index the environment searches, recorded (absolute) in every row's
    /// `extra_info.index_path`, where `rulegym.skyrl.SearchEnv` and verl's
    /// `rulegym_search_agent` find it (default: the dataset's index.idx when it exists).
    #[arg(long, conflicts_with = "tasks")]
    index: Option<PathBuf>,
    /// Tool-use tasks in verl format: `agent_name` of every row (default rulegym_tool_agent,
    /// rulegym's agent loop for verl >= 0.8, declared in `<stem>_agent_loop_config.yaml`;
    /// `tool_agent` runs verl 0.7's tool agent loop with the interaction config).
    #[arg(long, requires = "tasks")]
    agent_name: Option<String>,
    /// An environment preset (`presets/env/<name>.json`): phantomenvs (questions: the paper's
    /// prompt, system message, top-k; see docs/papers.md) or synthagent (tool-use tasks: 16 turns).
    /// Without it the rows are exactly as before (Search-R1's prompt, no system message).
    #[arg(long)]
    preset: Option<String>,
    /// The preset's stage whose settings are exported: train or eval.
    #[arg(long, value_enum, default_value_t = Stage::Train, requires = "preset")]
    stage: Stage,
    /// Questions: the user prompt, read from this file (must contain `{question}`); overrides
    /// the preset's.
    #[arg(long, conflicts_with = "tasks")]
    prompt: Option<PathBuf>,
    /// Questions: the system prompt, read from this file; overrides the preset's.
    #[arg(long, conflicts_with = "tasks")]
    system_prompt: Option<PathBuf>,
}

fn read_text(flag: &str, path: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| rulegym::Error::Io {
        context: format!("{flag} {}", path.display()),
        source,
    })
}

/// Runs `rulegym export`.
pub fn run(args: Args) -> Result<()> {
    let (format, stage) = (args.format, args.stage);
    let preset_name = args.preset.as_deref();
    if let Some(tasks) = &args.tasks {
        args.questions.refuse_with_tasks()?;
        let tasks = load_tasks(tasks, ValidateOptions::default())?;
        let mut defaults = ToolExportOptions::default();
        if preset_name.is_some() {
            defaults.max_turns = preset::tooluse_env(preset_name, stage, None, None)?.max_turns;
        }
        let options = ToolExportOptions {
            format,
            data_source: args.data_source.unwrap_or(defaults.data_source),
            env_class: args.env_class.unwrap_or(defaults.env_class),
            split: args.split.unwrap_or(defaults.split),
            agent_name: args.agent_name.unwrap_or(defaults.agent_name),
            ..defaults
        };
        let files = export_tasks(&args.out, &tasks, &options)?;
        println!(
            "wrote {} {} rows to {}",
            tasks.len(),
            args.format,
            args.out.display()
        );
        for file in &files[1..] {
            println!("wrote {}", file.display());
        }
        return Ok(());
    }
    let dataset = args
        .dataset
        .ok_or_else(|| rulegym::Error::Config("pass --dataset DIR or --tasks FILE".into()))?;
    let mut questions =
        rulegym::dataset::load_question_set(&dataset, args.questions.file.as_deref())?.questions;
    if let Some(name) = &args.split {
        let split = rulegym::question::Split::named(name).ok_or_else(|| {
            rulegym::Error::Config(format!("unknown split {name:?} (train, val)"))
        })?;
        questions.retain(|q| q.split == split);
    }
    let index = args
        .index
        .or_else(|| Some(dataset.join("index.idx")).filter(|p| p.is_file()));
    let index_path = match index {
        Some(p) if !p.is_file() => {
            return Err(rulegym::Error::Config(format!(
                "--index {}: no such file",
                p.display()
            )));
        }
        Some(p) => std::path::absolute(&p)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned(),
        None => String::new(),
    };
    let mut config = preset::search_env(preset_name, stage, SearchEnvConfig::default())?;
    if let Some(path) = &args.prompt {
        config.prompt = read_text("--prompt", path)?;
    }
    if let Some(path) = &args.system_prompt {
        config.system_prompt = Some(read_text("--system-prompt", path)?);
    }
    config.validate()?;
    let defaults = ExportOptions::default();
    let options = ExportOptions {
        index_path,
        format,
        data_source: args.data_source.unwrap_or(defaults.data_source),
        env_class: args.env_class.unwrap_or(defaults.env_class),
        config,
        ..defaults
    };
    let n = export(&args.out, &questions, &options)?;
    println!("wrote {n} {} rows to {}", args.format, args.out.display());
    Ok(())
}

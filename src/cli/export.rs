//! `rulegym export`: the search tasks of a dataset, or tool-use tasks, as verl or SkyRL training
//! rows (plus verl's tool and interaction configs for tool-use tasks).

use crate::Result;
use crate::env::export::{ExportFormat, ExportOptions, export};
use crate::env::search::SearchEnvConfig;
use crate::tooluse::export::{ToolExportOptions, export_tasks};
use crate::tooluse::task::{ValidateOptions, load_tasks};
use std::path::PathBuf;

/// Flags of `rulegym export`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A directory written by `rulegym generate` (reads its questions.jsonl).
    #[arg(long, required_unless_present = "tasks", conflicts_with = "tasks")]
    dataset: Option<PathBuf>,
    /// A tool-use task file (.jsonl, e.g. from `rulegym tools generate`, or .json). verl's
    /// tool config is global, so it holds every task's tools; a name that tasks give different
    /// schemas is exported once per schema as `<name>__<8 hex of the schema hash>`, and each
    /// row's create_kwargs map it back to the task's name (see python/rulegym/verl.py).
    #[arg(long)]
    tasks: Option<PathBuf>,
    /// verl or skyrl.
    #[arg(long)]
    format: String,
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
}

/// Runs `rulegym export`.
pub fn run(args: Args) -> Result<()> {
    let format: ExportFormat = args.format.parse()?;
    if let Some(tasks) = &args.tasks {
        let tasks = load_tasks(tasks, ValidateOptions::default())?;
        let defaults = ToolExportOptions::default();
        let options = ToolExportOptions {
            format,
            data_source: args.data_source.unwrap_or(defaults.data_source),
            env_class: args.env_class.unwrap_or(defaults.env_class),
            split: args.split.unwrap_or(defaults.split),
            ..ToolExportOptions::default()
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
        .ok_or_else(|| crate::Error::Config("pass --dataset DIR or --tasks FILE".into()))?;
    let mut questions = crate::dataset::load_questions(&dataset)?;
    if let Some(split) = &args.split {
        questions.retain(|q| &q.split == split);
    }
    let defaults = ExportOptions::default();
    let options = ExportOptions {
        format,
        data_source: args.data_source.unwrap_or(defaults.data_source),
        env_class: args.env_class.unwrap_or(defaults.env_class),
        config: SearchEnvConfig::default(),
        ..defaults
    };
    let n = export(&args.out, &questions, &options)?;
    println!("wrote {n} {} rows to {}", args.format, args.out.display());
    Ok(())
}

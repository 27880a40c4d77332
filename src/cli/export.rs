//! `rulegym export`: the search tasks of a dataset as verl or SkyRL training rows.

use crate::Result;
use crate::cli::oracle::read_questions;
use crate::env::export::{ExportFormat, ExportOptions, export};
use crate::env::search::SearchEnvConfig;
use std::path::PathBuf;

/// Flags of `rulegym export`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A directory written by `rulegym generate` (reads its questions.jsonl).
    #[arg(long)]
    dataset: PathBuf,
    /// verl or skyrl.
    #[arg(long)]
    format: String,
    /// Output file: parquet, or JSON lines when the name ends in `.jsonl`.
    #[arg(long)]
    out: PathBuf,
    /// Only questions of this split (train or val); all by default.
    #[arg(long)]
    split: Option<String>,
    /// `data_source` of every row.
    #[arg(long, default_value = "rulegym_search")]
    data_source: String,
    /// SkyRL `env_class` of every row (the id `rulegym.skyrl.register()` registers; SkyRL's own
    /// search environment is `search`).
    #[arg(long, default_value = "rulegym-search-v1")]
    env_class: String,
}

/// Runs `rulegym export`.
pub fn run(args: Args) -> Result<()> {
    let format: ExportFormat = args.format.parse()?;
    let mut questions = read_questions(&args.dataset.join("questions.jsonl"))?;
    if let Some(split) = &args.split {
        questions.retain(|q| &q.split == split);
    }
    let options = ExportOptions {
        format,
        data_source: args.data_source,
        env_class: args.env_class,
        config: SearchEnvConfig::default(),
        ..ExportOptions::default()
    };
    let n = export(&args.out, &questions, &options)?;
    println!("wrote {n} {} rows to {}", args.format, args.out.display());
    Ok(())
}

//! `rulegym questions`: more question sets for an existing universe directory.

use crate::dataset::{load_universe, write_file_atomic};
use crate::engine::Engine;
use crate::question::{self, AnchorStrategy, Family, QuestionConfig};
use crate::{Error, Result};
use std::path::PathBuf;

/// Flags of `rulegym questions`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A directory written by `rulegym generate`.
    #[arg(long)]
    universe: PathBuf,
    /// Question families, comma-separated: base, hops, hops+constraints, hops+comparisons.
    #[arg(long, value_delimiter = ',', default_value = "base")]
    family: Vec<Family>,
    /// Questions per template (base) or per cell (other families).
    #[arg(long, default_value_t = 10)]
    per_template: usize,
    /// Grammar depth of the base family.
    #[arg(long, default_value_t = 16)]
    depth: usize,
    /// Seed of the question streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Use all 45 relations (default: the universe's mode).
    #[arg(long, conflicts_with = "easy_mode")]
    hard_mode: bool,
    /// Use the 12 easy relations (default: the universe's mode).
    #[arg(long)]
    easy_mode: bool,
    /// Drop "How many" questions from the base family.
    #[arg(long)]
    exclude_aggregation: bool,
    /// Longest chain of the hops* families.
    #[arg(long, default_value_t = 7)]
    max_hops: usize,
    /// Anchor slot of bidirectional sampling: uniform, balanced or fixed:K.
    #[arg(long, default_value = "balanced")]
    anchor: AnchorStrategy,
    /// Cell-balance the hops* families.
    #[arg(long)]
    balance: bool,
    /// Fraction of each cell held out as the validation split.
    #[arg(long, default_value_t = 0.1)]
    val_fraction: f64,
    /// Output JSONL file (written atomically).
    #[arg(long)]
    out: PathBuf,
    /// No grid of cell counts on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs `rulegym questions`.
pub fn run(args: Args) -> Result<()> {
    let universe = load_universe(&args.universe)?;
    let easy_mode = if args.hard_mode {
        false
    } else {
        args.easy_mode || universe.config.easy_mode
    };
    let config = QuestionConfig {
        seed: args.seed,
        families: args.family,
        depth: args.depth,
        per_template: args.per_template,
        easy_mode,
        exclude_aggregation: args.exclude_aggregation,
        max_hops: args.max_hops,
        anchor: args.anchor,
        balance: args.balance,
        val_fraction: args.val_fraction,
        ..QuestionConfig::default()
    };
    config.validate()?;
    let engine = Engine::with_facts(&universe.facts())?;
    let (questions, report) = question::generate(&universe, &engine, &config)?;
    let mut out = Vec::new();
    for q in &questions {
        serde_json::to_writer(&mut out, q).map_err(|source| Error::Json {
            context: "serialising a question".into(),
            source,
        })?;
        out.push(b'\n');
    }
    write_file_atomic(&args.out, &out)?;
    if !args.quiet {
        eprint!("{}", question::balance::grid(&questions));
        eprintln!(
            "wrote {} questions ({} skipped slots, {} rejected walks, {} balanced away) to {}",
            questions.len(),
            report.skipped_slots,
            report.rejections,
            report.balanced_away,
            args.out.display()
        );
    }
    Ok(())
}

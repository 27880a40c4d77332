//! `rulegym questions`: more question sets for an existing universe directory.

use crate::Result;
use crate::dataset::build::article_index;
use crate::dataset::load_universe;
use crate::engine::Engine;
use crate::env::oracle::Certifier;
use crate::question::{self, AnchorStrategy, Family, QuestionConfig, Sampler, Solvability};
use std::path::PathBuf;

/// Question-generation flags, shared by `generate` and `questions`.
#[derive(clap::Args, Debug)]
pub struct QuestionArgs {
    /// Question families, comma-separated: base, hops, hops+constraints, hops+comparisons.
    #[arg(long, alias = "family", value_delimiter = ',', default_value = "base")]
    families: Vec<Family>,
    /// Questions per template (base) or per cell (other families).
    #[arg(long, default_value_t = 10)]
    per_template: usize,
    /// Grammar depth of the base family (16: PhantomWiki's 38 templates).
    #[arg(long, default_value_t = 16)]
    depth: usize,
    /// Seed of the question streams (defaults to the universe's seed).
    #[arg(long)]
    question_seed: Option<u64>,
    /// Drop "How many" questions from the base family.
    #[arg(long)]
    exclude_aggregation: bool,
    /// Longest chain of the hops* families.
    #[arg(long, default_value_t = 7)]
    max_hops: usize,
    /// Anchor slot of bidirectional sampling: uniform (the paper's), balanced or fixed:K.
    #[arg(long, default_value = "uniform")]
    anchor: AnchorStrategy,
    /// Step sampler of the hops* families: uniform (the paper's) or unambiguous.
    #[arg(long, default_value = "uniform")]
    sampler: Sampler,
    /// Keep questions the search environment cannot answer (their certificate says so)
    /// instead of rejecting them.
    #[arg(long)]
    keep_unsolvable: bool,
    /// Passages per search under which questions must be solvable.
    #[arg(long, default_value_t = Solvability::default().top_k)]
    solvable_top_k: usize,
    /// Turn cap (searches + answer) under which questions must be solvable.
    #[arg(long, default_value_t = Solvability::default().max_turns)]
    solvable_max_turns: usize,
    /// Cell-balance the hops* families.
    #[arg(long)]
    balance: bool,
    /// Fraction of each cell held out as the validation split.
    #[arg(long, default_value_t = 0.1)]
    val_fraction: f64,
}

impl QuestionArgs {
    /// The question configuration these flags describe.
    pub fn config(&self, default_seed: u64, easy_mode: bool) -> QuestionConfig {
        QuestionConfig {
            seed: self.question_seed.unwrap_or(default_seed),
            families: self.families.clone(),
            depth: self.depth,
            per_template: self.per_template,
            easy_mode,
            exclude_aggregation: self.exclude_aggregation,
            max_hops: self.max_hops,
            anchor: self.anchor,
            sampler: self.sampler,
            keep_unsolvable: self.keep_unsolvable,
            solvability: Solvability {
                top_k: self.solvable_top_k,
                max_turns: self.solvable_max_turns,
            },
            balance: self.balance,
            val_fraction: self.val_fraction,
            ..QuestionConfig::default()
        }
    }
}

/// Flags of `rulegym questions`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A directory written by `rulegym generate`.
    #[arg(long)]
    universe: PathBuf,
    #[command(flatten)]
    questions: QuestionArgs,
    /// Use all 45 relations (default: the universe's mode).
    #[arg(long, conflicts_with = "easy_mode")]
    hard_mode: bool,
    /// Use the 12 easy relations (default: the universe's mode).
    #[arg(long)]
    easy_mode: bool,
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
    let config = args.questions.config(universe.config.seed, easy_mode);
    config.validate()?;
    let engine = Engine::with_facts(&universe.facts())?;
    let index = article_index(&crate::corpus::articles(&universe))?;
    let certifier = Certifier::new(&universe, &index, config.solvability)?;
    let (questions, report) = question::generate(&universe, &engine, &config, Some(&certifier))?;
    crate::io::write_jsonl(&args.out, &questions)?;
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

//! `rulegym questions`: more question sets for an existing universe directory.

use rulegym::Result;
use rulegym::dataset::build::{Dataset, build_questions};
use rulegym::dataset::load_universe;
use rulegym::question::{self, AnchorStrategy, Comparison, Family, QuestionConfig, Sampler};
use rulegym::universe::UniverseConfig;
use std::path::PathBuf;

/// Question-generation flags, shared by `generate` and `questions`. Each flag overrides the
/// base configuration (a preset's, or [`QuestionConfig::default`]); the defaults shown are the
/// latter's.
#[derive(clap::Args, Debug)]
pub struct QuestionArgs {
    /// Question families, comma-separated: base, hops, hops+constraints, hops+comparisons
    /// [default: base].
    #[arg(long, alias = "family", value_delimiter = ',')]
    families: Option<Vec<Family>>,
    /// Questions per template (base) or per cell (other families) [default: 10].
    #[arg(long)]
    per_template: Option<usize>,
    /// Grammar depth of the base family (16: PhantomWiki's 38 templates) [default: 16].
    #[arg(long)]
    depth: Option<usize>,
    /// Seed of the question streams (defaults to the universe's seed).
    #[arg(long)]
    pub(crate) question_seed: Option<u64>,
    /// Drop "How many" questions from the base family.
    #[arg(long)]
    exclude_aggregation: bool,
    /// Longest chain of the hops* families [default: 7].
    #[arg(long)]
    max_hops: Option<usize>,
    /// Comparison shapes of hops+comparisons, comma-separated: older (the paper's), younger,
    /// born-first, oldest, youngest, most [default: older].
    #[arg(long, value_delimiter = ',')]
    comparisons: Option<Vec<Comparison>>,
    /// Let zero-hop comparison sides name their person by two or three attributes.
    #[arg(long)]
    multi_attribute_sides: bool,
    /// Anchor slot of bidirectional sampling: uniform (the paper's), balanced or fixed:K
    /// [default: uniform].
    #[arg(long)]
    anchor: Option<AnchorStrategy>,
    /// Step sampler of the hops* families: uniform (the paper's) or unambiguous
    /// [default: uniform].
    #[arg(long)]
    sampler: Option<Sampler>,
    /// Keep questions the search environment cannot answer (their certificate says so)
    /// instead of rejecting them.
    #[arg(long)]
    keep_unsolvable: bool,
    /// Passages per search under which questions must be solvable [default: 3].
    #[arg(long)]
    solvable_top_k: Option<usize>,
    /// Turn cap (searches + answer) under which questions must be solvable [default: 10].
    #[arg(long)]
    solvable_max_turns: Option<usize>,
    /// Cell-balance the hops* families.
    #[arg(long)]
    balance: bool,
    /// Fraction of each cell held out as the validation split [default: 0.1].
    #[arg(long)]
    val_fraction: Option<f64>,
}

impl QuestionArgs {
    /// `base` with every flag given applied, its seed and easy mode following `universe`
    /// (`easy_mode`: the caller's choice, if any).
    pub fn apply(
        &self,
        mut base: QuestionConfig,
        universe: &UniverseConfig,
        easy_mode: Option<bool>,
    ) -> QuestionConfig {
        if let Some(v) = &self.families {
            base.families = v.clone();
        }
        if let Some(v) = self.per_template {
            base.per_template = v;
        }
        if let Some(v) = self.depth {
            base.depth = v;
        }
        base.exclude_aggregation |= self.exclude_aggregation;
        if let Some(v) = self.max_hops {
            base.max_hops = v;
        }
        if let Some(v) = &self.comparisons {
            base.comparisons = v.clone();
        }
        base.multi_attribute_sides |= self.multi_attribute_sides;
        if let Some(v) = self.anchor {
            base.anchor = v;
        }
        if let Some(v) = self.sampler {
            base.sampler = v;
        }
        base.keep_unsolvable |= self.keep_unsolvable;
        if let Some(v) = self.solvable_top_k {
            base.solvability.top_k = v;
        }
        if let Some(v) = self.solvable_max_turns {
            base.solvability.max_turns = v;
        }
        base.balance |= self.balance;
        if let Some(v) = self.val_fraction {
            base.val_fraction = v;
        }
        base.following(universe, self.question_seed, easy_mode)
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
    /// Prolog engines verifying questions in parallel (0: one per core, at most 2).
    #[arg(long, default_value_t = 0)]
    engines: usize,
    /// No grid of cell counts on stderr.
    #[arg(long, short)]
    quiet: bool,
    /// After the summary, a table of every cell's slots, questions and rejected walks by
    /// reason, with what each word of the summary means.
    #[arg(long, conflicts_with = "quiet")]
    explain: bool,
}

/// Runs `rulegym questions`.
pub fn run(args: Args) -> Result<()> {
    let universe = load_universe(&args.universe)?;
    let easy_mode = match (args.hard_mode, args.easy_mode) {
        (true, _) => Some(false),
        (_, true) => Some(true),
        _ => None,
    };
    let config = (args.questions).apply(QuestionConfig::default(), &universe.config, easy_mode);
    let Dataset {
        questions, report, ..
    } = build_questions(universe, config, args.engines)?;
    rulegym::io::write_jsonl(&args.out, &questions)?;
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
    if args.explain {
        eprint!("{}", report.explain());
    }
    Ok(())
}

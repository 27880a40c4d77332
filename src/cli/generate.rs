//! `rulegym generate`: universe -> engine -> articles -> dataset directory.

use super::questions::QuestionArgs;
use crate::Result;
use crate::dataset::{self, BuildConfig, BuildEvent};
use crate::question;
use crate::universe::UniverseConfig;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Flags of `rulegym generate`; defaults reproduce the PhantomEnvironments training universe.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output directory (written atomically).
    #[arg(long)]
    out: PathBuf,
    /// Master seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of family trees.
    #[arg(long, default_value_t = 100)]
    num_family_trees: usize,
    /// Target people per tree (trees hold this many or one more).
    #[arg(long, default_value_t = 10)]
    max_family_tree_size: usize,
    /// Maximum generations per tree.
    #[arg(long, default_value_t = 10)]
    max_family_tree_depth: usize,
    /// Maximum children per couple.
    #[arg(long, default_value_t = 5)]
    max_branching_factor: usize,
    /// Expected number of friends per person.
    #[arg(long, default_value_t = 3.0)]
    friendship_k: f64,
    /// Hard mode: questions may use all 45 relations (recorded in the manifest).
    #[arg(long)]
    hard_mode: bool,
    #[command(flatten)]
    questions: QuestionArgs,
    /// Prolog engines verifying questions in parallel (0: one per core, at most 2).
    #[arg(long, default_value_t = 0)]
    engines: usize,
    /// Replace OUT if it exists.
    #[arg(long)]
    force: bool,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs `rulegym generate`: [`dataset::build_observed`] with a spinner per stage (unless
/// quiet), then the atomic write.
pub fn run(args: Args) -> Result<()> {
    let universe = UniverseConfig {
        seed: args.seed,
        num_family_trees: args.num_family_trees,
        max_family_tree_size: args.max_family_tree_size,
        max_family_tree_depth: args.max_family_tree_depth,
        max_branching_factor: args.max_branching_factor,
        friendship_k: args.friendship_k,
        easy_mode: !args.hard_mode,
    };
    let questions = args.questions.config(args.seed, !args.hard_mode);
    let quiet = args.quiet;
    dataset::check_output(&args.out, args.force)?;
    let config = BuildConfig {
        engines: args.engines,
        ..BuildConfig::new(universe, Some(questions))
    };
    let mut bar = ProgressBar::hidden();
    let data = dataset::build_observed(&config, &mut |event| match event {
        BuildEvent::Started(stage) if !quiet => {
            bar = ProgressBar::new_spinner().with_message(stage.name());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid"),
            );
            bar.enable_steady_tick(Duration::from_millis(100));
        }
        BuildEvent::Finished(stage, elapsed) if !quiet => {
            bar.finish_and_clear();
            eprintln!("{}: {:.2} s", stage.name(), elapsed.as_secs_f64());
        }
        _ => {}
    });
    bar.finish_and_clear();
    let data = data?;
    let start = Instant::now();
    data.write(&args.out, args.force)?;
    if !quiet {
        eprintln!("write: {:.2} s", start.elapsed().as_secs_f64());
        eprint!("{}", question::balance::grid(&data.questions));
        eprintln!(
            "wrote {} people, {} articles, {} questions ({} skipped slots, {} rejected walks) to {}",
            data.universe.people.len(),
            data.articles.len(),
            data.questions.len(),
            data.report.skipped_slots,
            data.report.rejections,
            args.out.display()
        );
    }
    Ok(())
}

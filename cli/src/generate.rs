//! `rulegym generate`: universe -> engine -> articles -> dataset directory.

use super::questions::QuestionArgs;
use indicatif::{ProgressBar, ProgressStyle};
use rulegym::Result;
use rulegym::dataset::batch::{self, Batch, BatchEvent, EngineSource, SeedRange};
use rulegym::dataset::{self, BuildConfig, BuildEvent, BuildStage};
use rulegym::preset;
use rulegym::question;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Flags of `rulegym generate`; defaults reproduce the PhantomEnvironments training universe.
/// Flags override the preset's values, if a preset is given.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output directory (written atomically).
    #[arg(long)]
    out: PathBuf,
    /// A named configuration to start from (`phantomenvs`: the paper's training set).
    #[arg(long)]
    preset: Option<String>,
    /// Master seed.
    #[arg(long, default_value_t = 1, conflicts_with = "seeds")]
    seed: u64,
    /// Many universes in one process: `A..B` (B excluded) or `A..=B`; writes OUT/seed-S for
    /// each seed S, byte-identical to `--seed S --out OUT/seed-S`.
    #[arg(long)]
    seeds: Option<SeedRange>,
    /// With --seeds: universes built in parallel (0: one per core).
    #[arg(long, default_value_t = 0, requires = "seeds")]
    workers: usize,
    /// With --seeds: MiB of facts text a warm engine loads before it is replaced by a fresh
    /// one (scryer never frees clauses). 0: each universe on its own engine (on Linux a forked
    /// copy of one engine started once), flat peak memory; a budget keeps engines warm and
    /// peak memory creeps up (BENCHMARKS.md).
    #[arg(long, default_value_t = 0, requires = "seeds")]
    engine_budget_mib: usize,
    /// With --seeds: start a fresh engine per universe on worker threads instead of forking
    /// children of one engine (the portable path; same bytes).
    #[arg(long, requires = "seeds")]
    no_fork: bool,
    /// Number of family trees [default: 100].
    #[arg(long)]
    num_family_trees: Option<usize>,
    /// Target people per tree (trees hold this many or one more) [default: 10].
    #[arg(long)]
    max_family_tree_size: Option<usize>,
    /// Maximum generations per tree [default: 10].
    #[arg(long)]
    max_family_tree_depth: Option<usize>,
    /// Maximum children per couple [default: 5].
    #[arg(long)]
    max_branching_factor: Option<usize>,
    /// Expected number of friends per person [default: 3].
    #[arg(long)]
    friendship_k: Option<f64>,
    /// Hard mode: questions may use all 45 relations (recorded in the manifest).
    #[arg(long)]
    hard_mode: bool,
    #[command(flatten)]
    questions: QuestionArgs,
    /// Prolog engines verifying questions in parallel (0: one per core, at most 2; with --seeds
    /// each worker verifies on its one engine, see --workers).
    #[arg(long, default_value_t = 0)]
    engines: usize,
    /// Replace OUT if it exists.
    #[arg(long)]
    force: bool,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
    /// After the summary, a table of every cell's slots, questions and rejected walks by
    /// reason, with what each word of the summary means.
    #[arg(long, conflicts_with = "quiet")]
    explain: bool,
}

/// Runs `rulegym generate`: [`dataset::build_and_write`] with a spinner per stage (unless
/// quiet), then the atomic write.
pub fn run(args: Args) -> Result<()> {
    let (mut universe, base) = preset::generation(args.preset.as_deref())?;
    universe.seed = args.seed;
    let overrides = [
        (&mut universe.num_family_trees, args.num_family_trees),
        (
            &mut universe.max_family_tree_size,
            args.max_family_tree_size,
        ),
        (
            &mut universe.max_family_tree_depth,
            args.max_family_tree_depth,
        ),
        (
            &mut universe.max_branching_factor,
            args.max_branching_factor,
        ),
    ];
    for (knob, flag) in overrides {
        if let Some(v) = flag {
            *knob = v;
        }
    }
    if let Some(k) = args.friendship_k {
        universe.friendship_k = k;
    }
    universe.easy_mode &= !args.hard_mode;
    let questions = args.questions.apply(base, &universe, None);
    let quiet = args.quiet;
    // One spinner for the stages (hidden when quiet); sampling writes its cell count into it.
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new_spinner()
            .with_style(ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid"))
    };
    let sampling_progress = (!quiet && args.seeds.is_none()).then(|| {
        let bar = bar.clone();
        dataset::SamplingProgress(std::sync::Arc::new(move |done: usize, total: usize| {
            bar.set_message(format!(
                "{} ({done} of {total} cells sampled)",
                BuildStage::LoadAndSample.name()
            ));
        }))
    });
    let config = BuildConfig {
        engines: args.engines,
        sampling_progress,
        ..BuildConfig::new(universe, Some(questions))
    };
    if let Some(seeds) = args.seeds {
        let batch = Batch {
            pin_question_seed: args.questions.question_seed.is_some(),
            workers: args.workers,
            engine_budget: args.engine_budget_mib << 20,
            zygote: !args.no_fork && cfg!(target_os = "linux"),
            ..Batch::new(config, seeds)
        };
        return run_batch(&batch, &args.out, args.force, quiet);
    }
    dataset::check_output(&args.out, args.force)?;
    let data = dataset::build_and_write(&config, &args.out, args.force, &mut |event| match event {
        BuildEvent::Started(stage) if !quiet => {
            bar.set_message(stage.name());
            bar.reset_elapsed();
            bar.enable_steady_tick(Duration::from_millis(100));
        }
        BuildEvent::Finished(stage, elapsed) if !quiet => {
            bar.suspend(|| eprintln!("{}: {:.2} s", stage.name(), elapsed.as_secs_f64()));
        }
        _ => {}
    });
    bar.finish_and_clear();
    let data = data?;
    if !quiet {
        eprint!("{}", question::balance::grid(&data.questions));
        let total = data.report.total();
        eprintln!(
            "wrote {} people, {} articles, {} questions and the search index to {} \
             ({} skipped slots, {} rejected walks: {} dead ends, {} duplicates, {} not unique, \
             {} degenerate, {} unsolvable)",
            data.universe.people.len(),
            data.articles.len(),
            data.questions.len(),
            args.out.display(),
            data.report.skipped_slots,
            data.report.rejections,
            total.dead_ends,
            total.duplicates,
            total.not_unique,
            total.degenerate,
            total.unsolvable,
        );
    }
    if args.explain {
        eprint!("{}", data.report.explain());
    }
    Ok(())
}

/// `--seeds`: [`batch::generate`], a line per universe (unless quiet) and a summary.
fn run_batch(batch: &Batch, out: &std::path::Path, force: bool, quiet: bool) -> Result<()> {
    let start = Instant::now();
    let report = batch::generate(batch, out, force, &|event| {
        if quiet {
            return;
        }
        match event {
            BatchEvent::Written(f) => eprintln!(
                "seed {}: {} people, {} questions in {:.2} s{} -> {}",
                f.seed,
                f.people,
                f.questions,
                f.elapsed.as_secs_f64(),
                match f.engine {
                    EngineSource::Started => " (fresh engine)",
                    EngineSource::Warm => "",
                    EngineSource::Forked => " (forked)",
                },
                f.dir.display()
            ),
            BatchEvent::Failed(seed, error) => eprintln!("seed {seed}: FAILED: {error}"),
        }
    })?;
    if !quiet {
        let n = report.universes.len();
        let wall = start.elapsed().as_secs_f64();
        eprintln!(
            "wrote {n} universes ({} questions) under {} in {wall:.2} s: {:.3} s per universe, \
             {} workers, {} engine{} started",
            report.universes.iter().map(|f| f.questions).sum::<usize>(),
            out.display(),
            wall / n as f64,
            report.workers,
            report.engines_started,
            if report.engines_started == 1 { "" } else { "s" },
        );
    }
    Ok(())
}

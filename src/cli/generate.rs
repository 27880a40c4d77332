//! `rulegym generate`: universe -> engine -> articles -> dataset directory.

use super::questions::QuestionArgs;
use crate::corpus;
use crate::dataset::{universe_files, write_dir_atomic};
use crate::engine::{Engine, Term, Var};
use crate::question;
use crate::universe::{Universe, UniverseConfig};
use crate::{Error, Result};
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

/// A spinner for one stage, shown on a terminal unless quiet; prints the stage's time when done.
fn stage<T>(quiet: bool, name: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new_spinner().with_message(name.to_owned());
        bar.set_style(ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid"));
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    };
    let start = Instant::now();
    let out = work();
    bar.finish_and_clear();
    if !quiet && out.is_ok() {
        eprintln!("{name}: {:.2} s", start.elapsed().as_secs_f64());
    }
    out
}

/// Runs `rulegym generate`.
pub fn run(args: Args) -> Result<()> {
    let config = UniverseConfig {
        seed: args.seed,
        num_family_trees: args.num_family_trees,
        max_family_tree_size: args.max_family_tree_size,
        max_family_tree_depth: args.max_family_tree_depth,
        max_branching_factor: args.max_branching_factor,
        friendship_k: args.friendship_k,
        easy_mode: !args.hard_mode,
    };
    let questions_config = args.questions.config(args.seed, !args.hard_mode);
    let quiet = args.quiet;
    config.validate()?;
    questions_config.validate()?;
    // Engines start while the universe is generated and load the facts while the articles
    // render and the questions are sampled; the consult (~25 us per clause) and verification
    // are the critical path, so two engines (one per core) halve the verification even for
    // small sets: at 1,036 people and 380 questions the second core is otherwise idle.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let engine_count = match args.engines {
        0 => cores.clamp(1, 2),
        n => n.min(16),
    };
    let starting: Vec<_> = (0..engine_count)
        .map(|_| std::thread::spawn(Engine::new))
        .collect();
    let universe = stage(quiet, "universe", || Universe::generate(&config))?;
    let facts = universe.facts();
    let (engines, articles, proposals) = stage(quiet, "engine load + articles + sampling", || {
        let engines = starting
            .into_iter()
            .map(|s| {
                s.join()
                    .map_err(|_| Error::Config("engine thread panicked".into()))?
                    .map_err(Error::from)
            })
            .collect::<Result<Vec<Engine>, Error>>()?;
        std::thread::scope(|scope| {
            let loading: Vec<_> = engines
                .iter()
                .map(|engine| scope.spawn(|| engine.consult("facts", &facts)))
                .collect();
            let articles = corpus::articles(&universe);
            let proposals = question::propose_all(&universe, &questions_config)?;
            for l in loading {
                l.join()
                    .map_err(|_| Error::Config("engine thread panicked".into()))??;
            }
            Ok::<_, Error>((articles, proposals))
        })
        .map(|(articles, proposals)| (engines, articles, proposals))
    })?;
    verify_loaded(&engines[0], &universe)?;
    let (questions, report) = stage(quiet, "questions verified by the engine", || {
        question::verify(&engines, proposals)
    })?;
    let files = universe_files(&universe, &facts, &articles, Some(&questions))?;
    stage(quiet, "write", || {
        write_dir_atomic(&args.out, &files, args.force)
    })?;
    if !quiet {
        eprint!("{}", question::balance::grid(&questions));
        eprintln!(
            "wrote {} people, {} articles, {} questions ({} skipped slots, {} rejected walks) to {}",
            universe.people.len(),
            articles.len(),
            questions.len(),
            report.skipped_slots,
            report.rejections,
            args.out.display()
        );
    }
    Ok(())
}

/// Checks that the engine holds every person (one `gender` fact each).
fn verify_loaded(engine: &Engine, universe: &Universe) -> Result<()> {
    let (p, g, n) = (Var::numbered(0), Var::numbered(1), Var::numbered(2));
    let count = Term::compound(
        "count_solutions",
        [
            Term::compound("gender", [Term::var(&p), Term::var(&g)]),
            Term::var(&n),
        ],
    );
    let rows = engine.query(&count, &[n])?;
    let loaded = rows.first().and_then(|r| r[0].as_int()).unwrap_or(-1);
    if loaded != universe.people.len() as i64 {
        return Err(Error::Config(format!(
            "the engine holds {loaded} people, the universe {}",
            universe.people.len()
        )));
    }
    Ok(())
}

//! Many universes per process: one dataset directory per seed of a [`SeedRange`], each
//! byte-identical to a single-seed [`build`](super::build()) of that seed, built by a few
//! workers that keep their Prolog engines warm across universes.
//!
//! Each worker owns one engine. With an engine budget, it starts the engine once (scryer's
//! start-up and the rule base, ~70 ms) and, for each universe, swaps the facts
//! ([`Engine::replace_facts`]); the load check after every swap ([`super::build`]'s clause
//! count per fact predicate) makes a clause left over from the previous universe an error,
//! never a wrong answer. scryer never frees consulted clauses, so a worker replaces its engine
//! once it has loaded [`Batch::engine_budget`] bytes of facts text. The default budget is 0, a
//! fresh engine per universe, the setting whose peak memory measured flat however many
//! universes run (see [`DEFAULT_ENGINE_BUDGET`]). Universes are independent, so workers run one universe each in parallel (one engine per
//! universe, no consult done twice) and every directory is written atomically as soon as it is
//! built: a universe that fails leaves the others intact and the error names it.
//!
//! On Linux, without an engine budget, the universes are built in forked children of one
//! engine started once instead ([`Batch::zygote`]): the same bytes without
//! the per-universe engine start.

use super::build::{Assembled, BuildConfig, Dataset, EngineLoad, Render, assemble};
use crate::engine::Engine;
use crate::universe::Universe;
use crate::{Error, Result};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A non-empty range of master seeds: `A..B` (B excluded) or `A..=B` (B included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedRange {
    first: u64,
    last: u64,
}

impl SeedRange {
    /// Seeds `first..=last`; an error when `last < first`.
    pub fn inclusive(first: u64, last: u64) -> Result<Self> {
        if last < first {
            return Err(Error::Config(format!(
                "seed range {first}..={last} is reversed (the first seed must not exceed the last)"
            )));
        }
        Ok(SeedRange { first, last })
    }

    /// Seeds `start..end`; an error when the range is empty or reversed.
    pub fn half_open(start: u64, end: u64) -> Result<Self> {
        if end <= start {
            let what = if end == start { "empty" } else { "reversed" };
            return Err(Error::Config(format!(
                "seed range {start}..{end} is {what} (write A..B with A < B, or A..=B)"
            )));
        }
        Ok(SeedRange {
            first: start,
            last: end - 1,
        })
    }

    /// The seeds in order.
    pub fn seeds(&self) -> std::ops::RangeInclusive<u64> {
        self.first..=self.last
    }

    /// How many seeds.
    pub fn len(&self) -> usize {
        (self.last - self.first) as usize + 1
    }

    /// Always false: a range holds at least one seed.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl FromStr for SeedRange {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let bad = || {
            Error::Config(format!(
                "seed range {text:?}: expected A..B (B excluded) or A..=B (B included), \
                 with A and B unsigned integers"
            ))
        };
        let number = |s: &str| s.trim().parse::<u64>().map_err(|_| bad());
        if let Some((a, b)) = text.split_once("..=") {
            SeedRange::inclusive(number(a)?, number(b)?)
        } else if let Some((a, b)) = text.split_once("..") {
            SeedRange::half_open(number(a)?, number(b)?)
        } else {
            Err(bad())
        }
    }
}

impl fmt::Display for SeedRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.first, self.last)
    }
}

/// The engine memory budget [`Batch::engine_budget`] defaults to: none, a fresh engine for
/// every universe. Measured (BENCHMARKS.md, "Many universes"): reusing a warm engine saves 5-7%
/// of the CPU per universe (the ~70 ms start), but peak memory then creeps up with the number
/// of universes (2 MiB budget, 310-person universes: 235 MB after 100, 277 MB after 200), while
/// fresh engines stay flat (92 MB after 50, 101 MB after 200). A dynamic consult grows the
/// engine by ~34 bytes per byte of facts text (9.3 MB per 1,036-person universe).
pub const DEFAULT_ENGINE_BUDGET: usize = 0;

/// Many universes: one [`BuildConfig`] applied to each seed of a range.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The build of every universe. Each seed replaces its universe seed and, unless
    /// `pin_question_seed`, its question seed (as `rulegym generate --seed S` does). Its
    /// `engines` is not used: each universe is verified on its worker's one engine (the
    /// workers are the parallelism).
    pub build: BuildConfig,
    /// The seeds.
    pub seeds: SeedRange,
    /// Keep `build`'s question seed for every universe (`--question-seed`).
    pub pin_question_seed: bool,
    /// Universes built in parallel, one engine each (0: one per core).
    pub workers: usize,
    /// Bytes of facts text a worker's engine loads before the worker replaces it with a fresh
    /// one (0, the default: a fresh engine for every universe).
    pub engine_budget: usize,
    /// With no engine budget, build each universe in a forked child of one engine started once
    /// (the zygote in `src/dataset/zygote.rs`; Linux only, the default there). Off, or elsewhere, each
    /// worker thread starts a fresh engine per universe. The output is the same bytes.
    pub zygote: bool,
}

impl Batch {
    /// `build` for every seed of `seeds`, on the default workers and engine budget.
    pub fn new(build: BuildConfig, seeds: SeedRange) -> Self {
        Batch {
            build,
            seeds,
            pin_question_seed: false,
            workers: 0,
            engine_budget: DEFAULT_ENGINE_BUDGET,
            zygote: cfg!(target_os = "linux"),
        }
    }

    /// The build of universe `seed`: exactly what a single-seed run of `seed` builds.
    pub fn config_for(&self, seed: u64) -> BuildConfig {
        let mut config = self.build.clone();
        config.universe.seed = seed;
        if let Some(q) = config
            .questions
            .as_mut()
            .filter(|_| !self.pin_question_seed)
        {
            q.seed = seed;
        }
        config
    }

    /// Checks the build config (the same for every seed but the seeds themselves).
    pub fn validate(&self) -> Result<()> {
        self.config_for(*self.seeds.seeds().start()).validate()
    }

    /// The directory of universe `seed` under `out`.
    pub fn dir(out: &Path, seed: u64) -> PathBuf {
        out.join(format!("seed-{seed}"))
    }

    fn worker_count(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let wanted = if self.workers == 0 {
            cores
        } else {
            self.workers
        };
        wanted.clamp(1, 64).min(self.seeds.len())
    }
}

/// One universe of a batch, finished.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// Its seed.
    pub seed: u64,
    /// Its directory.
    pub dir: PathBuf,
    /// People in the universe.
    pub people: usize,
    /// Questions written.
    pub questions: usize,
    /// Build and write time.
    pub elapsed: Duration,
    /// The engine it was verified on.
    pub engine: EngineSource,
}

/// Where the engine that verified a universe of a batch came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineSource {
    /// Started for it (each universe without an engine budget or zygote; with a budget, a
    /// worker's first universe and then once per [`Batch::engine_budget`]).
    Started,
    /// The worker's engine, kept warm from its previous universe.
    Warm,
    /// A forked child's copy of the zygote's engine ([`Batch::zygote`]).
    Forked,
}

/// A progress event of [`generate`], sent from the worker threads.
#[derive(Debug)]
pub enum BatchEvent<'a> {
    /// A universe was built and written.
    Written(&'a Finished),
    /// A universe failed (the others go on).
    Failed(u64, &'a Error),
}

/// What [`generate`] wrote, in seed order.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchReport {
    /// Every universe, in seed order.
    pub universes: Vec<Finished>,
    /// Engines started, over all workers (one with the zygote).
    pub engines_started: usize,
    /// Workers used.
    pub workers: usize,
}

/// Checks everything [`generate`] can check before any work: the configs, and that `out` is
/// new (or, with `overwrite`, that every seed's directory in it may be replaced).
pub fn check(batch: &Batch, out: &Path, overwrite: bool) -> Result<()> {
    batch.validate()?;
    if !out.exists() {
        return Ok(());
    }
    if !overwrite {
        return Err(Error::Exists(out.to_path_buf()));
    }
    if !out.is_dir() {
        return Err(Error::NotReplaceable {
            path: out.to_path_buf(),
            reason: "it is not a directory".into(),
        });
    }
    for seed in batch.seeds.seeds() {
        super::check_output(&Batch::dir(out, seed), true)?;
    }
    Ok(())
}

/// Builds and writes every universe of `batch` under `out` (`out/seed-S`, see
/// [`Batch::dir`]), telling `observe` about each as it finishes. Bad input ([`check`]) is an
/// error before any work. A universe that fails does not stop the others; the error then names
/// every failed seed ([`Error::BatchFailed`]) and the finished ones stay written.
pub fn generate(
    batch: &Batch,
    out: &Path,
    overwrite: bool,
    observe: &(dyn Fn(BatchEvent<'_>) + Sync),
) -> Result<BatchReport> {
    check(batch, out, overwrite)?;
    std::fs::create_dir_all(out)
        .map_err(crate::io::io_error(format!("creating {}", out.display())))?;
    let workers = batch.worker_count();
    #[cfg(target_os = "linux")]
    if batch.zygote && batch.engine_budget == 0 {
        let results = super::zygote::generate(batch, out, overwrite, workers, observe)?;
        return report(results, 1, workers);
    }
    let seeds: Vec<u64> = batch.seeds.seeds().collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(u64, Result<Finished>)>> = Mutex::new(Vec::new());
    let engines_started = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let mut worker = Worker::new(batch);
                while let Some(&seed) = seeds.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let result = worker.universe(seed, out, overwrite);
                    match &result {
                        Ok(finished) => observe(BatchEvent::Written(finished)),
                        Err(error) => observe(BatchEvent::Failed(seed, error)),
                    }
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((seed, result));
                }
                engines_started.fetch_add(worker.started, Ordering::Relaxed);
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    report(results, engines_started.into_inner(), workers)
}

/// The report of a batch from every seed's outcome: an error naming every failed seed when
/// any failed.
fn report(
    mut results: Vec<(u64, Result<Finished>)>,
    engines_started: usize,
    workers: usize,
) -> Result<BatchReport> {
    results.sort_by_key(|(seed, _)| *seed);
    let mut universes = Vec::with_capacity(results.len());
    let mut failed = Vec::new();
    for (seed, result) in results {
        match result {
            Ok(finished) => universes.push(finished),
            Err(error) => failed.push((seed, error.to_string())),
        }
    }
    if !failed.is_empty() {
        return Err(Error::BatchFailed {
            written: universes.iter().map(|f| f.seed).collect(),
            failed,
        });
    }
    Ok(BatchReport {
        universes,
        engines_started,
        workers,
    })
}

/// Builds every universe of `batch` in memory, in seed order, on one warm engine (for callers
/// that write elsewhere, the bench and the tests).
pub fn build_all(batch: &Batch) -> Result<Vec<Dataset>> {
    batch.validate()?;
    let mut worker = Worker::new(batch);
    batch
        .seeds
        .seeds()
        .map(|seed| Ok(worker.build(seed, Render::Later)?.dataset))
        .collect()
}

/// A worker thread's state: its warm engine and how much that engine has loaded.
struct Worker<'a> {
    batch: &'a Batch,
    engine: Option<Engine>,
    /// Bytes of facts text the current engine has loaded.
    loaded: usize,
    /// Fresh engines this worker started.
    started: usize,
}

impl<'a> Worker<'a> {
    fn new(batch: &'a Batch) -> Self {
        Worker {
            batch,
            engine: None,
            loaded: 0,
            started: 0,
        }
    }

    fn universe(&mut self, seed: u64, out: &Path, overwrite: bool) -> Result<Finished> {
        let start = Instant::now();
        let started_before = self.started;
        let dir = Batch::dir(out, seed);
        let staged = super::stage_output(&dir, overwrite)?;
        let data = self.build(seed, Render::Into(&staged))?.finish(staged)?;
        Ok(Finished {
            seed,
            dir,
            people: data.universe.people.len(),
            questions: data.questions.len(),
            elapsed: start.elapsed(),
            engine: if self.started > started_before {
                EngineSource::Started
            } else {
                EngineSource::Warm
            },
        })
    }

    fn build(&mut self, seed: u64, render: Render<'_>) -> Result<Assembled> {
        let config = self.batch.config_for(seed);
        let universe = Universe::generate(&config.universe)?;
        let facts = universe.engine_facts();
        let size = facts.len();
        let engine = match self.engine.take() {
            Some(engine) if self.loaded + size <= self.batch.engine_budget => engine,
            _ => {
                self.loaded = 0;
                self.started += 1;
                Engine::new()?
            }
        };
        self.loaded += size;
        // An engine that will not be reused takes the faster static consult (~40% less
        // than the dynamic one that replace_facts needs).
        let engines = std::slice::from_ref(&engine);
        let load = if self.batch.engine_budget == 0 {
            EngineLoad::Consult(engines)
        } else {
            EngineLoad::Replace(engines)
        };
        let result = assemble(&config, universe, facts, load, render, &mut |_| {});
        // An engine that failed may be in any state: the next universe gets a fresh one.
        if result.is_ok() {
            self.engine = Some(engine);
        }
        result
    }
}

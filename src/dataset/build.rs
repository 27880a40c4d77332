//! The generate pipeline, assembled once: universe -> engines (started while the universe is
//! generated, loading the facts while the articles render, the index is built and the questions
//! are sampled) -> articles -> search index -> certified proposals -> engine-verified questions. `rulegym generate`, the Python bindings
//! and the benches all call [`build`].

use crate::corpus::{self, Article};
use crate::engine::{Engine, EngineError, FACT_PREDICATES, Term, Var};
use crate::io::StagedDir;
use crate::question::{self, GenerationReport, Question, QuestionConfig};
use crate::retrieval::{Document, EncoderChoice, IndexKind, SearchIndex};
use crate::search::oracle::Certifier;
use crate::universe::{Universe, UniverseConfig};
use crate::{Error, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// What to build.
#[derive(Debug, Clone)]
pub struct BuildConfig {
    /// The universe.
    pub universe: UniverseConfig,
    /// The questions; `None` builds the universe, its engine load and its articles only.
    pub questions: Option<QuestionConfig>,
    /// Prolog engines verifying questions in parallel (0: one per core, at most 2); on Linux
    /// the second and later are forked copies of the first once it holds the facts.
    pub engines: usize,
    /// Keep only shard `.0` of `.1` of the questions (see [`question::Proposals::into_shard`]);
    /// `(0, 1)` keeps all of them.
    pub shard: (usize, usize),
    /// Called with (cells sampled, cells) as sampling goes (a progress display); it does not
    /// change what is built.
    pub sampling_progress: Option<SamplingProgress>,
}

/// A progress callback of the sampling stage: (cells sampled, cells), from the sampling thread.
#[derive(Clone)]
pub struct SamplingProgress(pub std::sync::Arc<dyn Fn(usize, usize) + Send + Sync>);

impl std::fmt::Debug for SamplingProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SamplingProgress")
    }
}

impl BuildConfig {
    /// The universe with its questions, all of them, on the default engine count.
    pub fn new(universe: UniverseConfig, questions: Option<QuestionConfig>) -> Self {
        BuildConfig {
            universe,
            questions,
            engines: 0,
            shard: (0, 1),
            sampling_progress: None,
        }
    }
}

impl BuildConfig {
    /// Checks the universe and question configs and the shard.
    pub fn validate(&self) -> Result<()> {
        self.universe.validate()?;
        if let Some(questions) = &self.questions {
            questions.validate()?;
        }
        question::check_shard(self.shard.0, self.shard.1)
    }
}

/// Reports that stage `name` started; the returned closure reports that it finished.
fn stage(
    name: BuildStage,
    observe: &mut dyn FnMut(BuildEvent),
) -> impl FnOnce(&mut dyn FnMut(BuildEvent)) + use<> {
    observe(BuildEvent::Started(name));
    let start = Instant::now();
    move |observe: &mut dyn FnMut(BuildEvent)| observe(BuildEvent::Finished(name, start.elapsed()))
}

/// The stages of [`build`], reported to its observer as they start and finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildStage {
    /// Generating the universe (engines start meanwhile).
    Universe,
    /// Loading the facts into the engines while rendering articles and sampling questions.
    LoadAndSample,
    /// Verifying every question's answer on the engines.
    Verify,
    /// Writing the dataset directory ([`build_and_write`] only).
    Write,
}

impl BuildStage {
    /// A human-readable name.
    pub fn name(self) -> &'static str {
        match self {
            BuildStage::Universe => "universe",
            BuildStage::LoadAndSample => "engine load + articles + sampling",
            BuildStage::Verify => "questions verified by the engine",
            BuildStage::Write => "write",
        }
    }
}

/// A progress event of [`build`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BuildEvent {
    /// A stage started.
    Started(BuildStage),
    /// A stage finished successfully, after this long.
    Finished(BuildStage, Duration),
}

/// A dataset built in memory.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The universe.
    pub universe: Universe,
    /// Its facts (`facts.pl`).
    pub facts: String,
    /// One article per person.
    pub articles: Vec<Article>,
    /// The engine-verified questions (empty when none were asked for).
    pub questions: Vec<Question>,
    /// The built-in-encoder index over the articles, under which the questions' solvability
    /// certificates hold (built when questions are asked for).
    pub index: Option<std::sync::Arc<SearchIndex>>,
    /// What question generation did.
    pub report: GenerationReport,
    /// The question configuration, when questions were asked for (a dataset without it has no
    /// `questions.jsonl`); the manifest records it.
    pub question_config: Option<QuestionConfig>,
}

impl Dataset {
    /// The dataset directory's files, manifest last (see [`super::universe_files`]).
    pub fn files(&self) -> Result<Vec<(String, Vec<u8>)>> {
        super::universe_files(
            &self.universe,
            &self.facts,
            &self.articles,
            self.question_config
                .as_ref()
                .map(|c| (c, &self.questions[..])),
            self.index.as_deref(),
        )
    }

    /// Writes the dataset directory atomically. An existing `dir` is replaced only when
    /// `overwrite` is set and it is an empty folder or a rulegym dataset
    /// ([`super::check_replaceable`]).
    pub fn write(&self, dir: &Path, overwrite: bool) -> Result<()> {
        let staged = super::stage_output(dir, overwrite)?;
        staged.write(&self.files()?)?;
        staged.commit()
    }
}

/// Builds a dataset with no progress reporting.
pub fn build(config: &BuildConfig) -> Result<Dataset> {
    build_observed(config, &mut |_| {})
}

/// Builds a dataset, telling `observe` when each stage starts and finishes.
pub fn build_observed(
    config: &BuildConfig,
    observe: &mut dyn FnMut(BuildEvent),
) -> Result<Dataset> {
    Ok(build_assembled(config, Render::Later, observe)?.dataset)
}

/// [`build_observed`], then [`Dataset::write`] to `dir`, except that the files that do not
/// depend on the questions (`facts.pl`, `articles.jsonl`, `people.jsonl`, the index) are
/// streamed into the output's staging directory while the engine still loads the facts: the
/// same bytes, sooner, and as atomic (a failed build leaves nothing under `dir`). Returns the
/// dataset written.
pub fn build_and_write(
    config: &BuildConfig,
    dir: &Path,
    overwrite: bool,
    observe: &mut dyn FnMut(BuildEvent),
) -> Result<Dataset> {
    let staged = super::stage_output(dir, overwrite)?;
    let assembled = build_assembled(config, Render::Into(&staged), observe)?;
    let done = stage(BuildStage::Write, observe);
    let dataset = assembled.finish(staged)?;
    done(observe);
    Ok(dataset)
}

/// Whether [`assemble`] writes the universe's files while the engine loads the facts.
#[derive(Clone, Copy)]
pub(crate) enum Render<'a> {
    /// Into this directory, while the engine loads ([`Assembled::finish`] writes the rest).
    Into(&'a StagedDir),
    /// Not at all ([`Dataset::write`] renders them).
    Later,
}

/// A dataset as [`assemble`] leaves it: with its universe's files already written when asked
/// for ([`Render::Into`]).
pub(crate) struct Assembled {
    /// The dataset.
    pub(crate) dataset: Dataset,
    /// (name, SHA-256) of the universe's files written into the staging directory.
    written: Option<Vec<(String, String)>>,
}

impl Assembled {
    /// Writes the rest of the dataset into `staged` (all of it unless [`Render::Into`] started
    /// the universe's files there) and commits it; returns the dataset.
    pub(crate) fn finish(self, staged: StagedDir) -> Result<Dataset> {
        let Assembled { dataset, written } = self;
        let files = match written {
            Some(sha256) => super::finish_files(
                &dataset.universe,
                &dataset.facts,
                dataset.articles.len(),
                &sha256,
                dataset
                    .question_config
                    .as_ref()
                    .map(|c| (c, &dataset.questions[..])),
            )?,
            None => dataset.files()?,
        };
        staged.write(&files)?;
        staged.commit()?;
        Ok(dataset)
    }
}

/// The engines [`assemble`] verifies on, starting on their own threads (`config.engines`).
fn start_engines(config: &BuildConfig) -> EngineLoad<'static> {
    // Verification and the consult (~35 us per clause) are the critical path, so two verifiers
    // (one per core) halve the verification even for small sets: at 1,036 people and 380
    // questions the second core is otherwise idle. On Linux the second is a forked copy of the
    // first once it holds the facts (a fork instead of a second engine start and consult).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let verifiers = match config.engines {
        0 => cores.clamp(1, 2),
        n => n.min(16),
    };
    let (started, forks) = if cfg!(target_os = "linux") {
        (1, verifiers - 1)
    } else {
        (verifiers, 0)
    };
    // The engines start while the universe is generated, and load its facts while the
    // articles render, the index is built and the questions are sampled.
    EngineLoad::Starting {
        engines: (0..started)
            .map(|_| std::thread::spawn(Engine::new))
            .collect(),
        forks,
    }
}

/// Questions for a universe already built (`rulegym questions`): the pipeline of [`build`]
/// (engines, articles, index, certifier, sampler, verification) over `universe`, so the same
/// universe and configuration give the same questions as a dataset generated with them.
pub fn build_questions(
    universe: Universe,
    questions: QuestionConfig,
    engines: usize,
) -> Result<Dataset> {
    let config = BuildConfig {
        engines,
        ..BuildConfig::new(universe.config.clone(), Some(questions))
    };
    config.validate()?;
    let load = start_engines(&config);
    let facts = universe.engine_facts();
    Ok(assemble(&config, universe, facts, load, Render::Later, &mut |_| {})?.dataset)
}

fn build_assembled(
    config: &BuildConfig,
    render: Render<'_>,
    observe: &mut dyn FnMut(BuildEvent),
) -> Result<Assembled> {
    config.validate()?;
    let load = start_engines(config);
    let done = stage(BuildStage::Universe, observe);
    let universe = Universe::generate(&config.universe)?;
    done(observe);
    let engine_facts = universe.engine_facts();
    assemble(config, universe, engine_facts, load, render, observe)
}

/// Where [`assemble`] gets its engines and how it puts a universe's facts into them.
pub(crate) enum EngineLoad<'a> {
    /// Engines starting on their own threads: each consults the facts once started; `forks`
    /// more verifiers are forked from the first once it holds them (Linux).
    Starting {
        /// The engine starts.
        engines: Vec<std::thread::JoinHandle<std::result::Result<Engine, EngineError>>>,
        /// Forked copies of the first engine that verify besides it.
        forks: usize,
    },
    /// Fresh engines (a zygote's forked copy): a static consult (the fastest load).
    Consult(&'a [Engine]),
    /// Warm engines that held other universes: [`Engine::replace_facts`].
    Replace(&'a [Engine]),
}

/// Everything after the universe: the facts load into the engines while the articles render,
/// the index is built and the questions are sampled (and with [`Render::Into`] the universe's
/// files are written); then the engines verify the questions. `config` is already validated.
pub(crate) fn assemble(
    config: &BuildConfig,
    universe: Universe,
    engine_facts: String,
    load: EngineLoad<'_>,
    render: Render<'_>,
    observe: &mut dyn FnMut(BuildEvent),
) -> Result<Assembled> {
    let (shard, shards) = config.shard;
    let done = stage(BuildStage::LoadAndSample, observe);
    let (borrowed, forks): (&[Engine], usize) = match &load {
        EngineLoad::Starting { forks, .. } => (&[], *forks),
        EngineLoad::Consult(engines) | EngineLoad::Replace(engines) => (engines, 0),
    };
    let (facts, articles, index, proposals, written, started) = std::thread::scope(|scope| {
        let facts = &engine_facts;
        let loading: Vec<_> = match load {
            EngineLoad::Starting { engines, .. } => engines
                .into_iter()
                .map(|start| {
                    scope.spawn(move || {
                        let engine = start
                            .join()
                            .map_err(|_| Error::ThreadPanicked("engine start"))??;
                        engine.consult("facts", facts)?;
                        Ok::<_, Error>(Some(engine))
                    })
                })
                .collect(),
            EngineLoad::Consult(engines) => engines
                .iter()
                .map(|engine| {
                    scope.spawn(move || Ok(engine.consult("facts", facts).map(|()| None)?))
                })
                .collect(),
            EngineLoad::Replace(engines) => engines
                .iter()
                .map(|engine| {
                    scope.spawn(move || Ok(engine.replace_facts(facts).map(|()| None)?))
                })
                .collect(),
        };
        // While the engines load, the rest runs on the cores they leave free: rayon's global
        // pool would take every core and slow the engines' start and consult, the critical path
        // of a small universe. Once they are loaded, the rest takes every core again.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let narrow = rayon::ThreadPoolBuilder::new()
            .num_threads(cores.saturating_sub(loading.len()).max(1))
            .thread_name(|_| "rulegym-build".into())
            .build()
            .ok();
        let loaded = || loading.iter().all(|l| l.is_finished());
        let articles = beside(&narrow, loaded(), || corpus::articles(&universe));
        // The dataset's `facts.pl` names people; the engines hold them by id.
        let named_facts = universe.facts();
        let sampled = (|| {
            let Some(q) = &config.questions else {
                return Ok((None, None));
            };
            let index = beside(&narrow, loaded(), || article_index(&articles))?;
            let certifier = beside(&narrow, loaded(), || {
                Certifier::new(&universe, &index, q.solvability)
            })?;
            let proposals = beside(&narrow, loaded(), || {
                let progress = config.sampling_progress.clone();
                let cell_done = move |done: usize, total: usize| {
                    if let Some(SamplingProgress(f)) = &progress {
                        f(done, total);
                    }
                };
                question::propose_all_observed(&universe, q, Some(&certifier), &cell_done)
            })?
            .into_shard(shard, shards)?;
            Ok::<_, Error>((Some(std::sync::Arc::new(index)), Some(proposals)))
        })();
        // What does not depend on the questions is written while the engine still loads.
        let written = match (&sampled, render) {
            (Ok((index, _)), Render::Into(staged)) => Some(beside(&narrow, loaded(), || {
                super::stream_universe(&universe, &named_facts, &articles, index.as_deref(), staged)
            })),
            _ => None,
        };
        let mut started = Vec::new();
        for l in loading {
            if let Some(engine) = l
                .join()
                .map_err(|_| Error::ThreadPanicked("engine load"))??
            {
                started.push(engine);
            }
        }
        let (index, proposals) = sampled?;
        let written = written.transpose()?;
        Ok::<_, Error>((named_facts, articles, index, proposals, written, started))
    })?;
    done(observe);
    let engines = if started.is_empty() {
        borrowed
    } else {
        &started[..]
    };
    check_loaded(&engines[0], &universe, &engine_facts)?;
    let (universe, (questions, report)) = match proposals {
        Some(proposals) => {
            let done = stage(BuildStage::Verify, observe);
            // Shared with the forked verifiers, which name the people they answer.
            let shared = std::sync::Arc::new(universe);
            let verified = verify(engines, forks, proposals, &shared)?;
            done(observe);
            // The forks' copies are gone: the parent dropped them unrun.
            let universe = std::sync::Arc::try_unwrap(shared).unwrap_or_else(|u| (*u).clone());
            (universe, verified)
        }
        None => (universe, (Vec::new(), GenerationReport::default())),
    };
    Ok(Assembled {
        dataset: Dataset {
            universe,
            facts,
            articles,
            questions,
            index,
            report,
            question_config: config.questions.clone(),
        },
        written,
    })
}

/// Runs `f` on `pool` (the cores that engines still loading leave free) unless `loaded`, else
/// on rayon's global pool.
fn beside<R: Send>(
    pool: &Option<rayon::ThreadPool>,
    loaded: bool,
    f: impl FnOnce() -> R + Send,
) -> R {
    match pool {
        Some(pool) if !loaded => pool.install(f),
        _ => f(),
    }
}

/// Phase 2 on `engines`, and on `forks` forked copies of the first (Linux).
fn verify(
    engines: &[Engine],
    forks: usize,
    proposals: question::Proposals,
    universe: &std::sync::Arc<Universe>,
) -> Result<(Vec<Question>, GenerationReport)> {
    #[cfg(target_os = "linux")]
    if forks > 0 {
        return question::verify_forked(&engines[0], forks, proposals, universe);
    }
    let _ = forks;
    question::verify(engines, proposals, universe)
}

/// The built-in-encoder flat index over `articles`, document `i` being person `i`'s article as
/// `articles.jsonl` records it (the index `rulegym index --corpus articles.jsonl` builds).
pub fn article_index(articles: &[Article]) -> Result<SearchIndex> {
    let docs = articles
        .iter()
        .enumerate()
        .map(|(i, a)| Document {
            id: i.to_string(),
            contents: a.contents(),
        })
        .collect();
    Ok(SearchIndex::build(
        docs,
        &EncoderChoice::Builtin(Default::default()),
        IndexKind::Flat,
    )?)
}

/// Checks that the engine holds exactly this universe's facts: as many clauses of each of
/// [`FACT_PREDICATES`] as `facts` (one clause per line) has, so a person missing from the load
/// or a clause left over from a universe a warm engine held before is an error.
fn check_loaded(engine: &Engine, universe: &Universe, facts: &str) -> Result<()> {
    let n = Var::numbered(0);
    for &(name, arity) in FACT_PREDICATES {
        let head = Term::compound(name, (0..arity).map(|_| Term::var(&Var::anonymous())));
        let count = Term::compound("count_solutions", [head, Term::var(&n)]);
        let rows = engine.query(&count, std::slice::from_ref(&n))?;
        let loaded = rows.first().and_then(|r| r[0].as_int()).unwrap_or(-1);
        let prefix = format!("{name}(");
        let expected = facts.lines().filter(|l| l.starts_with(&prefix)).count();
        if loaded != expected as i64 {
            return Err(Error::EngineIncomplete {
                predicate: format!("{name}/{arity}"),
                loaded,
                expected,
                people: universe.people.len(),
            });
        }
    }
    Ok(())
}

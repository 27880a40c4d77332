//! Universe, question and dataset generation (the library's `dataset::build`).

use crate::prelude::*;

/// Generates a universe; returns `{"config", "people", "articles", "facts"}` where `people`
/// are the `people.jsonl` records and `articles` the Search-R1 corpus records
/// (`{"id", "contents", "facts"}`) of `articles.jsonl`.
#[pyfunction]
#[pyo3(signature = (config=None))]
pub(crate) fn generate_universe<'py>(
    py: Python<'py>,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let config: UniverseConfig = from_py(py, config, "universe config")?;
    let (universe, facts, records) = py
        .allow_threads(|| -> rulegym::Result<_> {
            let universe = Universe::generate(&config)?;
            let facts = universe.facts();
            let records: Vec<_> = rulegym::corpus::articles(&universe)
                .iter()
                .enumerate()
                .map(|(i, a)| a.record(i as u32))
                .collect();
            Ok((universe, facts, records))
        })
        .map_err(err)?;
    let out = PyDict::new(py);
    out.set_item("config", to_py(py, &universe.config)?)?;
    out.set_item(
        "people",
        to_py(py, &rulegym::dataset::person_records(&universe))?,
    )?;
    out.set_item("articles", to_py(py, &records)?)?;
    out.set_item("facts", facts)?;
    Ok(out.into_any())
}

/// The engine-verified questions (shard `shard.0` of `shard.1`) of the dataset `rulegym
/// generate` builds for these configs.
pub(crate) fn propose_and_verify(
    universe_config: &UniverseConfig,
    config: &QuestionConfig,
    shard: (usize, usize),
) -> rulegym::Result<Vec<Question>> {
    let config = rulegym::dataset::BuildConfig {
        engines: 1,
        shard,
        ..rulegym::dataset::BuildConfig::new(universe_config.clone(), Some(config.clone()))
    };
    Ok(rulegym::dataset::build(&config)?.questions)
}

/// The question config as the `rulegym generate` CLI derives it: the question seed and easy
/// mode follow the universe's unless the dict sets them.
pub(crate) fn question_config(
    py: Python<'_>,
    universe: &UniverseConfig,
    questions: Option<&Bound<'_, PyAny>>,
) -> PyResult<QuestionConfig> {
    let given = |key: &str| -> PyResult<bool> {
        match questions.filter(|q| !q.is_none()) {
            Some(q) => q.downcast::<PyDict>()?.contains(key),
            None => Ok(false),
        }
    };
    let config: QuestionConfig = from_py(py, questions, "question config")?;
    let seed = given("seed")?.then_some(config.seed);
    let easy_mode = given("easy_mode")?.then_some(config.easy_mode);
    Ok(config.following(universe, seed, easy_mode))
}

/// Generates a universe and its engine-verified questions; returns the `questions.jsonl`
/// records as dicts. `universe` and `questions` are config dicts (None: defaults).
#[pyfunction]
#[pyo3(signature = (universe=None, questions=None))]
pub(crate) fn generate_questions<'py>(
    py: Python<'py>,
    universe: Option<&Bound<'py, PyAny>>,
    questions: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let ucfg: UniverseConfig = from_py(py, universe, "universe config")?;
    let qcfg = question_config(py, &ucfg, questions)?;
    let qs = py
        .allow_threads(|| propose_and_verify(&ucfg, &qcfg, (0, 1)))
        .map_err(err)?;
    to_py(py, &qs)
}

/// Like [`generate_questions`] but returns the exact bytes of `questions.jsonl`, or of shard
/// `shard` of `num_shards` of it: every shard samples all questions (cheap, deterministic) and
/// verifies a contiguous part on its engine, so the shards' bytes concatenated in shard order
/// are the unsharded output byte for byte.
#[pyfunction]
#[pyo3(signature = (universe=None, questions=None, shard=0, num_shards=1))]
pub(crate) fn generate_questions_jsonl<'py>(
    py: Python<'py>,
    universe: Option<&Bound<'py, PyAny>>,
    questions: Option<&Bound<'py, PyAny>>,
    shard: usize,
    num_shards: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let ucfg: UniverseConfig = from_py(py, universe, "universe config")?;
    let qcfg = question_config(py, &ucfg, questions)?;
    let bytes = py
        .allow_threads(|| propose_and_verify(&ucfg, &qcfg, (shard, num_shards)).map(|q| jsonl(&q)))
        .map_err(err)??;
    Ok(PyBytes::new(py, &bytes))
}

/// Writes a dataset directory like `rulegym generate` (facts.pl, articles.jsonl,
/// people.jsonl, questions.jsonl, manifest.json); returns the number of questions.
#[pyfunction]
#[pyo3(signature = (out, universe=None, questions=None, force=false))]
pub(crate) fn generate_dataset(
    py: Python<'_>,
    out: PathBuf,
    universe: Option<&Bound<'_, PyAny>>,
    questions: Option<&Bound<'_, PyAny>>,
    force: bool,
) -> PyResult<usize> {
    let ucfg: UniverseConfig = from_py(py, universe, "universe config")?;
    let qcfg = question_config(py, &ucfg, questions)?;
    py.allow_threads(|| -> rulegym::Result<usize> {
        let config = rulegym::dataset::BuildConfig::new(ucfg, Some(qcfg));
        let data = rulegym::dataset::build_and_write(&config, &out, force, &mut |_| {})?;
        Ok(data.questions.len())
    })
    .map_err(err)
}

/// Writes one dataset directory per seed of `seeds` (`"A..B"` or `"A..=B"`) under `out`
/// (`out/seed-S`), each byte-identical to [`generate_dataset`] with that universe seed, built by
/// `workers` warm engines (0: one per core) in this process (`rulegym generate --seeds`).
/// Returns one dict per universe in seed order: seed, dir, people, questions, seconds.
#[pyfunction]
#[pyo3(signature = (out, seeds, universe=None, questions=None, force=false, workers=0, engine_budget_mib=0))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn generate_datasets<'py>(
    py: Python<'py>,
    out: PathBuf,
    seeds: &str,
    universe: Option<&Bound<'py, PyAny>>,
    questions: Option<&Bound<'py, PyAny>>,
    force: bool,
    workers: usize,
    engine_budget_mib: usize,
) -> PyResult<Bound<'py, PyAny>> {
    use rulegym::dataset::batch::{self, Batch};
    let seeds: rulegym::dataset::SeedRange = seeds.parse().map_err(err)?;
    let ucfg: UniverseConfig = from_py(py, universe, "universe config")?;
    let pinned = match questions.filter(|q| !q.is_none()) {
        Some(q) => q.downcast::<PyDict>()?.contains("seed")?,
        None => false,
    };
    let qcfg = question_config(py, &ucfg, questions)?;
    let batch = Batch {
        pin_question_seed: pinned,
        workers,
        engine_budget: engine_budget_mib << 20,
        ..Batch::new(rulegym::dataset::BuildConfig::new(ucfg, Some(qcfg)), seeds)
    };
    let report = py
        .allow_threads(|| batch::generate(&batch, &out, force, &|_| {}))
        .map_err(err)?;
    let rows: Vec<serde_json::Value> = report
        .universes
        .iter()
        .map(|f| {
            serde_json::json!({
                "seed": f.seed,
                "dir": f.dir.display().to_string(),
                "people": f.people,
                "questions": f.questions,
                "seconds": f.elapsed.as_secs_f64(),
            })
        })
        .collect();
    to_py(py, &rows)
}

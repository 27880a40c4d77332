//! Dataset directories: `facts.pl`, `articles.jsonl`, `people.jsonl`, with questions
//! `questions.jsonl` and the search index `index.idx`, and `manifest.json` (with the SHA-256 of
//! every file), written atomically: everything goes to a temporary sibling directory
//! that is renamed into place only when complete, so a failed run leaves no half-written output.

pub mod batch;
pub mod build;
pub mod phantomwiki;
#[cfg(target_os = "linux")]
mod zygote;

pub use batch::{Batch, SeedRange};
pub use build::{
    BuildConfig, BuildEvent, BuildStage, Dataset, SamplingProgress, build, build_and_write,
    build_observed,
};

use crate::corpus::Article;
use crate::question::{Question, QuestionConfig};
use crate::retrieval::SearchIndex;
use crate::universe::{Universe, UniverseConfig};
use crate::{Error, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// Version of the generated data: bumped whenever the same seed and config produce different
/// bytes (see CHANGELOG.md, "Reproducibility").
pub const DATASET_VERSION: &str = "rulegym-universe-v4";

/// The search index `rulegym generate` writes into a dataset directory: the built-in encoder
/// over `articles.jsonl` (what `rulegym index --corpus DIR/articles.jsonl` builds), the index
/// under which the questions' solvability certificates hold.
pub const INDEX_FILE: &str = "index.idx";

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Version of the rulegym that wrote the dataset.
    pub rulegym_version: String,
    /// [`DATASET_VERSION`] at writing time.
    pub dataset_version: String,
    /// The full universe configuration.
    pub config: UniverseConfig,
    /// The full question configuration (families, per-template, sampler, anchor, seed,
    /// solvability, balance, ...), when the dataset has questions. Absent in manifests written
    /// before rulegym 0.1.0's question record (they still load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<crate::question::QuestionConfig>,
    /// Counts: people, trees, facts, articles, friendships.
    pub counts: BTreeMap<String, u64>,
    /// SHA-256 (hex) of every other file in the directory.
    pub sha256: BTreeMap<String, String>,
}

/// A line of `people.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersonRecord {
    /// Index of the person (also the article id).
    pub id: u32,
    /// Full name.
    pub name: String,
    /// `female` or `male`.
    pub gender: String,
    /// ISO date of birth.
    pub dob: String,
    /// Occupation.
    pub occupation: String,
    /// Hobby.
    pub hobby: String,
    /// Family tree index.
    pub tree: u32,
    /// Parents' names, father first.
    pub parents: Vec<String>,
    /// Children's names.
    pub children: Vec<String>,
    /// Spouse's name.
    pub spouse: Option<String>,
    /// Friends' names, sorted by id.
    pub friends: Vec<String>,
}

/// The `people.jsonl` records of a universe.
pub fn person_records(universe: &Universe) -> Vec<PersonRecord> {
    let name = |id: &u32| universe.person(*id).name.clone();
    universe
        .people
        .iter()
        .enumerate()
        .map(|(i, p)| PersonRecord {
            id: i as u32,
            name: p.name.clone(),
            gender: p.gender.as_str().to_owned(),
            dob: p.dob.clone(),
            occupation: p.occupation.clone(),
            hobby: p.hobby.clone(),
            tree: p.tree,
            parents: p.parents.iter().map(name).collect(),
            children: p.children.iter().map(name).collect(),
            spouse: p.spouse.as_ref().map(name),
            friends: p.friends.iter().map(name).collect(),
        })
        .collect()
}

/// The files of a universe dataset, in memory: (file name, bytes), manifest last.
pub fn universe_files(
    universe: &Universe,
    facts: &str,
    articles: &[Article],
    questions: Option<(&QuestionConfig, &[Question])>,
    index: Option<&SearchIndex>,
) -> Result<Vec<(String, Vec<u8>)>> {
    let rendered = render_universe(universe, facts, articles, index)?;
    let mut rest = finish_files(universe, facts, articles.len(), &rendered.sha256, questions)?;
    let mut files = rendered.files;
    // questions.jsonl after people.jsonl, the manifest last.
    let manifest = rest.pop();
    let at = files
        .iter()
        .position(|(name, _)| name == "people.jsonl")
        .map_or(files.len(), |i| i + 1);
    files.splice(at..at, rest);
    files.extend(manifest);
    Ok(files)
}

/// A universe's files rendered and hashed, before its questions and its manifest.
struct RenderedUniverse {
    /// (name, bytes) in the order [`universe_files`] lists them.
    files: Vec<(String, Vec<u8>)>,
    /// (name, SHA-256) of each.
    sha256: Vec<(String, String)>,
}

/// How one of a universe's files is written.
type Render<'a> = Box<dyn Fn(&mut dyn std::io::Write) -> Result<()> + Send + Sync + 'a>;

/// `facts.pl`, `articles.jsonl`, `people.jsonl` and the index (the files that do not depend on
/// the questions), each as its writer, in the order [`universe_files`] lists them.
fn universe_renders<'a>(
    universe: &'a Universe,
    facts: &'a str,
    articles: &'a [Article],
    index: Option<&'a SearchIndex>,
) -> Vec<(&'static str, Render<'a>)> {
    let written = |what: &'static str| crate::io::io_error(format!("writing {what}"));
    let mut renders: Vec<(&str, Render)> = vec![
        (
            "facts.pl",
            Box::new(move |out| out.write_all(facts.as_bytes()).map_err(written("facts.pl"))),
        ),
        (
            "articles.jsonl",
            Box::new(|out| {
                crate::io::write_jsonl_to(
                    out,
                    articles.iter().enumerate().map(|(i, a)| a.record(i as u32)),
                )
            }),
        ),
        (
            "people.jsonl",
            Box::new(|out| crate::io::write_jsonl_to(out, person_records(universe))),
        ),
    ];
    if let Some(index) = index {
        renders.push((
            INDEX_FILE,
            Box::new(move |out| index.write_to(out).map(drop).map_err(written(INDEX_FILE))),
        ));
    }
    renders
}

/// Renders and hashes the universe's files in memory, side by side (rayon): the bytes do not
/// depend on the threads, and at 10K people the index and the articles are ~38 MB.
fn render_universe(
    universe: &Universe,
    facts: &str,
    articles: &[Article],
    index: Option<&SearchIndex>,
) -> Result<RenderedUniverse> {
    let rendered: Vec<(String, Vec<u8>, String)> =
        universe_renders(universe, facts, articles, index)
            .par_iter()
            .map(|(name, render)| {
                let mut bytes = Vec::new();
                render(&mut bytes)?;
                let hash = crate::io::sha256_hex(&bytes);
                Ok(((*name).to_owned(), bytes, hash))
            })
            .collect::<Result<_>>()?;
    let sha256 = rendered
        .iter()
        .map(|(name, _, hash)| (name.clone(), hash.clone()))
        .collect();
    let files = rendered
        .into_iter()
        .map(|(name, bytes, _)| (name, bytes))
        .collect();
    Ok(RenderedUniverse { files, sha256 })
}

/// Writes the universe's files straight into `staged`, side by side (rayon), each hashed as it
/// is written (no copy in memory): the same bytes as [`render_universe`]. Returns (name,
/// SHA-256) of each, for the manifest ([`finish_files`]).
pub(crate) fn stream_universe(
    universe: &Universe,
    facts: &str,
    articles: &[Article],
    index: Option<&SearchIndex>,
    staged: &crate::io::StagedDir,
) -> Result<Vec<(String, String)>> {
    universe_renders(universe, facts, articles, index)
        .par_iter()
        .map(|(name, render)| Ok(((*name).to_owned(), staged.stream(name, render)?)))
        .collect()
}

/// The files that follow a universe's rendered files (`sha256`: their names and hashes):
/// `questions.jsonl` when questions were asked for, then the manifest, which hashes them all.
pub(crate) fn finish_files(
    universe: &Universe,
    facts: &str,
    articles: usize,
    sha256: &[(String, String)],
    questions: Option<(&QuestionConfig, &[Question])>,
) -> Result<Vec<(String, Vec<u8>)>> {
    let mut sha256: BTreeMap<String, String> = sha256.iter().cloned().collect();
    let mut files = Vec::new();
    let (question_config, questions) = questions.unzip();
    if let Some(questions) = questions {
        let bytes = crate::io::jsonl_bytes(questions)?;
        sha256.insert("questions.jsonl".to_owned(), crate::io::sha256_hex(&bytes));
        files.push(("questions.jsonl".to_owned(), bytes));
    }
    let friendships: usize = universe
        .people
        .iter()
        .map(|p| p.friends.len())
        .sum::<usize>()
        / 2;
    let trees = universe
        .people
        .iter()
        .map(|p| p.tree)
        .max()
        .map_or(0, |t| t + 1);
    let counts = BTreeMap::from([
        ("people".to_owned(), universe.people.len() as u64),
        ("trees".to_owned(), trees as u64),
        ("articles".to_owned(), articles as u64),
        ("friendships".to_owned(), friendships as u64),
        (
            "questions".to_owned(),
            questions.map_or(0, |q| q.len() as u64),
        ),
        (
            "facts".to_owned(),
            facts.lines().filter(|l| l.ends_with('.')).count() as u64,
        ),
    ]);
    let manifest = Manifest {
        rulegym_version: env!("CARGO_PKG_VERSION").to_owned(),
        dataset_version: DATASET_VERSION.to_owned(),
        config: universe.config.clone(),
        questions: question_config.cloned(),
        counts,
        sha256,
    };
    let mut manifest_bytes =
        serde_json::to_vec_pretty(&manifest).map_err(|source| Error::Json {
            context: "serialising manifest.json".into(),
            source,
        })?;
    manifest_bytes.push(b'\n');
    files.push(("manifest.json".to_owned(), manifest_bytes));
    Ok(files)
}

/// The staging directory of a dataset written to `dir` atomically: an existing `dir` is
/// replaced only with `overwrite` and only when [`check_replaceable`] accepts it.
pub(crate) fn stage_output(dir: &Path, overwrite: bool) -> Result<crate::io::StagedDir> {
    let check: &crate::io::ReplaceCheck = &check_replaceable;
    crate::io::StagedDir::new(dir, overwrite.then_some(check))
}

/// Refuses to replace `dir` unless it is an empty folder or a rulegym dataset (a `manifest.json`
/// naming a rulegym dataset version): `--force` never deletes anything else.
pub fn check_replaceable(dir: &Path) -> Result<()> {
    let refuse = |reason: &str| {
        Err(Error::NotReplaceable {
            path: dir.to_path_buf(),
            reason: reason.to_owned(),
        })
    };
    let meta = fs::symlink_metadata(dir)
        .map_err(crate::io::io_error(format!("inspecting {}", dir.display())))?;
    if !meta.is_dir() {
        return refuse("it is not a directory");
    }
    let mut entries =
        fs::read_dir(dir).map_err(crate::io::io_error(format!("listing {}", dir.display())))?;
    if entries.next().is_none() {
        return Ok(());
    }
    let manifest = fs::read(dir.join("manifest.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Manifest>(&bytes).ok());
    match manifest {
        Some(m) if m.dataset_version.starts_with("rulegym-universe-") => Ok(()),
        _ => refuse("it is neither empty nor a rulegym dataset (no rulegym manifest.json)"),
    }
}

/// Checks, before any work, that `dir` can receive a dataset: it does not exist, or `force` is
/// set and [`check_replaceable`] accepts it.
pub fn check_output(dir: &Path, force: bool) -> Result<()> {
    crate::io::clean_leftovers(dir)?;
    match fs::symlink_metadata(dir) {
        Err(_) => Ok(()),
        Ok(_) if !force => Err(Error::Exists(dir.to_path_buf())),
        Ok(_) => check_replaceable(dir),
    }
}

/// Reads a dataset directory written by `rulegym generate` back into a [`Universe`], checking
/// every file against the manifest's SHA-256 first (a modified or truncated file is an error).
pub fn load_universe(dir: &Path) -> Result<Universe> {
    let (manifest, people) = read_checked(dir, "people.jsonl")?;
    let file = dir.join("people.jsonl").display().to_string();
    let mut records = Vec::new();
    let mut lines = Vec::new();
    for (line, record) in crate::io::jsonl_records::<PersonRecord>(&people) {
        records.push(record.map_err(|source| Error::Json {
            context: format!("{file} line {line}"),
            source,
        })?);
        lines.push(line);
    }
    from_records(manifest.config, records, &file, &lines)
}

/// Reads `questions.jsonl` of a dataset directory, checked against the manifest's SHA-256.
pub fn load_questions(dir: &Path) -> Result<Vec<crate::question::Question>> {
    Ok(load_question_set(dir, None)?.questions)
}

/// The questions a command plays on dataset `dir`: its own `questions.jsonl` (checked against
/// the manifest), or `file`, another question set about the same universe (what
/// `rulegym questions --out FILE` writes, or a file edited by hand). A file's questions are
/// verified as generation verifies them: the engine runs every question's plan over the
/// dataset's universe, and each must give exactly the gold answers the file states (an edited
/// answer, a plan naming someone outside the universe, a malformed or empty file are errors
/// that name the line or the question).
pub fn load_question_set(dir: &Path, file: Option<&Path>) -> Result<QuestionSet> {
    let Some(file) = file else {
        // read_checked has matched the bytes against the manifest's SHA-256: that is the hash.
        let (mut manifest, bytes) = read_checked(dir, "questions.jsonl")?;
        let path = dir.join("questions.jsonl");
        return Ok(QuestionSet {
            questions: crate::io::parse_jsonl(&bytes, &path.display().to_string())?,
            sha256: manifest
                .sha256
                .remove("questions.jsonl")
                .unwrap_or_default(),
            source: path,
        });
    };
    let bytes = crate::io::read(file)?;
    let name = file.display().to_string();
    let questions: Vec<Question> = crate::io::parse_jsonl(&bytes, &name)?;
    if questions.is_empty() {
        return Err(Error::Dataset {
            file: name,
            message: "it holds no question".into(),
        });
    }
    let universe = load_universe(dir)?;
    verify_against(&universe, &questions, &name)?;
    Ok(QuestionSet {
        questions,
        sha256: crate::io::sha256_hex(&bytes),
        source: file.to_path_buf(),
    })
}

/// Questions to play, and where they came from.
#[derive(Debug, Clone)]
pub struct QuestionSet {
    /// The questions, in file order.
    pub questions: Vec<Question>,
    /// The file they were read from.
    pub source: std::path::PathBuf,
    /// SHA-256 (hex) of that file's bytes: what a report records to name the set.
    pub sha256: String,
}

/// Runs every question's plan on an engine holding `universe` and compares the answers with the
/// question's gold answers (`file` names the source in errors).
fn verify_against(universe: &Universe, questions: &[Question], file: &str) -> Result<()> {
    use crate::question::Query;
    let engine = crate::engine::Engine::with_facts(&universe.engine_facts())?;
    for (chunk_no, chunk) in questions.chunks(64).enumerate() {
        let plans: Vec<&Query> = chunk.iter().map(|q| &q.plan).collect();
        let golds =
            Query::evaluate_batch(&plans, &engine, universe).map_err(|e| Error::Dataset {
                file: file.to_owned(),
                message: format!(
                    "a plan of lines {}-{} does not run on the universe: {e}",
                    chunk_no * 64 + 1,
                    chunk_no * 64 + chunk.len()
                ),
            })?;
        for (i, (q, gold)) in chunk.iter().zip(golds).enumerate() {
            let mut stated = q.answers.clone();
            stated.sort();
            stated.dedup();
            if gold != stated {
                return Err(Error::Dataset {
                    file: format!("{file} line {}", chunk_no * 64 + i + 1),
                    message: format!(
                        "question {} states the answers {:?}, but the engine answers {:?} on \
                         this dataset's universe",
                        q.id, q.answers, gold
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Reads the dataset's manifest and its file `name`, checked against the manifest's SHA-256.
fn read_checked(dir: &Path, name: &str) -> Result<(Manifest, Vec<u8>)> {
    let manifest_path = dir.join("manifest.json");
    let manifest: Manifest =
        serde_json::from_slice(&crate::io::read(&manifest_path)?).map_err(|source| {
            Error::Json {
                context: format!("parsing {}", manifest_path.display()),
                source,
            }
        })?;
    let path = dir.join(name);
    let bytes = crate::io::read(&path)?;
    match manifest.sha256.get(name) {
        Some(expected) if &crate::io::sha256_hex(&bytes) == expected => Ok((manifest, bytes)),
        Some(_) => Err(Error::Dataset {
            file: path.display().to_string(),
            message: if name == "questions.jsonl" {
                "does not match the manifest's SHA-256: it was changed after generation (an \
                 edited question file can be played as a question set of its own, whose answers \
                 the engine checks instead)"
                    .into()
            } else {
                "does not match the manifest's SHA-256: it was changed after generation".into()
            },
        }),
        None => Err(Error::Dataset {
            file: manifest_path.display().to_string(),
            message: format!("lists no {name}"),
        }),
    }
}

/// Rebuilds a universe from `people.jsonl` records (names resolved to ids), checking every
/// invariant of the model ([`Universe::check_invariants`]); errors name the record's line.
pub fn universe_from_records(
    config: UniverseConfig,
    records: Vec<PersonRecord>,
) -> Result<Universe> {
    let lines: Vec<usize> = (1..=records.len()).collect();
    from_records(config, records, "people.jsonl", &lines)
}

/// [`universe_from_records`] for records read from `file` at `lines`.
fn from_records(
    config: UniverseConfig,
    records: Vec<PersonRecord>,
    file: &str,
    lines: &[usize],
) -> Result<Universe> {
    let at = |i: usize, message: String| Error::Dataset {
        file: format!("{file} line {}", lines.get(i).copied().unwrap_or(i + 1)),
        message,
    };
    let mut ids: std::collections::HashMap<&str, u32> =
        std::collections::HashMap::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        if r.id as usize != i {
            return Err(at(i, format!("has id {}, expected {i}", r.id)));
        }
        if ids.insert(r.name.as_str(), r.id).is_some() {
            return Err(at(i, format!("name {:?} is not unique", r.name)));
        }
    }
    let mut people = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        let resolve = |name: &String| {
            ids.get(name.as_str())
                .copied()
                .ok_or_else(|| at(i, format!("names unknown person {name:?}")))
        };
        let gender = match r.gender.as_str() {
            "female" => crate::universe::Gender::Female,
            "male" => crate::universe::Gender::Male,
            other => return Err(at(i, format!("unknown gender {other:?}"))),
        };
        people.push(crate::universe::Person {
            name: r.name.clone(),
            gender,
            dob: r.dob.clone(),
            occupation: r.occupation.clone(),
            hobby: r.hobby.clone(),
            tree: r.tree,
            parents: r.parents.iter().map(resolve).collect::<Result<_>>()?,
            children: r.children.iter().map(resolve).collect::<Result<_>>()?,
            spouse: r.spouse.as_ref().map(resolve).transpose()?,
            friends: r.friends.iter().map(resolve).collect::<Result<_>>()?,
        });
    }
    let universe = Universe::new(config, people);
    universe
        .check_invariants()
        .map_err(|e| at(e.person, e.message))?;
    Ok(universe)
}

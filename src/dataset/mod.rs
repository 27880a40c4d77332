//! Dataset directories: `facts.pl`, `articles.jsonl`, `people.jsonl` and `manifest.json` (with the
//! SHA-256 of every file), written atomically: everything goes to a temporary sibling directory
//! that is renamed into place only when complete, so a failed run leaves no half-written output.

pub mod jsonl;
pub mod phantomwiki;

use crate::corpus::Article;
use crate::question::Question;
use crate::universe::{Universe, UniverseConfig};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Version of the generated data: bumped whenever the same seed and config produce different
/// bytes (see CHANGELOG.md, "Reproducibility").
pub const DATASET_VERSION: &str = "rulegym-universe-v2";

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Version of the rulegym that wrote the dataset.
    pub rulegym_version: String,
    /// [`DATASET_VERSION`] at writing time.
    pub dataset_version: String,
    /// The full universe configuration.
    pub config: UniverseConfig,
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

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

fn json_lines<T: Serialize>(items: impl IntoIterator<Item = T>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for item in items {
        serde_json::to_writer(&mut out, &item).map_err(|source| Error::Json {
            context: "serialising a JSONL record".into(),
            source,
        })?;
        out.push(b'\n');
    }
    Ok(out)
}

/// Hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The files of a universe dataset, in memory: (file name, bytes), manifest last.
pub fn universe_files(
    universe: &Universe,
    facts: &str,
    articles: &[Article],
    questions: Option<&[Question]>,
) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = vec![
        ("facts.pl".to_owned(), facts.as_bytes().to_vec()),
        (
            "articles.jsonl".to_owned(),
            json_lines(articles.iter().enumerate().map(|(i, a)| a.record(i as u32)))?,
        ),
        (
            "people.jsonl".to_owned(),
            json_lines(person_records(universe))?,
        ),
    ];
    if let Some(questions) = questions {
        files.push(("questions.jsonl".to_owned(), json_lines(questions)?));
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
        ("articles".to_owned(), articles.len() as u64),
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
        counts,
        sha256: files
            .iter()
            .map(|(name, bytes)| (name.clone(), sha256_hex(bytes)))
            .collect(),
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

/// Writes `files` as the directory `dir` atomically. An existing `dir` is replaced only when
/// `overwrite` is set (and only after the new one is complete).
pub fn write_dir_atomic(dir: &Path, files: &[(String, Vec<u8>)], overwrite: bool) -> Result<()> {
    if dir.exists() && !overwrite {
        return Err(Error::Config(format!(
            "{} already exists (pass --force to replace it)",
            dir.display()
        )));
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(io(format!("creating {}", parent.display())))?;
    let file_name = dir
        .file_name()
        .ok_or_else(|| Error::Config(format!("{} is not a directory name", dir.display())))?
        .to_string_lossy()
        .into_owned();
    let staging = parent.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    let result = (|| {
        fs::create_dir(&staging).map_err(io(format!("creating {}", staging.display())))?;
        for (name, bytes) in files {
            let path = staging.join(name);
            let mut file =
                fs::File::create(&path).map_err(io(format!("creating {}", path.display())))?;
            file.write_all(bytes)
                .and_then(|()| file.sync_all())
                .map_err(io(format!("writing {}", path.display())))?;
        }
        if dir.exists() {
            let old = parent.join(format!(".{file_name}.old-{}", std::process::id()));
            fs::rename(dir, &old).map_err(io(format!("moving aside {}", dir.display())))?;
            fs::rename(&staging, dir).map_err(io(format!("renaming into {}", dir.display())))?;
            fs::remove_dir_all(&old).map_err(io(format!("removing {}", old.display())))?;
        } else {
            fs::rename(&staging, dir).map_err(io(format!("renaming into {}", dir.display())))?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    result
}

/// Writes one file atomically (temporary sibling, fsync, rename).
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
    }
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map_or("out".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let result = (|| {
        let mut file = fs::File::create(&tmp).map_err(io(format!("creating {}", tmp.display())))?;
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(io(format!("writing {}", tmp.display())))?;
        fs::rename(&tmp, path).map_err(io(format!("renaming into {}", path.display())))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Reads a dataset directory written by `rulegym generate` back into a [`Universe`], checking
/// every file against the manifest's SHA-256 first (a modified or truncated file is an error).
pub fn load_universe(dir: &Path) -> Result<Universe> {
    let read = |name: &str| {
        let path = dir.join(name);
        fs::read(&path).map_err(io(format!("reading {}", path.display())))
    };
    let manifest: Manifest =
        serde_json::from_slice(&read("manifest.json")?).map_err(|source| Error::Json {
            context: format!("parsing {}", dir.join("manifest.json").display()),
            source,
        })?;
    let people = read("people.jsonl")?;
    let expected = manifest.sha256.get("people.jsonl").ok_or_else(|| {
        Error::Config(format!("{}: manifest lists no people.jsonl", dir.display()))
    })?;
    if &sha256_hex(&people) != expected {
        return Err(Error::Config(format!(
            "{}: people.jsonl does not match the manifest's SHA-256",
            dir.display()
        )));
    }
    let records: Vec<PersonRecord> = jsonl::parse_jsonl(&people, "people.jsonl")?;
    universe_from_records(manifest.config, records)
}

/// Rebuilds a universe from `people.jsonl` records (names resolved to ids).
pub fn universe_from_records(
    config: UniverseConfig,
    records: Vec<PersonRecord>,
) -> Result<Universe> {
    let ids: std::collections::HashMap<&str, u32> =
        records.iter().map(|r| (r.name.as_str(), r.id)).collect();
    let resolve = |name: &String| {
        ids.get(name.as_str())
            .copied()
            .ok_or_else(|| Error::Config(format!("people.jsonl names unknown person {name:?}")))
    };
    let mut people = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        if r.id as usize != i {
            return Err(Error::Config(format!(
                "people.jsonl line {} has id {}",
                i + 1,
                r.id
            )));
        }
        let gender = match r.gender.as_str() {
            "female" => crate::universe::Gender::Female,
            "male" => crate::universe::Gender::Male,
            other => return Err(Error::Config(format!("unknown gender {other:?}"))),
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
    Ok(Universe { config, people })
}

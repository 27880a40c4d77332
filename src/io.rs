//! The crate's file kit: atomic writes of files and directories, SHA-256 hashing, and JSONL
//! (one JSON value per line) reading and writing. Every file rulegym writes or hashes goes
//! through here.
//!
//! JSONL lines are split on `\n`; a line that is empty or all ASCII white space is skipped, so a
//! trailing newline (or none), blank separator lines and `\r\n` endings are all accepted. Line
//! numbers are 1-based positions in the file, blank lines counted, so an error points at the
//! line an editor shows. Written JSONL is compact JSON, one value per line, each line ending in
//! `\n`.

use crate::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// An [`Error::Io`] constructor for `map_err`, with `context` (what was being done, with the path).
pub fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// Reads a whole file; the error names the path.
pub fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(io_error(format!("reading {}", path.display())))
}

/// Writes one file atomically (temporary sibling, fsync, rename); creates missing parents.
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        fs::create_dir_all(parent).map_err(io_error(format!("creating {}", parent.display())))?;
    }
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map_or("out".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let result = (|| {
        let mut file =
            fs::File::create(&tmp).map_err(io_error(format!("creating {}", tmp.display())))?;
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(io_error(format!("writing {}", tmp.display())))?;
        fs::rename(&tmp, path).map_err(io_error(format!("renaming into {}", path.display())))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes `files` ((name, bytes), flat) as the directory `dir` atomically: everything goes to a
/// temporary sibling directory that is renamed into place only when complete. An existing `dir`
/// is replaced only when `overwrite` is set (and only after the new one is complete).
pub fn write_dir_atomic(dir: &Path, files: &[(String, Vec<u8>)], overwrite: bool) -> Result<()> {
    if dir.exists() && !overwrite {
        return Err(Error::Exists(dir.to_path_buf()));
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(io_error(format!("creating {}", parent.display())))?;
    let file_name = dir
        .file_name()
        .ok_or_else(|| Error::Config(format!("{} is not a directory name", dir.display())))?
        .to_string_lossy()
        .into_owned();
    let staging = parent.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    let result = (|| {
        fs::create_dir(&staging).map_err(io_error(format!("creating {}", staging.display())))?;
        for (name, bytes) in files {
            let path = staging.join(name);
            let mut file = fs::File::create(&path)
                .map_err(io_error(format!("creating {}", path.display())))?;
            file.write_all(bytes)
                .and_then(|()| file.sync_all())
                .map_err(io_error(format!("writing {}", path.display())))?;
        }
        let rename_into = |from: &Path| {
            fs::rename(from, dir).map_err(io_error(format!("renaming into {}", dir.display())))
        };
        if dir.exists() {
            let old = parent.join(format!(".{file_name}.old-{}", std::process::id()));
            fs::rename(dir, &old).map_err(io_error(format!("moving aside {}", dir.display())))?;
            rename_into(&staging)?;
            fs::remove_dir_all(&old).map_err(io_error(format!("removing {}", old.display())))?;
        } else {
            rename_into(&staging)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    result
}

/// The non-blank lines of `bytes`, each parsed as a `T`, with its 1-based line number.
///
/// Lazy: parsing stops where the caller stops. Callers with their own error type map the
/// `serde_json::Error` themselves (see [`parse_jsonl`] for [`crate::Error`]).
pub fn jsonl_records<T: DeserializeOwned>(
    bytes: &[u8],
) -> impl Iterator<Item = (usize, serde_json::Result<T>)> + '_ {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.trim_ascii().is_empty())
        .map(|(i, line)| (i + 1, serde_json::from_slice(line)))
}

/// Parses JSONL `bytes` into records; a malformed line is an [`Error::Json`] whose context is
/// `"<what> line <n>"` (`what` names the file, e.g. its path).
pub fn parse_jsonl<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<Vec<T>> {
    jsonl_records(bytes)
        .map(|(line, record)| {
            record.map_err(|source| Error::Json {
                context: format!("{what} line {line}"),
                source,
            })
        })
        .collect()
}

/// Reads and parses the JSONL file at `path` ([`parse_jsonl`], errors naming the path).
pub fn read_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    parse_jsonl(&read(path)?, &path.display().to_string())
}

/// Serialises `items` as JSONL bytes.
pub fn jsonl_bytes<T: Serialize>(items: impl IntoIterator<Item = T>) -> Result<Vec<u8>> {
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

/// Writes `items` as a JSONL file, atomically.
pub fn write_jsonl<T: Serialize>(path: &Path, items: impl IntoIterator<Item = T>) -> Result<()> {
    write_file_atomic(path, &jsonl_bytes(items)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_lines_and_line_endings_are_tolerated_and_numbers_are_file_lines() {
        for text in [
            "1\n2\n3",
            "1\n2\n3\n",
            "1\r\n2\r\n3\r\n",
            "\n1\n  \n2\n\t\n3\n\n",
        ] {
            let v: Vec<u32> = parse_jsonl(text.as_bytes(), "t").unwrap();
            assert_eq!(v, [1, 2, 3], "{text:?}");
        }
        let lines: Vec<usize> = jsonl_records::<u32>(b"\n1\n\n2\n")
            .map(|(n, r)| {
                r.unwrap();
                n
            })
            .collect();
        assert_eq!(lines, [2, 4]);
        assert!(parse_jsonl::<u32>(b"", "t").unwrap().is_empty());
    }

    #[test]
    fn a_malformed_line_is_an_error_naming_the_file_and_line() {
        let err = parse_jsonl::<u32>(b"1\n\n{oops\n3\n", "people.jsonl").unwrap_err();
        match &err {
            Error::Json { context, .. } => assert_eq!(context, "people.jsonl line 3"),
            other => panic!("unexpected error {other:?}"),
        }
        let err = read_jsonl::<u32>(Path::new("/nonexistent/x.jsonl")).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
    }

    #[test]
    fn jsonl_round_trips_through_an_atomic_write() {
        let dir = std::env::temp_dir().join(format!("rulegym-io-{}", std::process::id()));
        let path = dir.join("sub/x.jsonl");
        write_jsonl(&path, [1u32, 2, 3]).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"1\n2\n3\n");
        assert_eq!(read_jsonl::<u32>(&path).unwrap(), [1, 2, 3]);
        let err = write_dir_atomic(&dir, &[], false).unwrap_err();
        assert!(matches!(err, Error::Exists(_)), "{err:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

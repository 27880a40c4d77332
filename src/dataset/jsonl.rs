//! Reading JSONL (one JSON value per line): the one line splitter and parser behind every
//! `.jsonl` file rulegym reads (datasets, questions, corpora, task files).
//!
//! Lines are split on `\n`; a line that is empty or all ASCII white space is skipped, so a
//! trailing newline (or none), blank separator lines and `\r\n` endings are all accepted. Line
//! numbers are 1-based positions in the file, blank lines counted, so an error points at the
//! line an editor shows.

use crate::{Error, Result};
use serde::de::DeserializeOwned;
use std::path::Path;

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
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        context: format!("reading {}", path.display()),
        source,
    })?;
    parse_jsonl(&bytes, &path.display().to_string())
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
}

//! Corpus documents in the Search-R1 format: one JSON object per line,
//! `{"id": "0", "contents": "\"Title\"\ntext"}`.

use super::RetrievalError;
use crate::io::jsonl_records;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One passage of a corpus.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// Unique id within an index.
    pub id: String,
    /// `"Title"` on the first line, then the text.
    pub contents: String,
}

impl Document {
    /// The title: the first line of `contents` without its surrounding quotes.
    pub fn title(&self) -> &str {
        let first = self.contents.lines().next().unwrap_or("");
        first
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap_or(first)
    }
}

/// Finds documents by title: the one titled exactly so, else the first (in corpus order) whose
/// title matches ignoring case ([`super::SearchIndex::article`] holds one).
#[derive(Debug, Clone, Default)]
pub(crate) struct TitleLookup {
    exact: std::collections::HashMap<String, usize>,
    folded: std::collections::HashMap<String, usize>,
}

impl TitleLookup {
    /// The lookup over `docs` (positions refer to this slice).
    pub(crate) fn new(docs: &[Document]) -> Self {
        let mut lookup = TitleLookup::default();
        for (i, d) in docs.iter().enumerate() {
            lookup.exact.entry(d.title().to_owned()).or_insert(i);
            lookup.folded.entry(d.title().to_lowercase()).or_insert(i);
        }
        lookup
    }

    /// The position of the document titled `title` (exactly, else ignoring case).
    pub(crate) fn find(&self, title: &str) -> Option<usize> {
        self.exact
            .get(title)
            .or_else(|| self.folded.get(&title.to_lowercase()))
            .copied()
    }
}

/// Reads a JSONL corpus ([`crate::io`]: blank lines are skipped); a malformed line
/// or a duplicate id is an error naming the line.
pub fn read_jsonl(path: &Path) -> Result<Vec<Document>, RetrievalError> {
    let bytes = std::fs::read(path)
        .map_err(|e| RetrievalError::Io(format!("open {}", path.display()), e))?;
    let mut docs = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (line, doc) in jsonl_records::<Document>(&bytes) {
        let doc = doc
            .map_err(|e| RetrievalError::Format(format!("{} line {line}: {e}", path.display())))?;
        if !ids.insert(doc.id.clone()) {
            return Err(RetrievalError::Format(format!(
                "{} line {line}: duplicate id {:?}",
                path.display(),
                doc.id
            )));
        }
        docs.push(doc);
    }
    Ok(docs)
}

/// Merges several corpora into one with unique ids `"<prefix>:<id>"`, the prefix naming the
/// source (e.g. `seed1`). Prefixes must be distinct and must not contain ':'.
pub fn pool(corpora: Vec<(String, Vec<Document>)>) -> Result<Vec<Document>, RetrievalError> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (prefix, docs) in corpora {
        if prefix.is_empty() || prefix.contains(':') || !seen.insert(prefix.clone()) {
            return Err(RetrievalError::Format(format!(
                "pool prefix {prefix:?} is empty, contains ':' or is repeated"
            )));
        }
        out.extend(docs.into_iter().map(|d| Document {
            id: format!("{prefix}:{}", d.id),
            contents: d.contents,
        }));
    }
    Ok(out)
}

//! Search indexes: building, loading (cached per file) and querying.

use crate::prelude::*;

/// Identity of an index file: canonical path, size and modification time (a file rewritten in
/// place is loaded again).
pub(crate) type IndexKey = (PathBuf, u64, Option<std::time::SystemTime>);

/// Indexes loaded by path, shared by every environment of the process.
pub(crate) fn index_cache() -> &'static Mutex<BTreeMap<IndexKey, Arc<SearchIndex>>> {
    static CACHE: OnceLock<Mutex<BTreeMap<IndexKey, Arc<SearchIndex>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

pub(crate) fn load_cached(path: &Path) -> rulegym::Result<Arc<SearchIndex>> {
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let meta = std::fs::metadata(path).ok();
    let key = (
        canonical,
        meta.as_ref().map_or(0, |m| m.len()),
        meta.and_then(|m| m.modified().ok()),
    );
    if let Some(index) = index_cache().lock().expect("not poisoned").get(&key) {
        return Ok(index.clone());
    }
    let index = Arc::new(SearchIndex::load(path)?);
    let mut cache = index_cache().lock().expect("not poisoned");
    cache.retain(|k, _| k.0 != key.0);
    cache.insert(key, index.clone());
    Ok(index)
}

/// A search index file written by `rulegym index` (or [`build_index`]), loaded once per file
/// (path, size, modification time) and process. Thread-safe: many threads may search one index.
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct Index {
    pub(crate) inner: Arc<SearchIndex>,
}

#[pymethods]
impl Index {
    /// Loads (or reuses the already loaded) index at `path`.
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py.allow_threads(|| load_cached(&path)).map_err(err)?;
        Ok(Index { inner })
    }

    /// The document titled `title` (exactly, else ignoring case) as `{"id", "contents"}`, or
    /// None: the MCP server's `get_article` lookup.
    fn article<'py>(&self, py: Python<'py>, title: &str) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.inner
            .article(title.trim())
            .map(|doc| {
                let item = PyDict::new(py);
                item.set_item("id", &doc.id)?;
                item.set_item("contents", &doc.contents)?;
                Ok(item)
            })
            .transpose()
    }

    /// Top-`k` documents for each query: `[[{"id", "contents", "score"}, ...], ...]`.
    #[pyo3(signature = (queries, k=3))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        queries: Vec<String>,
        k: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
        let hits = py
            .allow_threads(|| self.inner.search(&refs, k))
            .map_err(err)?;
        let docs = self.inner.docs();
        let out = PyList::empty(py);
        for row in hits {
            let list = PyList::empty(py);
            for h in row {
                let d = &docs[h.index as usize];
                let item = PyDict::new(py);
                item.set_item("id", &d.id)?;
                item.set_item("contents", &d.contents)?;
                item.set_item("score", h.score)?;
                list.append(item)?;
            }
            out.append(list)?;
        }
        Ok(out)
    }

    /// Number of documents.
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Writes the index to `path` atomically (what `rulegym index` writes; `Index(path)` loads
    /// it), e.g. a curriculum draw's index for a tool server in another process.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.allow_threads(|| self.inner.save(&path)).map_err(err)
    }
}

/// Builds a flat index with the built-in encoder over a Search-R1 JSONL corpus (such as a
/// dataset's `articles.jsonl`) and writes it to `out`, like `rulegym index`.
#[pyfunction]
pub(crate) fn build_index(py: Python<'_>, corpus: PathBuf, out: PathBuf) -> PyResult<usize> {
    py.allow_threads(|| -> rulegym::Result<usize> {
        use rulegym::retrieval::{BuiltinConfig, EncoderChoice, IndexKind, docs};
        let corpus = docs::read_jsonl(&corpus)?;
        let index = SearchIndex::build(
            corpus,
            &EncoderChoice::Builtin(BuiltinConfig::default()),
            IndexKind::Flat,
        )?;
        index.save(&out)?;
        Ok(index.len())
    })
    .map_err(err)
}

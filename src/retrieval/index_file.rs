//! Search indexes: documents + encoder + vectors, built in memory and persisted in one file.
//!
//! File layout (little-endian): the magic `RULEGYM-IDX\0`, a `u64` header length, a JSON
//! [`Header`], then three binary sections: the built-in encoder's document-frequency table
//! (`u64` hash, `u32` df per entry), the documents (`u32` id length, `u32` contents length,
//! bytes, per document) and the vectors in the search layout (blocks of 16 rows, transposed,
//! zero-padded: see [`kernel::pack`](super::kernel::pack)), and finally the SHA-256 of every
//! byte before it (format version 2): a flipped or truncated byte anywhere is a clear error at
//! load, never a silently different search result. Loading reads the vectors with a single
//! `read_exact` straight into their final buffer, hashing as it reads. Saving writes a temporary
//! file next to the target, syncs it and renames it over the target, so readers never see a
//! partial file.

use super::RetrievalError;
use super::docs::Document;
use super::encoder::{BuiltinConfig, BuiltinEncoder, Encoder, TextKind};
use super::flat::FlatIndex;
use super::hnsw::HnswParams;
use super::topk::Hit;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::io::Hashing;

const MAGIC: &[u8; 12] = b"RULEGYM-IDX\0";
/// Newest file format version this build reads and writes: 3 adds the HNSW graph after the
/// vectors, so loading an HNSW index no longer rebuilds it. An index without a stored graph
/// (every flat index) is written as version 2 ([`BASE_FORMAT_VERSION`]), byte for byte what
/// earlier builds wrote; version-2 HNSW files still load (their graph is rebuilt).
pub const FORMAT_VERSION: u32 = 3;
/// The version of files without a stored graph (2: the SHA-256 trailer).
pub const BASE_FORMAT_VERSION: u32 = 2;
/// Bytes of the SHA-256 trailer.
const CHECKSUM_BYTES: u64 = 32;

/// Which encoder to build an index with (parsed from `builtin` or `bert:DIR`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum EncoderChoice {
    /// The built-in hashed TF-IDF encoder with this configuration.
    Builtin(BuiltinConfig),
    /// A sentence-transformers model directory (feature `bert`).
    Bert(PathBuf),
}

impl std::str::FromStr for EncoderChoice {
    type Err = RetrievalError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "builtin" {
            Ok(EncoderChoice::Builtin(BuiltinConfig::default()))
        } else if let Some(dir) = s.strip_prefix("bert:") {
            if dir.is_empty() {
                return Err(RetrievalError::Config(
                    "bert: needs a model directory".into(),
                ));
            }
            Ok(EncoderChoice::Bert(PathBuf::from(dir)))
        } else {
            Err(RetrievalError::Config(format!(
                "unknown encoder {s:?}: expected `builtin` or `bert:DIR`"
            )))
        }
    }
}

/// How an encoder is rebuilt when an index is loaded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum EncoderSpec {
    /// Built-in encoder; its vocabulary table is stored in the file.
    Builtin {
        /// Output dimension.
        dim: usize,
        /// Unigram, bigram and trigram weights.
        weights: [f32; 3],
        /// Number of passages it was fitted on.
        docs: u64,
    },
    /// BERT-family model loaded from a directory (not copied into the index).
    Bert {
        /// The model directory as given at build time.
        dir: String,
    },
}

/// Search structure of an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum IndexKind {
    /// Exact search over all vectors.
    #[default]
    Flat,
    /// Approximate HNSW graph search (feature `hnsw`); the graph is stored in the file.
    Hnsw,
}

impl std::str::FromStr for IndexKind {
    type Err = RetrievalError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "flat" => Ok(IndexKind::Flat),
            "hnsw" => Ok(IndexKind::Hnsw),
            _ => Err(RetrievalError::Config(format!(
                "unknown index kind {s:?}: expected flat or hnsw"
            ))),
        }
    }
}

/// The JSON header of an index file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    /// File format version ([`FORMAT_VERSION`]).
    pub format: u32,
    /// Search structure.
    pub kind: IndexKind,
    /// Vector dimension.
    pub dim: usize,
    /// Number of documents (and vectors).
    pub count: usize,
    /// [`Encoder::identity`] of the encoder that produced the vectors.
    pub encoder_identity: String,
    /// How to rebuild that encoder.
    pub encoder: EncoderSpec,
    /// Entries in the vocabulary section.
    pub vocab_len: usize,
    /// Bytes in the documents section.
    pub docs_bytes: u64,
    /// HNSW parameters (kind `hnsw` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hnsw: Option<HnswParams>,
    /// Bytes of the HNSW graph stored after the vectors (format 3); absent in version-2 files,
    /// whose graph is rebuilt from the vectors on load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_bytes: Option<u64>,
}

/// A loaded or freshly built index: documents, their vectors and the encoder for queries.
pub struct SearchIndex {
    header: Header,
    vocab: Vec<(u64, u32)>,
    docs: Vec<Document>,
    flat: FlatIndex,
    encoder: Arc<dyn Encoder>,
    #[cfg(feature = "hnsw")]
    hnsw: Option<super::hnsw::HnswIndex>,
    /// Documents by title, built on the first [`SearchIndex::article`] call.
    titles: std::sync::OnceLock<super::TitleLookup>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

/// Builds the encoder named by `choice`; the built-in one is fitted on `passages`.
/// An encoder, how to rebuild it, and its vocabulary table (built-in only).
type MadeEncoder = (Arc<dyn Encoder>, EncoderSpec, Vec<(u64, u32)>);

fn make_encoder(choice: &EncoderChoice, passages: &[&str]) -> Result<MadeEncoder, RetrievalError> {
    match choice {
        EncoderChoice::Builtin(cfg) => {
            let enc = BuiltinEncoder::fit(cfg.clone(), passages)?;
            let spec = EncoderSpec::Builtin {
                dim: cfg.dim,
                weights: [cfg.unigram_weight, cfg.bigram_weight, cfg.trigram_weight],
                docs: enc.docs(),
            };
            let table = enc.table();
            Ok((Arc::new(enc), spec, table))
        }
        EncoderChoice::Bert(dir) => {
            let enc = load_bert(dir)?;
            let spec = EncoderSpec::Bert {
                dir: dir.display().to_string(),
            };
            Ok((enc, spec, Vec::new()))
        }
    }
}

#[cfg(feature = "bert")]
fn load_bert(dir: &Path) -> Result<Arc<dyn Encoder>, RetrievalError> {
    Ok(Arc::new(super::bert::BertEncoder::load(dir)?))
}

#[cfg(not(feature = "bert"))]
fn load_bert(dir: &Path) -> Result<Arc<dyn Encoder>, RetrievalError> {
    Err(RetrievalError::Config(format!(
        "encoder bert:{} needs rulegym built with feature `bert`",
        dir.display()
    )))
}

fn rebuild_encoder(
    spec: &EncoderSpec,
    vocab: &[(u64, u32)],
) -> Result<Arc<dyn Encoder>, RetrievalError> {
    match spec {
        EncoderSpec::Builtin { dim, weights, docs } => {
            let cfg = BuiltinConfig {
                dim: *dim,
                unigram_weight: weights[0],
                bigram_weight: weights[1],
                trigram_weight: weights[2],
            };
            Ok(Arc::new(BuiltinEncoder::from_table(cfg, *docs, vocab)?))
        }
        EncoderSpec::Bert { dir } => load_bert(Path::new(dir)),
    }
}

impl SearchIndex {
    /// Encodes `docs` as passages and builds an index of the given kind (HNSW with default
    /// parameters). Ids must be unique.
    pub fn build(
        docs: Vec<Document>,
        choice: &EncoderChoice,
        kind: IndexKind,
    ) -> Result<Self, RetrievalError> {
        Self::build_with(docs, choice, kind, HnswParams::default())
    }

    /// As [`build`](Self::build) with explicit HNSW parameters (ignored for a flat index).
    pub fn build_with(
        docs: Vec<Document>,
        choice: &EncoderChoice,
        kind: IndexKind,
        hnsw: HnswParams,
    ) -> Result<Self, RetrievalError> {
        Self::build_observed(docs, choice, kind, hnsw, &|_, _| {})
    }

    /// As [`build_with`](Self::build_with), calling `encoded(done, total)` after each batch
    /// of passages is encoded (a BERT encoder takes minutes over a large corpus).
    pub fn build_observed(
        docs: Vec<Document>,
        choice: &EncoderChoice,
        kind: IndexKind,
        hnsw: HnswParams,
        encoded: &dyn Fn(usize, usize),
    ) -> Result<Self, RetrievalError> {
        if kind == IndexKind::Hnsw {
            hnsw.validate()?;
        }
        let mut ids = std::collections::HashSet::new();
        for d in &docs {
            if !ids.insert(d.id.as_str()) {
                return Err(RetrievalError::Format(format!(
                    "duplicate document id {:?}",
                    d.id
                )));
            }
        }
        let texts: Vec<&str> = docs.iter().map(|d| d.contents.as_str()).collect();
        let (encoder, spec, vocab) = make_encoder(choice, &texts)?;
        let mut vectors = Vec::with_capacity(docs.len() * encoder.dim());
        for chunk in texts.chunks(256) {
            vectors.extend(encoder.encode(chunk, TextKind::Passage)?);
            encoded(vectors.len() / encoder.dim().max(1), texts.len());
        }
        let flat = FlatIndex::new(encoder.dim(), &vectors)?;
        let header = Header {
            format: BASE_FORMAT_VERSION,
            kind,
            dim: encoder.dim(),
            count: docs.len(),
            encoder_identity: encoder.identity(),
            encoder: spec,
            vocab_len: vocab.len(),
            docs_bytes: docs_bytes(&docs),
            hnsw: (kind == IndexKind::Hnsw).then_some(hnsw),
            graph_bytes: None,
        };
        Self::assemble(header, vocab, docs, flat, encoder, None)
    }

    fn assemble(
        header: Header,
        vocab: Vec<(u64, u32)>,
        docs: Vec<Document>,
        flat: FlatIndex,
        encoder: Arc<dyn Encoder>,
        graph: Option<&[u8]>,
    ) -> Result<Self, RetrievalError> {
        #[cfg(not(feature = "hnsw"))]
        if header.kind == IndexKind::Hnsw {
            return Err(RetrievalError::Config(
                "index kind hnsw needs rulegym built with feature `hnsw`".into(),
            ));
        }
        #[cfg(not(feature = "hnsw"))]
        let _ = graph;
        #[cfg(feature = "hnsw")]
        let hnsw = match (header.kind, graph) {
            (IndexKind::Hnsw, None) => Some(super::hnsw::HnswIndex::new(
                flat.dim(),
                &flat.to_rows(),
                header.hnsw.unwrap_or_default(),
            )?),
            (IndexKind::Hnsw, Some(mut bytes)) => Some(super::hnsw::HnswIndex::with_graph(
                flat.dim(),
                &flat.to_rows(),
                header.hnsw.unwrap_or_default(),
                &mut bytes,
            )?),
            (IndexKind::Flat, _) => None,
        };
        Ok(SearchIndex {
            header,
            vocab,
            docs,
            flat,
            encoder,
            #[cfg(feature = "hnsw")]
            hnsw,
            titles: std::sync::OnceLock::new(),
        })
    }

    /// The file header (kind, sizes, encoder identity).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The documents, in row order.
    pub fn docs(&self) -> &[Document] {
        &self.docs
    }

    /// The document titled exactly `title`, else the first (in row order) whose title matches
    /// it ignoring case: what every surface that reads an article by title uses (the MCP
    /// `get_article` tool, the Python `Index.article`). The lookup is built once, on first use.
    pub fn article(&self, title: &str) -> Option<&Document> {
        let titles = self
            .titles
            .get_or_init(|| super::TitleLookup::new(&self.docs));
        titles.find(title).map(|i| &self.docs[i])
    }

    /// Whether searches are exact scans of [`flat`](Self::flat) (no HNSW graph).
    pub fn is_flat(&self) -> bool {
        #[cfg(feature = "hnsw")]
        return self.hnsw.is_none();
        #[cfg(not(feature = "hnsw"))]
        true
    }

    /// The exact index over the document vectors.
    pub fn flat(&self) -> &FlatIndex {
        &self.flat
    }

    /// The encoder used for queries.
    pub fn encoder(&self) -> &Arc<dyn Encoder> {
        &self.encoder
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether the index holds no documents.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Replaces the query encoder; refused unless its identity equals the one that built the
    /// index (vectors from different encoders are not comparable).
    pub fn set_encoder(&mut self, encoder: Arc<dyn Encoder>) -> Result<(), RetrievalError> {
        if encoder.identity() != self.header.encoder_identity {
            return Err(RetrievalError::EncoderMismatch {
                index: self.header.encoder_identity.clone(),
                given: encoder.identity(),
            });
        }
        self.encoder = encoder;
        Ok(())
    }

    /// Top-`k` documents for each query text (rows into [`docs`](Self::docs)), best first.
    pub fn search(&self, queries: &[&str], k: usize) -> Result<Vec<Vec<Hit>>, RetrievalError> {
        if k == 0 {
            return Err(RetrievalError::InvalidK(0));
        }
        let q = self.encoder.encode(queries, TextKind::Query)?;
        self.search_vectors(&q, k)
    }

    /// Top-`k` rows for already encoded queries: exact for a flat index, approximate (HNSW
    /// graph at its default search width) for an HNSW index.
    pub fn search_vectors(&self, q: &[f32], k: usize) -> Result<Vec<Vec<Hit>>, RetrievalError> {
        #[cfg(feature = "hnsw")]
        if let Some(h) = &self.hnsw {
            return h.search(q, k);
        }
        self.flat.search(q, k)
    }

    /// The HNSW graph of an index of kind `hnsw`.
    #[cfg(feature = "hnsw")]
    pub fn hnsw(&self) -> Option<&super::hnsw::HnswIndex> {
        self.hnsw.as_ref()
    }

    /// The stored graph's bytes (an HNSW index), else nothing.
    fn graph_bytes(&self) -> std::io::Result<Option<Vec<u8>>> {
        #[cfg(feature = "hnsw")]
        if let Some(h) = &self.hnsw {
            let mut bytes = Vec::new();
            h.write_graph(&mut bytes).map_err(std::io::Error::other)?;
            return Ok(Some(bytes));
        }
        Ok(None)
    }

    /// Writes the index file's bytes to `w` (header, vocabulary, documents, packed vectors,
    /// the HNSW graph if any, SHA-256 trailer) and returns `w`.
    pub fn write_to<W: Write>(&self, w: W) -> std::io::Result<W> {
        let mut w = Hashing::new(w);
        let graph = self.graph_bytes()?;
        let mut header = self.header.clone();
        header.graph_bytes = graph.as_ref().map(|g| g.len() as u64);
        header.format = if graph.is_some() {
            FORMAT_VERSION
        } else {
            BASE_FORMAT_VERSION
        };
        let version = header.format;
        let header = serde_json::to_vec(&header)?;
        w.write_all(MAGIC)?;
        w.write_all(&version.to_le_bytes())?;
        w.write_all(&(header.len() as u64).to_le_bytes())?;
        w.write_all(&header)?;
        // Little-endian bytes in buffers of ~768 KB (a write per value costs more than the
        // hashing it feeds).
        let mut bytes = Vec::with_capacity(12 << 16);
        for chunk in self.vocab.chunks(1 << 16) {
            bytes.clear();
            for (h, df) in chunk {
                bytes.extend_from_slice(&h.to_le_bytes());
                bytes.extend_from_slice(&df.to_le_bytes());
            }
            w.write_all(&bytes)?;
        }
        for d in &self.docs {
            w.write_all(&(d.id.len() as u32).to_le_bytes())?;
            w.write_all(&(d.contents.len() as u32).to_le_bytes())?;
            w.write_all(d.id.as_bytes())?;
            w.write_all(d.contents.as_bytes())?;
        }
        let rows = self.flat.packed();
        for chunk in rows.chunks(1 << 16) {
            bytes.clear();
            for x in chunk {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
            w.write_all(&bytes)?;
        }
        if let Some(graph) = &graph {
            w.write_all(graph)?;
        }
        let (mut w, sha) = w.into_parts();
        w.write_all(&sha.finalize())?;
        Ok(w)
    }

    /// The index file's bytes (what [`save`](Self::save) writes).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.write_to(Vec::new())
            .expect("writing to memory cannot fail")
    }

    /// Writes the index to `path` atomically (temporary file, fsync, rename).
    pub fn save(&self, path: &Path) -> Result<(), RetrievalError> {
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
        let dir = dir.unwrap_or(Path::new("."));
        let name = path.file_name().ok_or_else(|| {
            RetrievalError::Config(format!("{} is not a file path", path.display()))
        })?;
        let tmp = dir.join(format!(
            ".{}.tmp-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let io = |what: &str, e| RetrievalError::Io(format!("{what} {}", tmp.display()), e);
        let result = (|| {
            let file = std::fs::File::create(&tmp).map_err(|e| io("create", e))?;
            let w = self
                .write_to(BufWriter::with_capacity(1 << 20, file))
                .map_err(|e| io("write", e))?;
            let file = w.into_inner().map_err(|e| io("flush", e.into_error()))?;
            file.sync_all().map_err(|e| io("sync", e))?;
            Ok(())
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            RetrievalError::Io(format!("rename to {}", path.display()), e)
        })
    }

    /// Reads an index written by [`save`](Self::save) and rebuilds its encoder.
    pub fn load(path: &Path) -> Result<Self, RetrievalError> {
        let ctx = |what: &str| format!("{what} {}", path.display());
        let bad = |msg: String| RetrievalError::Format(format!("{}: {msg}", path.display()));
        let file = std::fs::File::open(path).map_err(|e| RetrievalError::Io(ctx("open"), e))?;
        let file_len = file
            .metadata()
            .map_err(|e| RetrievalError::Io(ctx("stat"), e))?
            .len();
        let mut r = Hashing::new(BufReader::with_capacity(1 << 20, file));
        let read = |buf: &mut [u8], r: &mut Hashing<BufReader<std::fs::File>>| {
            r.read_exact(buf)
                .map_err(|e| RetrievalError::Io(ctx("read (truncated file?)"), e))
        };
        let mut magic = [0u8; 12];
        read(&mut magic, &mut r)?;
        if &magic != MAGIC {
            return Err(bad("not a rulegym index (bad magic)".into()));
        }
        let mut b4 = [0u8; 4];
        let mut b8 = [0u8; 8];
        read(&mut b4, &mut r)?;
        let version = u32::from_le_bytes(b4);
        if !(BASE_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(bad(format!(
                "format version {version}, this build reads {BASE_FORMAT_VERSION} to \
                 {FORMAT_VERSION} (rebuild it with `rulegym index`)"
            )));
        }
        read(&mut b8, &mut r)?;
        let header_len = u64::from_le_bytes(b8);
        if header_len > file_len {
            return Err(bad("header length exceeds file size".into()));
        }
        let mut hbuf = vec![0u8; header_len as usize];
        read(&mut hbuf, &mut r)?;
        let header: Header =
            serde_json::from_slice(&hbuf).map_err(|e| bad(format!("header: {e}")))?;
        if header.format != version || (version == FORMAT_VERSION) != header.graph_bytes.is_some() {
            return Err(bad(format!(
                "header of format {} (graph: {:?} bytes) in a version-{version} file",
                header.format, header.graph_bytes
            )));
        }
        let graph_bytes = header.graph_bytes.unwrap_or(0);
        let vec_bytes = (header.count.div_ceil(16) as u128) * 16 * (header.dim as u128) * 4;
        let expect = 24u128
            + header_len as u128
            + header.vocab_len as u128 * 12
            + header.docs_bytes as u128
            + vec_bytes
            + graph_bytes as u128
            + CHECKSUM_BYTES as u128;
        if expect != file_len as u128 {
            return Err(bad(format!(
                "size {file_len} bytes, header implies {expect}"
            )));
        }
        let mut vocab = Vec::with_capacity(header.vocab_len);
        let mut b12 = [0u8; 12];
        for _ in 0..header.vocab_len {
            read(&mut b12, &mut r)?;
            let h = u64::from_le_bytes(b12[..8].try_into().unwrap_or_default());
            let df = u32::from_le_bytes(b12[8..].try_into().unwrap_or_default());
            vocab.push((h, df));
        }
        let mut dbuf = vec![0u8; header.docs_bytes as usize];
        read(&mut dbuf, &mut r)?;
        let docs = parse_docs(&dbuf, header.count).map_err(bad)?;
        let mut vectors = vec![0f32; header.count.div_ceil(16) * 16 * header.dim];
        read(bytemuck::cast_slice_mut(&mut vectors), &mut r)?;
        let mut graph = vec![0u8; graph_bytes as usize];
        read(&mut graph, &mut r)?;
        let (mut r, sha) = r.into_parts();
        let mut stored = [0u8; CHECKSUM_BYTES as usize];
        r.read_exact(&mut stored)
            .map_err(|e| RetrievalError::Io(ctx("read (truncated file?)"), e))?;
        if sha.finalize().as_slice() != stored {
            return Err(bad(
                "checksum mismatch: the file is corrupt (rebuild it with `rulegym index`)".into(),
            ));
        }
        if cfg!(target_endian = "big") {
            for v in &mut vectors {
                *v = f32::from_bits(u32::from_le(v.to_bits()));
            }
        }
        let flat = FlatIndex::from_packed(header.dim, header.count, vectors)?;
        let encoder = rebuild_encoder(&header.encoder, &vocab)?;
        if encoder.identity() != header.encoder_identity || encoder.dim() != header.dim {
            return Err(RetrievalError::EncoderMismatch {
                index: header.encoder_identity.clone(),
                given: encoder.identity(),
            });
        }
        let graph = (version == FORMAT_VERSION).then_some(graph.as_slice());
        Self::assemble(header, vocab, docs, flat, encoder, graph)
    }
}

fn docs_bytes(docs: &[Document]) -> u64 {
    docs.iter()
        .map(|d| 8 + d.id.len() as u64 + d.contents.len() as u64)
        .sum()
}

fn parse_docs(buf: &[u8], count: usize) -> Result<Vec<Document>, String> {
    let mut docs = Vec::with_capacity(count);
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| -> Result<&[u8], String> {
        let end = at.checked_add(n).filter(|e| *e <= buf.len());
        let end = end.ok_or_else(|| "documents section truncated".to_string())?;
        let s = &buf[*at..end];
        *at = end;
        Ok(s)
    };
    for _ in 0..count {
        let lens = take(&mut at, 8)?;
        let il = u32::from_le_bytes([lens[0], lens[1], lens[2], lens[3]]) as usize;
        let cl = u32::from_le_bytes([lens[4], lens[5], lens[6], lens[7]]) as usize;
        let id = String::from_utf8(take(&mut at, il)?.to_vec()).map_err(|e| e.to_string())?;
        let contents = String::from_utf8(take(&mut at, cl)?.to_vec()).map_err(|e| e.to_string())?;
        docs.push(Document { id, contents });
    }
    if at != buf.len() {
        return Err("documents section has trailing bytes".into());
    }
    Ok(docs)
}

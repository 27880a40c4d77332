//! `rulegym index`: encode a corpus (or several, pooled) and write a search index file.

use rulegym::Result;
use rulegym::retrieval::hnsw::HnswParams;
use rulegym::retrieval::{BuiltinConfig, EncoderChoice, IndexKind, SearchIndex, docs};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Flags of `rulegym index`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Corpus in Search-R1 JSONL (`{"id", "contents"}` per line). Repeat to pool several
    /// corpora into one index; pooled ids become `NAME:id`, where NAME is given as
    /// `NAME=PATH` or defaults to the corpus file's parent directory name.
    #[arg(long, required = true)]
    corpus: Vec<String>,
    /// Encoder: `builtin` (hashed TF-IDF, no download) or `bert:DIR` (a sentence-transformers
    /// directory; needs feature `bert`).
    #[arg(long, default_value = "builtin")]
    encoder: String,
    /// Output dimension of the built-in encoder.
    #[arg(long, default_value_t = BuiltinConfig::default().dim)]
    dim: usize,
    /// Index kind: `flat` (exact) or `hnsw` (approximate; needs feature `hnsw`).
    #[arg(long, value_enum, default_value_t = IndexKind::Flat)]
    kind: IndexKind,
    /// HNSW: neighbours per node and layer (2..=256).
    #[arg(long, default_value_t = HnswParams::default().m)]
    hnsw_m: usize,
    /// HNSW: candidate list width while building.
    #[arg(long, default_value_t = HnswParams::default().ef_construction)]
    hnsw_ef_construction: usize,
    /// HNSW: default candidate list width while searching.
    #[arg(long, default_value_t = HnswParams::default().ef_search)]
    hnsw_ef_search: usize,
    /// HNSW: insert one by one (reproducible graph, slower) instead of in parallel.
    #[arg(long)]
    hnsw_sequential: bool,
    /// Output index file (written atomically).
    #[arg(long)]
    out: PathBuf,
}

fn pool_name(spec: &str) -> (String, PathBuf) {
    if let Some((name, path)) = spec.split_once('=') {
        return (name.to_string(), PathBuf::from(path));
    }
    let path = PathBuf::from(spec);
    let name = Path::new(spec)
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (name, path)
}

/// Runs `rulegym index`.
pub fn run(args: Args) -> Result<()> {
    let mut choice: EncoderChoice = args.encoder.parse()?;
    if let EncoderChoice::Builtin(cfg) = &mut choice {
        cfg.dim = args.dim;
    }
    let kind = args.kind;
    let start = Instant::now();
    let corpus = if args.corpus.len() == 1 {
        docs::read_jsonl(Path::new(&args.corpus[0]))?
    } else {
        let mut parts = Vec::new();
        for spec in &args.corpus {
            let (name, path) = pool_name(spec);
            parts.push((name, docs::read_jsonl(&path)?));
        }
        docs::pool(parts)?
    };
    let n = corpus.len();
    let params = HnswParams {
        m: args.hnsw_m,
        ef_construction: args.hnsw_ef_construction,
        ef_search: args.hnsw_ef_search,
        parallel: !args.hnsw_sequential,
    };
    // A spinner on a terminal (indicatif draws nothing when stderr is not one).
    let bar = indicatif::ProgressBar::new_spinner().with_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar.set_message(format!("encoding 0 of {n} passages"));
    let index = SearchIndex::build_observed(corpus, &choice, kind, params, &|done, total| {
        let then = if kind == IndexKind::Hnsw && done == total {
            ", building the HNSW graph"
        } else {
            ""
        };
        bar.set_message(format!("encoding {done} of {total} passages{then}"));
    })?;
    bar.finish_and_clear();
    index.save(&args.out)?;
    eprintln!(
        "indexed {n} documents ({} dims, {}) into {} in {:.2?}",
        index.header().dim,
        index.header().encoder_identity,
        args.out.display(),
        start.elapsed()
    );
    Ok(())
}

//! `rulegym search`: print the top passages of an index for one or more queries.

use rulegym::Result;
use rulegym::retrieval::SearchIndex;
use std::path::PathBuf;

/// Flags of `rulegym search`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Index file written by `rulegym index`.
    #[arg(long)]
    index: PathBuf,
    /// Number of passages per query.
    #[arg(long = "top-k", alias = "topk", default_value_t = 3)]
    topk: usize,
    /// Print one JSON line per query (Search-R1 result shape) instead of text.
    #[arg(long)]
    json: bool,
    /// Search exactly on the GPU (wgpu; feature `gpu`) instead of the CPU; fails with a clear
    /// message when the machine has no adapter.
    #[cfg(feature = "gpu")]
    #[arg(long)]
    gpu: bool,
    /// Query texts.
    #[arg(required = true)]
    queries: Vec<String>,
}

/// Runs `rulegym search`.
pub fn run(args: Args) -> Result<()> {
    let index = SearchIndex::load(&args.index)?;
    let queries: Vec<&str> = args.queries.iter().map(String::as_str).collect();
    #[cfg(feature = "gpu")]
    let hits = if args.gpu {
        if args.topk == 0 {
            return Err(rulegym::retrieval::RetrievalError::InvalidK(0).into());
        }
        let q = index
            .encoder()
            .encode(&queries, rulegym::retrieval::TextKind::Query)?;
        rulegym::retrieval::gpu::search(index.flat(), &q, args.topk)?
    } else {
        index.search(&queries, args.topk)?
    };
    #[cfg(not(feature = "gpu"))]
    let hits = index.search(&queries, args.topk)?;
    for (q, hs) in queries.iter().zip(&hits) {
        if args.json {
            let items: Vec<serde_json::Value> = hs
                .iter()
                .map(|h| {
                    let d = &index.docs()[h.index as usize];
                    serde_json::json!({"document": {"id": d.id, "contents": d.contents}, "score": h.score})
                })
                .collect();
            println!("{}", serde_json::json!({"query": q, "result": items}));
        } else {
            println!("query: {q}");
            for (rank, h) in hs.iter().enumerate() {
                let d = &index.docs()[h.index as usize];
                println!("  {}. [{:.4}] id={} {}", rank + 1, h.score, d.id, d.title());
            }
        }
    }
    Ok(())
}

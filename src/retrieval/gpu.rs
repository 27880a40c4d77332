//! Exact flat inner-product search on a GPU through wgpu (feature `gpu`).
//!
//! The twin of [`FlatIndex::search`]: same results (indices exactly, scores within rounding),
//! same tie rule (higher score first, then the lower row index). Kernels live in
//! `shaders/retrieval_flat.wgsl`:
//! * `score_partial`: one workgroup per (query, tile of 2,048 rows) computes the tile's scores
//!   into workgroup memory (sequential `fma` over the dimension) and selects the tile's top-k;
//! * `merge`: one workgroup per query selects the final top-k from all tiles' partial lists.
//!
//! Every storage binding stays under [`GpuContext::max_binding_bytes`] (<= 100 MB): rows are
//! uploaded once in row chunks, and queries are processed in query chunks sized so that the
//! query block and the partial lists also fit.
//!
//! **Scores**: the GPU computes each score as a sequential fused multiply-add chain, like the
//! CPU's canonical dot product, but shader compilers may split or reassociate it (Mesa's
//! lavapipe does), so scores can differ from the CPU's by rounding: at most
//! `dim * f32::EPSILON * |q| * |x|` ([`score_tolerance`]). Indices can then differ only between
//! rows whose exact scores are that close; identical rows always score identically, so exact
//! ties resolve to the lowest index on both paths.

use super::RetrievalError;
use super::flat::{FlatIndex, begin_search};
use super::topk::Hit;
use crate::gpu::{GpuContext, chunks};
use std::ops::{ControlFlow, Range};

/// Rows per workgroup tile (must match `TILE` in the shader).
const TILE: usize = 2048;
/// Largest `k` the GPU path serves (each selection pass costs one workgroup reduction).
pub const MAX_K: usize = 1024;
/// Slot index of "no hit" (the shader's `NONE`).
const NONE: u32 = u32::MAX;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    dim: u32,
    rows: u32,
    row_base: u32,
    tile_base: u32,
    tiles: u32,
    slots: u32,
    queries: u32,
    k: u32,
}

/// The largest difference between a GPU score and the CPU score for query `q` and row `x`
/// that rounding can explain: `dim * f32::EPSILON * |q| * |x|` (the standard bound for a
/// recursive sum of `dim` products, in any association).
pub fn score_tolerance(q: &[f32], x: &[f32]) -> f32 {
    (q.len() as f64 * f32::EPSILON as f64 * super::l2_norm(q) * super::l2_norm(x)) as f32
}

/// A flat index uploaded to a GPU: rows in row-major chunks of at most
/// [`GpuContext::max_binding_bytes`] each.
pub struct GpuFlatIndex<'a> {
    ctx: &'a GpuContext,
    dim: usize,
    len: usize,
    /// Row range and buffer of each chunk.
    chunks: Vec<(Range<usize>, wgpu::Buffer)>,
}

impl std::fmt::Debug for GpuFlatIndex<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuFlatIndex")
            .field("dim", &self.dim)
            .field("len", &self.len)
            .field("chunks", &self.chunks.len())
            .finish()
    }
}

impl<'a> GpuFlatIndex<'a> {
    /// Uploads the rows of `index` (compiling the kernels on first use).
    pub fn new(ctx: &'a GpuContext, index: &FlatIndex) -> Result<Self, RetrievalError> {
        let dim = index.dim();
        let cap = ctx.max_binding_bytes();
        let row_bytes = dim as u64 * 4;
        if row_bytes > cap {
            return Err(RetrievalError::Config(format!(
                "one row of dimension {dim} ({row_bytes} bytes) exceeds the GPU binding limit of {cap} bytes"
            )));
        }
        ctx.pipeline("retrieval_flat", "score_partial")?;
        ctx.pipeline("retrieval_flat", "merge")?;
        let rows = index.to_rows();
        let mut out = Vec::new();
        for range in chunks(index.len(), row_bytes, cap, 1) {
            let buf = ctx.storage("retrieval rows", &rows[range.start * dim..range.end * dim])?;
            out.push((range, buf));
        }
        Ok(GpuFlatIndex {
            ctx,
            dim,
            len: index.len(),
            chunks: out,
        })
    }

    /// Number of row chunks (one storage binding each).
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// The best `k` rows for each query (row-major, `dim` values each), best first; `k` above
    /// the number of rows returns every row. Errors: `k == 0`, `min(k, rows)` above [`MAX_K`],
    /// malformed or non-finite queries, and GPU failures.
    pub fn search(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>, RetrievalError> {
        let m = match begin_search(queries, self.dim, self.len, k)? {
            ControlFlow::Continue(m) => m,
            ControlFlow::Break(hits) => return Ok(hits),
        };
        let k = k.min(self.len);
        if k > MAX_K {
            return Err(RetrievalError::Config(format!(
                "GPU search serves k <= {MAX_K}, got {k}"
            )));
        }
        let tiles: Vec<usize> = self
            .chunks
            .iter()
            .map(|(r, _)| (r.end - r.start).div_ceil(TILE))
            .collect();
        let slots: usize = tiles.iter().sum();
        let cap = self.ctx.max_binding_bytes();
        let per_query = [self.dim as u64 * 4, slots as u64 * k as u64 * 4];
        let max_q = per_query.iter().map(|b| cap / b).min().unwrap_or(0) as usize;
        if max_q == 0 {
            return Err(RetrievalError::Config(format!(
                "one query's partial lists ({} bytes) exceed the GPU binding limit of {cap} bytes",
                per_query[1]
            )));
        }
        let mut results = Vec::with_capacity(m);
        for qr in chunks(m, 1, max_q as u64, 1) {
            self.search_chunk(
                &queries[qr.start * self.dim..qr.end * self.dim],
                k,
                &tiles,
                slots,
                &mut results,
            )?;
        }
        Ok(results)
    }

    fn search_chunk(
        &self,
        queries: &[f32],
        k: usize,
        tiles: &[usize],
        slots: usize,
        results: &mut Vec<Vec<Hit>>,
    ) -> Result<(), RetrievalError> {
        let ctx = self.ctx;
        let mq = queries.len() / self.dim;
        let score = ctx.pipeline("retrieval_flat", "score_partial")?;
        let merge = ctx.pipeline("retrieval_flat", "merge")?;
        let qbuf = ctx.storage("retrieval queries", queries)?;
        let part_bytes = (mq * slots * k * 4) as u64;
        let part_score = ctx.storage_zeroed("retrieval partial scores", part_bytes)?;
        let part_index = ctx.storage_zeroed("retrieval partial indices", part_bytes)?;
        let out_score = ctx.storage_zeroed("retrieval top scores", (mq * k * 4) as u64)?;
        let out_index = ctx.storage_zeroed("retrieval top indices", (mq * k * 4) as u64)?;
        let base = Params {
            dim: self.dim as u32,
            rows: 0,
            row_base: 0,
            tile_base: 0,
            tiles: 1,
            slots: slots as u32,
            queries: mq as u32,
            k: k as u32,
        };
        let mut encoder = ctx.encoder();
        let mut tile_base = 0usize;
        for ((range, rows), &nt) in self.chunks.iter().zip(tiles) {
            let params = Params {
                rows: (range.end - range.start) as u32,
                row_base: range.start as u32,
                tile_base: tile_base as u32,
                tiles: nt as u32,
                ..base
            };
            let uniform = ctx.uniform("retrieval params", &params);
            let group = ctx.bind_group(
                &score,
                &[
                    (0, &uniform),
                    (1, rows),
                    (2, &qbuf),
                    (3, &part_score),
                    (4, &part_index),
                ],
            );
            let workgroups = u32::try_from(mq * nt).map_err(|_| {
                RetrievalError::Config("too many GPU workgroups in one dispatch".into())
            })?;
            ctx.dispatch(&mut encoder, &score, &group, workgroups);
            tile_base += nt;
        }
        let uniform = ctx.uniform("retrieval merge params", &base);
        let group = ctx.bind_group(
            &merge,
            &[
                (0, &uniform),
                (3, &part_score),
                (4, &part_index),
                (5, &out_score),
                (6, &out_index),
            ],
        );
        ctx.dispatch(&mut encoder, &merge, &group, mq as u32);
        ctx.submit(encoder)?;
        let scores: Vec<f32> = ctx.read(&out_score, mq * k)?;
        let indices: Vec<u32> = ctx.read(&out_index, mq * k)?;
        for (s, i) in scores.chunks_exact(k).zip(indices.chunks_exact(k)) {
            let hits: Vec<Hit> = s
                .iter()
                .zip(i)
                .filter(|(_, i)| **i != NONE)
                .map(|(&score, &index)| Hit { index, score })
                .collect();
            if hits.len() != k || hits.iter().any(|h| h.index as usize >= self.len) {
                return Err(RetrievalError::Format(format!(
                    "GPU returned {} valid hits of {k} (device fault?)",
                    hits.len()
                )));
            }
            results.push(hits);
        }
        Ok(())
    }
}

/// One-shot GPU search: acquires an adapter ([`GpuContext::new`]; a machine without one gives
/// [`RetrievalError::Gpu`] wrapping [`GpuError::NoAdapter`](crate::gpu::GpuError::NoAdapter)),
/// uploads `index` and searches. Reuse a [`GpuFlatIndex`] to search repeatedly.
pub fn search(
    index: &FlatIndex,
    queries: &[f32],
    k: usize,
) -> Result<Vec<Vec<Hit>>, RetrievalError> {
    let ctx = GpuContext::new()?;
    GpuFlatIndex::new(&ctx, index)?.search(queries, k)
}

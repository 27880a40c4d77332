//! Exact inner-product search over an `n x dim` matrix (CPU).
//!
//! Rows are streamed once per search in cache-sized chunks; each chunk meets all queries in
//! register tiles of 4 queries x 4 rows ([`kernel`](super::kernel)), and every score goes
//! through a threshold check into a per-query [`TopK`]. The rows are split into one contiguous
//! range per thread and the per-thread selections are merged, so a search reads the matrix from
//! memory once whatever the batch size. Ties go to the lowest row index; scores are
//! bit-identical for a query whatever the batch it arrives in.

use super::RetrievalError;
use super::kernel::{self, BLOCK, Isa};
use super::topk::{Hit, TopK};
use rayon::prelude::*;
use std::ops::ControlFlow;

/// Blocks of 16 rows per cache chunk (at d = 384: 384 KiB, fits L2).
const CHUNK_BLOCKS: usize = 16;
/// Below this many multiply-adds a search runs on the calling thread.
const PARALLEL_MIN_WORK: usize = 1 << 20;
/// Largest accepted vector norm: keeps every partial sum finite (|q|*|x| <= 1e36 < f32::MAX).
const MAX_NORM: f64 = 1e18;

/// An exact inner-product index over row vectors.
#[derive(Clone, Debug)]
pub struct FlatIndex {
    dim: usize,
    len: usize,
    /// Packed blocks of 16 rows ([`kernel::pack`]).
    blocks: Vec<f32>,
}

/// Checks that every value is finite and every vector's norm is at most 1e18.
pub(crate) fn validate_vectors(data: &[f32], dim: usize, what: &str) -> Result<(), RetrievalError> {
    if dim == 0 {
        return Err(RetrievalError::Shape("dimension must be at least 1".into()));
    }
    if !data.len().is_multiple_of(dim) {
        return Err(RetrievalError::Shape(format!(
            "{what}: {} values is not a multiple of dimension {dim}",
            data.len()
        )));
    }
    for (i, v) in data.chunks_exact(dim).enumerate() {
        let mut norm2 = 0f64;
        for &x in v {
            if !x.is_finite() {
                return Err(RetrievalError::NonFinite(format!("{what} {i}")));
            }
            norm2 += (x as f64) * (x as f64);
        }
        if norm2.sqrt() > MAX_NORM {
            return Err(RetrievalError::NonFinite(format!(
                "{what} {i} has norm above 1e18"
            )));
        }
    }
    Ok(())
}

/// The checks and trivial answers every exact search starts with, over an index of `rows`
/// vectors of `dim`: `k == 0` and malformed or non-finite queries are errors; with no query, or
/// no row (one empty hit list per query), the answer is [`ControlFlow::Break`]; otherwise the
/// number of queries is [`ControlFlow::Continue`].
pub(crate) fn begin_search(
    queries: &[f32],
    dim: usize,
    rows: usize,
    k: usize,
) -> Result<ControlFlow<Vec<Vec<Hit>>, usize>, RetrievalError> {
    if k == 0 {
        return Err(RetrievalError::InvalidK(0));
    }
    validate_vectors(queries, dim, "query")?;
    let m = queries.len() / dim;
    Ok(if m == 0 {
        ControlFlow::Break(Vec::new())
    } else if rows == 0 {
        ControlFlow::Break(vec![Vec::new(); m])
    } else {
        ControlFlow::Continue(m)
    })
}

impl FlatIndex {
    /// Builds an index from `data` (row-major, `data.len() / dim` rows). Rejects a zero
    /// dimension, a length that is not a multiple of `dim`, more than `u32::MAX` rows, and
    /// non-finite values or vectors with norm above 1e18.
    pub fn new(dim: usize, data: &[f32]) -> Result<Self, RetrievalError> {
        validate_vectors(data, dim, "row")?;
        let len = data.len() / dim;
        if len > u32::MAX as usize {
            return Err(RetrievalError::Shape(format!("{len} rows exceed u32::MAX")));
        }
        Ok(FlatIndex {
            dim,
            len,
            blocks: kernel::pack(data, dim),
        })
    }

    /// Adopts vectors already in the packed block layout ([`kernel::pack`]), as stored in
    /// index files; validates like [`new`](Self::new) and checks that padding rows are zero.
    pub fn from_packed(dim: usize, len: usize, blocks: Vec<f32>) -> Result<Self, RetrievalError> {
        if dim == 0 {
            return Err(RetrievalError::Shape("dimension must be at least 1".into()));
        }
        if len > u32::MAX as usize {
            return Err(RetrievalError::Shape(format!("{len} rows exceed u32::MAX")));
        }
        let nblocks = len.div_ceil(BLOCK);
        if Some(blocks.len()) != nblocks.checked_mul(dim * BLOCK) {
            return Err(RetrievalError::Shape(format!(
                "packed vectors: {} values for {len} rows of dimension {dim}",
                blocks.len()
            )));
        }
        for (b, blk) in blocks.chunks_exact(dim * BLOCK).enumerate() {
            let mut norm2 = [0f64; BLOCK];
            for vals in blk.chunks_exact(BLOCK) {
                for (lane, &x) in vals.iter().enumerate() {
                    norm2[lane] += (x as f64) * (x as f64);
                    if !x.is_finite() {
                        return Err(RetrievalError::NonFinite(format!(
                            "row {}",
                            b * BLOCK + lane
                        )));
                    }
                }
            }
            for (lane, n2) in norm2.iter().enumerate() {
                let row = b * BLOCK + lane;
                if row >= len && *n2 != 0.0 {
                    return Err(RetrievalError::Shape(
                        "packed padding rows are not zero".into(),
                    ));
                }
                if n2.sqrt() > MAX_NORM {
                    return Err(RetrievalError::NonFinite(format!(
                        "row {row} has norm above 1e18"
                    )));
                }
            }
        }
        Ok(FlatIndex { dim, len, blocks })
    }

    /// The packed block layout (what index files store).
    pub fn packed(&self) -> &[f32] {
        &self.blocks
    }

    /// All rows, row-major (unpacked copy).
    pub fn to_rows(&self) -> Vec<f32> {
        let mut out = vec![0f32; self.len * self.dim];
        for (r, row) in out.chunks_exact_mut(self.dim).enumerate() {
            let base = (r / BLOCK) * self.dim * BLOCK + r % BLOCK;
            for (i, x) in row.iter_mut().enumerate() {
                *x = self.blocks[base + i * BLOCK];
            }
        }
        out
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the index has no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A copy of row `i`, or `None` when out of range.
    pub fn row(&self, i: usize) -> Option<Vec<f32>> {
        (i < self.len).then(|| {
            let base = (i / BLOCK) * self.dim * BLOCK + i % BLOCK;
            (0..self.dim)
                .map(|d| self.blocks[base + d * BLOCK])
                .collect()
        })
    }

    /// The best `k` rows for each query (`queries` row-major, `dim` values each), best first.
    /// `k` above the number of rows returns every row. Uses rayon's global pool.
    pub fn search(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>, RetrievalError> {
        self.search_with_threads(queries, k, rayon::current_num_threads())
    }

    /// As [`search`](Self::search) with an explicit number of row partitions (threads).
    pub fn search_with_threads(
        &self,
        queries: &[f32],
        k: usize,
        threads: usize,
    ) -> Result<Vec<Vec<Hit>>, RetrievalError> {
        let m = match begin_search(queries, self.dim, self.len, k)? {
            ControlFlow::Continue(m) => m,
            ControlFlow::Break(hits) => return Ok(hits),
        };
        let blocks = self.len.div_ceil(BLOCK);
        let work = m.saturating_mul(self.len).saturating_mul(self.dim);
        let parts = if work < PARALLEL_MIN_WORK {
            1
        } else {
            threads.clamp(1, blocks)
        };
        let isa = kernel::detect();
        let mut tops = if parts == 1 {
            self.scan(isa, queries, m, k, 0, blocks)
        } else {
            let per = blocks.div_ceil(parts);
            let partial: Vec<Vec<TopK>> = (0..parts)
                .into_par_iter()
                .map(|p| {
                    let lo = (p * per).min(blocks);
                    let hi = ((p + 1) * per).min(blocks);
                    self.scan(isa, queries, m, k, lo, hi)
                })
                .collect();
            let mut it = partial.into_iter();
            let mut first = it.next().unwrap_or_default();
            for part in it {
                for (a, b) in first.iter_mut().zip(part) {
                    a.merge(b);
                }
            }
            first
        };
        Ok(tops.drain(..).map(TopK::into_sorted).collect())
    }

    /// The same hits as [`search`](Self::search), bit for bit, computed from each query's
    /// non-zero values only ([`kernel::sparse_blocks`]): for sparse queries (a name or a short
    /// phrase under the built-in hashed encoder: ~20 of 512 values) it does a few percent of
    /// the dense scan's arithmetic. Queries go in groups over rayon's global pool; each group
    /// walks the index in cache-sized chunks of blocks, so a chunk is read from memory once
    /// per group, not once per query.
    pub fn search_sparse(
        &self,
        queries: &[f32],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>, RetrievalError> {
        let m = match begin_search(queries, self.dim, self.len, k)? {
            ControlFlow::Continue(m) => m,
            ControlFlow::Break(hits) => return Ok(hits),
        };
        let isa = kernel::detect();
        let k = k.min(self.len);
        let blk = self.dim * BLOCK;
        let nonzero: Vec<Vec<(usize, f32)>> = queries
            .chunks_exact(self.dim)
            .map(|q| {
                q.iter()
                    .enumerate()
                    .filter(|(_, v)| **v != 0.0)
                    .map(|(i, v)| (i, *v))
                    .collect()
            })
            .collect();
        // ~256 KB of index per chunk (L2-resident while a group's queries pass over it).
        let per_chunk = ((256 << 10) / (blk * 4)).max(1);
        let group = m.div_ceil(rayon::current_num_threads() * 4).clamp(1, 512);
        let blocks: Vec<&[f32]> = self.blocks.chunks_exact(blk).collect();
        Ok(nonzero
            .par_chunks(group)
            .flat_map_iter(|group| {
                let mut tops: Vec<TopK> = group.iter().map(|_| TopK::new(k)).collect();
                for (c, chunk) in blocks.chunks(per_chunk).enumerate() {
                    let chunk0 = c * per_chunk;
                    for (nonzero, top) in group.iter().zip(&mut tops) {
                        let mut quads = chunk.chunks_exact(4);
                        for (j, quad) in quads.by_ref().enumerate() {
                            let quad = [quad[0], quad[1], quad[2], quad[3]];
                            let scores = kernel::sparse_blocks(isa, nonzero, quad);
                            for (i, scores) in scores.iter().enumerate() {
                                self.offer(top, (chunk0 + 4 * j + i) * BLOCK, scores);
                            }
                        }
                        let done = chunk.len() - quads.remainder().len();
                        for (i, block) in quads.remainder().iter().enumerate() {
                            let [scores] = kernel::sparse_blocks(isa, nonzero, [*block]);
                            self.offer(top, (chunk0 + done + i) * BLOCK, &scores);
                        }
                    }
                }
                tops.into_iter().map(TopK::into_sorted)
            })
            .collect())
    }

    /// Offers a block's scores (its first row `row0`) to `top`, rows past the index's end left
    /// out.
    #[inline]
    fn offer(&self, top: &mut TopK, row0: usize, scores: &[f32; BLOCK]) {
        offer_block(top, row0, &scores[..(self.len - row0).min(BLOCK)]);
    }

    /// Scans blocks `lo..hi` against all `m` queries.
    fn scan(&self, isa: Isa, q: &[f32], m: usize, k: usize, lo: usize, hi: usize) -> Vec<TopK> {
        let dim = self.dim;
        let blk = dim * BLOCK;
        let k = k.min(self.len);
        let (tq, tb) = isa.tile();
        let mut tops: Vec<TopK> = (0..m).map(|_| TopK::new(k)).collect();
        let mut out = [[0f32; 3 * BLOCK]; 8];
        let mut c0 = lo;
        while c0 < hi {
            let c1 = (c0 + CHUNK_BLOCKS).min(hi);
            let mut q0 = 0;
            while q0 < m {
                let mq = (m - q0).min(tq);
                let mut b = c0;
                while b < c1 {
                    let nb = (c1 - b).min(tb);
                    kernel::tile(
                        isa,
                        &q[q0 * dim..(q0 + mq) * dim],
                        mq,
                        &self.blocks[b * blk..(b + nb) * blk],
                        nb,
                        dim,
                        &mut out,
                    );
                    let row0 = b * BLOCK;
                    let valid = (self.len - row0).min(nb * BLOCK);
                    for (t, scores) in tops[q0..q0 + mq].iter_mut().zip(out.iter()) {
                        for (c, chunk) in scores[..valid].chunks(BLOCK).enumerate() {
                            offer_block(t, row0 + c * BLOCK, chunk);
                        }
                    }
                    b += nb;
                }
                q0 += mq;
            }
            c0 = c1;
        }
        tops
    }
}

/// Decides whether given rows are among a query's top k hits without ranking the whole index
/// ([`FlatIndex::rank_checker`]). Holds, per block of 16 rows and per dimension, the largest
/// and smallest value (dimension-major), so a block's scores against a query are bounded by
/// one multiply-add per non-zero query value instead of sixteen.
pub struct RankChecker<'a> {
    index: &'a FlatIndex,
    isa: Isa,
    blocks: usize,
    /// `max[i * blocks + b]`: the largest value of dimension `i` among block `b`'s rows.
    max: Vec<f32>,
    /// `min[i * blocks + b]`: the smallest.
    min: Vec<f32>,
    /// The largest absolute value in the index.
    largest: f32,
}

impl FlatIndex {
    /// A [`RankChecker`] over this index (one pass over it).
    pub fn rank_checker(&self) -> RankChecker<'_> {
        let dim = self.dim;
        let blocks = self.blocks.len() / (dim * BLOCK).max(1);
        let mut max = vec![0f32; dim * blocks];
        let mut min = vec![0f32; dim * blocks];
        let mut largest = 0f32;
        for (b, block) in self.blocks.chunks_exact(dim * BLOCK).enumerate() {
            for (i, lanes) in block.chunks_exact(BLOCK).enumerate() {
                let hi = lanes.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let lo = lanes.iter().copied().fold(f32::INFINITY, f32::min);
                max[i * blocks + b] = hi;
                min[i * blocks + b] = lo;
                largest = largest.max(hi.abs()).max(lo.abs());
            }
        }
        RankChecker {
            index: self,
            isa: kernel::detect(),
            blocks,
            max,
            min,
            largest,
        }
    }
}

impl RankChecker<'_> {
    /// For each query (row-major `queries`) and its `targets` (rows), whether every target is
    /// among the query's `k` best hits as [`FlatIndex::search`] and
    /// [`FlatIndex::search_sparse`] rank them (higher score first, ties to the lower row).
    /// The same decision, exactly: the worst target's score and every score compared with it
    /// are the searches' scores bit for bit. A block whose bound, widened by the worst-case
    /// rounding of both sums, stays below the worst target's score cannot outrank it and is
    /// not scored, and a query stops at the first row too many that outranks it. A target
    /// past the index's end is not retrieved; an empty target list is.
    pub fn all_in_top_k(
        &self,
        queries: &[f32],
        targets: &[&[u32]],
        k: usize,
    ) -> Result<Vec<bool>, RetrievalError> {
        let index = self.index;
        let m = match begin_search(queries, index.dim, index.len, k)? {
            ControlFlow::Continue(m) => m,
            ControlFlow::Break(hits) => hits.len(),
        };
        if m != targets.len() {
            return Err(RetrievalError::Shape(format!(
                "{m} queries but {} target lists",
                targets.len()
            )));
        }
        let k = k.min(index.len);
        Ok(queries
            .par_chunks(index.dim.max(1))
            .zip(targets)
            .map(|(q, targets)| self.decide(q, targets, k))
            .collect())
    }

    /// Every block's bound on its scores against the query with these non-zero values: the sum
    /// over them of `q_i` times the block's largest (`q_i > 0`) or smallest value of dimension
    /// `i`. Vectorised with AVX2 where the CPU has it (the same sums either way).
    fn bounds(&self, nonzero: &[(usize, f32)]) -> Vec<f32> {
        #[cfg(target_arch = "x86_64")]
        if matches!(self.isa, Isa::Avx512 | Isa::Avx2) {
            // SAFETY: `kernel::detect` found avx2.
            return unsafe { self.bounds_avx2(nonzero) };
        }
        self.bounds_portable(nonzero)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn bounds_avx2(&self, nonzero: &[(usize, f32)]) -> Vec<f32> {
        self.bounds_portable(nonzero)
    }

    #[inline(always)]
    fn bounds_portable(&self, nonzero: &[(usize, f32)]) -> Vec<f32> {
        let mut bound = vec![0f32; self.blocks];
        for &(i, qv) in nonzero {
            let side = if qv > 0.0 { &self.max } else { &self.min };
            for (acc, &x) in bound.iter_mut().zip(&side[i * self.blocks..]) {
                *acc += qv * x;
            }
        }
        bound
    }

    fn decide(&self, query: &[f32], targets: &[u32], k: usize) -> bool {
        let index = self.index;
        if targets.is_empty() {
            return true;
        }
        if targets.len() > k || targets.iter().any(|&t| t as usize >= index.len) {
            return false;
        }
        let nonzero: Vec<(usize, f32)> = query
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != 0.0)
            .map(|(i, v)| (i, *v))
            .collect();
        let blk = index.dim * BLOCK;
        let block = |b: usize| &index.blocks[b * blk..(b + 1) * blk];
        let score = |row: u32| {
            let row = row as usize;
            kernel::sparse_blocks(self.isa, &nonzero, [block(row / BLOCK)])[0][row % BLOCK]
        };
        // The target that ranks last; the others rank before it.
        let worst = targets
            .iter()
            .map(|&t| Hit {
                index: t,
                score: score(t),
            })
            .max_by(super::topk::rank_order)
            .expect("targets is not empty");
        let mut allowed = k - targets.len();
        // Bounds on every block's scores, and how far rounding can move a score or a bound:
        // each sums at most `nonzero.len()` products, each at most |q_i| * largest.
        let bound = self.bounds(&nonzero);
        let l1: f32 = nonzero.iter().map(|(_, qv)| qv.abs()).sum();
        let slack = 4.0 * (nonzero.len() + 2) as f32 * f32::EPSILON * l1 * self.largest;
        for (b, &bound) in bound.iter().enumerate() {
            if bound + slack < worst.score {
                continue;
            }
            let [scores] = kernel::sparse_blocks(self.isa, &nonzero, [block(b)]);
            let row0 = b * BLOCK;
            for (lane, &s) in scores[..(index.len - row0).min(BLOCK)].iter().enumerate() {
                let row = (row0 + lane) as u32;
                if (s > worst.score || (s == worst.score && row < worst.index))
                    && !targets.contains(&row)
                {
                    if allowed == 0 {
                        return false;
                    }
                    allowed -= 1;
                }
            }
        }
        true
    }
}

/// Offers the scores of up to one block's rows (the first is row `row0`) to `top`: every lane at
/// or above the threshold as it stood before the block, in row order (the dense and the sparse
/// search share it, so they keep the same hits on ties).
#[inline]
fn offer_block(top: &mut TopK, row0: usize, scores: &[f32]) {
    let thr = top.threshold();
    let mut mask = 0u32;
    for (lane, &s) in scores.iter().enumerate() {
        mask |= ((s >= thr) as u32) << lane;
    }
    while mask != 0 {
        let lane = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        top.push((row0 + lane) as u32, scores[lane]);
    }
}

/// Reference implementation: scores every row with the canonical dot product, sorts by
/// (score descending, index ascending) and truncates. Quadratic memory-free but slow; for tests.
pub fn naive_search(dim: usize, data: &[f32], queries: &[f32], k: usize) -> Vec<Vec<Hit>> {
    queries
        .chunks_exact(dim)
        .map(|q| {
            let mut hits: Vec<Hit> = data
                .chunks_exact(dim)
                .enumerate()
                .map(|(i, x)| Hit {
                    index: i as u32,
                    score: kernel::dot_canonical(q, x),
                })
                .collect();
            hits.sort_by(super::topk::rank_order);
            hits.truncate(k);
            hits
        })
        .collect()
}

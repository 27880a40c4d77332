//! Exact inner-product search over an `n x dim` matrix (CPU).
//!
//! Rows are streamed once per search in cache-sized chunks; each chunk meets all queries in
//! register tiles of 4 queries x 4 rows ([`kernel`](super::kernel)), and every score goes
//! through a threshold check into a per-query [`TopK`]. The rows are split into one contiguous
//! range per thread and the per-thread selections are merged, so a search reads the matrix from
//! memory once whatever the batch size. Ties go to the lowest row index; scores are
//! bit-identical for a query whatever the batch it arrives in.

use super::RetrievalError;
use super::kernel::{self, Isa, TILE_QUERIES, TILE_ROWS};
use super::topk::{Hit, TopK};
use rayon::prelude::*;

/// Rows per cache chunk (at d = 384: 384 KiB, fits L2).
const CHUNK_ROWS: usize = 256;
/// Queries per block inside a chunk (at d = 384: 48 KiB, about L1).
const QUERY_BLOCK: usize = 32;
/// Below this many multiply-adds a search runs on the calling thread.
const PARALLEL_MIN_WORK: usize = 1 << 20;
/// Largest accepted vector norm: keeps every partial sum finite (|q|*|x| <= 1e36 < f32::MAX).
const MAX_NORM: f64 = 1e18;

/// An exact inner-product index over row vectors.
#[derive(Clone, Debug)]
pub struct FlatIndex {
    dim: usize,
    padded: usize,
    len: usize,
    /// Row-major, each row zero-padded to `padded` floats.
    rows: Vec<f32>,
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

fn pad(data: &[f32], dim: usize, padded: usize) -> Vec<f32> {
    if dim == padded {
        return data.to_vec();
    }
    let n = data.len() / dim;
    let mut out = vec![0f32; n * padded];
    for (src, dst) in data.chunks_exact(dim).zip(out.chunks_exact_mut(padded)) {
        dst[..dim].copy_from_slice(src);
    }
    out
}

impl FlatIndex {
    /// Builds an index from `data` (row-major, `data.len() / dim` rows). Rejects a zero
    /// dimension, a length that is not a multiple of `dim`, more than `u32::MAX` rows, and
    /// non-finite values or vectors with norm above 1e18.
    pub fn new(dim: usize, data: &[f32]) -> Result<Self, RetrievalError> {
        validate_vectors(data, dim, "row")?;
        let padded = kernel::padded_dim(dim);
        Self::checked(dim, pad(data, dim, padded), data.len() / dim)
    }

    /// As [`new`](Self::new), taking ownership (no copy when `dim` is a multiple of 16).
    pub fn from_vec(dim: usize, data: Vec<f32>) -> Result<Self, RetrievalError> {
        validate_vectors(&data, dim, "row")?;
        let len = data.len() / dim;
        let padded = kernel::padded_dim(dim);
        let rows = if padded == dim {
            data
        } else {
            pad(&data, dim, padded)
        };
        Self::checked(dim, rows, len)
    }

    fn checked(dim: usize, rows: Vec<f32>, len: usize) -> Result<Self, RetrievalError> {
        if len > u32::MAX as usize {
            return Err(RetrievalError::Shape(format!("{len} rows exceed u32::MAX")));
        }
        Ok(FlatIndex {
            dim,
            padded: kernel::padded_dim(dim),
            len,
            rows,
        })
    }

    /// All rows, unpadded, row-major (allocates when `dim` is not a multiple of 16).
    pub fn to_unpadded(&self) -> std::borrow::Cow<'_, [f32]> {
        if self.dim == self.padded {
            std::borrow::Cow::Borrowed(&self.rows)
        } else {
            std::borrow::Cow::Owned(
                self.rows
                    .chunks_exact(self.padded)
                    .flat_map(|r| r[..self.dim].iter().copied())
                    .collect(),
            )
        }
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

    /// Row `i` (unpadded), or `None` when out of range.
    pub fn row(&self, i: usize) -> Option<&[f32]> {
        (i < self.len).then(|| &self.rows[i * self.padded..i * self.padded + self.dim])
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
        if k == 0 {
            return Err(RetrievalError::InvalidK(0));
        }
        validate_vectors(queries, self.dim, "query")?;
        let m = queries.len() / self.dim;
        if m == 0 {
            return Ok(Vec::new());
        }
        if self.len == 0 {
            return Ok(vec![Vec::new(); m]);
        }
        let q = pad(queries, self.dim, self.padded);
        let work = m.saturating_mul(self.len).saturating_mul(self.padded);
        let parts = if work < PARALLEL_MIN_WORK {
            1
        } else {
            threads.clamp(1, self.len.div_ceil(TILE_ROWS))
        };
        let isa = kernel::detect();
        let mut tops = if parts == 1 {
            self.scan(isa, &q, m, k, 0, self.len)
        } else {
            let per = self.len.div_ceil(parts).next_multiple_of(TILE_ROWS);
            let partial: Vec<Vec<TopK>> = (0..parts)
                .into_par_iter()
                .map(|p| {
                    let lo = (p * per).min(self.len);
                    let hi = ((p + 1) * per).min(self.len);
                    self.scan(isa, &q, m, k, lo, hi)
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

    /// Scans rows `lo..hi` against all `m` padded queries.
    fn scan(&self, isa: Isa, q: &[f32], m: usize, k: usize, lo: usize, hi: usize) -> Vec<TopK> {
        let dp = self.padded;
        let k = k.min(self.len);
        let mut tops: Vec<TopK> = (0..m).map(|_| TopK::new(k)).collect();
        let mut out = [[0f32; TILE_ROWS]; TILE_QUERIES];
        let mut c0 = lo;
        while c0 < hi {
            let c1 = (c0 + CHUNK_ROWS).min(hi);
            let mut b0 = 0;
            while b0 < m {
                let b1 = (b0 + QUERY_BLOCK).min(m);
                let mut r = c0;
                while r < c1 {
                    let nr = (c1 - r).min(TILE_ROWS);
                    let rows = &self.rows[r * dp..(r + nr) * dp];
                    let mut qi0 = b0;
                    while qi0 < b1 {
                        let mq = (b1 - qi0).min(TILE_QUERIES);
                        kernel::tile(
                            isa,
                            &q[qi0 * dp..(qi0 + mq) * dp],
                            mq,
                            rows,
                            nr,
                            dp,
                            &mut out,
                        );
                        for (t, scores) in tops[qi0..qi0 + mq].iter_mut().zip(out.iter()) {
                            let thr = t.threshold();
                            for (ri, &s) in scores.iter().enumerate().take(nr) {
                                if s >= thr {
                                    t.push((r + ri) as u32, s);
                                }
                            }
                        }
                        qi0 += mq;
                    }
                    r += nr;
                }
                b0 = b1;
            }
            c0 = c1;
        }
        tops
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

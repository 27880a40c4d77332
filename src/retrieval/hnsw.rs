//! Approximate inner-product search with an HNSW graph (feature `hnsw`), built and searched
//! by rulegym's own code.
//!
//! [`HnswParams`] and [`recall_at_k`] are always available (index files record the
//! parameters); the graph itself needs the feature.
//!
//! * **Distance**: `-<a, b>` with a vectorised dot product ([`dot`]: 16 independent lanes,
//!   AVX+FMA when the CPU has it), so the graph needs unit (or zero) vectors, which every
//!   rulegym encoder produces; [`HnswIndex::new`] rejects others. [`InnerProductDistance`]
//!   is the same order as `1 - <a, b>` clamped into `[0, 2]`.
//! * **Parameters** ([`HnswParams`]) are validated: out-of-range values are errors.
//! * **Build** (module `build`): Malkov & Yashunin's insertion with the neighbour-selection
//!   heuristic for the new node's lists and for the reverse updates (a full list is re-pruned
//!   by the heuristic, not truncated), `M` neighbours per upper layer, `2M` on layer 0.
//! * **Search** (module `graph`): the layers are flat `u32` adjacency arrays (CSR); a query
//!   descends greedily from the entry point through the upper layers, then runs a best-first
//!   search of width `max(ef, k)` on layer 0 with per-thread reusable scratch (a
//!   generation-stamped visited array, two heaps of `(distance, id)` keys), the next
//!   neighbour's row prefetched: no hash sets, locks or allocations per visited node.
//! * **Results**: the `k` nearest nodes the walk found are re-scored with the exact
//!   canonical dot product (the flat index's score, bit for bit) and ranked by score, then
//!   lowest index, so a returned list is always correctly ordered with exact scores; only
//!   membership is approximate (measure it with [`recall_at_k`]).
//! * **Determinism**: node levels come from a hash of the row number and every comparison
//!   orders `(distance, node id)`, so a sequential build (`parallel: false`) gives the same
//!   graph on every run, and searching a given graph is deterministic. The default parallel
//!   build inserts on rayon's pool, one lock per node's neighbour lists; the order of
//!   concurrent updates depends on scheduling, so the graph — and hence which approximate
//!   neighbours a query gets — can differ between runs (recall stays statistically the same).

use super::RetrievalError;
#[cfg(feature = "hnsw")]
use super::flat::validate_vectors;
#[cfg(feature = "hnsw")]
use super::kernel::dot_canonical;
use super::topk::Hit;
#[cfg(feature = "hnsw")]
use super::topk::rank_order;

#[cfg(feature = "hnsw")]
mod build;
#[cfg(feature = "hnsw")]
mod graph;
use serde::{Deserialize, Serialize};

/// Largest `m` accepted.
pub const MAX_M: usize = 256;

/// HNSW build and search parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HnswParams {
    /// Neighbours kept per node and layer (`M`; layer 0 keeps `2M`), 2..=256.
    pub m: usize,
    /// Candidate list width while building, `m..=100_000`.
    pub ef_construction: usize,
    /// Default candidate list width while searching (`>= 1`; a search uses `max(ef, k)`).
    pub ef_search: usize,
    /// Insert on rayon's pool (fast, not reproducible) or one by one (reproducible).
    pub parallel: bool,
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams {
            m: 16,
            ef_construction: 200,
            ef_search: 128,
            parallel: true,
        }
    }
}

impl HnswParams {
    /// Checks the ranges documented on each field.
    pub fn validate(&self) -> Result<(), RetrievalError> {
        if !(2..=MAX_M).contains(&self.m) {
            return Err(RetrievalError::Config(format!(
                "HNSW m = {} outside 2..={MAX_M}",
                self.m
            )));
        }
        if !(self.m..=100_000).contains(&self.ef_construction) {
            return Err(RetrievalError::Config(format!(
                "HNSW ef_construction = {} outside m..=100000 (m = {})",
                self.ef_construction, self.m
            )));
        }
        if !(1..=100_000).contains(&self.ef_search) {
            return Err(RetrievalError::Config(format!(
                "HNSW ef_search = {} outside 1..=100000",
                self.ef_search
            )));
        }
        Ok(())
    }
}

#[cfg(feature = "hnsw")]
/// `1 - <a, b>`, clamped into `[0, 2]`; never NaN, never panics (mismatched lengths compare
/// the common prefix; the index never passes such pairs).
#[derive(Clone, Copy, Debug, Default)]
pub struct InnerProductDistance;

#[cfg(feature = "hnsw")]
impl InnerProductDistance {
    /// `1 - <va, vb>` (vectorised [`dot`]), clamped into `[0, 2]`, 2 for a NaN.
    pub fn eval(&self, va: &[f32], vb: &[f32]) -> f32 {
        let d = 1.0 - dot(va, vb);
        if d.is_nan() { 2.0 } else { d.clamp(0.0, 2.0) }
    }
}

#[cfg(feature = "hnsw")]
/// Dot product with 16 independent accumulators (vectorises to SIMD lanes).
#[inline(always)]
fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 16];
    let mut ca = a.chunks_exact(16);
    let mut cb = b.chunks_exact(16);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..16 {
            acc[l] = x[l].mul_add(y[l], acc[l]);
        }
    }
    let mut tail = 0f32;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail = x.mul_add(*y, tail);
    }
    let mut s = [0f32; 8];
    for l in 0..8 {
        s[l] = acc[l] + acc[l + 8];
    }
    (s[0] + s[4]) + (s[1] + s[5]) + ((s[2] + s[6]) + (s[3] + s[7])) + tail
}

#[cfg(all(feature = "hnsw", target_arch = "x86_64"))]
#[target_feature(enable = "avx,fma")]
fn dot_avx_fma(a: &[f32], b: &[f32]) -> f32 {
    dot_lanes(a, b)
}

#[cfg(feature = "hnsw")]
/// Whether this CPU has 256-bit AVX and FMA (detected once).
fn has_avx_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static AVX_FMA: OnceLock<bool> = OnceLock::new();
        *AVX_FMA.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx") && std::arch::is_x86_feature_detected!("fma")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(feature = "hnsw")]
/// Vectorised dot product (AVX+FMA when available, else the portable 16-lane loop; both
/// give identical results since they perform the same fused operations in the same order).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_avx_fma() {
        // SAFETY: the CPU supports AVX and FMA (checked above).
        return unsafe { dot_avx_fma(a, b) };
    }
    dot_lanes(a, b)
}

#[cfg(all(feature = "hnsw", target_arch = "x86_64"))]
#[target_feature(enable = "fma")]
fn dot_canonical_fma(q: &[f32], x: &[f32]) -> f32 {
    q.iter().zip(x).fold(0f32, |acc, (a, b)| a.mul_add(*b, acc))
}

#[cfg(feature = "hnsw")]
/// [`dot_canonical`], with the hardware FMA instruction when the CPU has it (the same
/// correctly rounded operations in the same order, so the same bits; without it each
/// `mul_add` is a libm call).
fn canonical(q: &[f32], x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_avx_fma() {
        // SAFETY: the CPU supports FMA (checked above).
        return unsafe { dot_canonical_fma(q, x) };
    }
    dot_canonical(q, x)
}

#[cfg(feature = "hnsw")]
/// Asks the CPU to start loading `row` into cache (a hint; no effect on results).
#[inline(always)]
fn prefetch_row(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in row.chunks(16) {
        // SAFETY: prefetching is a hint that never faults; the pointer is in bounds.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

#[cfg(feature = "hnsw")]
/// An HNSW graph over unit vectors, with its own copy of the rows for exact re-scoring.
///
/// The graph lives in flat adjacency arrays of `u32` row numbers, which the search walks
/// with per-thread reusable scratch: no hash sets, locks, reference counts or allocations
/// per visited node.
pub struct HnswIndex {
    params: HnswParams,
    dim: usize,
    len: usize,
    rows: Vec<f32>,
    graph: graph::Graph,
}

#[cfg(feature = "hnsw")]
impl std::fmt::Debug for HnswIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HnswIndex")
            .field("params", &self.params)
            .field("dim", &self.dim)
            .field("len", &self.len)
            .field("layers", &(self.graph.upper.len() + 1))
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "hnsw")]
impl HnswIndex {
    /// Checks parameters and rows (finite, unit norm within 1e-3 or exactly zero); returns
    /// the row count.
    fn check(dim: usize, data: &[f32], params: &HnswParams) -> Result<usize, RetrievalError> {
        params.validate()?;
        validate_vectors(data, dim, "row")?;
        let len = data.len() / dim;
        if len >= u32::MAX as usize {
            return Err(RetrievalError::Shape(format!(
                "{len} rows exceed u32::MAX - 1"
            )));
        }
        for (i, v) in data.chunks_exact(dim).enumerate() {
            let norm = super::l2_norm(v);
            if norm != 0.0 && (norm - 1.0).abs() > 1e-3 {
                return Err(RetrievalError::Config(format!(
                    "HNSW needs unit or zero vectors (inner-product distance); row {i} has norm {norm:.4}"
                )));
            }
        }
        Ok(len)
    }

    /// Builds the graph over `data` (row-major, `dim` values per row). Rows must be finite and
    /// of unit norm (within 1e-3) or exactly zero; parameters are validated first.
    pub fn new(dim: usize, data: &[f32], params: HnswParams) -> Result<Self, RetrievalError> {
        let len = Self::check(dim, data, &params)?;
        let row = |i: u32| &data[i as usize * dim..(i as usize + 1) * dim];
        let graph = build::build(
            len,
            params.m,
            params.ef_construction,
            params.parallel,
            &|a, b| -dot(row(a), row(b)),
        );
        Ok(HnswIndex {
            params,
            dim,
            len,
            rows: data.to_vec(),
            graph,
        })
    }

    /// Writes the graph (not the rows or parameters) in rulegym's own binary layout, to be
    /// read back by [`with_graph`](Self::with_graph) over the same rows.
    pub fn write_graph(&self, w: &mut dyn std::io::Write) -> Result<(), RetrievalError> {
        self.graph
            .write(w)
            .map_err(|e| RetrievalError::Io("writing HNSW graph".into(), e))
    }

    /// An index over `data` with a graph written by [`write_graph`](Self::write_graph) (no
    /// build). Rows and parameters are validated as in [`new`](Self::new), and the graph's
    /// node ids and offsets are checked against the row count; a malformed graph is a
    /// [`RetrievalError::Format`] (a graph written for other rows of the same count is not
    /// detected: it only lowers recall, never the exactness of returned scores).
    pub fn with_graph(
        dim: usize,
        data: &[f32],
        params: HnswParams,
        graph: &mut dyn std::io::Read,
    ) -> Result<Self, RetrievalError> {
        let len = Self::check(dim, data, &params)?;
        let graph = graph::Graph::read(graph, len)?;
        Ok(HnswIndex {
            params,
            dim,
            len,
            rows: data.to_vec(),
            graph,
        })
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &HnswParams {
        &self.params
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

    /// Approximate top-`k` for each query at the default search width.
    pub fn search(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>, RetrievalError> {
        self.search_ef(queries, k, self.params.ef_search)
    }

    /// Approximate top-`k` for each query with candidate list width `max(ef, k)`; hits are
    /// scored with the exact canonical dot product and ordered by score, then lowest index.
    pub fn search_ef(
        &self,
        queries: &[f32],
        k: usize,
        ef: usize,
    ) -> Result<Vec<Vec<Hit>>, RetrievalError> {
        if k == 0 {
            return Err(RetrievalError::InvalidK(0));
        }
        if ef == 0 || ef > 100_000 {
            return Err(RetrievalError::Config(format!(
                "HNSW ef = {ef} outside 1..=100000"
            )));
        }
        validate_vectors(queries, self.dim, "query")?;
        use rayon::prelude::*;
        Ok(queries
            .par_chunks_exact(self.dim)
            .map(|q| self.search_one(q, k, ef.max(k)))
            .collect())
    }

    fn row(&self, i: u32) -> &[f32] {
        let i = i as usize;
        &self.rows[i * self.dim..(i + 1) * self.dim]
    }

    /// One query: graph search with the fast dot product (it only steers the walk), then the
    /// `k` nearest found re-scored with the canonical dot product and ranked.
    fn search_one(&self, q: &[f32], k: usize, ef: usize) -> Vec<Hit> {
        let found = self
            .graph
            .search(ef, |j| -dot(q, self.row(j)), |j| prefetch_row(self.row(j)));
        let mut hits: Vec<Hit> = found
            .iter()
            .take(k)
            .map(|&(_, j)| Hit {
                index: j,
                score: canonical(q, self.row(j)),
            })
            .collect();
        hits.sort_by(rank_order);
        hits
    }
}

/// Mean recall@k of `approx` against `exact` (the fraction of each exact top-k found in the
/// approximate top-k, averaged over queries; 1.0 for no queries).
pub fn recall_at_k(approx: &[Vec<Hit>], exact: &[Vec<Hit>], k: usize) -> f64 {
    if exact.is_empty() {
        return 1.0;
    }
    let mut sum = 0.0;
    for (a, e) in approx.iter().zip(exact) {
        let want: Vec<u32> = e.iter().take(k).map(|h| h.index).collect();
        if want.is_empty() {
            sum += 1.0;
            continue;
        }
        let got = a.iter().take(k).filter(|h| want.contains(&h.index)).count();
        sum += got as f64 / want.len() as f64;
    }
    sum / exact.len() as f64
}

#[cfg(feature = "hnsw")]
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_never_leaves_its_range() {
        let a = [1.0f32, 0.0];
        let d = InnerProductDistance;
        assert_eq!(d.eval(&a, &a), 0.0);
        assert_eq!(d.eval(&[1.0000001, 0.0], &[1.0000001, 0.0]), 0.0);
        assert_eq!(d.eval(&a, &[-1.0, 0.0]), 2.0);
        assert_eq!(d.eval(&a, &[f32::NAN, 0.0]), 2.0);
        assert_eq!(d.eval(&a, &[1.0]), 0.0);
        let v: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin()).collect();
        let w: Vec<f32> = (0..37).map(|i| (i as f32 * 0.11).cos()).collect();
        assert!((dot(&v, &w) - dot_canonical(&v, &w)).abs() < 1e-5);
        assert_eq!(dot(&v, &w), dot_lanes(&v, &w));
        for n in [0, 1, 7, 37, 384] {
            let v: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let w: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            assert_eq!(canonical(&v, &w).to_bits(), dot_canonical(&v, &w).to_bits());
        }
    }

    #[test]
    fn bad_parameters_are_errors_not_exits() {
        let data = [1.0f32, 0.0, 0.0, 1.0];
        for m in [0, 1, 257, 10_000] {
            let p = HnswParams {
                m,
                ..Default::default()
            };
            assert!(matches!(
                HnswIndex::new(2, &data, p),
                Err(RetrievalError::Config(_))
            ));
        }
        let p = HnswParams {
            ef_construction: 3,
            ..Default::default()
        };
        assert!(HnswIndex::new(2, &data, p).is_err());
        let p = HnswParams {
            ef_search: 0,
            ..Default::default()
        };
        assert!(HnswIndex::new(2, &data, p).is_err());
        assert!(HnswIndex::new(2, &[3.0, 0.0], HnswParams::default()).is_err());
        let idx = HnswIndex::new(2, &data, HnswParams::default()).unwrap();
        assert!(matches!(
            idx.search(&[1.0, 0.0], 0),
            Err(RetrievalError::InvalidK(0))
        ));
        assert!(idx.search(&[f32::NAN, 0.0], 1).is_err());
        let hits = idx.search(&[1.0, 0.0], 5).unwrap();
        assert_eq!(
            hits[0].iter().map(|h| h.index).collect::<Vec<_>>(),
            vec![0, 1]
        );
    }
}

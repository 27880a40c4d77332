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
        Ok(Self::assemble(params, dim, len, data, graph))
    }

    fn assemble(
        params: HnswParams,
        dim: usize,
        len: usize,
        data: &[f32],
        graph: graph::Graph,
    ) -> Self {
        HnswIndex {
            params,
            dim,
            len,
            rows: data.to_vec(),
            graph,
        }
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
        Ok(Self::assemble(params, dim, len, data, graph))
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

#[cfg(feature = "hnsw")]
mod graph {
    //! The HNSW graph as flat adjacency arrays of `u32` node ids (node id = row index), searched
    //! with per-thread reusable scratch.
    //!
    //! * Layer 0 is one CSR adjacency over all nodes; each upper layer is a CSR adjacency over the
    //!   sorted ids of its nodes (looked up by binary search: upper layers are only walked by the
    //!   greedy descent, a few dozen steps per query).
    //! * A search descends greedily (`ef = 1`, repeated until no neighbour is closer) from the
    //!   entry point through the upper layers, then runs the usual best-first search of width `ef`
    //!   on layer 0. Candidates are `u64` keys `(distance bits, node id)`, so every comparison,
    //!   tie included, is a total order on `(distance, id)`: the search is deterministic.
    //! * Scratch per thread: a visited array of `u16` generation stamps (cleared only when the
    //!   stamp wraps), the two heaps and a neighbour buffer, all reused, so a search allocates
    //!   only its result.

    use super::RetrievalError;
    use std::cell::RefCell;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::io::{Read, Write};

    /// One upper layer: its nodes (sorted ids) and their neighbour lists in CSR form.
    #[derive(Clone, Debug, Default, PartialEq)]
    pub(super) struct UpperLayer {
        pub ids: Vec<u32>,
        pub offsets: Vec<u32>,
        pub neighbours: Vec<u32>,
    }

    impl UpperLayer {
        fn of(&self, node: u32) -> &[u32] {
            match self.ids.binary_search(&node) {
                Ok(i) => &self.neighbours[self.offsets[i] as usize..self.offsets[i + 1] as usize],
                Err(_) => &[],
            }
        }
    }

    /// A compact HNSW graph over `len` nodes.
    #[derive(Clone, Debug, Default, PartialEq)]
    pub(super) struct Graph {
        /// Entry node (on the top layer); meaningless when `len == 0`.
        pub entry: u32,
        /// Layer 0: `offsets[i]..offsets[i + 1]` indexes node `i`'s neighbours (`len + 1` offsets).
        pub offsets: Vec<u32>,
        pub neighbours: Vec<u32>,
        /// Layers 1, 2, ... (bottom-up).
        pub upper: Vec<UpperLayer>,
    }

    impl Graph {
        /// Builds the graph from per-node, per-layer neighbour lists (`lists[node][layer]`; a node
        /// is on layers `0..lists[node].len()`). Ids `>= len`, self loops and repeated ids are
        /// dropped.
        pub fn from_lists(lists: &[Vec<Vec<u32>>], entry: u32) -> Graph {
            let len = lists.len();
            let top = lists.iter().map(|l| l.len()).max().unwrap_or(0);
            let clean = |node: usize, list: &[u32], out: &mut Vec<u32>| {
                let start = out.len();
                for &j in list {
                    if (j as usize) < len && j as usize != node && !out[start..].contains(&j) {
                        out.push(j);
                    }
                }
            };
            let mut offsets = Vec::with_capacity(len + 1);
            let mut neighbours = Vec::new();
            offsets.push(0);
            for (node, l) in lists.iter().enumerate() {
                if let Some(list) = l.first() {
                    clean(node, list, &mut neighbours);
                }
                offsets.push(neighbours.len() as u32);
            }
            let mut upper = Vec::new();
            for layer in 1..top {
                let mut u = UpperLayer {
                    offsets: vec![0],
                    ..Default::default()
                };
                for (node, l) in lists.iter().enumerate() {
                    if let Some(list) = l.get(layer) {
                        u.ids.push(node as u32);
                        clean(node, list, &mut u.neighbours);
                        u.offsets.push(u.neighbours.len() as u32);
                    }
                }
                upper.push(u);
            }
            Graph {
                entry: if (entry as usize) < len { entry } else { 0 },
                offsets,
                neighbours,
                upper,
            }
        }

        fn len(&self) -> usize {
            self.offsets.len().saturating_sub(1)
        }

        #[inline]
        fn base(&self, node: u32) -> &[u32] {
            let i = node as usize;
            &self.neighbours[self.offsets[i] as usize..self.offsets[i + 1] as usize]
        }

        /// The up to `ef` nearest nodes to `q` found by the search, nearest first (ties: lower id),
        /// as `(distance, id)`; `dist(q, id)` is the traversal distance.
        pub fn search(
            &self,
            ef: usize,
            dist: impl Fn(u32) -> f32,
            prefetch: impl Fn(u32),
        ) -> Vec<(f32, u32)> {
            if self.len() == 0 {
                return Vec::new();
            }
            let mut cur = self.entry;
            let mut cur_key = key(dist(cur), cur);
            for layer in self.upper.iter().rev() {
                loop {
                    let mut changed = false;
                    for &j in layer.of(cur) {
                        let k = key(dist(j), j);
                        if k < cur_key {
                            cur_key = k;
                            cur = j;
                            changed = true;
                        }
                    }
                    if !changed {
                        break;
                    }
                }
            }
            SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                s.search_base(self, cur_key, ef.max(1), &dist, &prefetch)
            })
        }

        /// Writes the graph (little-endian `u32`s after a magic line).
        pub fn write(&self, w: &mut dyn Write) -> std::io::Result<()> {
            let mut put = |xs: &[u32]| -> std::io::Result<()> {
                w.write_all(&(xs.len() as u64).to_le_bytes())?;
                w.write_all(bytemuck::cast_slice(xs))
            };
            put(&[MAGIC, self.entry, self.upper.len() as u32])?;
            put(&self.offsets)?;
            put(&self.neighbours)?;
            for u in &self.upper {
                put(&u.ids)?;
                put(&u.offsets)?;
                put(&u.neighbours)?;
            }
            Ok(())
        }

        /// Reads a graph written by [`write`](Self::write) for `len` nodes and checks every id and
        /// offset, so a malformed file is an error, never an out-of-bounds access.
        pub fn read(r: &mut dyn Read, len: usize) -> Result<Graph, RetrievalError> {
            let io = |e: std::io::Error| RetrievalError::Io("reading HNSW graph".into(), e);
            let bad = |what: &str| RetrievalError::Format(format!("HNSW graph: {what}"));
            let mut get = |max: usize| -> Result<Vec<u32>, RetrievalError> {
                let mut n = [0u8; 8];
                r.read_exact(&mut n).map_err(io)?;
                let n = u64::from_le_bytes(n);
                if n > max as u64 {
                    return Err(bad("array longer than the graph allows"));
                }
                let mut bytes = vec![0u8; n as usize * 4];
                r.read_exact(&mut bytes).map_err(io)?;
                Ok(bytes
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect())
            };
            let head = get(3)?;
            if head.len() != 3 || head[0] != MAGIC {
                return Err(bad("not a rulegym HNSW graph"));
            }
            let (entry, layers) = (head[1], head[2] as usize);
            if layers > 64 || (len > 0 && entry as usize >= len) {
                return Err(bad("entry point or layer count out of range"));
            }
            let max = len.saturating_mul(512).max(1);
            let check_csr = |offsets: &[u32], neighbours: &[u32], nodes: usize| {
                offsets.len() == nodes + 1
                    && offsets[0] == 0
                    && offsets.windows(2).all(|w| w[0] <= w[1])
                    && offsets[nodes] as usize == neighbours.len()
                    && neighbours.iter().all(|&j| (j as usize) < len)
            };
            let offsets = get(len + 1)?;
            let neighbours = get(max)?;
            if !check_csr(&offsets, &neighbours, len) {
                return Err(bad("malformed layer 0"));
            }
            let mut upper = Vec::with_capacity(layers);
            for _ in 0..layers {
                let ids = get(len)?;
                let offsets = get(len + 1)?;
                let neighbours = get(max)?;
                if !ids.windows(2).all(|w| w[0] < w[1])
                    || ids.last().is_some_and(|&i| i as usize >= len)
                    || !check_csr(&offsets, &neighbours, ids.len())
                {
                    return Err(bad("malformed upper layer"));
                }
                upper.push(UpperLayer {
                    ids,
                    offsets,
                    neighbours,
                });
            }
            Ok(Graph {
                entry,
                offsets,
                neighbours,
                upper,
            })
        }
    }

    const MAGIC: u32 = u32::from_le_bytes(*b"RGH1");

    /// `(distance, id)` as one `u64` whose integer order is the lexicographic order (distances
    /// mapped to their total-order bits; never NaN here).
    #[inline(always)]
    pub(super) fn key(d: f32, id: u32) -> u64 {
        let b = d.to_bits();
        let o = if b >> 31 == 1 { !b } else { b | 0x8000_0000 };
        ((o as u64) << 32) | id as u64
    }

    #[inline(always)]
    pub(super) fn unkey(k: u64) -> (f32, u32) {
        let o = (k >> 32) as u32;
        let b = if o >> 31 == 1 { o & 0x7fff_ffff } else { !o };
        (f32::from_bits(b), k as u32)
    }

    #[derive(Default)]
    struct Scratch {
        visited: Vec<u16>,
        stamp: u16,
        candidates: BinaryHeap<Reverse<u64>>,
        results: BinaryHeap<u64>,
        fresh: Vec<u32>,
    }

    thread_local! {
        static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    }

    impl Scratch {
        /// A new visited generation for `len` nodes.
        fn reset(&mut self, len: usize) {
            if self.visited.len() < len {
                self.visited.resize(len, 0);
            }
            self.stamp = self.stamp.wrapping_add(1);
            if self.stamp == 0 {
                self.visited.fill(0);
                self.stamp = 1;
            }
            self.candidates.clear();
            self.results.clear();
        }

        fn search_base(
            &mut self,
            g: &Graph,
            start: u64,
            ef: usize,
            dist: &impl Fn(u32) -> f32,
            prefetch: &impl Fn(u32),
        ) -> Vec<(f32, u32)> {
            self.reset(g.len());
            let stamp = self.stamp;
            let Scratch {
                visited,
                candidates,
                results,
                fresh,
                ..
            } = self;
            visited[start as u32 as usize] = stamp;
            candidates.push(Reverse(start));
            results.push(start);
            while let Some(Reverse(c)) = candidates.pop() {
                let worst = *results.peek().unwrap_or(&u64::MAX);
                if c > worst && results.len() >= ef {
                    break;
                }
                fresh.clear();
                for &j in g.base(c as u32) {
                    let v = &mut visited[j as usize];
                    if *v != stamp {
                        *v = stamp;
                        fresh.push(j);
                    }
                }
                if let Some(&first) = fresh.first() {
                    prefetch(first);
                }
                for i in 0..fresh.len() {
                    let j = fresh[i];
                    if let Some(&next) = fresh.get(i + 1) {
                        prefetch(next);
                    }
                    let k = key(dist(j), j);
                    if results.len() < ef || k < *results.peek().unwrap_or(&u64::MAX) {
                        candidates.push(Reverse(k));
                        results.push(k);
                        if results.len() > ef {
                            results.pop();
                        }
                    }
                }
            }
            let mut out: Vec<u64> = results.drain().collect();
            out.sort_unstable();
            out.into_iter().map(unkey).collect()
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn keys_order_as_distance_then_id() {
            let ds = [-2.0f32, -1.0, -0.0, 0.0, 1e-30, 0.5, 1.0, 2.0];
            for w in ds.windows(2) {
                assert!(key(w[0], 7) <= key(w[1], 3) || w[0] == w[1]);
                assert!(key(w[0], 1) < key(w[0], 2));
            }
            for &d in &ds {
                assert_eq!(unkey(key(d, 9)), (d, 9));
            }
        }

        #[test]
        fn graph_round_trips_and_rejects_garbage() {
            let lists = vec![
                vec![vec![1, 2, 1, 9], vec![2]],
                vec![vec![0, 2]],
                vec![vec![0, 1, 2], vec![0]],
            ];
            let g = Graph::from_lists(&lists, 2);
            assert_eq!(g.base(0), &[1, 2]);
            assert_eq!(g.base(2), &[0, 1]);
            assert_eq!(g.upper[0].of(0), &[2]);
            assert_eq!(g.upper[0].of(1), &[] as &[u32]);
            let mut bytes = Vec::new();
            g.write(&mut bytes).unwrap();
            assert_eq!(Graph::read(&mut &bytes[..], 3).unwrap(), g);
            assert!(Graph::read(&mut &bytes[..], 2).is_err());
            assert!(Graph::read(&mut &bytes[..bytes.len() - 1], 3).is_err());
            let mut evil = bytes.clone();
            let n = evil.len();
            evil[n - 4] = 200;
            assert!(Graph::read(&mut &evil[..], 3).is_err());
            assert!(Graph::read(&mut &b"nonsense"[..], 3).is_err());
        }
    }
}

#[cfg(feature = "hnsw")]
mod build {
    //! rulegym's own HNSW construction (Malkov & Yashunin, with the neighbour-selection heuristic
    //! on both the new node's list and the reverse updates), producing a [`Graph`].
    //!
    //! * Node levels come from a hash of the node id (not from an RNG shared between threads), so
    //!   they do not depend on insertion order or scheduling.
    //! * Every distance comparison orders `(distance, node id)`, so a sequential build is
    //!   reproducible; a parallel build inserts on rayon's pool with one lock per node's
    //!   neighbour lists, and the order of concurrent updates depends on scheduling.

    use super::graph::{Graph, key, unkey};
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::sync::{Mutex, RwLock};

    thread_local! {
        /// Visited marks (generation stamps) for the build's layer searches.
        static VISITED: std::cell::RefCell<(Vec<u16>, u16)> = const { std::cell::RefCell::new((Vec::new(), 0)) };
    }

    /// Highest level a node may get.
    const MAX_LEVEL: usize = 15;

    /// The level of node `i` for connectivity `m`: `floor(-ln(u) / ln(m))`, `u` uniform in
    /// `(0, 1]` from a hash of `i`.
    fn level(i: usize, m: usize) -> usize {
        let mut z = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let u = ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        ((-u.ln() / (m as f64).ln()) as usize).min(MAX_LEVEL)
    }

    struct Builder<'a, D: Fn(u32, u32) -> f32 + Sync> {
        m: usize,
        ef: usize,
        dist: &'a D,
        /// `links[i][l]`: node `i`'s neighbours on layer `l`.
        links: Vec<Mutex<Vec<Vec<u32>>>>,
        /// `(entry node, its level)`, `None` before the first insertion.
        entry: RwLock<Option<(u32, usize)>>,
    }

    /// Builds the graph over `len` nodes; `dist(a, b)` is the distance between nodes `a` and `b`.
    pub(super) fn build<D: Fn(u32, u32) -> f32 + Sync>(
        len: usize,
        m: usize,
        ef_construction: usize,
        parallel: bool,
        dist: &D,
    ) -> Graph {
        let b = Builder {
            m,
            ef: ef_construction.max(m),
            dist,
            links: (0..len)
                .map(|i| Mutex::new(vec![Vec::new(); level(i, m) + 1]))
                .collect(),
            entry: RwLock::new(None),
        };
        // The first node (lowest id) is inserted alone, so both modes start the same way.
        if parallel && len > 1 {
            use rayon::prelude::*;
            b.insert(0);
            (1..len as u32).into_par_iter().for_each(|i| b.insert(i));
        } else {
            (0..len as u32).for_each(|i| b.insert(i));
        }
        let entry = b
            .entry
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .map_or(0, |e| e.0);
        let lists: Vec<Vec<Vec<u32>>> = b
            .links
            .into_iter()
            .map(|l| l.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect();
        Graph::from_lists(&lists, entry)
    }

    impl<D: Fn(u32, u32) -> f32 + Sync> Builder<'_, D> {
        fn neighbours(&self, node: u32, layer: usize, out: &mut Vec<u32>) {
            out.clear();
            let links = self.links[node as usize]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(l) = links.get(layer) {
                out.extend_from_slice(l);
            }
        }

        fn insert(&self, q: u32) {
            let lvl = level(q as usize, self.m);
            let Some((entry, top)) = *self.entry.read().unwrap_or_else(|e| e.into_inner()) else {
                let mut e = self.entry.write().unwrap_or_else(|e| e.into_inner());
                if e.is_none() {
                    *e = Some((q, lvl));
                    return;
                }
                drop(e);
                return self.insert(q);
            };
            let mut buf = Vec::new();
            let mut cur = key((self.dist)(q, entry), entry);
            for layer in (lvl + 1..=top).rev() {
                loop {
                    let mut changed = false;
                    self.neighbours(unkey(cur).1, layer, &mut buf);
                    for &j in &buf {
                        let k = key((self.dist)(q, j), j);
                        if k < cur {
                            cur = k;
                            changed = true;
                        }
                    }
                    if !changed {
                        break;
                    }
                }
            }
            let mut starts = vec![cur];
            for layer in (0..=lvl.min(top)).rev() {
                let found = self.search_layer(q, &starts, layer);
                let max = if layer == 0 { 2 * self.m } else { self.m };
                let chosen = self.select(&found, self.m);
                {
                    let mut links = self.links[q as usize]
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    links[layer] = chosen.iter().map(|&k| unkey(k).1).collect();
                }
                for &c in &chosen {
                    let n = unkey(c).1;
                    let mut links = self.links[n as usize]
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    let list = &mut links[layer];
                    if list.contains(&q) {
                        continue;
                    }
                    if list.len() < max {
                        list.push(q);
                    } else {
                        let mut cands: Vec<u64> = list
                            .iter()
                            .chain(std::iter::once(&q))
                            .map(|&j| key((self.dist)(n, j), j))
                            .collect();
                        cands.sort_unstable();
                        *list = self
                            .select(&cands, max)
                            .iter()
                            .map(|&k| unkey(k).1)
                            .collect();
                    }
                }
                starts = found;
            }
            if lvl > top {
                let mut e = self.entry.write().unwrap_or_else(|e| e.into_inner());
                if e.is_none_or(|(_, t)| lvl > t) {
                    *e = Some((q, lvl));
                }
            }
        }

        /// Best-first search of width `ef` on `layer` from `starts`; the found keys, nearest first.
        fn search_layer(&self, q: u32, starts: &[u64], layer: usize) -> Vec<u64> {
            VISITED.with(|v| {
                let mut v = v.borrow_mut();
                let (marks, stamp) = &mut *v;
                if marks.len() < self.links.len() {
                    marks.resize(self.links.len(), 0);
                }
                *stamp = stamp.wrapping_add(1);
                if *stamp == 0 {
                    marks.fill(0);
                    *stamp = 1;
                }
                self.search_marked(q, starts, layer, marks, *stamp)
            })
        }

        fn search_marked(
            &self,
            q: u32,
            starts: &[u64],
            layer: usize,
            marks: &mut [u16],
            stamp: u16,
        ) -> Vec<u64> {
            let mut visit = |j: u32| {
                let m = &mut marks[j as usize];
                let new = *m != stamp;
                *m = stamp;
                new
            };
            visit(q);
            let mut cands: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
            let mut results: BinaryHeap<u64> = BinaryHeap::new();
            for &s in starts {
                if visit(unkey(s).1) {
                    cands.push(Reverse(s));
                    results.push(s);
                }
            }
            while results.len() > self.ef {
                results.pop();
            }
            let mut buf = Vec::new();
            while let Some(Reverse(c)) = cands.pop() {
                if results.len() >= self.ef && c > *results.peek().unwrap_or(&u64::MAX) {
                    break;
                }
                self.neighbours(unkey(c).1, layer, &mut buf);
                for &j in &buf {
                    if !visit(j) {
                        continue;
                    }
                    let k = key((self.dist)(q, j), j);
                    if results.len() < self.ef || k < *results.peek().unwrap_or(&u64::MAX) {
                        cands.push(Reverse(k));
                        results.push(k);
                        if results.len() > self.ef {
                            results.pop();
                        }
                    }
                }
            }
            results.into_sorted_vec()
        }

        /// The heuristic: walk `cands` (keys relative to some node, nearest first) and keep a
        /// candidate only if it is nearer to that node than to every candidate kept so far, up to
        /// `max`.
        fn select(&self, cands: &[u64], max: usize) -> Vec<u64> {
            let mut kept: Vec<u64> = Vec::with_capacity(max);
            for &c in cands {
                if kept.len() >= max {
                    break;
                }
                let (d, j) = unkey(c);
                if kept.iter().all(|&k| (self.dist)(j, unkey(k).1) > d) {
                    kept.push(c);
                }
            }
            kept
        }
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

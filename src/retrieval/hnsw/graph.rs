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

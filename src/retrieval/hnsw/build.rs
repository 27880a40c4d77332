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

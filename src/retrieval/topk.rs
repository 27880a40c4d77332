//! Top-k selection with the tie rule "higher score first, then lower index".

use std::cmp::Ordering;

/// One search result: a row of the index and its inner-product score.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Hit {
    /// Row number in the index (0-based).
    pub index: u32,
    /// Inner product of the query and the row.
    pub score: f32,
}

/// The ranking order: higher score first, ties broken by the lower index. Scores are never NaN
/// (inputs are validated), so this is a total order.
#[inline]
pub fn rank_order(a: &Hit, b: &Hit) -> Ordering {
    b.score
        .partial_cmp(&a.score)
        .unwrap_or(Ordering::Equal)
        .then(a.index.cmp(&b.index))
}

/// Streaming top-k: amortised O(1) per candidate, O(k) memory (a buffer of at most `2k` hits
/// compacted with a linear-time selection).
#[derive(Clone, Debug)]
pub struct TopK {
    k: usize,
    buf: Vec<Hit>,
    /// Once full, the worst kept hit; a candidate must rank before it.
    worst: Option<Hit>,
}

impl TopK {
    /// An empty selection of the best `k` hits (`k >= 1`).
    pub fn new(k: usize) -> Self {
        let k = k.max(1);
        TopK {
            k,
            buf: Vec::with_capacity(2 * k),
            worst: None,
        }
    }

    /// A cheap pre-filter: candidates with a score below this can never enter.
    #[inline(always)]
    pub fn threshold(&self) -> f32 {
        match self.worst {
            Some(w) => w.score,
            None => f32::NEG_INFINITY,
        }
    }

    /// Offers a candidate.
    #[inline]
    pub fn push(&mut self, index: u32, score: f32) {
        let hit = Hit { index, score };
        if let Some(w) = self.worst
            && rank_order(&hit, &w) != Ordering::Less
        {
            return;
        }
        self.buf.push(hit);
        if self.buf.len() >= 2 * self.k {
            self.compact();
        }
    }

    fn compact(&mut self) {
        if self.buf.len() > self.k {
            self.buf.select_nth_unstable_by(self.k - 1, rank_order);
            self.buf.truncate(self.k);
        }
        if self.buf.len() == self.k {
            // After the selection the k-th best sits at position k - 1; find it regardless.
            self.worst = self.buf.iter().copied().max_by(rank_order);
        }
    }

    /// Merges another selection into this one.
    pub fn merge(&mut self, other: TopK) {
        for h in other.buf {
            self.push(h.index, h.score);
        }
    }

    /// The kept hits, best first.
    pub fn into_sorted(mut self) -> Vec<Hit> {
        self.compact();
        self.buf.sort_unstable_by(rank_order);
        self.buf.truncate(self.k);
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_go_to_the_lowest_index_in_any_arrival_order() {
        let mut t = TopK::new(2);
        for i in [5u32, 3, 9, 1, 7] {
            t.push(i, 1.0);
        }
        let got: Vec<u32> = t.into_sorted().iter().map(|h| h.index).collect();
        assert_eq!(got, vec![1, 3]);
    }
}

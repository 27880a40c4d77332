//! Friendships: the random graph G(n, p = k/n) over everyone (friends cross family trees), drawn
//! from one stream of the master seed by geometric skipping (Batagelj-Brandes), O(n + edges).

use super::PersonId;
use crate::seed;
use rand::Rng;

/// Sorted friend lists (symmetric, no self-loops) for `n` people with expected degree `k`.
pub(crate) fn sample(master: u64, n: usize, k: f64) -> Vec<Vec<PersonId>> {
    let mut friends = vec![Vec::new(); n];
    if n < 2 || k <= 0.0 {
        return friends;
    }
    let p = (k / n as f64).min(1.0);
    let mut rng = seed::stream(master, "friendship", 0);
    // Walk the lower triangle (v > w) in row-major order, skipping Geometric(p) pairs each time.
    let log_q = (1.0 - p).ln();
    let (mut v, mut w): (usize, i64) = (1, -1);
    while v < n {
        let skip = if p >= 1.0 {
            0
        } else {
            let r: f64 = 1.0 - rng.random::<f64>();
            (r.ln() / log_q).floor() as i64
        };
        w += 1 + skip;
        while v < n && w >= v as i64 {
            w -= v as i64;
            v += 1;
        }
        if v < n {
            friends[v].push(w as PersonId);
            friends[w as usize].push(v as PersonId);
        }
    }
    for list in &mut friends {
        list.sort_unstable();
    }
    friends
}

//! Seed derivation: every random choice in rulegym draws from a ChaCha stream keyed by
//! `(seed, label, index)`, so items are independent of generation order and thread count.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;
use sha2::{Digest, Sha256};

/// A ChaCha8 stream for item `index` of the generator `label` under the master `seed`.
///
/// The 256-bit ChaCha key is SHA-256 over the three parts (length-prefixed label), so streams
/// for different labels or indices never overlap and never depend on how many items were drawn
/// before. Cost: one SHA-256 block (~0.2 µs).
pub fn stream(seed: u64, label: &str, index: u64) -> ChaCha8Rng {
    let mut hasher = Sha256::new();
    hasher.update(b"rulegym-seed-v1");
    hasher.update(seed.to_le_bytes());
    hasher.update((label.len() as u64).to_le_bytes());
    hasher.update(label.as_bytes());
    hasher.update(index.to_le_bytes());
    ChaCha8Rng::from_seed(hasher.finalize().into())
}

/// A child seed for sharded generation: shard `index` of `label` under `seed`.
pub fn derive(seed: u64, label: &str, index: u64) -> u64 {
    use rand::RngCore;
    stream(seed, label, index).next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn streams_are_pinned() {
        // Value-stability: changing these breaks every dataset; bump the dataset version if so.
        let a = stream(1, "universe", 0).next_u64();
        let b = stream(1, "universe", 0).next_u64();
        assert_eq!(a, b);
        assert_ne!(a, stream(1, "universe", 1).next_u64());
        assert_ne!(a, stream(2, "universe", 0).next_u64());
        assert_ne!(a, stream(1, "universf", 0).next_u64());
        // The values themselves (as rand's `value_stability` tests pin theirs): a change in
        // the hashing, the ChaCha variant or rand_chacha's output order shows here first.
        let pinned: Vec<u64> = [
            (1, "universe", 0),
            (7, "openenv/reset", 0),
            (3, "demo-phrasing", 42),
        ]
        .iter()
        .map(|&(seed, label, index)| stream(seed, label, index).next_u64())
        .collect();
        assert_eq!(
            pinned,
            [
                12_534_255_240_717_334_834,
                12_482_815_541_558_099_502,
                9_351_343_171_090_968_883
            ]
        );
    }
}

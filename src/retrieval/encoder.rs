//! Text encoders: a batch of texts in, L2-normalised `f32` vectors out.
//!
//! [`BuiltinEncoder`] is the default and needs no download: a hashed TF-IDF embedding over
//! word unigrams, word bigrams and character trigrams, fitted on the corpus (document
//! frequencies) and projected into a fixed dimension with signed feature hashing.

use super::RetrievalError;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for keys that are already well-mixed 64-bit feature hashes: one multiply instead of
/// SipHash (the maps are only looked up, never iterated in an order that reaches the output).
#[derive(Default, Clone, Copy)]
struct FeatureHasher(u64);

impl Hasher for FeatureHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Feature hash -> value.
type FeatureMap<V> = HashMap<u64, V, BuildHasherDefault<FeatureHasher>>;

/// Whether a text is a search query or a corpus passage (some models prefix them differently).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKind {
    /// A search query.
    Query,
    /// A corpus passage.
    Passage,
}

/// A text encoder. Implementations are deterministic: the same text always gives the same
/// vector, independent of the rest of the batch.
pub trait Encoder: Send + Sync {
    /// A string that identifies the encoder and its parameters exactly; an index refuses to be
    /// queried with an encoder of another identity.
    fn identity(&self) -> String;
    /// Output dimension.
    fn dim(&self) -> usize;
    /// Encodes `texts` into `texts.len() * dim()` values (row-major), each row of unit L2 norm,
    /// or all zeros when the text shares no feature with the model's vocabulary.
    fn encode(&self, texts: &[&str], kind: TextKind) -> Result<Vec<f32>, RetrievalError>;
}

/// Parameters of the built-in encoder.
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltinConfig {
    /// Output dimension (number of hash buckets), 16..=65,536.
    pub dim: usize,
    /// Weight of a word unigram feature.
    pub unigram_weight: f32,
    /// Weight of a word bigram feature (captures full names and "mother of").
    pub bigram_weight: f32,
    /// Weight of a character trigram feature (robust to inflection and typos).
    pub trigram_weight: f32,
}

impl Default for BuiltinConfig {
    fn default() -> Self {
        BuiltinConfig {
            dim: 512,
            unigram_weight: 1.0,
            bigram_weight: 1.0,
            trigram_weight: 0.25,
        }
    }
}

impl BuiltinConfig {
    /// Checks ranges: `dim` in 16..=65,536, weights finite and non-negative, not all zero.
    pub fn validate(&self) -> Result<(), RetrievalError> {
        if !(16..=65_536).contains(&self.dim) {
            return Err(RetrievalError::Config(format!(
                "builtin encoder dim {} outside 16..=65536",
                self.dim
            )));
        }
        let w = [self.unigram_weight, self.bigram_weight, self.trigram_weight];
        if w.iter().any(|x| !x.is_finite() || *x < 0.0) || w.iter().all(|x| *x == 0.0) {
            return Err(RetrievalError::Config(
                "builtin encoder weights must be finite, non-negative and not all zero".into(),
            ));
        }
        Ok(())
    }
}

/// Feature kinds, mixed into the feature hash.
const UNI: u8 = 1;
const BI: u8 = 2;
const TRI: u8 = 3;

/// 64-bit FNV-1a, stable across platforms and releases.
fn fnv1a(kind: u8, parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    eat(kind);
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            eat(0xff);
        }
        for &b in *p {
            eat(b);
        }
    }
    h
}

/// The bucket of a feature whose mixed hash is `m` (`m % dim`; the division is only a mask
/// for the default power-of-two dimension).
#[inline]
fn bucket(m: u64, dim: usize) -> usize {
    if dim.is_power_of_two() {
        (m & (dim as u64 - 1)) as usize
    } else {
        (m % dim as u64) as usize
    }
}

/// A final mixer so bucket and sign bits are well spread (splitmix64 finaliser).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Scratch space of [`features`], reused across texts.
#[derive(Default)]
struct Scratch {
    /// The text's words, lower-cased, one after another.
    lower: String,
    /// Each word's byte range in `lower`.
    spans: Vec<(usize, usize)>,
    /// A word between `<` and `>` (its character trigrams).
    padded: Vec<char>,
    /// The features grouped by output bucket ([`Scratch::group`]).
    grouped: Vec<(u64, f32)>,
    /// Bucket `b`'s features are `grouped[starts[b]..starts[b + 1]]`.
    starts: Vec<usize>,
    /// Each feature's bucket.
    buckets: Vec<usize>,
    /// Where the next feature of each bucket goes.
    cursor: Vec<usize>,
}

impl Scratch {
    /// Groups `feats` by output bucket (`mix(h) % dim`, a counting sort), each bucket's
    /// features sorted by hash, so equal hashes are adjacent. A bucket's sum then adds its
    /// features in the order a pass over all of them sorted by hash would, bit for bit, without
    /// sorting the whole text's features.
    fn group(&mut self, feats: &[(u64, f32)], dim: usize) {
        let Scratch {
            grouped,
            starts,
            buckets,
            cursor,
            ..
        } = self;
        starts.clear();
        starts.resize(dim + 1, 0);
        buckets.clear();
        for &(h, _) in feats {
            let b = bucket(mix(h), dim);
            buckets.push(b);
            starts[b + 1] += 1;
        }
        for b in 0..dim {
            starts[b + 1] += starts[b];
        }
        grouped.clear();
        grouped.resize(feats.len(), (0, 0.0));
        cursor.clear();
        cursor.extend_from_slice(&starts[..dim]);
        for (&f, &b) in feats.iter().zip(buckets.iter()) {
            grouped[cursor[b]] = f;
            cursor[b] += 1;
        }
        for b in 0..dim {
            let bucket = &mut grouped[starts[b]..starts[b + 1]];
            if bucket.len() > 1 {
                bucket.sort_unstable_by_key(|f| f.0);
            }
        }
    }

    /// Splits `text` into lower-cased alphanumeric words (Unicode-aware; everything else
    /// separates). ASCII text, which is what generated articles are, skips the per-character
    /// case tables.
    fn split(&mut self, text: &str) {
        self.lower.clear();
        self.spans.clear();
        if text.is_ascii() {
            self.lower.push_str(text);
            self.lower.make_ascii_lowercase();
            let bytes = self.lower.as_bytes();
            let mut start = None;
            for (i, b) in bytes.iter().enumerate() {
                match (b.is_ascii_alphanumeric(), start) {
                    (true, None) => start = Some(i),
                    (false, Some(s)) => {
                        self.spans.push((s, i));
                        start = None;
                    }
                    _ => {}
                }
            }
            if let Some(s) = start {
                self.spans.push((s, bytes.len()));
            }
            return;
        }
        let mut start = None;
        for c in text.chars() {
            if c.is_alphanumeric() {
                start.get_or_insert(self.lower.len());
                self.lower.extend(c.to_lowercase());
            } else if let Some(s) = start.take() {
                self.spans.push((s, self.lower.len()));
            }
        }
        if let Some(s) = start {
            self.spans.push((s, self.lower.len()));
        }
    }
}

/// The distinct features of one text: an open-addressing set of feature hashes, emptied in
/// constant time between texts (each slot carries the text's generation).
#[derive(Default)]
struct Seen {
    /// (hash, generation); a slot of another generation is empty.
    slots: Vec<(u64, u32)>,
    generation: u32,
}

impl Seen {
    /// Empties the set for a text of `n` features.
    fn start(&mut self, n: usize) {
        let want = (2 * n).next_power_of_two().max(64);
        self.generation = self.generation.wrapping_add(1);
        if self.slots.len() < want || self.generation == 0 {
            self.slots.clear();
            self.slots.resize(want, (0, 0));
            self.generation = 1;
        }
    }

    /// Adds `h`; whether it was not in the set yet.
    #[inline]
    fn first(&mut self, h: u64) -> bool {
        let mask = self.slots.len() - 1;
        let mut i = (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize & mask;
        loop {
            let slot = &mut self.slots[i];
            if slot.1 != self.generation {
                *slot = (h, self.generation);
                return true;
            }
            if slot.0 == h {
                return false;
            }
            i = (i + 1) & mask;
        }
    }
}

/// Feature hashes of a text with their kind weights, in text order (duplicates kept).
fn features(text: &str, cfg: &BuiltinConfig, scratch: &mut Scratch, out: &mut Vec<(u64, f32)>) {
    out.clear();
    scratch.split(text);
    let Scratch {
        lower,
        spans,
        padded,
        ..
    } = scratch;
    let word = |&(a, b): &(usize, usize)| &lower.as_bytes()[a..b];
    for (i, span) in spans.iter().enumerate() {
        let w = word(span);
        if cfg.unigram_weight > 0.0 {
            out.push((fnv1a(UNI, &[w]), cfg.unigram_weight));
        }
        if cfg.bigram_weight > 0.0
            && let Some(next) = spans.get(i + 1)
        {
            out.push((fnv1a(BI, &[w, word(next)]), cfg.bigram_weight));
        }
        if cfg.trigram_weight > 0.0 {
            if w.is_ascii() {
                // A character is a byte: the trigrams of `<w>` are its byte windows.
                let n = w.len();
                let at = |j: usize| match j {
                    0 => b'<',
                    j if j == n + 1 => b'>',
                    j => w[j - 1],
                };
                for j in 0..n {
                    out.push((
                        fnv1a(TRI, &[&[at(j), at(j + 1), at(j + 2)]]),
                        cfg.trigram_weight,
                    ));
                }
            } else {
                padded.clear();
                padded.push('<');
                padded.extend(lower[span.0..span.1].chars());
                padded.push('>');
                let mut buf = [0u8; 12];
                for t in padded.windows(3) {
                    let mut n = 0;
                    for c in t {
                        n += c.encode_utf8(&mut buf[n..]).len();
                    }
                    out.push((fnv1a(TRI, &[&buf[..n]]), cfg.trigram_weight));
                }
            }
        }
    }
}

/// The default encoder: corpus-fitted hashed TF-IDF over words, word pairs and character
/// trigrams. Weight of a feature = kind weight x (1 + ln tf) x idf with
/// idf = ln((N + 1) / (df + 1)), so a feature found in every passage counts for nothing and a
/// feature absent from the corpus is dropped (it cannot match). Each feature lands in bucket
/// `h mod dim` with sign from another hash bit; the vector is then L2-normalised.
///
/// Cost: about 1 µs per word; the vocabulary table holds 12 bytes per distinct feature.
#[derive(Clone, Debug)]
pub struct BuiltinEncoder {
    cfg: BuiltinConfig,
    idf: FeatureMap<f32>,
    docs: u64,
    digest: String,
    table: Vec<(u64, u32)>,
}

impl BuiltinEncoder {
    /// Fits document frequencies on `passages`.
    pub fn fit(cfg: BuiltinConfig, passages: &[&str]) -> Result<Self, RetrievalError> {
        cfg.validate()?;
        let mut df: FeatureMap<u32> = FeatureMap::default();
        let mut feats = Vec::new();
        let mut scratch = Scratch::default();
        let mut seen = Seen::default();
        for p in passages {
            features(p, &cfg, &mut scratch, &mut feats);
            seen.start(feats.len());
            for &(h, _) in &feats {
                if seen.first(h) {
                    *df.entry(h).or_insert(0) += 1;
                }
            }
        }
        let mut table: Vec<(u64, u32)> = df.into_iter().collect();
        table.sort_unstable();
        Self::from_table(cfg, passages.len() as u64, &table)
    }

    /// Rebuilds an encoder from a stored document-frequency table (sorted by hash).
    pub fn from_table(
        cfg: BuiltinConfig,
        docs: u64,
        table: &[(u64, u32)],
    ) -> Result<Self, RetrievalError> {
        cfg.validate()?;
        let mut hasher = Sha256::new();
        hasher.update(docs.to_le_bytes());
        let mut idf = FeatureMap::with_capacity_and_hasher(table.len(), Default::default());
        let n = docs as f64;
        for (i, &(h, df)) in table.iter().enumerate() {
            if i > 0 && table[i - 1].0 >= h {
                return Err(RetrievalError::Format(
                    "vocabulary table is not sorted by hash".into(),
                ));
            }
            if df as u64 > docs {
                return Err(RetrievalError::Format(format!(
                    "document frequency {df} exceeds document count {docs}"
                )));
            }
            hasher.update(h.to_le_bytes());
            hasher.update(df.to_le_bytes());
            let w = ((n + 1.0) / (df as f64 + 1.0)).ln() as f32;
            if w > 0.0 {
                idf.insert(h, w);
            }
        }
        let digest = hex::encode(&hasher.finalize()[..8]);
        Ok(BuiltinEncoder {
            cfg,
            idf,
            docs,
            digest,
            table: table.to_vec(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &BuiltinConfig {
        &self.cfg
    }

    /// The fitted document-frequency table, sorted by feature hash.
    pub fn table(&self) -> Vec<(u64, u32)> {
        self.table.clone()
    }

    /// Number of passages the encoder was fitted on.
    pub fn docs(&self) -> u64 {
        self.docs
    }

    /// Encodes one text into `out` (`dim` values).
    fn encode_one(
        &self,
        text: &str,
        scratch: &mut Scratch,
        feats: &mut Vec<(u64, f32)>,
        out: &mut [f32],
    ) {
        features(text, &self.cfg, scratch, feats);
        let dim = self.cfg.dim;
        // Each bucket adds its features in hash order. A short text (a query) has its few
        // features sorted; a passage's hundreds are grouped by bucket instead.
        let sorted: &[(u64, f32)] = if feats.len() * 16 < dim {
            feats.sort_unstable_by_key(|f| f.0);
            feats
        } else {
            scratch.group(feats, dim);
            &scratch.grouped
        };
        let mut i = 0;
        while i < sorted.len() {
            let (h, w) = sorted[i];
            let mut j = i;
            while j < sorted.len() && sorted[j].0 == h {
                j += 1;
            }
            if let Some(idf) = self.idf.get(&h) {
                let tf = (j - i) as f32;
                let m = mix(h);
                let sign = if m >> 63 == 1 { -1.0 } else { 1.0 };
                out[bucket(m, dim)] += sign * w * (1.0 + tf.ln()) * idf;
            }
            i = j;
        }
        let norm = super::l2_norm(out);
        if norm > 0.0 {
            let inv = (1.0 / norm) as f32;
            out.iter_mut().for_each(|x| *x *= inv);
        }
    }
}

impl Encoder for BuiltinEncoder {
    fn identity(&self) -> String {
        format!(
            "builtin-tfidf-v1 dim={} w={},{},{} docs={} vocab={}",
            self.cfg.dim,
            self.cfg.unigram_weight,
            self.cfg.bigram_weight,
            self.cfg.trigram_weight,
            self.docs,
            self.digest
        )
    }

    fn dim(&self) -> usize {
        self.cfg.dim
    }

    fn encode(&self, texts: &[&str], _kind: TextKind) -> Result<Vec<f32>, RetrievalError> {
        use rayon::prelude::*;
        let d = self.cfg.dim;
        let mut out = vec![0f32; texts.len() * d];
        let scratch = || (Scratch::default(), Vec::new());
        let work = |(scratch, feats): &mut (Scratch, Vec<(u64, f32)>),
                    (t, o): (&&str, &mut [f32])| {
            self.encode_one(t, scratch, feats, o)
        };
        if texts.len() >= 64 {
            texts
                .par_iter()
                .zip(out.par_chunks_mut(d))
                .for_each_init(scratch, work);
        } else {
            let mut state = scratch();
            texts
                .iter()
                .zip(out.chunks_mut(d))
                .for_each(|item| work(&mut state, item));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_normalised_deterministic_and_batch_independent() {
        let docs = [
            "The mother of Ann Lee is Mary Lee.",
            "The hobby of Bob Roe is chess.",
        ];
        let enc = BuiltinEncoder::fit(BuiltinConfig::default(), &docs).unwrap();
        let a = enc.encode(&docs, TextKind::Passage).unwrap();
        let b = enc.encode(&docs[1..], TextKind::Passage).unwrap();
        assert_eq!(&a[enc.dim()..], &b[..]);
        let n: f32 = a[..enc.dim()].iter().map(|x| x * x).sum();
        assert!((n - 1.0).abs() < 1e-5);
        let z = enc.encode(&["zzzz qqqq"], TextKind::Query).unwrap();
        assert!(z.iter().all(|x| *x == 0.0));
    }

    #[test]
    fn bad_config_is_an_error() {
        let cfg = BuiltinConfig {
            dim: 3,
            ..Default::default()
        };
        assert!(BuiltinEncoder::fit(cfg, &[]).is_err());
    }
}

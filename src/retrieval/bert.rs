//! BERT-family sentence encoder (feature `bert`): a batched, batch-invariant forward pass on the
//! CPU + Hugging Face tokenizers.
//!
//! Loads a sentence-transformers model directory:
//! * `config.json` (a BERT config: all-MiniLM-L6-v2, e5-base-v2, bge, ...),
//! * `tokenizer.json`,
//! * `model.safetensors` (f32, f16 or bf16 weights, with or without the `bert.` prefix),
//! * `1_Pooling/config.json` (mean or CLS pooling; mean when absent) and
//!   `sentence_bert_config.json` (`max_seq_length`; else the model's position limit).
//!
//! Output: the pooled last hidden state (mean over the text's tokens, or the CLS token),
//! L2-normalised. Prefixes: when `config_sentence_transformers.json` declares `prompts` for
//! `query` and `passage`/`document` they are used; otherwise a model whose directory or
//! `_name_or_path` names E5 (`e5-...`) gets E5's `query: ` / `passage: ` prefixes, as its model
//! card requires; other models get none.
//!
//! **Batch invariance.** A batch is encoded in one pass, and every text gets the bits it gets
//! alone, whatever the batch's composition, the thread count or the instruction set:
//! * the texts' tokens are packed one after another (no padding, so no mask), and every linear
//!   layer is one GEMM over all of them ([`kernel::gemm_par`](super::kernel)) in which each
//!   output is one sequential FMA chain over its own input row;
//! * attention runs per (text, head) over that text's tokens only, with the same kernel;
//! * layer norms, softmax and pooling reduce within one row in a fixed order, and `exp`/`erf`
//!   are polynomial evaluations with fused multiply-adds (no platform libm), so they give the
//!   same bits on every machine.
//!
//! A batch is cut into chunks of at most [`BertEncoder::max_batch_tokens`] tokens (the bound
//! on activation memory); by the invariance above the chunking never changes a vector. Texts
//! longer than the model's limit are truncated to it.

use super::RetrievalError;
use super::encoder::{Encoder, TextKind};
use super::kernel::{self, Isa};
use super::transformer::{Config, Model, Tokens};
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// Pooling over the last hidden state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// Mean over the tokens kept by the attention mask.
    Mean,
    /// The first (CLS) token.
    Cls,
}

/// Default bound on the tokens of one forward pass ([`BertEncoder::max_batch_tokens`]).
pub const DEFAULT_MAX_BATCH_TOKENS: usize = 8192;

/// A sentence-transformers BERT model loaded for inference on the CPU.
pub struct BertEncoder {
    dir: PathBuf,
    model: Model,
    tokenizer: Tokenizer,
    pooling: Pooling,
    max_len: usize,
    max_batch_tokens: usize,
    isa: Isa,
    query_prefix: String,
    passage_prefix: String,
    identity: String,
}

impl std::fmt::Debug for BertEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertEncoder")
            .field("dir", &self.dir)
            .field("dim", &self.model.hidden)
            .field("layers", &self.model.depth())
            .field("pooling", &self.pooling)
            .field("max_len", &self.max_len)
            .field("max_batch_tokens", &self.max_batch_tokens)
            .field("query_prefix", &self.query_prefix)
            .field("passage_prefix", &self.passage_prefix)
            .finish_non_exhaustive()
    }
}

fn cfg_err(dir: &Path, msg: impl std::fmt::Display) -> RetrievalError {
    RetrievalError::Config(format!("BERT model {}: {msg}", dir.display()))
}

fn read_json(path: &Path) -> Result<Option<serde_json::Value>, RetrievalError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| RetrievalError::Format(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(RetrievalError::Io(format!("read {}", path.display()), e)),
    }
}

impl BertEncoder {
    /// Loads the model in `dir` (see the module documentation for the files it reads).
    pub fn load(dir: &Path) -> Result<Self, RetrievalError> {
        let config_path = dir.join("config.json");
        let config_value =
            read_json(&config_path)?.ok_or_else(|| cfg_err(dir, "config.json is missing"))?;
        let config: Config = serde_json::from_value(config_value.clone())
            .map_err(|e| cfg_err(dir, format!("config.json is not a BERT config: {e}")))?;
        let pool_cfg = read_json(&dir.join("1_Pooling/config.json"))?;
        let flag = |key: &str| {
            pool_cfg
                .as_ref()
                .and_then(|v| v.get(key))
                .and_then(|v| v.as_bool())
                .unwrap_or(false)
        };
        let pooling = match (
            pool_cfg.is_some(),
            flag("pooling_mode_mean_tokens"),
            flag("pooling_mode_cls_token"),
        ) {
            (false, _, _) | (true, true, false) => Pooling::Mean,
            (true, false, true) => Pooling::Cls,
            _ => {
                return Err(cfg_err(
                    dir,
                    "1_Pooling/config.json: only mean or CLS pooling (exactly one) is supported",
                ));
            }
        };
        if config.max_position_embeddings < 8 {
            return Err(cfg_err(
                dir,
                format!(
                    "config.json: max_position_embeddings {} (at least 8)",
                    config.max_position_embeddings
                ),
            ));
        }
        let st_cfg = read_json(&dir.join("sentence_bert_config.json"))?;
        let max_len = st_cfg
            .as_ref()
            .and_then(|v| v.get("max_seq_length"))
            .and_then(|v| v.as_u64())
            .map(|n| n as usize)
            .unwrap_or(config.max_position_embeddings)
            .clamp(8, config.max_position_embeddings);
        let (query_prefix, passage_prefix) = Self::prefixes(dir, &config_value)?;

        let tok_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tok_path)
            .map_err(|e| cfg_err(dir, format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_len,
                ..Default::default()
            }))
            .map_err(|e| cfg_err(dir, format!("tokenizer truncation: {e}")))?;

        let weights = dir.join("model.safetensors");
        let bytes = std::fs::read(&weights)
            .map_err(|e| RetrievalError::Io(format!("read {}", weights.display()), e))?;
        let model = Model::load(&bytes, &config)
            .map_err(|e| cfg_err(dir, format!("model.safetensors: {e}")))?;

        let mut h = Sha256::new();
        for name in [
            "config.json",
            "tokenizer.json",
            "model.safetensors",
            "1_Pooling/config.json",
            "sentence_bert_config.json",
        ] {
            let p = dir.join(name);
            if name == "model.safetensors" {
                h.update(&bytes);
            } else if p.exists() {
                let mut f = std::fs::File::open(&p)
                    .map_err(|e| RetrievalError::Io(format!("open {}", p.display()), e))?;
                std::io::copy(&mut f, &mut h)
                    .map_err(|e| RetrievalError::Io(format!("read {}", p.display()), e))?;
            }
            h.update(name.as_bytes());
        }
        h.update(query_prefix.as_bytes());
        h.update([0]);
        h.update(passage_prefix.as_bytes());
        let digest = hex::encode(h.finalize());
        // v2: rulegym's own batch-invariant forward pass (v1 was candle's, whose vectors differ
        // in the last bits).
        let identity = format!(
            "bert-v2:{}:dim={}:{:?}:max_len={max_len}:sha256={}",
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            config.hidden_size,
            pooling,
            &digest[..16]
        );
        Ok(BertEncoder {
            dir: dir.to_path_buf(),
            model,
            tokenizer,
            pooling,
            max_len,
            max_batch_tokens: DEFAULT_MAX_BATCH_TOKENS,
            isa: kernel::detect(),
            query_prefix,
            passage_prefix,
            identity,
        })
    }

    /// Sets the bound on the tokens of one forward pass (at least the model's text length
    /// limit): a larger batch is encoded in consecutive chunks, with the same vectors.
    /// Activation memory is about `tokens x (6 x hidden + intermediate) x 4` bytes
    /// (MiniLM: 15 KB per token, 120 MB at the default 8,192).
    pub fn with_max_batch_tokens(mut self, tokens: usize) -> Self {
        self.max_batch_tokens = tokens.max(self.max_len);
        self
    }

    /// The bound on the tokens of one forward pass.
    pub fn max_batch_tokens(&self) -> usize {
        self.max_batch_tokens
    }

    /// `(query prefix, passage prefix)` for the model in `dir`.
    fn prefixes(
        dir: &Path,
        config: &serde_json::Value,
    ) -> Result<(String, String), RetrievalError> {
        if let Some(st) = read_json(&dir.join("config_sentence_transformers.json"))?
            && let Some(prompts) = st.get("prompts").and_then(|p| p.as_object())
        {
            let get = |k: &str| prompts.get(k).and_then(|v| v.as_str()).map(str::to_string);
            if let Some(q) = get("query") {
                let p = get("passage")
                    .or_else(|| get("document"))
                    .unwrap_or_default();
                return Ok((q, p));
            }
        }
        let name = format!(
            "{} {}",
            dir.file_name()
                .map(|n| n.to_string_lossy().to_lowercase())
                .unwrap_or_default(),
            config
                .get("_name_or_path")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_lowercase()
        );
        let is_e5 = name
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '-')
            .any(|w| w.starts_with("e5-") || w.contains("-e5-") || w == "e5");
        Ok(if is_e5 {
            ("query: ".into(), "passage: ".into())
        } else {
            (String::new(), String::new())
        })
    }

    /// The prefix prepended to texts of `kind`.
    pub fn prefix(&self, kind: TextKind) -> &str {
        match kind {
            TextKind::Query => &self.query_prefix,
            TextKind::Passage => &self.passage_prefix,
        }
    }

    /// Pooling mode from the model directory.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Token limit per text (longer texts are truncated).
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Token ids and type ids of each text (with `prefix`), truncated to the model's limit.
    fn tokenize(&self, texts: &[&str], prefix: &str) -> Result<Vec<Tokens>, RetrievalError> {
        texts
            .par_iter()
            .map(|text| {
                let enc = if prefix.is_empty() {
                    self.tokenizer.encode(*text, true)
                } else {
                    self.tokenizer.encode(format!("{prefix}{text}"), true)
                }
                .map_err(|e| RetrievalError::Format(format!("tokenizing {text:?}: {e}")))?;
                Ok(Tokens {
                    ids: enc.get_ids().to_vec(),
                    types: enc.get_type_ids().to_vec(),
                })
            })
            .collect()
    }

    /// Pools and normalises the hidden states of one text into `out`.
    fn pool(&self, hidden: &[f32], out: &mut [f32]) -> Result<(), RetrievalError> {
        let dim = self.model.hidden;
        let tokens = hidden.len() / dim;
        if tokens == 0 {
            out.fill(0.0);
            return Ok(());
        }
        match self.pooling {
            Pooling::Cls => out.copy_from_slice(&hidden[..dim]),
            Pooling::Mean => {
                let mut acc = vec![0f64; dim];
                for row in hidden.chunks_exact(dim) {
                    for (a, &x) in acc.iter_mut().zip(row) {
                        *a += x as f64;
                    }
                }
                for (o, a) in out.iter_mut().zip(&acc) {
                    *o = (*a / tokens as f64) as f32;
                }
            }
        }
        if out.iter().any(|x| !x.is_finite()) {
            return Err(RetrievalError::NonFinite(format!(
                "BERT embedding ({})",
                self.dir.display()
            )));
        }
        let norm = super::l2_norm(out);
        if norm > 0.0 {
            for x in out.iter_mut() {
                *x = (*x as f64 / norm) as f32;
            }
        }
        Ok(())
    }

    /// [`Encoder::encode`] with the kernels of `isa` (every instruction set gives the same bits;
    /// this exists so that tests can check it). `isa` must be supported by this CPU: one that
    /// is not is replaced by the portable kernels.
    pub fn encode_with_isa(
        &self,
        texts: &[&str],
        kind: TextKind,
        isa: Isa,
    ) -> Result<Vec<f32>, RetrievalError> {
        let isa = if kernel::supported(isa) {
            isa
        } else {
            Isa::Portable
        };
        let dim = self.model.hidden;
        let tokens = self.tokenize(texts, self.prefix(kind))?;
        let mut out = vec![0f32; texts.len() * dim];
        let mut start = 0;
        while start < tokens.len() {
            let mut end = start;
            let mut total = 0;
            while end < tokens.len()
                && (end == start || total + tokens[end].ids.len() <= self.max_batch_tokens)
            {
                total += tokens[end].ids.len();
                end += 1;
            }
            let hidden = self.model.forward(isa, &tokens[start..end]);
            let mut row = 0;
            for (t, o) in tokens[start..end]
                .iter()
                .zip(out[start * dim..end * dim].chunks_exact_mut(dim))
            {
                let n = t.ids.len();
                self.pool(&hidden[row * dim..(row + n) * dim], o)?;
                row += n;
            }
            start = end;
        }
        Ok(out)
    }
}

impl Encoder for BertEncoder {
    fn identity(&self) -> String {
        self.identity.clone()
    }

    fn dim(&self) -> usize {
        self.model.hidden
    }

    fn encode(&self, texts: &[&str], kind: TextKind) -> Result<Vec<f32>, RetrievalError> {
        self.encode_with_isa(texts, kind, self.isa)
    }
}

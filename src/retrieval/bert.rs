//! BERT-family sentence encoder (feature `bert`): candle on the CPU + Hugging Face tokenizers.
//!
//! Loads a sentence-transformers model directory:
//! * `config.json` (a BERT config: all-MiniLM-L6-v2, e5-base-v2, bge, ...),
//! * `tokenizer.json`,
//! * `model.safetensors` (weights with or without the `bert.` prefix),
//! * `1_Pooling/config.json` (mean or CLS pooling; mean when absent) and
//!   `sentence_bert_config.json` (`max_seq_length`; else the model's position limit).
//!
//! Output: the pooled last hidden state (mean over the tokens the attention mask keeps, or the
//! CLS token), L2-normalised. Prefixes: when `config_sentence_transformers.json` declares
//! `prompts` for `query` and `passage`/`document` they are used; otherwise a model whose
//! directory or `_name_or_path` names E5 (`e5-...`) gets E5's `query: ` / `passage: `
//! prefixes, as its model card requires; other models get none.
//!
//! Each text is encoded on its own (batch of one, no padding), so a text's vector never
//! depends on the rest of the batch.

use super::RetrievalError;
use super::encoder::{Encoder, TextKind};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
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

/// A sentence-transformers BERT model loaded for inference on the CPU.
pub struct BertEncoder {
    dir: PathBuf,
    model: BertModel,
    tokenizer: Tokenizer,
    dim: usize,
    pooling: Pooling,
    max_len: usize,
    query_prefix: String,
    passage_prefix: String,
    identity: String,
}

impl std::fmt::Debug for BertEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertEncoder")
            .field("dir", &self.dir)
            .field("dim", &self.dim)
            .field("pooling", &self.pooling)
            .field("max_len", &self.max_len)
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
        let device = Device::Cpu;
        // SAFETY: the weights file is memory-mapped read-only; rulegym never writes it while
        // loaded (another process truncating it would be undefined behaviour, as for any mmap).
        let vb = unsafe {
            VarBuilder::from_mmaped_safetensors(std::slice::from_ref(&weights), DType::F32, &device)
        }
        .map_err(|e| cfg_err(dir, format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| cfg_err(dir, format!("loading BERT weights: {e}")))?;

        let mut h = Sha256::new();
        for name in [
            "config.json",
            "tokenizer.json",
            "model.safetensors",
            "1_Pooling/config.json",
            "sentence_bert_config.json",
        ] {
            let p = dir.join(name);
            if p.exists() {
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
        let identity = format!(
            "bert-v1:{}:dim={}:{:?}:max_len={max_len}:sha256={}",
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
            dim: config.hidden_size,
            pooling,
            max_len,
            query_prefix,
            passage_prefix,
            identity,
        })
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

    fn encode_one(&self, text: &str, out: &mut [f32]) -> Result<(), RetrievalError> {
        let err = |e: candle_core::Error| {
            RetrievalError::Config(format!("BERT forward pass ({}): {e}", self.dir.display()))
        };
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| RetrievalError::Format(format!("tokenizing {text:?}: {e}")))?;
        let ids = enc.get_ids();
        let mask = enc.get_attention_mask();
        let n = ids.len();
        if n == 0 {
            out.fill(0.0);
            return Ok(());
        }
        let device = &self.model.device;
        let input = Tensor::from_slice(ids, (1, n), device).map_err(err)?;
        let types = Tensor::from_slice(enc.get_type_ids(), (1, n), device).map_err(err)?;
        let mask_t = Tensor::from_slice(mask, (1, n), device).map_err(err)?;
        let hidden = self
            .model
            .forward(&input, &types, Some(&mask_t))
            .map_err(err)?;
        let hidden: Vec<Vec<f32>> = hidden.squeeze(0).map_err(err)?.to_vec2().map_err(err)?;
        out.fill(0.0);
        match self.pooling {
            Pooling::Cls => out.copy_from_slice(&hidden[0][..self.dim]),
            Pooling::Mean => {
                let mut acc = vec![0f64; self.dim];
                let mut count = 0f64;
                for (row, &m) in hidden.iter().zip(mask) {
                    if m != 0 {
                        count += 1.0;
                        for (a, &x) in acc.iter_mut().zip(row) {
                            *a += x as f64;
                        }
                    }
                }
                let count = count.max(1.0);
                for (o, a) in out.iter_mut().zip(&acc) {
                    *o = (*a / count) as f32;
                }
            }
        }
        if out.iter().any(|x| !x.is_finite()) {
            return Err(RetrievalError::NonFinite(format!(
                "BERT embedding of {text:?}"
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
}

impl Encoder for BertEncoder {
    fn identity(&self) -> String {
        self.identity.clone()
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn encode(&self, texts: &[&str], kind: TextKind) -> Result<Vec<f32>, RetrievalError> {
        let prefix = self.prefix(kind);
        let mut out = vec![0f32; texts.len() * self.dim];
        for (text, row) in texts.iter().zip(out.chunks_exact_mut(self.dim)) {
            if prefix.is_empty() {
                self.encode_one(text, row)?;
            } else {
                self.encode_one(&format!("{prefix}{text}"), row)?;
            }
        }
        Ok(out)
    }
}

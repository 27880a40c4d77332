//! The BERT encoder's forward pass (feature `bert`), written so that a text's hidden states
//! never depend on what it is batched with (see [`super::bert`] for the argument).
//!
//! Weights are read from safetensors (f32, f16 or bf16), converted to f32 and packed once into
//! the GEMM kernel's layout ([`kernel::pack`]). A batch is a list of token sequences packed row
//! after row; [`Model::forward`] returns the last hidden state of every token.

use super::kernel::{self, Isa};
use rayon::prelude::*;
use safetensors::{Dtype, SafeTensors};

/// One text's token ids and token type ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tokens {
    /// Vocabulary ids (special tokens included).
    pub ids: Vec<u32>,
    /// Token type (segment) ids, one per token.
    pub types: Vec<u32>,
}

/// A dense layer `y = x W^T + b` with `W` packed for [`kernel::gemm_par`].
struct Linear {
    packed: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

impl Linear {
    fn new(weight: &[f32], bias: Vec<f32>, inputs: usize) -> Linear {
        Linear {
            packed: kernel::pack(weight, inputs),
            outputs: bias.len(),
            bias,
            inputs,
        }
    }

    /// `rows` inputs (row-major) through the layer.
    fn apply(&self, isa: Isa, x: &[f32], rows: usize) -> Vec<f32> {
        let mut y = kernel::gemm_par(isa, x, rows, self.inputs, &self.packed, self.outputs);
        for row in y.chunks_exact_mut(self.outputs) {
            for (v, b) in row.iter_mut().zip(&self.bias) {
                *v += b;
            }
        }
        y
    }
}

/// Layer normalisation over the last dimension.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f64,
}

impl Norm {
    /// Normalises every row of `x` in place (mean and variance in f64, in element order).
    fn apply(&self, x: &mut [f32]) {
        let d = self.gamma.len();
        for row in x.chunks_exact_mut(d) {
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
            let var = row
                .iter()
                .map(|&v| (v as f64 - mean) * (v as f64 - mean))
                .sum::<f64>()
                / d as f64;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.gamma).zip(&self.beta) {
                *v = ((*v as f64 - mean) * inv) as f32 * g + b;
            }
        }
    }
}

/// The feed-forward activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Activation {
    /// `x * Phi(x)` with the exact (erf) normal CDF.
    Gelu,
    /// The tanh approximation of GELU (`gelu_new`, `gelu_pytorch_tanh`).
    GeluTanh,
    /// `max(x, 0)`.
    Relu,
}

struct Layer {
    /// Query, key and value projections as one `3h x h` layer.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

/// A BERT encoder stack.
pub(crate) struct Model {
    /// Hidden size.
    pub hidden: usize,
    heads: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    vocab: usize,
    positions: usize,
    types: usize,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    activation: Activation,
}

/// The fields of a BERT `config.json` the forward pass uses.
#[derive(Clone, Debug, serde::Deserialize)]
pub(crate) struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_position_type")]
    pub position_embedding_type: String,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_position_type() -> String {
    "absolute".into()
}

/// Reads tensors by name from a safetensors file, with or without a `bert.` prefix.
struct Weights<'a> {
    st: SafeTensors<'a>,
    prefix: &'static str,
}

impl Weights<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        let view = self
            .st
            .tensor(&full)
            .map_err(|_| format!("tensor {full} is missing"))?;
        if view.shape() != shape {
            return Err(format!(
                "tensor {full} has shape {:?}, the config says {shape:?}",
                view.shape()
            ));
        }
        let data = view.data();
        Ok(match view.dtype() {
            Dtype::F32 => data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => data
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::BF16 => data
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => {
                return Err(format!(
                    "tensor {full} has dtype {other:?} (f32, f16, bf16 only)"
                ));
            }
        })
    }

    /// A layer norm's scale and shift (`weight`/`bias`, or the old `gamma`/`beta`).
    fn norm(&self, name: &str, d: usize, eps: f64) -> Result<Norm, String> {
        let (gamma, beta) = match self.get(&format!("{name}.weight"), &[d]) {
            Ok(g) => (g, self.get(&format!("{name}.bias"), &[d])?),
            Err(_) => (
                self.get(&format!("{name}.gamma"), &[d])?,
                self.get(&format!("{name}.beta"), &[d])?,
            ),
        };
        Ok(Norm { gamma, beta, eps })
    }

    fn linear(&self, name: &str, outputs: usize, inputs: usize) -> Result<Linear, String> {
        let w = self.get(&format!("{name}.weight"), &[outputs, inputs])?;
        Ok(Linear::new(
            &w,
            self.get(&format!("{name}.bias"), &[outputs])?,
            inputs,
        ))
    }
}

impl Model {
    /// Loads the weights of the model `shape` describes from safetensors bytes.
    pub(crate) fn load(bytes: &[u8], shape: &Config) -> Result<Model, String> {
        let activation = match shape.hidden_act.as_str() {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            other => {
                return Err(format!(
                    "hidden_act {other:?} is not supported (gelu, gelu_new, relu)"
                ));
            }
        };
        if shape.position_embedding_type != "absolute" {
            return Err(format!(
                "position_embedding_type {:?} is not supported (absolute only)",
                shape.position_embedding_type
            ));
        }
        if shape.vocab_size == 0
            || shape.intermediate_size == 0
            || shape.max_position_embeddings < 8
        {
            return Err(format!(
                "vocab_size {} and intermediate_size {} must be positive and max_position_embeddings {} at least 8",
                shape.vocab_size, shape.intermediate_size, shape.max_position_embeddings
            ));
        }
        let (h, heads) = (shape.hidden_size, shape.num_attention_heads);
        if h == 0
            || heads == 0
            || h % heads != 0
            || shape.num_hidden_layers == 0
            || shape.type_vocab_size == 0
        {
            return Err(format!(
                "hidden_size {h} must be a positive multiple of num_attention_heads {heads}, with at least one layer and token type"
            ));
        }
        let st = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let prefix = if st.tensor("embeddings.word_embeddings.weight").is_ok() {
            ""
        } else {
            "bert."
        };
        let w = Weights { st, prefix };
        let eps = shape.layer_norm_eps;
        let mut layers = Vec::with_capacity(shape.num_hidden_layers);
        for i in 0..shape.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let mut qkv_w = Vec::with_capacity(3 * h * h);
            let mut qkv_b = Vec::with_capacity(3 * h);
            for part in ["query", "key", "value"] {
                qkv_w.extend(w.get(&format!("{p}.attention.self.{part}.weight"), &[h, h])?);
                qkv_b.extend(w.get(&format!("{p}.attention.self.{part}.bias"), &[h])?);
            }
            layers.push(Layer {
                qkv: Linear::new(&qkv_w, qkv_b, h),
                attention_out: w.linear(&format!("{p}.attention.output.dense"), h, h)?,
                attention_norm: w.norm(&format!("{p}.attention.output.LayerNorm"), h, eps)?,
                intermediate: w.linear(
                    &format!("{p}.intermediate.dense"),
                    shape.intermediate_size,
                    h,
                )?,
                output: w.linear(&format!("{p}.output.dense"), h, shape.intermediate_size)?,
                output_norm: w.norm(&format!("{p}.output.LayerNorm"), h, eps)?,
            });
        }
        Ok(Model {
            hidden: h,
            heads,
            word: w.get("embeddings.word_embeddings.weight", &[shape.vocab_size, h])?,
            position: w.get(
                "embeddings.position_embeddings.weight",
                &[shape.max_position_embeddings, h],
            )?,
            token_type: w.get(
                "embeddings.token_type_embeddings.weight",
                &[shape.type_vocab_size, h],
            )?,
            vocab: shape.vocab_size,
            positions: shape.max_position_embeddings,
            types: shape.type_vocab_size,
            embedding_norm: w.norm("embeddings.LayerNorm", h, eps)?,
            layers,
            activation,
        })
    }

    /// Number of transformer layers.
    pub(crate) fn depth(&self) -> usize {
        self.layers.len()
    }

    /// The last hidden state of every token of `batch` (texts packed one after another,
    /// `hidden` values per token). Ids past the vocabulary, positions past the model's limit
    /// and unknown token types are clamped (the tokenizer never produces them).
    pub(crate) fn forward(&self, isa: Isa, batch: &[Tokens]) -> Vec<f32> {
        let h = self.hidden;
        let total: usize = batch.iter().map(|t| t.ids.len()).sum();
        let mut x = vec![0f32; total * h];
        let mut row = 0;
        for t in batch {
            for (p, (&id, &ty)) in t.ids.iter().zip(&t.types).enumerate() {
                let id = (id as usize).min(self.vocab - 1);
                let ty = (ty as usize).min(self.types - 1);
                let p = p.min(self.positions - 1);
                let out = &mut x[row * h..(row + 1) * h];
                let word = &self.word[id * h..(id + 1) * h];
                let ty = &self.token_type[ty * h..(ty + 1) * h];
                let pos = &self.position[p * h..(p + 1) * h];
                for i in 0..h {
                    out[i] = (word[i] + ty[i]) + pos[i];
                }
                row += 1;
            }
        }
        self.embedding_norm.apply(&mut x);
        let spans: Vec<(usize, usize)> = batch
            .iter()
            .scan(0, |at, t| {
                let s = (*at, t.ids.len());
                *at += t.ids.len();
                Some(s)
            })
            .collect();
        for layer in &self.layers {
            let qkv = layer.qkv.apply(isa, &x, total);
            let context = self.attention(isa, &qkv, &spans, total);
            let mut attended = layer.attention_out.apply(isa, &context, total);
            for (a, r) in attended.iter_mut().zip(&x) {
                *a += r;
            }
            layer.attention_norm.apply(&mut attended);
            let mut inner = layer.intermediate.apply(isa, &attended, total);
            activate(isa, self.activation, &mut inner);
            let mut out = layer.output.apply(isa, &inner, total);
            for (o, r) in out.iter_mut().zip(&attended) {
                *o += r;
            }
            layer.output_norm.apply(&mut out);
            x = out;
        }
        x
    }

    /// Self-attention of every text over its own tokens: `spans` are (first row, length).
    fn attention(&self, isa: Isa, qkv: &[f32], spans: &[(usize, usize)], total: usize) -> Vec<f32> {
        let h = self.hidden;
        let d = h / self.heads;
        let scale = (d as f32).sqrt();
        let jobs: Vec<(usize, usize)> = (0..spans.len())
            .flat_map(|s| (0..self.heads).map(move |hd| (s, hd)))
            .collect();
        let parts: Vec<Vec<f32>> = jobs
            .par_iter()
            .map(|&(s, hd)| {
                let (r0, n) = spans[s];
                let column = |part: usize, i: usize| {
                    let at = (r0 + i) * 3 * h + part * h + hd * d;
                    &qkv[at..at + d]
                };
                let q: Vec<f32> = (0..n).flat_map(|i| column(0, i).iter().copied()).collect();
                let k: Vec<f32> = (0..n).flat_map(|i| column(1, i).iter().copied()).collect();
                let mut vt = vec![0f32; d * n];
                for i in 0..n {
                    for (c, &v) in column(2, i).iter().enumerate() {
                        vt[c * n + i] = v;
                    }
                }
                let mut scores = kernel::gemm(isa, &q, n, d, &kernel::pack(&k, d), n);
                for row in scores.chunks_exact_mut(n) {
                    softmax(isa, row, scale);
                }
                kernel::gemm(isa, &scores, n, n, &kernel::pack(&vt, n), d)
            })
            .collect();
        let mut context = vec![0f32; total * h];
        for (&(s, hd), part) in jobs.iter().zip(&parts) {
            let (r0, _) = spans[s];
            for (i, row) in part.chunks_exact(d).enumerate() {
                context[(r0 + i) * h + hd * d..][..d].copy_from_slice(row);
            }
        }
        context
    }
}

/// `row = softmax(row / scale)` with a fixed summation order.
fn softmax(isa: Isa, row: &mut [f32], scale: f32) {
    let mut max = f32::NEG_INFINITY;
    for v in row.iter_mut() {
        *v /= scale;
        max = max.max(*v);
    }
    for v in row.iter_mut() {
        *v -= max;
    }
    elementwise(isa, row, exp);
    let sum: f32 = row.iter().sum();
    for v in row.iter_mut() {
        *v /= sum;
    }
}

fn activate(isa: Isa, activation: Activation, x: &mut [f32]) {
    match activation {
        Activation::Gelu => elementwise(isa, x, gelu),
        Activation::GeluTanh => elementwise(isa, x, gelu_tanh),
        Activation::Relu => x.iter_mut().for_each(|v| *v = v.max(0.0)),
    }
}

/// Applies `f` to every value; with FMA instructions enabled where the CPU has them (the same
/// bits: `mul_add` is one correctly rounded operation on every path).
fn elementwise<F: Fn(f32) -> f32>(isa: Isa, x: &mut [f32], f: F) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa` is only Avx2/Avx512 where the CPU has avx2 and fma (`kernel::supported`).
        Isa::Avx2 | Isa::Avx512 => unsafe { elementwise_fma(x, f) },
        _ => x.iter_mut().for_each(|v| *v = f(*v)),
    }
}

/// # Safety
/// The CPU must support avx2 and fma.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn elementwise_fma<F: Fn(f32) -> f32>(x: &mut [f32], f: F) {
    x.iter_mut().for_each(|v| *v = f(*v));
}

/// `e^x` (max error ~2 ulp on [-87, 88]; below -87.3 it returns `e^-87.3`, above 88.3
/// `e^88.3`): Cody-Waite range reduction and Cephes' degree-5 polynomial, fused multiply-adds
/// only, so every platform computes the same bits.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer
    let x = x.clamp(-87.3, 88.3);
    let t = x.mul_add(std::f32::consts::LOG2_E, MAGIC);
    let n = t - MAGIC;
    let r = (-n).mul_add(0.693_359_4, x);
    let r = (-n).mul_add(-2.121_944_4e-4, r);
    let mut p = 1.987_569_2e-4f32;
    p = p.mul_add(r, 1.398_2e-3);
    p = p.mul_add(r, 8.333_452e-3);
    p = p.mul_add(r, 4.166_579_6e-2);
    p = p.mul_add(r, 0.166_666_65);
    p = p.mul_add(r, 0.5);
    let y = p.mul_add(r * r, r) + 1.0;
    let e = (t.to_bits() as i32 - MAGIC.to_bits() as i32) + 127;
    y * f32::from_bits((e as u32) << 23)
}

/// The error function (absolute error < 1e-6): Eigen's / XLA's rational approximation on
/// [-4, 4] (beyond, erf is +-1 in f32), fused multiply-adds only.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10f32;
    p = p.mul_add(x2, 2.770_681_4e-8);
    p = p.mul_add(x2, -2.101_024e-6);
    p = p.mul_add(x2, -5.692_506_4e-5);
    p = p.mul_add(x2, -7.349_906_3e-4);
    p = p.mul_add(x2, -2.954_6e-3);
    p = p.mul_add(x2, -1.609_603_3e-2);
    let p = x * p;
    let mut q = -1.456_607_2e-5f32;
    q = q.mul_add(x2, -2.133_740_6e-4);
    q = q.mul_add(x2, -1.682_827e-3);
    q = q.mul_add(x2, -7.373_329e-3);
    q = q.mul_add(x2, -1.426_474e-2);
    p / q
}

/// GELU with the exact normal CDF: `x / 2 * (1 + erf(x / sqrt 2))`.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU's tanh approximation: `x / 2 * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`, with
/// `tanh(y) = 1 - 2 / (e^(2y) + 1)`.
#[inline(always)]
fn gelu_tanh(x: f32) -> f32 {
    let y = 0.797_884_6 * (x + 0.044_715 * x * x * x);
    0.5 * x * (2.0 - 2.0 / (exp(2.0 * y) + 1.0))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// erf in f64 from its Taylor series (enough terms for |x| <= 4).
    fn erf_reference(x: f64) -> f64 {
        let mut sum = 0.0;
        let mut term = x; // (-1)^n x^(2n+1) / n!
        for n in 0..200 {
            sum += term / (2 * n + 1) as f64;
            term *= -x * x / (n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn exp_and_erf_are_accurate() {
        let mut worst_exp = 0f64;
        let mut worst_erf = 0f64;
        for i in 0..=20_000 {
            let x = -87.0 + 175.0 * i as f32 / 20_000.0;
            let rel = ((exp(x) as f64 - (x as f64).exp()) / (x as f64).exp()).abs();
            worst_exp = worst_exp.max(rel);
            let x = -5.0 + 10.0 * i as f32 / 20_000.0;
            let r = if x.abs() >= 4.0 {
                x.signum() as f64
            } else {
                erf_reference(x as f64)
            };
            worst_erf = worst_erf.max((erf(x) as f64 - r).abs());
        }
        assert!(
            worst_exp < 4.0 * f32::EPSILON as f64,
            "exp relative error {worst_exp}"
        );
        assert!(worst_erf < 1e-6, "erf absolute error {worst_erf}");
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1000.0) > 0.0 && exp(-1000.0) < 1e-37);
    }

    fn pseudo(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.4
            })
            .collect()
    }

    /// A small random BERT (2 layers, hidden 24, 3 heads, vocabulary 50) as safetensors bytes.
    pub(crate) fn tiny_model(activation: &str) -> Model {
        let (v, h, i, p, t, layers) = (50, 24, 40, 64, 2, 2);
        let mut tensors: Vec<(String, Vec<usize>)> = vec![
            ("embeddings.word_embeddings.weight".into(), vec![v, h]),
            ("embeddings.position_embeddings.weight".into(), vec![p, h]),
            ("embeddings.token_type_embeddings.weight".into(), vec![t, h]),
            ("embeddings.LayerNorm.weight".into(), vec![h]),
            ("embeddings.LayerNorm.bias".into(), vec![h]),
        ];
        for l in 0..layers {
            let p = format!("encoder.layer.{l}");
            for (name, shape) in [
                ("attention.self.query", vec![h, h]),
                ("attention.self.key", vec![h, h]),
                ("attention.self.value", vec![h, h]),
                ("attention.output.dense", vec![h, h]),
                ("intermediate.dense", vec![i, h]),
                ("output.dense", vec![h, i]),
            ] {
                tensors.push((format!("{p}.{name}.weight"), shape.clone()));
                tensors.push((format!("{p}.{name}.bias"), vec![shape[0]]));
            }
            for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
                tensors.push((format!("{p}.{name}.weight"), vec![h]));
                tensors.push((format!("{p}.{name}.bias"), vec![h]));
            }
        }
        let data: Vec<Vec<u8>> = tensors
            .iter()
            .enumerate()
            .map(|(k, (name, shape))| {
                let n: usize = shape.iter().product();
                let vals = if name.contains("LayerNorm.weight") {
                    pseudo(n, k as u64).iter().map(|x| 1.0 + x).collect()
                } else {
                    pseudo(n, k as u64)
                };
                vals.iter().flat_map(|x| x.to_le_bytes()).collect()
            })
            .collect();
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
            .iter()
            .zip(&data)
            .map(|((name, shape), d)| {
                let view =
                    safetensors::tensor::TensorView::new(Dtype::F32, shape.clone(), d).unwrap();
                (name.clone(), view)
            })
            .collect();
        let bytes = safetensors::serialize(views, None).unwrap();
        let shape = Config {
            vocab_size: v,
            hidden_size: h,
            num_hidden_layers: layers,
            num_attention_heads: 3,
            intermediate_size: i,
            max_position_embeddings: p,
            type_vocab_size: t,
            layer_norm_eps: 1e-12,
            hidden_act: activation.into(),
            position_embedding_type: "absolute".into(),
        };
        Model::load(&bytes, &shape).unwrap()
    }

    #[test]
    fn bad_configs_are_errors_not_panics() {
        let good = Config {
            vocab_size: 50,
            hidden_size: 24,
            num_hidden_layers: 2,
            num_attention_heads: 3,
            intermediate_size: 40,
            max_position_embeddings: 64,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            hidden_act: "gelu".into(),
            position_embedding_type: "absolute".into(),
        };
        let bad = [
            Config {
                vocab_size: 0,
                ..good.clone()
            },
            Config {
                max_position_embeddings: 4,
                ..good.clone()
            },
            Config {
                num_attention_heads: 5,
                ..good.clone()
            },
            Config {
                hidden_act: "swish".into(),
                ..good.clone()
            },
            Config {
                position_embedding_type: "relative_key".into(),
                ..good.clone()
            },
        ];
        for config in bad {
            assert!(Model::load(&[], &config).is_err(), "{config:?}");
        }
        // Garbage or mismatched weights are errors too.
        assert!(Model::load(b"not safetensors", &good).is_err());
    }

    fn text(seed: u64) -> Tokens {
        let len = 1 + (seed * 7919 % 40) as usize;
        Tokens {
            ids: (0..len)
                .map(|i| ((seed as usize * 31 + i * 17) % 50) as u32)
                .collect(),
            types: vec![0; len],
        }
    }

    #[test]
    fn a_text_gets_the_same_bits_alone_and_in_any_batch_on_any_isa_and_thread_count() {
        for activation in ["gelu", "gelu_new", "relu"] {
            let model = tiny_model(activation);
            let texts: Vec<Tokens> = (0..24).map(text).collect();
            let alone: Vec<Vec<u32>> = texts
                .iter()
                .map(|t| {
                    model
                        .forward(Isa::Portable, std::slice::from_ref(t))
                        .iter()
                        .map(|v| v.to_bits())
                        .collect()
                })
                .collect();
            for isa in kernel::every_supported_isa() {
                for threads in [1, 2, 3] {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    for (start, step) in [(0, 1), (3, 5), (1, 2), (0, 24)] {
                        let batch: Vec<Tokens> =
                            texts.iter().skip(start).step_by(step).cloned().collect();
                        let out = pool.install(|| model.forward(isa, &batch));
                        let mut row = 0;
                        for (j, t) in batch.iter().enumerate() {
                            let n = t.ids.len();
                            let got: Vec<u32> = out[row * 24..(row + n) * 24]
                                .iter()
                                .map(|v| v.to_bits())
                                .collect();
                            assert_eq!(
                                got,
                                alone[start + j * step],
                                "{activation} {isa:?} {threads} threads"
                            );
                            row += n;
                        }
                    }
                }
            }
        }
    }
}

//! `rulegym grpo`: GRPO advantages, loss, gradient and metrics for a batch given as JSON.
//!
//! Input: `{"rewards": [...], "group_size": G, "logp_old": [[...]], "logp_new": [[...]],
//! "mask": [[...]], "config": {...}}`; rows may have different lengths; `mask` (0/1 or
//! booleans) defaults to all ones and `config` to [`GrpoConfig::default`]. Output (stdout): one
//! JSON object with `advantages`, `loss`, `grad` (same shape as `logp_new`) and the metrics.

use rulegym::grpo::{GrpoConfig, GrpoError, GrpoOutput, TokenBatch};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Flags of `rulegym grpo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// JSON file with rewards, group_size, logp_old, logp_new, optional mask and config.
    #[arg(long)]
    pub input: PathBuf,
    /// Where to compute: `cpu` (the reference) or `gpu` (WGSL; needs feature `gpu`).
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub device: Device,
}

/// Compute device for `rulegym grpo`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The CPU reference.
    Cpu,
    /// WGSL compute shaders through wgpu.
    Gpu,
}

/// A mask entry: 0/1 or a boolean.
#[derive(Deserialize, Debug, Clone, Copy)]
#[serde(untagged)]
enum MaskValue {
    Bool(bool),
    Int(u64),
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Input {
    rewards: Vec<f32>,
    group_size: usize,
    logp_old: Vec<Vec<f32>>,
    logp_new: Vec<Vec<f32>>,
    #[serde(default)]
    mask: Option<Vec<Vec<MaskValue>>>,
    #[serde(default)]
    config: GrpoConfig,
}

#[derive(Serialize)]
struct Output {
    advantages: Vec<f32>,
    loss: f64,
    grad: Vec<Vec<f32>>,
    tokens: u64,
    sequences: u64,
    clip_frac_low: f64,
    clip_frac_high: f64,
    dual_clip_frac: f64,
    mean_ratio: f64,
    approx_kl_k1: f64,
    approx_kl_k3: f64,
}

/// Flattened rows: values plus offsets.
struct Flat {
    old: Vec<f32>,
    new: Vec<f32>,
    mask: Vec<u8>,
    offsets: Vec<usize>,
}

fn flatten(input: &Input) -> Result<Flat, rulegym::Error> {
    let rows = input.logp_old.len();
    if input.logp_new.len() != rows {
        return Err(GrpoError::Shape(format!(
            "logp_old has {rows} rows, logp_new has {}",
            input.logp_new.len()
        ))
        .into());
    }
    if let Some(m) = &input.mask
        && m.len() != rows
    {
        return Err(
            GrpoError::Shape(format!("logp_old has {rows} rows, mask has {}", m.len())).into(),
        );
    }
    let mut flat = Flat {
        old: vec![],
        new: vec![],
        mask: vec![],
        offsets: vec![0],
    };
    for r in 0..rows {
        let len = input.logp_old[r].len();
        if input.logp_new[r].len() != len {
            return Err(GrpoError::Shape(format!(
                "row {r}: logp_old has {len} tokens, logp_new has {}",
                input.logp_new[r].len()
            ))
            .into());
        }
        flat.old.extend_from_slice(&input.logp_old[r]);
        flat.new.extend_from_slice(&input.logp_new[r]);
        match &input.mask {
            None => flat.mask.extend(std::iter::repeat_n(1u8, len)),
            Some(m) => {
                if m[r].len() != len {
                    return Err(GrpoError::Shape(format!(
                        "row {r}: logp_old has {len} tokens, mask has {}",
                        m[r].len()
                    ))
                    .into());
                }
                for (c, v) in m[r].iter().enumerate() {
                    flat.mask.push(match *v {
                        MaskValue::Bool(b) => b as u8,
                        MaskValue::Int(i @ (0 | 1)) => i as u8,
                        MaskValue::Int(i) => {
                            return Err(rulegym::Error::Config(format!(
                                "mask[{r}][{c}] = {i}; mask values are 0 or 1"
                            )));
                        }
                    });
                }
            }
        }
        flat.offsets.push(flat.old.len());
    }
    Ok(flat)
}

/// Computes one GRPO step on `input` (a parsed JSON document) on `device`.
fn compute(input: &Input, device: Device) -> Result<(GrpoOutput, Vec<usize>), rulegym::Error> {
    let flat = flatten(input)?;
    if input.rewards.len() != flat.offsets.len() - 1 {
        return Err(GrpoError::Shape(format!(
            "{} rewards for {} rows",
            input.rewards.len(),
            flat.offsets.len() - 1
        ))
        .into());
    }
    let batch = TokenBatch::ragged(&flat.old, &flat.new, &flat.mask, &flat.offsets)?;
    let out = match device {
        Device::Cpu => {
            rulegym::grpo::grpo_step(&input.rewards, input.group_size, &batch, &input.config)?
        }
        #[cfg(feature = "gpu")]
        Device::Gpu => {
            let ctx = rulegym::gpu::GpuContext::new().map_err(|e| GrpoError::Gpu(e.to_string()))?;
            rulegym::grpo::gpu::GpuGrpo::new(&ctx)?.step(
                &input.rewards,
                input.group_size,
                &batch,
                &input.config,
            )?
        }
        #[cfg(not(feature = "gpu"))]
        Device::Gpu => {
            return Err(
                GrpoError::Gpu("this rulegym was built without feature `gpu`".into()).into(),
            );
        }
    };
    Ok((out, flat.offsets))
}

/// Runs `rulegym grpo`: reads the input file, computes, prints the result as JSON.
pub fn run(args: Args) -> Result<(), rulegym::Error> {
    let context = format!("reading GRPO input {}", args.input.display());
    let text = std::fs::read_to_string(&args.input).map_err(|source| rulegym::Error::Io {
        context: context.clone(),
        source,
    })?;
    let input: Input =
        serde_json::from_str(&text).map_err(|source| rulegym::Error::Json { context, source })?;
    let (out, offsets) = compute(&input, args.device)?;
    let grad = offsets
        .windows(2)
        .map(|w| out.grad[w[0]..w[1]].to_vec())
        .collect();
    let s = out.stats;
    let json = Output {
        advantages: out.advantages,
        loss: s.loss,
        grad,
        tokens: s.tokens,
        sequences: s.sequences,
        clip_frac_low: s.clip_frac_low,
        clip_frac_high: s.clip_frac_high,
        dual_clip_frac: s.dual_clip_frac,
        mean_ratio: s.mean_ratio,
        approx_kl_k1: s.approx_kl_k1,
        approx_kl_k3: s.approx_kl_k3,
    };
    let text = serde_json::to_string(&json).map_err(|source| rulegym::Error::Json {
        context: "writing GRPO output".into(),
        source,
    })?;
    println!("{text}");
    Ok(())
}

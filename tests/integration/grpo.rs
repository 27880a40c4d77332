//! GRPO math: hand-computed cases, error handling, and properties (proptest, bounded cases).
#![allow(clippy::needless_range_loop)] // index loops mirror the math

use super::cli;
use proptest::prelude::*;
use rulegym::grpo::{
    Aggregation, GrpoConfig, GrpoError, GrpoStats, StdKind, TokenBatch, group_advantages,
    grpo_step, policy_loss,
};

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + b.abs())
}

/// One sequence of one token with advantage `a` and ratio `rho`; returns (stats, grad).
fn one_token(a: f32, rho: f64, cfg: &GrpoConfig) -> (GrpoStats, f32) {
    let old = [-1.0f32];
    let new = [(-1.0 + rho.ln()) as f32];
    let batch = TokenBatch::ragged(&old, &new, &[1], &[0, 1]).unwrap();
    let mut grad = [f32::NAN];
    let stats = policy_loss(&batch, &[a], cfg, &mut grad).unwrap();
    (stats, grad[0])
}

#[test]
fn advantages_hand_computed() {
    let mut out = [0.0f32; 4];
    let eps0 = GrpoConfig {
        eps: 0.0,
        ..Default::default()
    };
    group_advantages(&[1.0, 0.0, 0.0, 1.0], 4, &eps0, &mut out).unwrap();
    // mean 0.5, sample std sqrt(1/3): 0.5 / 0.57735 = 0.8660254
    let s = 0.5 / (1.0f64 / 3.0).sqrt();
    for (o, sign) in out.iter().zip([1.0, -1.0, -1.0, 1.0]) {
        assert!(close(*o as f64, sign * s, 1e-7), "{out:?}");
    }
    let pop = GrpoConfig {
        std: StdKind::Population,
        eps: 0.0,
        ..Default::default()
    };
    group_advantages(&[1.0, 0.0, 0.0, 1.0], 4, &pop, &mut out).unwrap();
    assert_eq!(out, [1.0, -1.0, -1.0, 1.0]);
    let mean_only = GrpoConfig {
        mean_only: true,
        ..Default::default()
    };
    group_advantages(&[3.0, 1.0, 2.0, 2.0], 4, &mean_only, &mut out).unwrap();
    assert_eq!(out, [1.0, -1.0, 0.0, 0.0]);
    // default eps = 1e-6 is added to the std
    group_advantages(&[1.0, 0.0, 0.0, 1.0], 4, &GrpoConfig::default(), &mut out).unwrap();
    assert!(close(
        out[0] as f64,
        0.5 / ((1.0f64 / 3.0).sqrt() + 1e-6),
        1e-7
    ));
    // two groups of 2: the second has zero spread
    group_advantages(&[2.0, 4.0, 7.0, 7.0], 2, &pop, &mut out).unwrap();
    assert_eq!(out, [-1.0, 1.0, 0.0, 0.0]);
    // G = 1: every advantage is 0, for every std choice
    for cfg in [GrpoConfig::default(), pop, mean_only] {
        group_advantages(&[5.0, -3.0, 0.5, 9.0], 1, &cfg, &mut out).unwrap();
        assert_eq!(out, [0.0; 4]);
    }
}

#[test]
fn every_clip_region_by_hand() {
    let cfg = GrpoConfig::default(); // clip_low 0.2, clip_high 0.28
    let tol = 1e-6;
    // A > 0, ratio above 1 + clip_high: clipped, loss -(1.28) A, no gradient
    let (s, g) = one_token(1.0, 1.5, &cfg);
    assert!(
        close(s.loss, -1.28, tol) && g == 0.0 && s.clip_frac_high == 1.0 && s.clip_frac_low == 0.0
    );
    // A > 0, ratio below 1 - clip_low: not clipped (min picks rho*A), gradient -A rho
    let (s, g) = one_token(1.0, 0.5, &cfg);
    assert!(close(s.loss, -0.5, tol) && close(g as f64, -0.5, tol) && s.clip_frac_low == 0.0);
    // A > 0, inside the trust region
    let (s, g) = one_token(2.0, 1.1, &cfg);
    assert!(close(s.loss, -2.2, tol) && close(g as f64, -2.2, tol));
    // A < 0, ratio below 1 - clip_low: clipped, loss 0.8 |A|, no gradient
    let (s, g) = one_token(-1.0, 0.5, &cfg);
    assert!(
        close(s.loss, 0.8, tol) && g == 0.0 && s.clip_frac_low == 1.0 && s.clip_frac_high == 0.0
    );
    // A < 0, ratio above 1 + clip_high: not clipped (pessimistic side), gradient |A| rho
    let (s, g) = one_token(-1.0, 1.5, &cfg);
    assert!(close(s.loss, 1.5, tol) && close(g as f64, 1.5, tol) && s.clip_frac_high == 0.0);
    // A = 0: no loss, no gradient, no clipping counted
    let (s, g) = one_token(0.0, 3.0, &cfg);
    assert!(s.loss == 0.0 && g == 0.0 && s.clip_frac_high == 0.0 && s.clip_frac_low == 0.0);
    assert!(close(s.mean_ratio, 3.0, tol));
    // PhantomEnvironments: ratio capped at 2.0
    let pe = GrpoConfig {
        clip_high: 1.0,
        ..Default::default()
    };
    let (s, g) = one_token(0.5, 2.5, &pe);
    assert!(close(s.loss, -1.0, tol) && g == 0.0);
    let (s, g) = one_token(0.5, 1.9, &pe);
    assert!(close(s.loss, -0.95, tol) && close(g as f64, -0.95, tol));
}

#[test]
fn dual_clip_by_hand() {
    let cfg = GrpoConfig {
        dual_clip: Some(3.0),
        ..Default::default()
    };
    // A < 0 and rho > c: loss capped at -c A = 3 |A|, no gradient
    let (s, g) = one_token(-2.0, 4.0, &cfg);
    assert!(close(s.loss, 6.0, 1e-6) && g == 0.0 && s.dual_clip_frac == 1.0);
    // A < 0 and 1 + clip_high < rho < c: unclipped
    let (s, g) = one_token(-2.0, 2.5, &cfg);
    assert!(close(s.loss, 5.0, 1e-6) && close(g as f64, 5.0, 1e-6) && s.dual_clip_frac == 0.0);
    // A > 0 ignores the dual clip
    let (s, g) = one_token(2.0, 4.0, &cfg);
    assert!(close(s.loss, -2.56, 1e-6) && g == 0.0 && s.dual_clip_frac == 0.0);
    // without dual clip the loss is unbounded
    let (s, _) = one_token(-2.0, 4.0, &GrpoConfig::default());
    assert!(close(s.loss, 8.0, 1e-6));
}

/// `ratio_cap` (PhantomEnvironments' token-level cap of the ratio at 2.0) as a named setting:
/// it caps the ratio for both advantage signs, by hand and against the equivalent clip/dual-clip
/// configurations; it parses from JSON (`ratio-cap` or `ratio_cap`) and is validated.
#[test]
fn ratio_cap_by_hand() {
    let cap = GrpoConfig {
        ratio_cap: Some(2.0),
        clip_high: 5.0, // looser than the cap: the cap decides
        ..Default::default()
    };
    assert_eq!(cap.high_bound(), 2.0);
    assert_eq!(cap.dual_bound(), Some(2.0));
    // A > 0, rho above the cap: loss -cap*A, no gradient, counted as a high clip
    let (s, g) = one_token(0.5, 2.5, &cap);
    assert!(close(s.loss, -1.0, 1e-6) && g == 0.0 && s.clip_frac_high == 1.0);
    // A > 0, rho below the cap: unclipped
    let (s, g) = one_token(0.5, 1.9, &cap);
    assert!(close(s.loss, -0.95, 1e-6) && close(g as f64, -0.95, 1e-6));
    // A < 0, rho above the cap: loss capped at cap*|A|, no gradient (a dual clip at 2.0)
    let (s, g) = one_token(-2.0, 3.0, &cap);
    assert!(close(s.loss, 4.0, 1e-6) && g == 0.0 && s.dual_clip_frac == 1.0);
    // A < 0, rho under the cap: unclipped (without the cap the loss would be the same)
    let (s, g) = one_token(-2.0, 1.5, &cap);
    assert!(close(s.loss, 3.0, 1e-6) && close(g as f64, 3.0, 1e-6));
    // With the usual clip_high 0.28 the cap only changes negative advantages: identical to a
    // dual clip at 2.0 on a whole batch.
    let old = [-1.0f32, -2.0, -0.5, -1.2, -0.3, -2.2];
    let new = [-0.1f32, -2.5, 0.4, -1.0, -1.9, -0.9];
    let mask = [1u8; 6];
    let offsets = [0usize, 2, 4, 6];
    let batch = TokenBatch::ragged(&old, &new, &mask, &offsets).unwrap();
    let rewards = [1.0f32, 0.0, 0.5];
    let with_cap = GrpoConfig {
        ratio_cap: Some(2.0),
        ..Default::default()
    };
    let with_dual = GrpoConfig {
        dual_clip: Some(2.0),
        ..Default::default()
    };
    let a = grpo_step(&rewards, 3, &batch, &with_cap).unwrap();
    let b = grpo_step(&rewards, 3, &batch, &with_dual).unwrap();
    assert_eq!(a, b);
    assert!(a.stats.dual_clip_frac > 0.0, "the case exercises the cap");
    // A dual clip looser than the cap: the cap wins
    let both = GrpoConfig {
        dual_clip: Some(3.0),
        ratio_cap: Some(2.0),
        ..Default::default()
    };
    assert_eq!(both.dual_bound(), Some(2.0));
    // JSON, both spellings; invalid caps are errors naming the knob
    let parsed: GrpoConfig = serde_json::from_str(r#"{"ratio-cap": 2.0}"#).unwrap();
    assert_eq!(parsed.ratio_cap, Some(2.0));
    let parsed: GrpoConfig = serde_json::from_str(r#"{"ratio_cap": 2.0}"#).unwrap();
    assert_eq!(parsed.ratio_cap, Some(2.0));
    for bad in [1.0f32, 0.5, f32::NAN, f32::INFINITY] {
        let cfg = GrpoConfig {
            ratio_cap: Some(bad),
            ..Default::default()
        };
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains("ratio_cap must be finite and > 1"), "{err}");
    }
    // Default config serialises without the knob (reports stay byte-identical)
    let json = serde_json::to_string(&GrpoConfig::default()).unwrap();
    assert!(!json.contains("ratio"), "{json}");
}

/// seq 0: 3 tokens (mask 1 1 0), seq 1: 1 token, seq 2: 2 tokens fully masked; rho = 1.
fn aggregation_case(agg: Aggregation) -> (GrpoStats, Vec<f32>) {
    let old = [-1.0f32, -2.0, -3.0, -0.5, -1.0, -1.0];
    let mask = [1u8, 1, 0, 1, 0, 0];
    let cfg = GrpoConfig {
        aggregation: agg,
        ..Default::default()
    };
    let batch = TokenBatch::ragged(&old, &old, &mask, &[0, 3, 4, 6]).unwrap();
    let mut grad = vec![f32::NAN; 6];
    let stats = policy_loss(&batch, &[1.0, -2.0, 5.0], &cfg, &mut grad).unwrap();
    (stats, grad)
}

#[test]
fn aggregations_by_hand() {
    // per-token loss is -A: seq 0 gives -1, -1; seq 1 gives +2; seq 2 is masked
    let (s, g) = aggregation_case(Aggregation::TokenMean);
    assert!(close(s.loss, 0.0, 1e-7) && s.tokens == 3 && s.sequences == 2);
    let t = 1.0 / 3.0;
    let want = [-t, -t, 0.0, 2.0 * t, 0.0, 0.0];
    assert!(
        g.iter().zip(want).all(|(a, b)| close(*a as f64, b, 1e-6)),
        "{g:?}"
    );
    let (s, g) = aggregation_case(Aggregation::SeqMeanTokenMean);
    assert!(close(s.loss, 0.5, 1e-7));
    assert!(
        g.iter()
            .zip([-0.25, -0.25, 0.0, 1.0, 0.0, 0.0])
            .all(|(a, b)| close(*a as f64, b, 1e-6)),
        "{g:?}"
    );
    let (s, g) = aggregation_case(Aggregation::SeqMeanTokenSum);
    assert!(close(s.loss, 0.0, 1e-7));
    assert!(
        g.iter()
            .zip([-0.5, -0.5, 0.0, 1.0, 0.0, 0.0])
            .all(|(a, b)| close(*a as f64, b, 1e-6)),
        "{g:?}"
    );
    assert_eq!(
        (s.mean_ratio, s.approx_kl_k1, s.approx_kl_k3),
        (1.0, 0.0, 0.0)
    );
}

#[test]
fn kl_metrics_by_hand() {
    let old = [-1.0f32, -1.0, -1.0];
    let new = [-0.9f32, -1.2, 50.0];
    let batch = TokenBatch::ragged(&old, &new, &[1, 1, 0], &[0, 3]).unwrap();
    let mut grad = [0.0f32; 3];
    let s = policy_loss(&batch, &[0.7], &GrpoConfig::default(), &mut grad).unwrap();
    let d = [(new[0] - old[0]) as f64, (new[1] - old[1]) as f64];
    assert!(close(s.approx_kl_k1, -(d[0] + d[1]) / 2.0, 1e-6));
    let k3 = d.iter().map(|d| d.exp() - 1.0 - d).sum::<f64>() / 2.0;
    assert!(close(s.approx_kl_k3, k3, 1e-6));
    assert!(close(s.mean_ratio, (d[0].exp() + d[1].exp()) / 2.0, 1e-6));
    assert_eq!(grad[2], 0.0);
}

#[test]
fn fully_masked_batch_is_zero() {
    let old = [-1.0f32; 4];
    let batch = TokenBatch::padded(&old, &old, &[0; 4], 2, 2).unwrap();
    let mut grad = [9.0f32; 4];
    let s = policy_loss(&batch, &[1.0, -1.0], &GrpoConfig::default(), &mut grad).unwrap();
    assert_eq!(s, GrpoStats::default());
    assert_eq!(grad, [0.0; 4]);
}

#[test]
fn bad_inputs_are_clear_errors_and_never_nan() {
    let cfg = GrpoConfig::default();
    let mut adv = [7.0f32; 2];
    assert!(matches!(
        group_advantages(&[1.0, f32::NAN], 2, &cfg, &mut adv),
        Err(GrpoError::NonFinite(_))
    ));
    assert_eq!(adv, [0.0, 0.0], "output zero-filled on error");
    assert!(matches!(
        group_advantages(&[1.0, f32::INFINITY], 2, &cfg, &mut adv),
        Err(GrpoError::NonFinite(_))
    ));
    assert!(matches!(
        group_advantages(&[1.0, 2.0, 3.0], 2, &cfg, &mut [0.0; 3]),
        Err(GrpoError::Shape(_))
    ));
    assert!(matches!(
        group_advantages(&[1.0, 2.0], 0, &cfg, &mut adv),
        Err(GrpoError::Config(_))
    ));
    assert!(matches!(
        group_advantages(&[], 2, &cfg, &mut []),
        Err(GrpoError::Empty(_))
    ));
    assert!(matches!(
        group_advantages(&[1.0, 2.0], 2, &cfg, &mut [0.0; 3]),
        Err(GrpoError::Shape(_))
    ));

    let old = [-1.0f32, -1.0, -1.0];
    let mut grad = [7.0f32; 3];
    // NaN in an unmasked token: error naming the token; the gradient buffer is zero-filled
    let new = [-1.0f32, f32::NAN, -1.0];
    let b = TokenBatch::ragged(&old, &new, &[1, 1, 1], &[0, 2, 3]).unwrap();
    let err = policy_loss(&b, &[1.0, 1.0], &cfg, &mut grad).unwrap_err();
    assert!(
        matches!(err, GrpoError::NonFinite(_)) && err.to_string().contains("token 1"),
        "{err}"
    );
    assert_eq!(grad, [0.0; 3]);
    // -inf in logp_old of an unmasked token
    let old_inf = [-1.0f32, -1.0, f32::NEG_INFINITY];
    let b = TokenBatch::ragged(&old_inf, &old, &[1, 1, 1], &[0, 2, 3]).unwrap();
    assert!(matches!(
        policy_loss(&b, &[1.0, 1.0], &cfg, &mut grad),
        Err(GrpoError::NonFinite(_))
    ));
    // ... but a NaN under mask 0 is ignored and gets gradient 0
    let b = TokenBatch::ragged(&old, &new, &[1, 0, 1], &[0, 2, 3]).unwrap();
    let s = policy_loss(&b, &[1.0, 1.0], &cfg, &mut grad).unwrap();
    assert!(s.loss.is_finite() && grad[1] == 0.0 && grad.iter().all(|g| g.is_finite()));
    // NaN advantage
    assert!(matches!(
        policy_loss(&b, &[f32::NAN, 1.0], &cfg, &mut grad),
        Err(GrpoError::NonFinite(_))
    ));
    // mask values other than 0/1
    let b = TokenBatch::ragged(&old, &old, &[1, 2, 1], &[0, 2, 3]).unwrap();
    assert!(matches!(
        policy_loss(&b, &[1.0, 1.0], &cfg, &mut grad),
        Err(GrpoError::Mask { index: 1, value: 2 })
    ));
    // shapes
    assert!(matches!(
        TokenBatch::ragged(&old, &old, &[1, 1, 1], &[0, 2, 4]),
        Err(GrpoError::Shape(_))
    ));
    assert!(matches!(
        TokenBatch::ragged(&old, &old, &[1, 1, 1], &[0, 2, 1, 3]),
        Err(GrpoError::Shape(_))
    ));
    assert!(matches!(
        TokenBatch::ragged(&old, &old, &[1, 1, 1], &[1, 3]),
        Err(GrpoError::Shape(_))
    ));
    assert!(matches!(
        TokenBatch::ragged(&old, &old, &[1, 1], &[0, 3]),
        Err(GrpoError::Shape(_))
    ));
    assert!(matches!(
        TokenBatch::ragged(&old, &old, &[1, 1, 1], &[3]),
        Err(GrpoError::Empty(_))
    ));
    assert!(matches!(
        TokenBatch::padded(&old, &old, &[1, 1, 1], 2, 2),
        Err(GrpoError::Shape(_))
    ));
    let b = TokenBatch::ragged(&old, &old, &[1, 1, 1], &[0, 2, 3]).unwrap();
    assert!(matches!(
        policy_loss(&b, &[1.0], &cfg, &mut grad),
        Err(GrpoError::Shape(_))
    ));
    assert!(matches!(
        policy_loss(&b, &[1.0, 1.0], &cfg, &mut [0.0; 2]),
        Err(GrpoError::Shape(_))
    ));
    // overflow: a log-ratio of 100 with a large negative advantage
    let big = [99.0f32, -1.0, -1.0];
    let b = TokenBatch::ragged(&old, &big, &[1, 1, 1], &[0, 2, 3]).unwrap();
    assert!(matches!(
        policy_loss(&b, &[-1e3, 1.0], &cfg, &mut grad),
        Err(GrpoError::Overflow(_))
    ));
    assert!(grad.iter().all(|g| *g == 0.0));
    // finite inputs whose difference overflows
    let huge = [3e38f32, -1.0, -1.0];
    let neg = [-3e38f32, -1.0, -1.0];
    let b = TokenBatch::ragged(&neg, &huge, &[1, 1, 1], &[0, 2, 3]).unwrap();
    assert!(matches!(
        policy_loss(&b, &[1.0, 1.0], &cfg, &mut grad),
        Err(GrpoError::Overflow(_))
    ));
}

#[test]
fn config_validation() {
    assert!(GrpoConfig::default().validate().is_ok());
    for bad in [
        GrpoConfig {
            eps: -1.0,
            ..Default::default()
        },
        GrpoConfig {
            eps: f64::NAN,
            ..Default::default()
        },
        GrpoConfig {
            clip_low: 1.5,
            ..Default::default()
        },
        GrpoConfig {
            clip_low: -0.1,
            ..Default::default()
        },
        GrpoConfig {
            clip_high: f32::INFINITY,
            ..Default::default()
        },
        GrpoConfig {
            dual_clip: Some(1.0),
            ..Default::default()
        },
        GrpoConfig {
            dual_clip: Some(f32::NAN),
            ..Default::default()
        },
    ] {
        assert!(
            matches!(bad.validate(), Err(GrpoError::Config(_))),
            "{bad:?}"
        );
        let mut out = [3.0f32; 2];
        assert!(group_advantages(&[0.0, 1.0], 2, &bad, &mut out).is_err());
        assert_eq!(out, [0.0; 2]);
    }
    let cfg: GrpoConfig = serde_json::from_str(
        r#"{"std": "population", "clip-high": 1.0, "dual_clip": 3.0, "aggregation": "seq-mean-token-sum"}"#,
    )
    .unwrap();
    assert_eq!(cfg.std, StdKind::Population);
    assert_eq!(
        (cfg.clip_high, cfg.dual_clip, cfg.aggregation),
        (1.0, Some(3.0), Aggregation::SeqMeanTokenSum)
    );
    assert!(serde_json::from_str::<GrpoConfig>(r#"{"clip_hgih": 1.0}"#).is_err());
}

/// A random ragged batch (lengths may be 0), deterministic in `seed`.
#[derive(Debug, Clone)]
struct Batch {
    rewards: Vec<f32>,
    group: usize,
    old: Vec<f32>,
    new: Vec<f32>,
    mask: Vec<u8>,
    offsets: Vec<usize>,
}

fn batch_strategy(
    max_groups: usize,
    max_g: usize,
    max_len: usize,
    spread: f32,
) -> impl Strategy<Value = Batch> {
    (1..=max_groups, 1..=max_g).prop_flat_map(move |(groups, g)| {
        let seqs = groups * g;
        (
            proptest::collection::vec(prop_oneof![Just(0.0f32), Just(1.0f32), -2.0f32..2.0], seqs),
            proptest::collection::vec(0..=max_len, seqs),
        )
            .prop_flat_map(move |(rewards, lens)| {
                let n: usize = lens.iter().sum();
                (
                    Just(rewards),
                    Just(lens),
                    proptest::collection::vec(-6.0f32..0.0, n),
                    proptest::collection::vec(-spread..spread, n),
                    proptest::collection::vec(prop_oneof![3 => Just(1u8), 1 => Just(0u8)], n),
                )
            })
            .prop_map(move |(rewards, lens, old, delta, mask)| {
                let mut offsets = vec![0];
                for l in lens {
                    offsets.push(offsets.last().unwrap() + l);
                }
                let new = old.iter().zip(&delta).map(|(o, d)| o + d).collect();
                Batch {
                    rewards,
                    group: g,
                    old,
                    new,
                    mask,
                    offsets,
                }
            })
    })
}

fn config_strategy() -> impl Strategy<Value = GrpoConfig> {
    (
        prop_oneof![Just(StdKind::Sample), Just(StdKind::Population)],
        any::<bool>(),
        0.05f32..0.5,
        0.1f32..1.0,
        prop_oneof![Just(None), (2.5f32..4.0).prop_map(Some)],
        prop_oneof![
            Just(Aggregation::TokenMean),
            Just(Aggregation::SeqMeanTokenMean),
            Just(Aggregation::SeqMeanTokenSum)
        ],
    )
        .prop_map(
            |(std, mean_only, clip_low, clip_high, dual_clip, aggregation)| GrpoConfig {
                std,
                eps: 1e-6,
                mean_only,
                clip_low,
                clip_high,
                dual_clip,
                ratio_cap: None,
                aggregation,
            },
        )
}

/// The loss straight from the definition, in f64 (an independent reference).
fn reference(b: &Batch, adv: &[f32], cfg: &GrpoConfig) -> (f64, Vec<f64>) {
    let seqs = adv.len();
    let counts: Vec<usize> = (0..seqs)
        .map(|s| {
            b.mask[b.offsets[s]..b.offsets[s + 1]]
                .iter()
                .filter(|&&m| m == 1)
                .count()
        })
        .collect();
    let total: usize = counts.iter().sum();
    let nonempty = counts.iter().filter(|&&c| c > 0).count();
    let mut loss = 0.0;
    let mut grad = vec![0.0; b.old.len()];
    if total == 0 {
        return (0.0, grad);
    }
    for s in 0..seqs {
        let w = match cfg.aggregation {
            Aggregation::TokenMean => 1.0 / total as f64,
            Aggregation::SeqMeanTokenMean if counts[s] > 0 => 1.0 / (nonempty * counts[s]) as f64,
            Aggregation::SeqMeanTokenMean => 0.0,
            Aggregation::SeqMeanTokenSum => 1.0 / nonempty as f64,
        };
        let a = adv[s] as f64;
        for t in b.offsets[s]..b.offsets[s + 1] {
            if b.mask[t] == 0 {
                continue;
            }
            let rho = ((b.new[t] - b.old[t]) as f64).exp();
            let lo = 1.0 - cfg.clip_low as f64;
            let hi = 1.0 + cfg.clip_high as f64;
            let unclipped = rho * a;
            let clipped = rho.clamp(lo, hi) * a;
            let mut l = -unclipped.min(clipped);
            let mut g = if unclipped <= clipped { -a * rho } else { 0.0 };
            if let Some(c) = cfg.dual_clip
                && a < 0.0
                && -(c as f64) * a < l
            {
                l = -(c as f64) * a;
                g = 0.0;
            }
            loss += w * l;
            grad[t] = w * g;
        }
    }
    (loss, grad)
}

/// Whether a ratio is within a relative `margin` of a clip boundary (where f32 and f64 may
/// disagree on the region, and where a finite difference straddles the kink).
fn near_boundary(rho: f64, cfg: &GrpoConfig, margin: f64) -> bool {
    let mut bounds = vec![1.0 - cfg.clip_low as f64, cfg.high_bound() as f64];
    bounds.extend(cfg.dual_bound().map(|c| c as f64));
    bounds.iter().any(|b| (rho / b - 1.0).abs() < margin)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn advantages_have_zero_mean_and_unit_sample_std(
        groups in 1usize..6,
        g in 2usize..12,
        seed_rewards in proptest::collection::vec(-5.0f32..5.0, 72),
        mean_only in any::<bool>(),
    ) {
        let rewards = &seed_rewards[..groups * g];
        let cfg = GrpoConfig { eps: 0.0, mean_only, ..Default::default() };
        let mut adv = vec![0.0f32; rewards.len()];
        group_advantages(rewards, g, &cfg, &mut adv).unwrap();
        for (rs, a) in rewards.chunks(g).zip(adv.chunks(g)) {
            if rs.iter().all(|&r| r == rs[0]) {
                prop_assert!(a.iter().all(|&x| x == 0.0));
                continue;
            }
            let n = g as f64;
            let mean = a.iter().map(|&x| x as f64).sum::<f64>() / n;
            prop_assert!(mean.abs() < 1e-6, "mean {}", mean);
            if !mean_only {
                let var = a.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
                prop_assert!((var.sqrt() - 1.0).abs() < 1e-6, "std {}", var.sqrt());
            }
        }
    }

    #[test]
    fn kernel_matches_f64_reference(b in batch_strategy(4, 6, 300, 0.6), cfg in config_strategy()) {
        let mut adv = vec![0.0f32; b.rewards.len()];
        group_advantages(&b.rewards, b.group, &cfg, &mut adv).unwrap();
        let batch = TokenBatch::ragged(&b.old, &b.new, &b.mask, &b.offsets).unwrap();
        let mut grad = vec![f32::NAN; b.old.len()];
        let stats = policy_loss(&batch, &adv, &cfg, &mut grad).unwrap();
        let (loss, want) = reference(&b, &adv, &cfg);
        let scale: f64 = want.iter().map(|g| g.abs()).fold(0.0, f64::max).max(1e-30);
        prop_assert!((stats.loss - loss).abs() <= 1e-5 * (1.0 + loss.abs()), "{} vs {}", stats.loss, loss);
        for t in 0..grad.len() {
            let rho = ((b.new[t] - b.old[t]) as f64).exp();
            if near_boundary(rho, &cfg, 1e-5) { continue; }
            prop_assert!((grad[t] as f64 - want[t]).abs() <= 1e-5 * scale, "token {}: {} vs {}", t, grad[t], want[t]);
        }
    }

    #[test]
    fn gradient_equals_central_finite_difference(b in batch_strategy(2, 4, 8, 0.6), cfg in config_strategy()) {
        let mut adv = vec![0.0f32; b.rewards.len()];
        group_advantages(&b.rewards, b.group, &cfg, &mut adv).unwrap();
        let loss_at = |new: &[f32]| {
            let batch = TokenBatch::ragged(&b.old, new, &b.mask, &b.offsets).unwrap();
            let mut g = vec![0.0f32; new.len()];
            policy_loss(&batch, &adv, &cfg, &mut g).unwrap().loss
        };
        let batch = TokenBatch::ragged(&b.old, &b.new, &b.mask, &b.offsets).unwrap();
        let mut grad = vec![0.0f32; b.old.len()];
        policy_loss(&batch, &adv, &cfg, &mut grad).unwrap();
        let scale = grad.iter().map(|g| g.abs()).fold(0.0f32, f32::max) as f64;
        let h = 1e-2f32;
        for t in 0..b.old.len() {
            let rho = ((b.new[t] - b.old[t]) as f64).exp();
            if near_boundary(rho, &cfg, 0.03) { continue; }
            let (mut plus, mut minus) = (b.new.clone(), b.new.clone());
            plus[t] += h;
            minus[t] -= h;
            let fd = (loss_at(&plus) - loss_at(&minus)) / (plus[t] - minus[t]) as f64;
            // central differences of exp have relative error ~h^2/6; f32 rounding adds ~1e-6/h
            prop_assert!((fd - grad[t] as f64).abs() <= 1e-4 * (grad[t].abs() as f64) + 2e-4 * scale + 1e-7,
                "token {}: fd {} vs analytic {}", t, fd, grad[t]);
        }
    }

    #[test]
    fn masked_tokens_get_zero_gradient(b in batch_strategy(3, 4, 64, 1.5), cfg in config_strategy()) {
        let mut adv = vec![0.0f32; b.rewards.len()];
        group_advantages(&b.rewards, b.group, &cfg, &mut adv).unwrap();
        let batch = TokenBatch::ragged(&b.old, &b.new, &b.mask, &b.offsets).unwrap();
        let mut grad = vec![f32::NAN; b.old.len()];
        policy_loss(&batch, &adv, &cfg, &mut grad).unwrap();
        for (g, m) in grad.iter().zip(&b.mask) {
            prop_assert!(g.is_finite());
            if *m == 0 { prop_assert_eq!(*g, 0.0); }
        }
    }

    #[test]
    fn equal_policies_give_minus_mean_advantage(b in batch_strategy(4, 6, 200, 0.5), cfg in config_strategy()) {
        let cfg = GrpoConfig { aggregation: Aggregation::TokenMean, ..cfg };
        let mut adv = vec![0.0f32; b.rewards.len()];
        group_advantages(&b.rewards, b.group, &cfg, &mut adv).unwrap();
        let batch = TokenBatch::ragged(&b.old, &b.old, &b.mask, &b.offsets).unwrap();
        let mut grad = vec![0.0f32; b.old.len()];
        let stats = policy_loss(&batch, &adv, &cfg, &mut grad).unwrap();
        let (mut sum, mut n) = (0.0f64, 0u64);
        for s in 0..adv.len() {
            for t in b.offsets[s]..b.offsets[s + 1] {
                if b.mask[t] == 1 { sum += adv[s] as f64; n += 1; }
            }
        }
        let want = if n == 0 { 0.0 } else { -sum / n as f64 };
        prop_assert!((stats.loss - want).abs() <= 1e-12 * (1.0 + want.abs()), "{} vs {}", stats.loss, want);
        prop_assert_eq!(stats.mean_ratio, if n == 0 { 0.0 } else { 1.0 });
        prop_assert_eq!((stats.approx_kl_k1, stats.approx_kl_k3), (0.0, 0.0));
    }

    #[test]
    fn padded_equals_ragged(rows in 1usize..6, cols in 0usize..70, seed in any::<u64>(), cfg in config_strategy()) {
        use rand::Rng;
        let mut rng = rulegym::seed::stream(seed, "grpo-padded", 0);
        let n = rows * cols;
        let old: Vec<f32> = (0..n).map(|_| rng.random_range(-5.0..0.0)).collect();
        let new: Vec<f32> = old.iter().map(|o| o + rng.random_range(-0.5..0.5)).collect();
        let mask: Vec<u8> = (0..n).map(|_| rng.random_bool(0.7) as u8).collect();
        let rewards: Vec<f32> = (0..rows).map(|_| rng.random_range(0.0..1.0)).collect();
        let offsets: Vec<usize> = (0..=rows).map(|r| r * cols).collect();
        let padded = TokenBatch::padded(&old, &new, &mask, rows, cols).unwrap();
        let ragged = TokenBatch::ragged(&old, &new, &mask, &offsets).unwrap();
        let a = grpo_step(&rewards, rows, &padded, &cfg).unwrap();
        let b = grpo_step(&rewards, rows, &ragged, &cfg).unwrap();
        prop_assert_eq!(a, b);
    }
}

#[test]
fn results_do_not_depend_on_thread_count() {
    use rand::Rng;
    let mut rng = rulegym::seed::stream(3, "grpo-threads", 0);
    let lens: Vec<usize> = (0..64).map(|_| rng.random_range(0..5000)).collect();
    let mut offsets = vec![0];
    for l in &lens {
        offsets.push(offsets.last().unwrap() + l);
    }
    let n = *offsets.last().unwrap();
    let old: Vec<f32> = (0..n).map(|_| rng.random_range(-5.0..0.0)).collect();
    let new: Vec<f32> = old
        .iter()
        .map(|o| o + rng.random_range(-0.5..0.5))
        .collect();
    let mask: Vec<u8> = (0..n).map(|_| rng.random_bool(0.8) as u8).collect();
    let rewards: Vec<f32> = (0..64).map(|_| rng.random_range(0.0..1.0)).collect();
    let batch = TokenBatch::ragged(&old, &new, &mask, &offsets).unwrap();
    for agg in [
        Aggregation::TokenMean,
        Aggregation::SeqMeanTokenMean,
        Aggregation::SeqMeanTokenSum,
    ] {
        let cfg = GrpoConfig {
            aggregation: agg,
            ..Default::default()
        };
        let run = |threads| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| grpo_step(&rewards, 8, &batch, &cfg).unwrap())
        };
        let one = run(1);
        assert_eq!(one, run(2));
        assert_eq!(one, run(3));
        assert!(one.stats.clip_frac_high > 0.0 && one.stats.clip_frac_low > 0.0);
    }
}

/// GPU (WGSL through wgpu) against the CPU reference on random ragged batches.
#[cfg(feature = "gpu")]
mod gpu {
    use super::*;
    use rand::Rng;
    use rulegym::gpu::GpuContext;
    use rulegym::grpo::gpu::GpuGrpo;

    /// The GPU context (see `retrieval_gpu::context`: a missing adapter fails under CI).
    fn context() -> Option<GpuContext> {
        crate::retrieval_gpu::context("GPU-vs-CPU GRPO test")
    }

    fn random_batch(seed: u64, seqs: usize, max_len: usize) -> Batch {
        let mut rng = rulegym::seed::stream(seed, "grpo-gpu", 0);
        let mut offsets = vec![0usize];
        for _ in 0..seqs {
            // some empty and some fully masked sequences, lengths across tile boundaries
            let len = if rng.random_bool(0.05) {
                0
            } else {
                rng.random_range(1..=max_len)
            };
            offsets.push(offsets.last().unwrap() + len);
        }
        let n = *offsets.last().unwrap();
        let old: Vec<f32> = (0..n).map(|_| rng.random_range(-8.0f32..0.0)).collect();
        // ratios from e^-1.3 to e^1.3: every clip region, the dual clip (c = 3) included
        let new: Vec<f32> = old
            .iter()
            .map(|o| o + rng.random_range(-1.3f32..1.3))
            .collect();
        let mut mask: Vec<u8> = (0..n).map(|_| rng.random_bool(0.8) as u8).collect();
        let dead = rng.random_range(0..seqs);
        mask[offsets[dead]..offsets[dead + 1]].fill(0);
        let rewards = (0..seqs)
            .map(|_| {
                if rng.random_bool(0.3) {
                    1.0
                } else {
                    rng.random_range(0.0f32..1.0)
                }
            })
            .collect();
        Batch {
            rewards,
            group: 8,
            old,
            new,
            mask,
            offsets,
        }
    }

    fn rel(a: f64, b: f64, floor: f64) -> f64 {
        (a - b).abs() / b.abs().max(floor)
    }

    /// Asserts agreement; returns the dual-clip fraction (to check that region was exercised).
    fn compare(gpu: &GpuGrpo<'_>, b: &Batch, cfg: &GrpoConfig) -> f64 {
        let batch = TokenBatch::ragged(&b.old, &b.new, &b.mask, &b.offsets).unwrap();
        let cpu = grpo_step(&b.rewards, b.group, &batch, cfg).unwrap();
        let dev = gpu.step(&b.rewards, b.group, &batch, cfg).unwrap();
        let tol = 1e-5;
        for (g, c) in dev.advantages.iter().zip(&cpu.advantages) {
            assert!(
                rel(*g as f64, *c as f64, 1.0) <= tol,
                "advantage {g} vs {c}"
            );
        }
        let (s, t) = (dev.stats, cpu.stats);
        assert_eq!((s.tokens, s.sequences), (t.tokens, t.sequences));
        // Relative error 1e-5, measured against max(|cpu|, 0.01) so that sums which cancel to
        // nearly 0 are held to 1e-7 absolute.
        assert!(
            rel(s.loss, t.loss, 1e-2) <= tol,
            "loss {} vs {}",
            s.loss,
            t.loss
        );
        assert!(
            rel(s.mean_ratio, t.mean_ratio, 1e-2) <= tol,
            "ratio {} vs {}",
            s.mean_ratio,
            t.mean_ratio
        );
        assert!(
            rel(s.approx_kl_k1, t.approx_kl_k1, 1e-2) <= tol,
            "k1 {} vs {}",
            s.approx_kl_k1,
            t.approx_kl_k1
        );
        assert!(
            rel(s.approx_kl_k3, t.approx_kl_k3, 1e-2) <= tol,
            "k3 {} vs {}",
            s.approx_kl_k3,
            t.approx_kl_k3
        );
        for (x, y) in [
            (s.clip_frac_low, t.clip_frac_low),
            (s.clip_frac_high, t.clip_frac_high),
            (s.dual_clip_frac, t.dual_clip_frac),
        ] {
            // counts may differ only by tokens whose ratio sits on a clip boundary
            assert!(
                (x - y).abs() * t.tokens as f64 <= 2.0,
                "clip fraction {x} vs {y}"
            );
        }
        let scale = cpu.grad.iter().map(|g| g.abs()).fold(0.0f32, f32::max) as f64;
        let mut worst = 0.0f64;
        for (i, (g, c)) in dev.grad.iter().zip(&cpu.grad).enumerate() {
            let rho = ((b.new[i] - b.old[i]) as f64).exp();
            if near_boundary(rho, cfg, 1e-5) {
                continue;
            }
            let e = (*g as f64 - *c as f64).abs() / (c.abs() as f64).max(1e-6 * scale).max(1e-30);
            worst = worst.max(e);
            assert!(e <= tol, "grad[{i}] {g} vs {c}");
        }
        eprintln!(
            "GPU vs CPU: {} tokens, loss {} vs {}, worst grad rel err {worst:.2e}",
            b.old.len(),
            s.loss,
            t.loss
        );
        t.dual_clip_frac
    }

    #[test]
    fn gpu_equals_cpu_on_random_ragged_batches() {
        let Some(mut ctx) = context() else { return };
        let mut dual_seen = false;
        let configs = [
            GrpoConfig::default(),
            GrpoConfig {
                aggregation: Aggregation::SeqMeanTokenMean,
                dual_clip: Some(3.0),
                ..Default::default()
            },
            GrpoConfig {
                aggregation: Aggregation::SeqMeanTokenSum,
                std: StdKind::Population,
                ..Default::default()
            },
            GrpoConfig {
                mean_only: true,
                clip_high: 1.0,
                ..Default::default()
            },
            // PhantomEnvironments' ratio cap, looser clip_high: the cap bounds both signs.
            GrpoConfig {
                clip_high: 5.0,
                ratio_cap: Some(2.0),
                ..Default::default()
            },
        ];
        {
            let gpu = GpuGrpo::new(&ctx).unwrap();
            for (i, cfg) in configs.iter().enumerate() {
                dual_seen |= compare(&gpu, &random_batch(i as u64, 64, 9000), cfg) > 0.0;
            }
            compare(&gpu, &random_batch(10, 8, 3), &configs[0]);
        }
        assert!(dual_seen, "the dual-clip region was never exercised");
        // small binding cap: many chunks, sequences split across chunks
        ctx.set_max_binding_bytes(16 * 1024);
        let gpu = GpuGrpo::new(&ctx).unwrap();
        for (i, cfg) in configs.iter().enumerate() {
            compare(&gpu, &random_batch(20 + i as u64, 32, 5000), cfg);
        }
    }

    #[test]
    fn gpu_reports_bad_inputs() {
        let Some(ctx) = context() else { return };
        let gpu = GpuGrpo::new(&ctx).unwrap();
        let cfg = GrpoConfig::default();
        let old = [-1.0f32; 6];
        let mut new = [-1.0f32; 6];
        new[4] = f32::NAN;
        let mut grad = [5.0f32; 6];
        let b = TokenBatch::ragged(&old, &new, &[1; 6], &[0, 3, 6]).unwrap();
        let err = gpu
            .policy_loss(&b, &[1.0, -1.0], &cfg, &mut grad)
            .unwrap_err();
        assert!(
            matches!(err, GrpoError::NonFinite(_)) && err.to_string().contains("token 4"),
            "{err}"
        );
        assert_eq!(grad, [0.0; 6]);
        let b = TokenBatch::ragged(&old, &old, &[1, 1, 3, 1, 1, 1], &[0, 3, 6]).unwrap();
        assert!(matches!(
            gpu.policy_loss(&b, &[1.0, -1.0], &cfg, &mut grad),
            Err(GrpoError::Mask { index: 2, value: 3 })
        ));
        let mut adv = [1.0f32; 2];
        assert!(matches!(
            gpu.advantages(&[0.0, f32::INFINITY], 2, &cfg, &mut adv),
            Err(GrpoError::NonFinite(_))
        ));
        assert_eq!(adv, [0.0; 2]);
        // a fully masked batch
        let b = TokenBatch::ragged(&old, &old, &[0; 6], &[0, 3, 6]).unwrap();
        assert_eq!(
            gpu.policy_loss(&b, &[1.0, -1.0], &cfg, &mut grad).unwrap(),
            GrpoStats::default()
        );
        assert_eq!(grad, [0.0; 6]);
    }
}

/// `rulegym grpo --input FILE.json` prints advantages, loss, grad (shaped like logp_new) and
/// the metrics, equal to the library's results.
#[test]
fn cli_grpo_matches_library() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("batch.json");
    let doc = serde_json::json!({
        "rewards": [1.0, 0.0, 0.5, 0.5],
        "group_size": 2,
        "logp_old": [[-1.0, -2.0, -0.5], [-0.3], [-1.0, -1.0], []],
        "logp_new": [[-0.5, -2.1, -0.5], [-0.2], [-1.2, -0.9], []],
        "mask": [[1, 1, 0], [true], [1, 1], []],
        "config": {"clip-high": 1.0, "aggregation": "seq-mean-token-mean"}
    });
    std::fs::write(&path, doc.to_string()).unwrap();
    let out = cli::run_ok(cli::rulegym().args([
        "grpo",
        "--input",
        path.to_str().unwrap(),
        "--device",
        "cpu",
    ]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cfg = GrpoConfig {
        clip_high: 1.0,
        aggregation: Aggregation::SeqMeanTokenMean,
        ..Default::default()
    };
    let old = [-1.0f32, -2.0, -0.5, -0.3, -1.0, -1.0];
    let new = [-0.5f32, -2.1, -0.5, -0.2, -1.2, -0.9];
    let batch = TokenBatch::ragged(&old, &new, &[1, 1, 0, 1, 1, 1], &[0, 3, 4, 6, 6]).unwrap();
    let want = grpo_step(&[1.0, 0.0, 0.5, 0.5], 2, &batch, &cfg).unwrap();
    assert_eq!(v["loss"].as_f64().unwrap(), want.stats.loss);
    assert_eq!(v["tokens"].as_u64().unwrap(), 5);
    let grad: Vec<Vec<f64>> = serde_json::from_value(v["grad"].clone()).unwrap();
    assert_eq!(
        grad.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![3, 1, 2, 0]
    );
    let flat: Vec<f32> = grad.concat().iter().map(|&g| g as f32).collect();
    assert_eq!(flat, want.grad);
    let adv: Vec<f32> = serde_json::from_value(v["advantages"].clone()).unwrap();
    assert_eq!(adv, want.advantages);
    for key in [
        "clip_frac_low",
        "clip_frac_high",
        "dual_clip_frac",
        "mean_ratio",
        "approx_kl_k1",
        "approx_kl_k3",
    ] {
        assert!(v[key].is_number(), "{key}");
    }
    // a bad mask value is a clear error
    let bad = doc
        .to_string()
        .replace("[1, 1, 0]", "[1, 2, 0]")
        .replace("[1,1,0]", "[1,2,0]");
    std::fs::write(&path, bad).unwrap();
    let out = cli::run(cli::rulegym().args(["grpo", "--input", path.to_str().unwrap()]));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("mask[0][1] = 2"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

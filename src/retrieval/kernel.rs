//! Inner-product micro-kernels with one canonical summation order.
//!
//! Every score is computed the same way on every path (AVX-512, AVX2+FMA, portable): 16 lane
//! accumulators, lane `j` sums `q[i] * x[i]` for `i ≡ j (mod 16)` in increasing `i` with a fused
//! multiply-add, then a fixed pairwise tree (`j + 8`, `j + 4`, `j + 2`, `j + 1`). Vectors are
//! zero-padded to a multiple of 16, which adds exact zeros. The score of a (query, row) pair is
//! therefore bit-identical whatever the batch size, the tile it falls in, the thread count or the
//! instruction set, so batching concurrent requests never changes a ranking.

/// Lanes of the canonical accumulator.
pub const LANES: usize = 16;

/// Rows per register tile.
pub const TILE_ROWS: usize = 4;
/// Queries per register tile.
pub const TILE_QUERIES: usize = 4;

/// `dim` rounded up to a multiple of [`LANES`].
pub fn padded_dim(dim: usize) -> usize {
    dim.div_ceil(LANES) * LANES
}

/// Which instruction set the kernels use on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// 512-bit vectors with FMA.
    Avx512,
    /// Two 256-bit vectors with FMA per 16 lanes.
    Avx2,
    /// Portable code (`f32::mul_add`, correctly rounded like the hardware FMA).
    Portable,
}

/// The best instruction set available (detected once).
pub fn detect() -> Isa {
    use std::sync::OnceLock;
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    })
}

/// Computes the scores of `mq` queries against `nr` rows (`mq, nr <= 4`) and hands each
/// `(query_in_tile, row_in_tile, score)` to `sink`.
///
/// `queries` and `rows` are row-major with stride `dp` (a multiple of 16); `queries` holds at
/// least `mq` and `rows` at least `nr` vectors.
#[inline]
pub fn tile(
    isa: Isa,
    queries: &[f32],
    mq: usize,
    rows: &[f32],
    nr: usize,
    dp: usize,
    out: &mut [[f32; TILE_ROWS]; TILE_QUERIES],
) {
    debug_assert!(dp.is_multiple_of(LANES) && mq <= TILE_QUERIES && nr <= TILE_ROWS);
    debug_assert!(queries.len() >= mq * dp && rows.len() >= nr * dp);
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => {
            // SAFETY: `detect` verified avx512f; slice lengths checked by the callers (debug
            // asserted above) and every load below stays within `mq * dp` / `nr * dp`.
            unsafe { x86::tile_avx512_dispatch(queries, mq, rows, nr, dp, out) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            // SAFETY: `detect` verified avx2 and fma; bounds as above.
            unsafe { x86::tile_avx2_dispatch(queries, mq, rows, nr, dp, out) }
        }
        _ => portable_tile(queries, mq, rows, nr, dp, out),
    }
}

/// The canonical score of one pair, portable code; the reference every fast path equals.
pub fn dot_canonical(q: &[f32], x: &[f32]) -> f32 {
    let dp = q.len().min(x.len());
    let mut acc = [0f32; LANES];
    let mut i = 0;
    while i + LANES <= dp {
        for (j, a) in acc.iter_mut().enumerate() {
            *a = q[i + j].mul_add(x[i + j], *a);
        }
        i += LANES;
    }
    for (j, a) in acc.iter_mut().enumerate() {
        if i + j < dp {
            *a = q[i + j].mul_add(x[i + j], *a);
        }
    }
    reduce16(&acc)
}

/// The fixed reduction tree of the 16 lane accumulators.
#[inline(always)]
pub fn reduce16(acc: &[f32; LANES]) -> f32 {
    let mut s8 = [0f32; 8];
    for j in 0..8 {
        s8[j] = acc[j] + acc[j + 8];
    }
    let mut s4 = [0f32; 4];
    for j in 0..4 {
        s4[j] = s8[j] + s8[j + 4];
    }
    let s2 = [s4[0] + s4[2], s4[1] + s4[3]];
    s2[0] + s2[1]
}

fn portable_tile(
    queries: &[f32],
    mq: usize,
    rows: &[f32],
    nr: usize,
    dp: usize,
    out: &mut [[f32; TILE_ROWS]; TILE_QUERIES],
) {
    for (qi, o) in out.iter_mut().enumerate().take(mq) {
        let q = &queries[qi * dp..(qi + 1) * dp];
        for (ri, slot) in o.iter_mut().enumerate().take(nr) {
            *slot = dot_canonical(q, &rows[ri * dp..(ri + 1) * dp]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{LANES, TILE_QUERIES, TILE_ROWS};
    use std::arch::x86_64::*;

    macro_rules! dispatch {
        ($name:ident, $kernel:ident, $feat:literal) => {
            #[target_feature(enable = $feat)]
            pub unsafe fn $name(
                queries: &[f32],
                mq: usize,
                rows: &[f32],
                nr: usize,
                dp: usize,
                out: &mut [[f32; TILE_ROWS]; TILE_QUERIES],
            ) {
                let q = queries.as_ptr();
                let r = rows.as_ptr();
                // SAFETY (all arms): the caller guarantees `mq * dp` query and `nr * dp` row floats.
                unsafe {
                    match (mq, nr) {
                        (4, 4) => $kernel::<4, 4>(q, r, dp, out),
                        (4, 3) => $kernel::<4, 3>(q, r, dp, out),
                        (4, 2) => $kernel::<4, 2>(q, r, dp, out),
                        (4, 1) => $kernel::<4, 1>(q, r, dp, out),
                        (3, 4) => $kernel::<3, 4>(q, r, dp, out),
                        (3, 3) => $kernel::<3, 3>(q, r, dp, out),
                        (3, 2) => $kernel::<3, 2>(q, r, dp, out),
                        (3, 1) => $kernel::<3, 1>(q, r, dp, out),
                        (2, 4) => $kernel::<2, 4>(q, r, dp, out),
                        (2, 3) => $kernel::<2, 3>(q, r, dp, out),
                        (2, 2) => $kernel::<2, 2>(q, r, dp, out),
                        (2, 1) => $kernel::<2, 1>(q, r, dp, out),
                        (1, 4) => $kernel::<1, 4>(q, r, dp, out),
                        (1, 3) => $kernel::<1, 3>(q, r, dp, out),
                        (1, 2) => $kernel::<1, 2>(q, r, dp, out),
                        (1, 1) => $kernel::<1, 1>(q, r, dp, out),
                        _ => {}
                    }
                }
            }
        };
    }

    dispatch!(tile_avx512_dispatch, tile_avx512, "avx512f");
    dispatch!(tile_avx2_dispatch, tile_avx2, "avx2,fma");

    /// Reduces a 256-bit sum of the two halves with the canonical tree (`+4`, `+2`, `+1`).
    #[inline(always)]
    unsafe fn reduce8(s8: __m256) -> f32 {
        // SAFETY: only called from functions compiled with avx2 or avx512f enabled.
        unsafe {
            let lo = _mm256_castps256_ps128(s8);
            let hi = _mm256_extractf128_ps(s8, 1);
            let s4 = _mm_add_ps(lo, hi); // s4[j] = s8[j] + s8[j + 4]
            let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4)); // s2[j] = s4[j] + s4[j + 2]
            let s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0b01)); // s2[0] + s2[1]
            _mm_cvtss_f32(s1)
        }
    }

    #[inline(always)]
    unsafe fn tile_avx512<const MQ: usize, const NR: usize>(
        q: *const f32,
        r: *const f32,
        dp: usize,
        out: &mut [[f32; TILE_ROWS]; TILE_QUERIES],
    ) {
        // SAFETY: caller guarantees bounds (see `dispatch!`) and avx512f.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); NR]; MQ];
            let mut i = 0;
            while i < dp {
                let mut xs = [_mm512_setzero_ps(); NR];
                for (ri, x) in xs.iter_mut().enumerate() {
                    *x = _mm512_loadu_ps(r.add(ri * dp + i));
                }
                for (qi, a) in acc.iter_mut().enumerate() {
                    let qv = _mm512_loadu_ps(q.add(qi * dp + i));
                    for ri in 0..NR {
                        a[ri] = _mm512_fmadd_ps(qv, xs[ri], a[ri]);
                    }
                }
                i += LANES;
            }
            for qi in 0..MQ {
                for ri in 0..NR {
                    let a = acc[qi][ri];
                    let lo = _mm512_castps512_ps256(a);
                    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
                    out[qi][ri] = reduce8(_mm256_add_ps(lo, hi)); // s8[j] = acc[j] + acc[j + 8]
                }
            }
        }
    }

    #[inline(always)]
    unsafe fn tile_avx2<const MQ: usize, const NR: usize>(
        q: *const f32,
        r: *const f32,
        dp: usize,
        out: &mut [[f32; TILE_ROWS]; TILE_QUERIES],
    ) {
        // SAFETY: caller guarantees bounds (see `dispatch!`) and avx2+fma.
        unsafe {
            let mut lo = [[_mm256_setzero_ps(); NR]; MQ];
            let mut hi = [[_mm256_setzero_ps(); NR]; MQ];
            let mut i = 0;
            while i < dp {
                for qi in 0..MQ {
                    let ql = _mm256_loadu_ps(q.add(qi * dp + i));
                    let qh = _mm256_loadu_ps(q.add(qi * dp + i + 8));
                    for ri in 0..NR {
                        let xl = _mm256_loadu_ps(r.add(ri * dp + i));
                        let xh = _mm256_loadu_ps(r.add(ri * dp + i + 8));
                        lo[qi][ri] = _mm256_fmadd_ps(ql, xl, lo[qi][ri]);
                        hi[qi][ri] = _mm256_fmadd_ps(qh, xh, hi[qi][ri]);
                    }
                }
                i += LANES;
            }
            for qi in 0..MQ {
                for ri in 0..NR {
                    out[qi][ri] = reduce8(_mm256_add_ps(lo[qi][ri], hi[qi][ri]));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pseudo(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn every_isa_and_tile_shape_is_bit_identical_to_the_canonical_dot() {
        let dp = 48;
        let q = pseudo(4 * dp, 1);
        let r = pseudo(4 * dp, 2);
        let mut isas = vec![Isa::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                isas.push(Isa::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                isas.push(Isa::Avx512);
            }
        }
        for isa in isas {
            for mq in 1..=4 {
                for nr in 1..=4 {
                    let mut out = [[f32::NAN; 4]; 4];
                    tile(isa, &q, mq, &r, nr, dp, &mut out);
                    for qi in 0..mq {
                        for ri in 0..nr {
                            let want = dot_canonical(
                                &q[qi * dp..(qi + 1) * dp],
                                &r[ri * dp..(ri + 1) * dp],
                            );
                            assert_eq!(out[qi][ri].to_bits(), want.to_bits(), "{isa:?} {mq}x{nr}");
                        }
                    }
                }
            }
        }
    }
}

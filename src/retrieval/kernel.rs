//! Inner-product micro-kernels with one canonical summation order.
//!
//! Rows are stored in blocks of [`BLOCK`] = 16 rows, transposed inside the block (value `i` of
//! the 16 rows is contiguous), like the packed right-hand side of a GEMM. A kernel keeps one
//! 16-lane accumulator per (query, block) and walks the dimensions in order, broadcasting the
//! query value and multiplying it into the 16 rows with a fused multiply-add. So every score is
//! `fma(q[d-1], x[d-1], ... fma(q[1], x[1], fma(q[0], x[0], 0)))`: one sequential chain per
//! pair, on every path (AVX-512, AVX2+FMA, portable `f32::mul_add`). The score of a
//! (query, row) pair is therefore bit-identical whatever the batch size, the tile it falls in,
//! the thread count or the instruction set, so batching concurrent requests never changes a
//! ranking.

/// Rows per packed block (one 512-bit vector of scores).
pub const BLOCK: usize = 16;

/// Which instruction set the kernels use on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// 512-bit vectors with FMA.
    Avx512,
    /// Two 256-bit vectors with FMA per block.
    Avx2,
    /// Portable code (`f32::mul_add`, correctly rounded like the hardware FMA).
    Portable,
}

impl Isa {
    /// Largest register tile `(queries, blocks)` this instruction set uses.
    pub fn tile(self) -> (usize, usize) {
        match self {
            Isa::Avx512 => (8, 3),
            Isa::Avx2 => (4, 1),
            Isa::Portable => (4, 1),
        }
    }
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

/// Whether this CPU can run the kernels of `isa`.
#[cfg(any(feature = "bert", test))]
pub fn supported(isa: Isa) -> bool {
    match isa {
        Isa::Portable => true,
        Isa::Avx2 => detect() != Isa::Portable,
        Isa::Avx512 => detect() == Isa::Avx512,
    }
}

/// Every instruction set this CPU runs (for tests that compare them).
#[cfg(test)]
pub(crate) fn every_supported_isa() -> Vec<Isa> {
    [Isa::Portable, Isa::Avx2, Isa::Avx512]
        .into_iter()
        .filter(|&i| supported(i))
        .collect()
}

/// Packs row-major `n x dim` data into transposed blocks of 16 rows (the last block padded
/// with zero rows).
pub fn pack(data: &[f32], dim: usize) -> Vec<f32> {
    let n = data.len() / dim;
    let blocks = n.div_ceil(BLOCK);
    let mut out = vec![0f32; blocks * dim * BLOCK];
    for (r, row) in data.chunks_exact(dim).enumerate() {
        let base = (r / BLOCK) * dim * BLOCK + r % BLOCK;
        for (i, &x) in row.iter().enumerate() {
            out[base + i * BLOCK] = x;
        }
    }
    out
}

/// The canonical score of one pair (sequential fused multiply-adds); every fast path equals it.
pub fn dot_canonical(q: &[f32], x: &[f32]) -> f32 {
    q.iter().zip(x).fold(0f32, |acc, (a, b)| a.mul_add(*b, acc))
}

/// Scores `mq` queries (row-major, stride `dim`) against `nb` consecutive packed blocks and
/// writes `out[q][b * 16 + lane]`. Requires `mq <= 8`, `nb <= 3`, `queries.len() >= mq * dim`
/// and `blocks.len() >= nb * dim * 16`; other shapes leave `out` untouched.
#[inline]
pub fn tile(
    isa: Isa,
    queries: &[f32],
    mq: usize,
    blocks: &[f32],
    nb: usize,
    dim: usize,
    out: &mut [[f32; 3 * BLOCK]; 8],
) {
    if mq == 0 || mq > 8 || nb == 0 || nb > 3 {
        return;
    }
    if queries.len() < mq * dim || blocks.len() < nb * dim * BLOCK {
        return;
    }
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => {
            // SAFETY: `detect` verified avx512f; shapes checked above.
            unsafe {
                x86::tile_avx512_dispatch(queries.as_ptr(), mq, blocks.as_ptr(), nb, dim, out)
            }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            // SAFETY: `detect` verified avx2 and fma; shapes checked above.
            unsafe { x86::tile_avx2_dispatch(queries.as_ptr(), mq, blocks.as_ptr(), nb, dim, out) }
        }
        _ => portable_tile(queries, mq, blocks, nb, dim, out),
    }
}

/// Rows of `x` multiplied into packed rows, written row-major: `out[i * n + j]` is
/// [`dot_canonical`]`(x[i], row j)` for the `m` rows of `x` (row-major, `k` values each) and the
/// `n` rows packed in `packed` ([`pack`] of an `n x k` matrix). This is a GEMM `x * W^T` (a
/// linear layer's weights `W` are `n x k`), and every output is one sequential FMA chain, so an
/// output row depends on its input row only: not on the other rows, their number, the thread
/// count or the instruction set. Runs on one thread; [`gemm_par`] splits the work over rayon.
#[cfg(any(feature = "bert", test))]
pub fn gemm(isa: Isa, x: &[f32], m: usize, k: usize, packed: &[f32], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; m * n];
    gemm_into(
        isa,
        x,
        k,
        0..m,
        packed,
        0..n.div_ceil(BLOCK),
        n,
        &mut out,
        n,
    );
    out
}

/// [`gemm`] over rayon's pool: row chunks, and column ranges when there are too few rows to
/// keep every thread busy. The same bits as [`gemm`] (each output is computed the same way).
#[cfg(any(feature = "bert", test))]
pub fn gemm_par(isa: Isa, x: &[f32], m: usize, k: usize, packed: &[f32], n: usize) -> Vec<f32> {
    use rayon::prelude::*;
    const ROWS: usize = 64;
    let threads = rayon::current_num_threads();
    let blocks = n.div_ceil(BLOCK);
    if threads == 1 || m.saturating_mul(n).saturating_mul(k) < 1 << 20 {
        return gemm(isa, x, m, k, packed, n);
    }
    let mut out = vec![0f32; m * n];
    let row_chunks = m.div_ceil(ROWS);
    if row_chunks >= 2 * threads {
        out.par_chunks_mut(ROWS * n)
            .enumerate()
            .for_each(|(c, dst)| {
                let r0 = c * ROWS;
                let rows = dst.len() / n;
                gemm_into(isa, x, k, r0..r0 + rows, packed, 0..blocks, n, dst, n);
            });
        return out;
    }
    let parts = (2 * threads).div_ceil(row_chunks).clamp(1, blocks);
    let per = blocks.div_ceil(parts);
    let tiles: Vec<(usize, usize, usize, Vec<f32>)> = (0..row_chunks * parts)
        .into_par_iter()
        .map(|job| {
            let (c, p) = (job / parts, job % parts);
            let (r0, r1) = (c * ROWS, ((c + 1) * ROWS).min(m));
            let (b0, b1) = ((p * per).min(blocks), ((p + 1) * per).min(blocks));
            let width = (b1 * BLOCK).min(n) - (b0 * BLOCK).min(n);
            let mut dst = vec![0f32; (r1 - r0) * width];
            gemm_into(isa, x, k, r0..r1, packed, b0..b1, n, &mut dst, width);
            (r0, b0 * BLOCK, width, dst)
        })
        .collect();
    for (r0, c0, width, dst) in tiles {
        if width == 0 {
            continue;
        }
        for (i, row) in dst.chunks_exact(width).enumerate() {
            out[(r0 + i) * n + c0..][..width].copy_from_slice(row);
        }
    }
    out
}

/// Computes rows `rows` of `x` against packed blocks `blocks` into `dst` (row stride `ld`,
/// column 0 of `dst` = column `blocks.start * 16` of the product; columns past `n` are left out).
#[cfg(any(feature = "bert", test))]
#[allow(clippy::too_many_arguments)]
fn gemm_into(
    isa: Isa,
    x: &[f32],
    k: usize,
    rows: std::ops::Range<usize>,
    packed: &[f32],
    blocks: std::ops::Range<usize>,
    n: usize,
    dst: &mut [f32],
    ld: usize,
) {
    let blk = k * BLOCK;
    let (tq, tb) = isa.tile();
    // Blocks per pass over the rows: ~256 KB of weights, L2-resident while the rows stream by.
    let per_pass = ((256 << 10) / (blk * 4).max(1)).max(tb);
    let mut acc = [[0f32; 3 * BLOCK]; 8];
    let mut c0 = blocks.start;
    while c0 < blocks.end {
        let c1 = (c0 + per_pass).min(blocks.end);
        let mut i = rows.start;
        while i < rows.end {
            let mq = (rows.end - i).min(tq);
            let mut b = c0;
            while b < c1 {
                let nb = (c1 - b).min(tb);
                tile(
                    isa,
                    &x[i * k..(i + mq) * k],
                    mq,
                    &packed[b * blk..(b + nb) * blk],
                    nb,
                    k,
                    &mut acc,
                );
                let col = b * BLOCK;
                let cols = n.saturating_sub(col).min(nb * BLOCK);
                let at = col - blocks.start * BLOCK;
                for (q, scores) in acc.iter().enumerate().take(mq) {
                    dst[(i - rows.start + q) * ld + at..][..cols].copy_from_slice(&scores[..cols]);
                }
                b += nb;
            }
            i += mq;
        }
        c0 = c1;
    }
}

/// Scores of the 16 rows of each of `N` packed blocks against a sparse query: `nonzero` lists
/// the query's non-zero values `(dimension, value)` in increasing dimension order. Skipping a
/// zero value skips `fma(0, x, acc)`, which returns `acc` exactly (the chain starts at +0 and
/// an FMA whose operands include a zero never turns it into -0), so every score is
/// bit-identical to the dense chain ([`dot_canonical`]) at a cost of `nonzero.len()` instead of
/// `dim` steps. The `N` blocks' chains are independent, so the CPU overlaps them (one chain
/// alone waits on each FMA's latency).
#[inline]
pub fn sparse_blocks<const N: usize>(
    isa: Isa,
    nonzero: &[(usize, f32)],
    blocks: [&[f32]; N],
) -> [[f32; BLOCK]; N] {
    let end = nonzero.last().map_or(0, |&(i, _)| (i + 1) * BLOCK);
    if blocks.iter().any(|b| b.len() < end) || nonzero.windows(2).any(|w| w[0].0 >= w[1].0) {
        return [[f32::NAN; BLOCK]; N];
    }
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `detect` verified avx2 and fma (avx512f implies both); bounds checked above.
        Isa::Avx512 | Isa::Avx2 => unsafe { x86::sparse_blocks_fma(nonzero, blocks) },
        _ => sparse_blocks_portable(nonzero, blocks),
    }
}

#[inline(always)]
fn sparse_blocks_portable<const N: usize>(
    nonzero: &[(usize, f32)],
    blocks: [&[f32]; N],
) -> [[f32; BLOCK]; N] {
    let mut acc = [[0f32; BLOCK]; N];
    for &(i, qv) in nonzero {
        for (acc, block) in acc.iter_mut().zip(&blocks) {
            let x = &block[i * BLOCK..(i + 1) * BLOCK];
            for (a, &xv) in acc.iter_mut().zip(x) {
                *a = qv.mul_add(xv, *a);
            }
        }
    }
    acc
}

fn portable_tile(
    queries: &[f32],
    mq: usize,
    blocks: &[f32],
    nb: usize,
    dim: usize,
    out: &mut [[f32; 3 * BLOCK]; 8],
) {
    for (qi, o) in out.iter_mut().enumerate().take(mq) {
        let q = &queries[qi * dim..(qi + 1) * dim];
        for b in 0..nb {
            let blk = &blocks[b * dim * BLOCK..(b + 1) * dim * BLOCK];
            let mut acc = [0f32; BLOCK];
            for (i, &qv) in q.iter().enumerate() {
                for (lane, a) in acc.iter_mut().enumerate() {
                    *a = qv.mul_add(blk[i * BLOCK + lane], *a);
                }
            }
            o[b * BLOCK..(b + 1) * BLOCK].copy_from_slice(&acc);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    /// [`super::sparse_blocks`] with the FMA instructions enabled (the loop vectorises to
    /// `vfmadd` over the 16 lanes; each lane stays one sequential chain).
    ///
    /// # Safety
    /// The CPU must support avx2 and fma; every dimension in `nonzero` must lie in each block.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn sparse_blocks_fma<const N: usize>(
        nonzero: &[(usize, f32)],
        blocks: [&[f32]; N],
    ) -> [[f32; BLOCK]; N] {
        super::sparse_blocks_portable(nonzero, blocks)
    }

    use super::BLOCK;
    use std::arch::x86_64::*;

    macro_rules! dispatch {
        ($name:ident, $kernel:ident, $feat:literal) => {
            #[target_feature(enable = $feat)]
            pub unsafe fn $name(
                q: *const f32,
                mq: usize,
                b: *const f32,
                nb: usize,
                dim: usize,
                out: &mut [[f32; 3 * BLOCK]; 8],
            ) {
                // SAFETY (all arms): the caller guarantees `mq * dim` query floats and
                // `nb * dim * 16` block floats.
                unsafe {
                    match (mq, nb) {
                        (1, 1) => $kernel::<1, 1>(q, b, dim, out),
                        (1, 2) => $kernel::<1, 2>(q, b, dim, out),
                        (1, 3) => $kernel::<1, 3>(q, b, dim, out),
                        (2, 1) => $kernel::<2, 1>(q, b, dim, out),
                        (2, 2) => $kernel::<2, 2>(q, b, dim, out),
                        (2, 3) => $kernel::<2, 3>(q, b, dim, out),
                        (3, 1) => $kernel::<3, 1>(q, b, dim, out),
                        (3, 2) => $kernel::<3, 2>(q, b, dim, out),
                        (3, 3) => $kernel::<3, 3>(q, b, dim, out),
                        (4, 1) => $kernel::<4, 1>(q, b, dim, out),
                        (4, 2) => $kernel::<4, 2>(q, b, dim, out),
                        (4, 3) => $kernel::<4, 3>(q, b, dim, out),
                        (5, 1) => $kernel::<5, 1>(q, b, dim, out),
                        (5, 2) => $kernel::<5, 2>(q, b, dim, out),
                        (5, 3) => $kernel::<5, 3>(q, b, dim, out),
                        (6, 1) => $kernel::<6, 1>(q, b, dim, out),
                        (6, 2) => $kernel::<6, 2>(q, b, dim, out),
                        (6, 3) => $kernel::<6, 3>(q, b, dim, out),
                        (7, 1) => $kernel::<7, 1>(q, b, dim, out),
                        (7, 2) => $kernel::<7, 2>(q, b, dim, out),
                        (7, 3) => $kernel::<7, 3>(q, b, dim, out),
                        (8, 1) => $kernel::<8, 1>(q, b, dim, out),
                        (8, 2) => $kernel::<8, 2>(q, b, dim, out),
                        (8, 3) => $kernel::<8, 3>(q, b, dim, out),
                        _ => {}
                    }
                }
            }
        };
    }

    dispatch!(tile_avx512_dispatch, tile_avx512, "avx512f");
    dispatch!(tile_avx2_dispatch, tile_avx2, "avx2,fma");

    #[inline(always)]
    unsafe fn tile_avx512<const MQ: usize, const NB: usize>(
        q: *const f32,
        b: *const f32,
        dim: usize,
        out: &mut [[f32; 3 * BLOCK]; 8],
    ) {
        // SAFETY: caller guarantees bounds (see `dispatch!`) and avx512f.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); NB]; MQ];
            for i in 0..dim {
                let mut xs = [_mm512_setzero_ps(); NB];
                for (j, x) in xs.iter_mut().enumerate() {
                    *x = _mm512_loadu_ps(b.add(j * dim * BLOCK + i * BLOCK));
                }
                for (qi, a) in acc.iter_mut().enumerate() {
                    let qv = _mm512_set1_ps(*q.add(qi * dim + i));
                    for j in 0..NB {
                        a[j] = _mm512_fmadd_ps(qv, xs[j], a[j]);
                    }
                }
            }
            for (qi, a) in acc.iter().enumerate() {
                for (j, v) in a.iter().enumerate() {
                    _mm512_storeu_ps(out[qi].as_mut_ptr().add(j * BLOCK), *v);
                }
            }
        }
    }

    #[inline(always)]
    unsafe fn tile_avx2<const MQ: usize, const NB: usize>(
        q: *const f32,
        b: *const f32,
        dim: usize,
        out: &mut [[f32; 3 * BLOCK]; 8],
    ) {
        // SAFETY: caller guarantees bounds (see `dispatch!`) and avx2+fma.
        unsafe {
            let mut lo = [[_mm256_setzero_ps(); NB]; MQ];
            let mut hi = [[_mm256_setzero_ps(); NB]; MQ];
            for i in 0..dim {
                for qi in 0..MQ {
                    let qv = _mm256_set1_ps(*q.add(qi * dim + i));
                    for j in 0..NB {
                        let p = b.add(j * dim * BLOCK + i * BLOCK);
                        lo[qi][j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(p), lo[qi][j]);
                        hi[qi][j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(p.add(8)), hi[qi][j]);
                    }
                }
            }
            for qi in 0..MQ {
                for j in 0..NB {
                    let o = out[qi].as_mut_ptr().add(j * BLOCK);
                    _mm256_storeu_ps(o, lo[qi][j]);
                    _mm256_storeu_ps(o.add(8), hi[qi][j]);
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
        let dim = 37;
        let rows = 3 * BLOCK;
        let q = pseudo(8 * dim, 1);
        let data = pseudo(rows * dim, 2);
        let packed = pack(&data, dim);
        for isa in every_supported_isa() {
            for mq in 1..=8 {
                for nb in 1..=3 {
                    let mut out = [[f32::NAN; 3 * BLOCK]; 8];
                    tile(isa, &q, mq, &packed, nb, dim, &mut out);
                    for qi in 0..mq {
                        for r in 0..nb * BLOCK {
                            let want = dot_canonical(
                                &q[qi * dim..(qi + 1) * dim],
                                &data[r * dim..(r + 1) * dim],
                            );
                            assert_eq!(out[qi][r].to_bits(), want.to_bits(), "{isa:?} {mq}x{nb}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn gemm_is_the_canonical_dot_for_every_shape_isa_and_thread_count() {
        for (m, k, n) in [
            (1, 5, 1),
            (3, 37, 17),
            (9, 64, 50),
            (200, 64, 200),
            (20, 300, 401),
            (70, 33, 100),
            (300, 40, 20),
            (5, 96, 600),
        ] {
            let x = pseudo(m * k, m as u32);
            let w = pseudo(n * k, n as u32 + 7);
            let packed = pack(&w, k);
            let want: Vec<u32> = (0..m * n)
                .map(|e| {
                    let (i, j) = (e / n, e % n);
                    dot_canonical(&x[i * k..(i + 1) * k], &w[j * k..(j + 1) * k]).to_bits()
                })
                .collect();
            for isa in every_supported_isa() {
                let got: Vec<u32> = gemm(isa, &x, m, k, &packed, n)
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                assert_eq!(got, want, "{isa:?} {m}x{k}x{n}");
                for threads in [1, 2, 3] {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    let got: Vec<u32> = pool
                        .install(|| gemm_par(isa, &x, m, k, &packed, n))
                        .iter()
                        .map(|v| v.to_bits())
                        .collect();
                    assert_eq!(got, want, "{isa:?} {m}x{k}x{n} on {threads} threads");
                }
            }
        }
    }
}

// GRPO clipped-surrogate loss, gradient and metrics; the same math as rulegym::grpo::cpu.
//
// The host splits the flat token arrays into chunks (every binding <= 100 MB) and each chunk
// into items: (sequence, first token, end token) with at most 4,096 tokens, never crossing a
// sequence or chunk boundary. Four entry points run in order:
//   count_tokens  (per chunk, one workgroup per item): unmasked tokens and bad mask values
//   finalize      (one workgroup): per-sequence counts, totals, per-sequence gradient weights
//   policy_loss   (per chunk, one workgroup per item): gradient per token, partial sums per item
//   reduce        (one workgroup): the batch totals
// Float sums are f32: per thread over at most 16 tokens (or items), then a tree over the
// workgroup, so the error stays ~1e-7 of the sum of absolute values. No compensated-summation
// or magic-number rounding tricks: shader compilers may reassociate float math (Mesa's NIR
// does, turning (x + 1.5 * 2^23) - 1.5 * 2^23 into x). The per-token exp is the CPU's
// polynomial with fma, and round() for the reduction.

const WG: u32 = 256u;

struct Params {
    n_seqs: u32,
    n_items: u32,       // items in the whole batch (finalize, reduce) or this chunk (others)
    item_base: u32,     // global index of this chunk's first item
    aggregation: u32,   // 0 token-mean, 1 seq-mean-token-mean, 2 seq-mean-token-sum
    clip_lo: f32,       // 1 - clip_low
    clip_hi: f32,       // 1 + clip_high
    dual_c: f32,        // dual-clip constant when has_dual == 1
    has_dual: u32,
}

// Per item: sums [loss, rho, d, k3] and counts [low, high, dual, bad_in, bad_out, unused...].
struct Partial {
    s: array<f32, 4>,
    c: array<u32, 8>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> logp_old: array<f32>;
@group(0) @binding(2) var<storage, read> logp_new: array<f32>;
@group(0) @binding(3) var<storage, read> mask_words: array<u32>;   // mask bytes, 4 per word
@group(0) @binding(4) var<storage, read> items: array<vec4<u32>>;  // (seq, start, end, 0)
@group(0) @binding(5) var<storage, read_write> item_stats: array<vec2<u32>>;  // (count, bad mask)
@group(0) @binding(6) var<storage, read> seq_items: array<u32>;    // first item of each sequence, + end
@group(0) @binding(7) var<storage, read> advantages: array<f32>;
@group(0) @binding(8) var<storage, read_write> seq_coef: array<f32>;  // -A_s * w_s
@group(0) @binding(9) var<storage, read_write> totals: array<u32>;  // tokens, sequences, bad mask
@group(0) @binding(10) var<storage, read_write> grad: array<f32>;
@group(0) @binding(11) var<storage, read_write> partials: array<Partial>;
@group(0) @binding(12) var<storage, read_write> result: array<Partial>;
@group(0) @binding(13) var<storage, read> seq_coef_in: array<f32>;
@group(0) @binding(14) var<storage, read> item_stats_in: array<vec2<u32>>;
@group(0) @binding(15) var<storage, read> partials_in: array<Partial>;

var<workgroup> sh_u: array<u32, 1536>;   // 6 x WG
var<workgroup> sh_f: array<f32, 1024>;   // 4 x WG

fn mask_at(t: u32) -> u32 {
    return (mask_words[t >> 2u] >> ((t & 3u) * 8u)) & 0xffu;
}

fn workgroup_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

fn non_finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u;
}

// exp(x) for x clamped to [-86, 88]: the CPU kernel's polynomial (within 2 ulp).
fn exp32(x_in: f32) -> f32 {
    let x = min(max(x_in, -86.0), 88.0);
    let kf = round(x * 1.442695041);
    let k = i32(kf);
    var r = fma(-kf, 0.693359375, x);
    r = fma(-kf, -2.12194440e-4, r);
    var p = 1.9875691500e-4;
    p = fma(p, r, 1.3981999507e-3);
    p = fma(p, r, 8.3334519073e-3);
    p = fma(p, r, 4.1665795894e-2);
    p = fma(p, r, 1.6666665459e-1);
    p = fma(p, r, 0.5);
    p = fma(p, r * r, r) + 1.0;
    let scale = bitcast<f32>(u32(k + 127) << 23u);
    return p * scale;
}

@compute @workgroup_size(256)
fn count_tokens(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let item = workgroup_index(wid, nwg);
    var count = 0u;
    var bad = 0u;
    if (item < params.n_items) {
        let it = items[item];
        for (var t = it.y + lid; t < it.z; t += WG) {
            let m = mask_at(t);
            count += select(0u, 1u, m != 0u);
            bad += select(0u, 1u, m > 1u);
        }
    }
    sh_u[lid] = count;
    sh_u[WG + lid] = bad;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            sh_u[lid] += sh_u[lid + stride];
            sh_u[WG + lid] += sh_u[WG + lid + stride];
        }
        workgroupBarrier();
    }
    if (lid == 0u && item < params.n_items) {
        item_stats[params.item_base + item] = vec2<u32>(sh_u[0], sh_u[WG]);
    }
}

@compute @workgroup_size(256)
fn finalize(@builtin(local_invocation_index) lid: u32) {
    var tokens = 0u;
    var seqs = 0u;
    var bad = 0u;
    for (var s = lid; s < params.n_seqs; s += WG) {
        var c = 0u;
        for (var i = seq_items[s]; i < seq_items[s + 1u]; i++) {
            let st = item_stats_in[i];
            c += st.x;
            bad += st.y;
        }
        tokens += c;
        seqs += select(0u, 1u, c > 0u);
        seq_coef[s] = f32(c);  // per-sequence count, turned into the weight below
    }
    sh_u[lid] = tokens;
    sh_u[WG + lid] = seqs;
    sh_u[2u * WG + lid] = bad;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            sh_u[lid] += sh_u[lid + stride];
            sh_u[WG + lid] += sh_u[WG + lid + stride];
            sh_u[2u * WG + lid] += sh_u[2u * WG + lid + stride];
        }
        workgroupBarrier();
    }
    let n_tok = sh_u[0];
    let n_seq = sh_u[WG];
    if (lid == 0u) {
        totals[0] = n_tok;
        totals[1] = n_seq;
        totals[2] = sh_u[2u * WG];
    }
    for (var s = lid; s < params.n_seqs; s += WG) {
        let c = seq_coef[s];
        var w = 0.0;
        if (n_tok > 0u) {
            if (params.aggregation == 0u) {
                w = 1.0 / f32(n_tok);
            } else if (params.aggregation == 1u) {
                if (c > 0.0) {
                    w = 1.0 / (f32(n_seq) * c);
                }
            } else {
                w = 1.0 / f32(n_seq);
            }
        }
        seq_coef[s] = -advantages[s] * w;
    }
}

@compute @workgroup_size(256)
fn policy_loss(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let item = workgroup_index(wid, nwg);
    var sums = vec4<f32>(0.0);  // v, rho, d, k3
    var below = 0u;
    var above = 0u;
    var bad_in = 0u;
    var bad_out = 0u;
    var a = 0.0;
    var coef = 0.0;
    if (item < params.n_items) {
        let it = items[item];
        a = advantages[it.x];
        coef = seq_coef_in[it.x];
        var lo = 0.0;
        var hi = 3.0e38;
        if (a > 0.0) {
            hi = params.clip_hi;
        } else if (a < 0.0) {
            lo = params.clip_lo;
            if (params.has_dual == 1u) {
                hi = params.dual_c;
            }
        }
        for (var t = it.y + lid; t < it.z; t += WG) {
            let on = mask_at(t) != 0u;
            let o = logp_old[t];
            let n = logp_new[t];
            let d = n - o;
            let rho = exp32(d);
            let is_below = rho < lo;
            let is_above = rho > hi;
            let v = min(max(rho, lo), hi);
            let flows = on && !(is_below || is_above);
            let g = select(0.0, coef * rho, flows);
            grad[t] = g;
            if (on) {
                sums += vec4<f32>(v, rho, d, rho - 1.0 - d);
                below += select(0u, 1u, is_below);
                above += select(0u, 1u, is_above);
                bad_in += select(0u, 1u, non_finite(o) || non_finite(n));
            }
            bad_out += select(0u, 1u, non_finite(g));
        }
    }
    for (var k = 0u; k < 4u; k++) {
        sh_f[k * WG + lid] = sums[k];
    }
    sh_u[lid] = below;
    sh_u[WG + lid] = above;
    sh_u[2u * WG + lid] = bad_in;
    sh_u[3u * WG + lid] = bad_out;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            for (var k = 0u; k < 4u; k++) {
                sh_f[k * WG + lid] += sh_f[k * WG + lid + stride];
            }
            for (var k = 0u; k < 4u; k++) {
                sh_u[k * WG + lid] += sh_u[k * WG + lid + stride];
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u && item < params.n_items) {
        var p: Partial;
        p.s[0] = coef * sh_f[0];  // loss = -A w * sum(v)
        p.s[1] = sh_f[WG];
        p.s[2] = sh_f[2u * WG];
        p.s[3] = sh_f[3u * WG];
        p.c[0] = select(0u, sh_u[0], a < 0.0);           // low clip: A < 0, rho < 1 - clip_low
        p.c[1] = select(0u, sh_u[WG], a > 0.0);          // high clip: A > 0, rho > 1 + clip_high
        p.c[2] = select(0u, sh_u[WG], a < 0.0);          // dual clip: A < 0, rho > c
        p.c[3] = sh_u[2u * WG];
        p.c[4] = sh_u[3u * WG];
        p.c[5] = 0u;
        p.c[6] = 0u;
        p.c[7] = 0u;
        partials[params.item_base + item] = p;
    }
}

@compute @workgroup_size(256)
fn reduce(@builtin(local_invocation_index) lid: u32) {
    var sums = vec4<f32>(0.0);
    var c = array<u32, 5>(0u, 0u, 0u, 0u, 0u);
    for (var i = lid; i < params.n_items; i += WG) {
        let p = partials_in[i];
        sums += vec4<f32>(p.s[0], p.s[1], p.s[2], p.s[3]);
        for (var k = 0u; k < 5u; k++) {
            c[k] += p.c[k];
        }
    }
    for (var k = 0u; k < 4u; k++) {
        sh_f[k * WG + lid] = sums[k];
    }
    for (var k = 0u; k < 5u; k++) {
        sh_u[k * WG + lid] = c[k];
    }
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            for (var k = 0u; k < 4u; k++) {
                sh_f[k * WG + lid] += sh_f[k * WG + lid + stride];
            }
            for (var k = 0u; k < 5u; k++) {
                sh_u[k * WG + lid] += sh_u[k * WG + lid + stride];
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        var p: Partial;
        for (var k = 0u; k < 4u; k++) {
            p.s[k] = sh_f[k * WG];
        }
        for (var k = 0u; k < 5u; k++) {
            p.c[k] = sh_u[k * WG];
        }
        p.c[5] = 0u;
        p.c[6] = 0u;
        p.c[7] = 0u;
        result[0] = p;
    }
}

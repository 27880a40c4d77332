// GRPO group advantages: one invocation per group of `group_size` consecutive rewards.
// A_i = (r_i - mean) / (std + eps), or r_i - mean with mean_only; a group whose rewards are all
// equal gets 0. Matches rulegym::grpo::cpu::group_advantages (which sums in f64) within ~1e-6.
// Sums are plain f32: shader compilers may reassociate float math (Mesa does), so no
// compensated-summation tricks.
// The host dispatches chunks of groups so that no binding exceeds 100 MB.

struct Params {
    n_groups: u32,    // groups in this chunk
    group_size: u32,
    mean_only: u32,   // 1: no division by the std
    population: u32,  // 1: population std (divide by n), 0: sample std (n - 1)
    eps: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rewards: array<f32>;
@group(0) @binding(2) var<storage, read_write> advantages: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * nwg.x * 64u;
    if (g >= params.n_groups) {
        return;
    }
    let n = params.group_size;
    let base = g * n;
    var sum = 0.0;
    var mn = rewards[base];
    var mx = mn;
    for (var i = 0u; i < n; i++) {
        let r = rewards[base + i];
        sum += r;
        mn = min(mn, r);
        mx = max(mx, r);
    }
    if (mn == mx) {
        for (var i = 0u; i < n; i++) {
            advantages[base + i] = 0.0;
        }
        return;
    }
    let mean = sum / f32(n);
    if (params.mean_only == 1u) {
        for (var i = 0u; i < n; i++) {
            advantages[base + i] = rewards[base + i] - mean;
        }
        return;
    }
    var ss = 0.0;
    for (var i = 0u; i < n; i++) {
        let d = rewards[base + i] - mean;
        ss += d * d;
    }
    var dof = f32(n) - 1.0;
    if (params.population == 1u) {
        dof = f32(n);
    }
    let denom = sqrt(ss / dof) + params.eps;
    for (var i = 0u; i < n; i++) {
        advantages[base + i] = (rewards[base + i] - mean) / denom;
    }
}

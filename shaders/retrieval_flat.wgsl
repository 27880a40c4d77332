// Exact inner-product top-k for rulegym::retrieval::gpu.
//
// Ranking: higher score first, ties broken by the lower row index (the CPU rule). Slots that
// hold no hit carry index NONE, which ranks after every real hit.
//
// score_partial: one workgroup per (query, tile of TILE rows) of a row chunk. Each invocation
//   computes the scores of PER rows (sequential fma over the dimension, like the CPU's
//   canonical dot product) into workgroup memory; then k selection passes each pick the best
//   candidate that ranks strictly after the previous pick (a tree reduction per pass), and the
//   tile's top-k goes to the partials buffers at slot (query, tile_base + tile).
// merge: one workgroup per query; the same k passes over all of that query's partial slots
//   (every tile of every row chunk) give its final top-k.

struct Params {
    dim: u32,
    // Rows in this row chunk.
    rows: u32,
    // Global index of the chunk's first row.
    row_base: u32,
    // First partial slot of this chunk (per query).
    tile_base: u32,
    // Tiles in this chunk (>= 1).
    tiles: u32,
    // Partial slots per query, over all chunks.
    slots: u32,
    // Queries in this query chunk.
    queries: u32,
    k: u32,
}

const WG: u32 = 256u;
const PER: u32 = 8u;
const TILE: u32 = 2048u;
const NONE: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> rows: array<f32>;
@group(0) @binding(2) var<storage, read> queries: array<f32>;
@group(0) @binding(3) var<storage, read_write> part_score: array<f32>;
@group(0) @binding(4) var<storage, read_write> part_index: array<u32>;
@group(0) @binding(5) var<storage, read_write> out_score: array<f32>;
@group(0) @binding(6) var<storage, read_write> out_index: array<u32>;

var<workgroup> tile_score: array<f32, TILE>;
var<workgroup> red_score: array<f32, WG>;
var<workgroup> red_index: array<u32, WG>;

// Whether (sa, ia) ranks strictly before (sb, ib).
fn before(sa: f32, ia: u32, sb: f32, ib: u32) -> bool {
    if ia == NONE {
        return false;
    }
    if ib == NONE {
        return true;
    }
    return sa > sb || (sa == sb && ia < ib);
}

// Tree reduction of (red_score, red_index) into slot 0; call with every invocation.
fn reduce(lid: u32) {
    workgroupBarrier();
    for (var w = WG / 2u; w > 0u; w = w >> 1u) {
        if lid < w {
            let os = red_score[lid + w];
            let oi = red_index[lid + w];
            if before(os, oi, red_score[lid], red_index[lid]) {
                red_score[lid] = os;
                red_index[lid] = oi;
            }
        }
        workgroupBarrier();
    }
}

struct Hit {
    score: f32,
    index: u32,
}

// Whether candidate (s, idx) may be this pass's pick (pass 0, or ranking strictly after the
// previous pick) and ranks before the invocation's best so far.
fn improves(j: u32, prev: Hit, s: f32, idx: u32, best: Hit) -> bool {
    return (j == 0u || before(prev.score, prev.index, s, idx)) && before(s, idx, best.score, best.index);
}

// The workgroup's pick of one selection pass: the best of every invocation's `best`; call with
// every invocation.
fn pick(lid: u32, best: Hit) -> Hit {
    red_score[lid] = best.score;
    red_index[lid] = best.index;
    reduce(lid);
    let hit = Hit(red_score[0], red_index[0]);
    workgroupBarrier();
    return hit;
}

@compute @workgroup_size(256)
fn score_partial(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let lin = wid.x + wid.y * nwg.x;
    let q = lin / p.tiles;
    let t = lin % p.tiles;
    if q >= p.queries {
        return;
    }
    let first = t * TILE;
    let qbase = q * p.dim;
    for (var i = 0u; i < PER; i++) {
        let slot = i * WG + lid;
        let r = first + slot;
        var s = 0.0;
        if r < p.rows {
            let base = r * p.dim;
            for (var j = 0u; j < p.dim; j++) {
                s = fma(queries[qbase + j], rows[base + j], s);
            }
        }
        tile_score[slot] = s;
    }
    workgroupBarrier();
    let valid = min(TILE, p.rows - first);
    let out = (q * p.slots + p.tile_base + t) * p.k;
    var prev = Hit(0.0, NONE);
    for (var j = 0u; j < p.k; j++) {
        var best = Hit(0.0, NONE);
        for (var i = 0u; i < PER; i++) {
            let slot = i * WG + lid;
            if slot < valid {
                let s = tile_score[slot];
                let idx = p.row_base + first + slot;
                if improves(j, prev, s, idx, best) {
                    best = Hit(s, idx);
                }
            }
        }
        prev = pick(lid, best);
        if lid == 0u {
            part_score[out + j] = prev.score;
            part_index[out + j] = prev.index;
        }
    }
}

@compute @workgroup_size(256)
fn merge(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let q = wid.x + wid.y * nwg.x;
    if q >= p.queries {
        return;
    }
    let n = p.slots * p.k;
    let base = q * n;
    var prev = Hit(0.0, NONE);
    for (var j = 0u; j < p.k; j++) {
        var best = Hit(0.0, NONE);
        for (var c = lid; c < n; c += WG) {
            let s = part_score[base + c];
            let idx = part_index[base + c];
            if improves(j, prev, s, idx, best) {
                best = Hit(s, idx);
            }
        }
        prev = pick(lid, best);
        if lid == 0u {
            out_score[q * p.k + j] = prev.score;
            out_index[q * p.k + j] = prev.index;
        }
    }
}

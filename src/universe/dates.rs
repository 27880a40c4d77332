//! Dates of birth: a parent is about 27 years older than a child (at least 18, at most 45);
//! spouses are born within 10 years of each other; siblings at least 300 days apart except twins
//! (5%, same date). Dates are ISO strings with zero-padded 4-digit years, so string order is
//! chronological order.
//!
//! Every date of generation `g` is drawn around the tree's anchor `base + 27.0 * g` years
//! (normal, sd 3 years) and clamped to within 4.49 years of it. That window alone guarantees the
//! constraints: parent gaps fall in 27 +- 9 years (inside 18..45) and spouse gaps under 9 years,
//! whatever order people joined the tree in; sibling spacing is then found by rejection, with a
//! twin's date as the always-feasible fallback.

use super::trees::Skeleton;
use crate::seed;
use rand::Rng;

/// Mean generation gap and the standard deviation of a date around its anchor, in days.
const GENERATION: (f64, f64) = (27.0 * 365.25, 3.0 * 365.25);
/// Half-width of the window around the anchor, in days (4.49 years).
const WINDOW: i64 = 1640;
const SIBLING_GAP: i64 = 300;
const TWIN_PROBABILITY: f64 = 0.05;

/// ISO dates of birth for everyone.
pub(crate) fn assign(master: u64, people: &[Skeleton]) -> Vec<String> {
    let mut days: Vec<Option<i64>> = vec![None; people.len()];
    for order in processing_order(people) {
        let tree_min = order
            .iter()
            .map(|&id| people[id].generation)
            .min()
            .unwrap_or(0);
        for id in order {
            let day = draw(master, people, id, tree_min, &days);
            days[id] = Some(day);
        }
    }
    days.into_iter()
        .map(|d| iso(d.expect("every person was dated")))
        .collect()
}

/// Tree by tree, oldest generation first, so parents and siblings are dated before a child.
fn processing_order(people: &[Skeleton]) -> Vec<Vec<usize>> {
    let mut trees: Vec<Vec<usize>> = Vec::new();
    for (id, p) in people.iter().enumerate() {
        if trees.len() <= p.tree as usize {
            trees.resize(p.tree as usize + 1, Vec::new());
        }
        trees[p.tree as usize].push(id);
    }
    for ids in &mut trees {
        ids.sort_by_key(|&id| (people[id].generation, id));
    }
    trees
}

fn normal(rng: &mut impl Rng, mean: f64, sd: f64) -> f64 {
    // Box-Muller; u1 in (0, 1] so the logarithm is finite.
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn draw(master: u64, people: &[Skeleton], id: usize, tree_min: i32, days: &[Option<i64>]) -> i64 {
    let person = &people[id];
    let mut anchor_rng = seed::stream(master, "tree-anchor", person.tree as u64);
    let base = days_from_civil(anchor_rng.random_range(300..=400), 1, 1);
    let anchor = base + ((person.generation - tree_min) as f64 * GENERATION.0) as i64;
    let (lo, hi) = (anchor - WINDOW, anchor + WINDOW);
    let mut rng = seed::stream(master, "dob", id as u64);
    let siblings: Vec<i64> = match person.parents.first() {
        Some(&father) => people[father as usize]
            .children
            .iter()
            .filter_map(|&c| days[c as usize])
            .collect(),
        None => Vec::new(),
    };
    if !siblings.is_empty() && rng.random_bool(TWIN_PROBABILITY) {
        return siblings[rng.random_range(0..siblings.len())];
    }
    // Married-in people are drawn around their spouse, everyone else around the anchor.
    let centre = person
        .spouse
        .and_then(|s| days[s as usize])
        .unwrap_or(anchor) as f64;
    let free = |d: i64| siblings.iter().all(|&s| (d - s).abs() >= SIBLING_GAP);
    let first = (normal(&mut rng, centre, GENERATION.1) as i64).clamp(lo, hi);
    if free(first) {
        return first;
    }
    (0..100)
        .map(|_| rng.random_range(lo..=hi))
        .find(|&d| free(d))
        .unwrap_or_else(|| siblings[rng.random_range(0..siblings.len())])
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day number.
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `YYYY-MM-DD` with a zero-padded 4-digit year.
pub(crate) fn iso(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip() {
        for day in (-700_000..50_000).step_by(997) {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        assert_eq!(iso(days_from_civil(530, 2, 21)), "0530-02-21");
        assert_eq!(iso(0), "1970-01-01");
    }
}

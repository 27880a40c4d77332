//! Dates of birth: a parent is about 27 years (sd 3) older than a child, at least 18 and at most
//! 45; spouses are born within 10 years of each other; siblings at least 300 days apart except
//! twins (5%, same date). Dates are ISO strings with zero-padded 4-digit years, so string order is
//! chronological order.

use super::trees::Skeleton;
use crate::seed;
use rand::Rng;

const YEAR: i64 = 365;
/// Minimum and maximum parent-child gap, in days.
const PARENT_GAP: (i64, i64) = (18 * YEAR, 45 * YEAR);
/// Mean and standard deviation of the generation gap, in days.
const GENERATION_GAP: (f64, f64) = (27.0 * 365.25, 3.0 * 365.25);
const SPOUSE_GAP: i64 = 10 * YEAR;
const SIBLING_GAP: i64 = 300;
const TWIN_PROBABILITY: f64 = 0.05;

/// ISO dates of birth for everyone.
pub(crate) fn assign(master: u64, people: &[Skeleton]) -> Vec<String> {
    let mut days: Vec<Option<i64>> = vec![None; people.len()];
    for order in processing_order(people) {
        let tree_min = order.first().map_or(0, |&id| people[id].generation);
        for id in order {
            let day = draw(master, people, id, tree_min, &days);
            days[id] = Some(day);
        }
    }
    days.into_iter()
        .map(|d| iso(d.expect("every person was dated")))
        .collect()
}

/// Tree by tree, oldest generation first; within a generation, people with parents (dated from
/// them) before people without (dated from a spouse or the tree's anchor).
fn processing_order(people: &[Skeleton]) -> Vec<Vec<usize>> {
    let mut trees: Vec<Vec<usize>> = Vec::new();
    for (id, p) in people.iter().enumerate() {
        if trees.len() <= p.tree as usize {
            trees.resize(p.tree as usize + 1, Vec::new());
        }
        trees[p.tree as usize].push(id);
    }
    for ids in &mut trees {
        ids.sort_by_key(|&id| (people[id].generation, people[id].parents.is_empty(), id));
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
    let mut rng = seed::stream(master, "dob", id as u64);
    let person = &people[id];
    let spouse = person.spouse.and_then(|s| days[s as usize]);
    let Some(&father) = person.parents.first() else {
        return match spouse {
            Some(s) => s + rng.random_range(-SPOUSE_GAP..=SPOUSE_GAP),
            None => {
                let mut anchor_rng = seed::stream(master, "tree-anchor", person.tree as u64);
                let base = days_from_civil(anchor_rng.random_range(300..=400), 1, 1);
                let generation = (person.generation - tree_min) as f64;
                base + normal(&mut rng, generation * GENERATION_GAP.0, GENERATION_GAP.1) as i64
            }
        };
    };
    let mother = person.parents[1];
    let (f, m) = (days[father as usize].unwrap(), days[mother as usize].unwrap());
    let mut lo = f.max(m) + PARENT_GAP.0;
    let mut hi = f.min(m) + PARENT_GAP.1;
    if let Some(s) = spouse {
        // Spouses within 10 years, when compatible with the parents' constraint.
        let (slo, shi) = (lo.max(s - SPOUSE_GAP), hi.min(s + SPOUSE_GAP));
        if slo <= shi {
            (lo, hi) = (slo, shi);
        }
    }
    let siblings: Vec<i64> = people[father as usize]
        .children
        .iter()
        .filter_map(|&c| days[c as usize])
        .collect();
    if !siblings.is_empty() && rng.random_bool(TWIN_PROBABILITY) {
        let twin = siblings[rng.random_range(0..siblings.len())];
        if (lo..=hi).contains(&twin) {
            return twin;
        }
    }
    let free = |d: i64| siblings.iter().all(|&s| (d - s).abs() >= SIBLING_GAP);
    let target = (f.max(m) as f64 + normal(&mut rng, GENERATION_GAP.0, GENERATION_GAP.1)) as i64;
    let first = target.clamp(lo, hi);
    if free(first) {
        return first;
    }
    (0..100)
        .map(|_| rng.random_range(lo..=hi))
        .find(|&d| free(d))
        .or_else(|| (lo..=hi).find(|&d| free(d)))
        .unwrap_or(first)
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

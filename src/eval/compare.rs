//! Several evaluation runs side by side (seeds of one model, or models): means over runs,
//! pooled standard errors and the gaps to a baseline.

use super::report::{EvalReport, GroupStats, REPORT_SCHEMA_VERSION, mean_se};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A statistic of one key (`all` or a difficulty) over several runs: the mean of the runs'
/// means with its standard error over runs (seeds), and the standard error over every question
/// of every run pooled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedStats {
    /// `all` or a PhantomWiki difficulty.
    pub key: String,
    /// Runs with at least one episode of this key.
    pub runs: usize,
    /// Episodes pooled over those runs.
    pub n: usize,
    /// Mean over runs of each run's mean F1.
    pub f1: f64,
    /// Standard error of `f1` over runs (0 with fewer than 2 runs).
    pub f1_se_seeds: f64,
    /// Standard error of the pooled mean F1 over all episodes.
    pub f1_se_questions: f64,
    /// Mean over runs of each run's mean searches per question.
    pub searches: f64,
    /// Standard error of `searches` over runs.
    pub searches_se_seeds: f64,
    /// Standard error of the pooled mean searches over all episodes.
    pub searches_se_questions: f64,
    /// Mean searches the proof-derived oracle needs.
    pub oracle_searches: f64,
    /// Mean over runs of the mean token-level F1 (when every run has it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_f1: Option<f64>,
    /// Standard error of `token_f1` over runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_f1_se_seeds: Option<f64>,
}

impl SeedStats {
    /// The band drawn around a mean: the SE over seeds with 2+ runs, else over questions.
    pub fn f1_band(&self) -> f64 {
        if self.runs >= 2 {
            self.f1_se_seeds
        } else {
            self.f1_se_questions
        }
    }
    /// As [`SeedStats::f1_band`], for searches.
    pub fn searches_band(&self) -> f64 {
        if self.runs >= 2 {
            self.searches_se_seeds
        } else {
            self.searches_se_questions
        }
    }
}

/// Runs of one configuration (one group: several seeds), or of one universe size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonGroup {
    /// The group's name (`--run GROUP=DIR`), or `<N> people` for universe sizes.
    pub group: String,
    /// The run labels in it, in command-line order.
    pub runs: Vec<String>,
    /// People in the universe of its runs (the largest, if they differ).
    pub universe_people: usize,
    /// Every episode.
    pub overall: SeedStats,
    /// Per PhantomWiki difficulty, ascending.
    pub by_difficulty: Vec<SeedStats>,
}

/// A difference of mean F1 between a group and the baseline group, for one key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GapStats {
    /// `all` or a PhantomWiki difficulty (keys both groups have).
    pub key: String,
    /// Mean F1 of the group minus mean F1 of the baseline.
    pub f1_gap: f64,
    /// Standard error of the gap, `sqrt(se_group^2 + se_baseline^2)` (runs independent), each
    /// side's band error (over seeds with 2+ runs, else over questions).
    pub f1_gap_se: f64,
}

/// A group against the baseline group (e.g. the knowledge-advantage gap: a model trained on
/// real-world data minus the same model trained on fictional data, `--baseline fictional`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    /// The group.
    pub group: String,
    /// The baseline group.
    pub baseline: String,
    /// Over every episode.
    pub overall: GapStats,
    /// Per PhantomWiki difficulty both groups have, ascending.
    pub by_difficulty: Vec<GapStats>,
}

/// `comparison.json`: several runs side by side (schema version [`REPORT_SCHEMA_VERSION`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// [`REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// One entry per group, in first-appearance order.
    pub groups: Vec<ComparisonGroup>,
    /// One entry per universe size, ascending (the unseen-universe comparison: 1K vs 10K).
    pub by_universe: Vec<ComparisonGroup>,
    /// Every other group minus the baseline group (only with a baseline).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<Gap>,
}

fn gap_stats(a: &SeedStats, b: &SeedStats) -> GapStats {
    GapStats {
        key: a.key.clone(),
        f1_gap: a.f1 - b.f1,
        f1_gap_se: (a.f1_band().powi(2) + b.f1_band().powi(2)).sqrt(),
    }
}

fn gap(group: &ComparisonGroup, baseline: &ComparisonGroup) -> Gap {
    Gap {
        group: group.group.clone(),
        baseline: baseline.group.clone(),
        overall: gap_stats(&group.overall, &baseline.overall),
        by_difficulty: group
            .by_difficulty
            .iter()
            .filter_map(|a| {
                let b = baseline.by_difficulty.iter().find(|b| b.key == a.key)?;
                Some(gap_stats(a, b))
            })
            .collect(),
    }
}

/// (n, sum, sum of squares) of a group, rebuilt exactly from its mean and standard error.
fn moments(n: usize, mean: f64, se: f64) -> (f64, f64, f64) {
    let n = n as f64;
    let var = se * se * n; // se = sd / sqrt(n)
    let sum = n * mean;
    let sum2 = if n >= 2.0 {
        (n - 1.0) * var + n * mean * mean
    } else {
        n * mean * mean
    };
    (n, sum, sum2)
}

fn pooled_se(parts: &[(usize, f64, f64)]) -> f64 {
    let (n, sum, sum2) = parts
        .iter()
        .map(|&(n, m, s)| moments(n, m, s))
        .fold((0.0, 0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    if n < 2.0 {
        return 0.0;
    }
    let mean = sum / n;
    let var = ((sum2 - n * mean * mean) / (n - 1.0)).max(0.0);
    (var / n).sqrt()
}

fn seed_stats(key: String, stats: &[&GroupStats]) -> SeedStats {
    let f1: Vec<f64> = stats.iter().map(|g| g.f1).collect();
    let searches: Vec<f64> = stats.iter().map(|g| g.searches).collect();
    let token: Option<Vec<f64>> = stats.iter().map(|g| g.token_f1).collect();
    let token = token.filter(|t| !t.is_empty()).map(|t| mean_se(&t));
    let (f1, f1_se_seeds) = mean_se(&f1);
    let (searches, searches_se_seeds) = mean_se(&searches);
    let n: usize = stats.iter().map(|g| g.n).sum();
    let oracle = if n == 0 {
        0.0
    } else {
        stats
            .iter()
            .map(|g| g.oracle_searches * g.n as f64)
            .sum::<f64>()
            / n as f64
    };
    SeedStats {
        key,
        runs: stats.len(),
        n,
        f1,
        f1_se_seeds,
        f1_se_questions: pooled_se(
            &stats
                .iter()
                .map(|g| (g.n, g.f1, g.f1_se))
                .collect::<Vec<_>>(),
        ),
        searches,
        searches_se_seeds,
        searches_se_questions: pooled_se(
            &stats
                .iter()
                .map(|g| (g.n, g.searches, g.searches_se))
                .collect::<Vec<_>>(),
        ),
        oracle_searches: oracle,
        token_f1: token.map(|t| t.0),
        token_f1_se_seeds: token.map(|t| t.1),
    }
}

fn comparison_group(group: String, runs: &[&(String, EvalReport)]) -> ComparisonGroup {
    let overall: Vec<&GroupStats> = runs.iter().map(|(_, r)| &r.overall).collect();
    let mut keys: BTreeMap<i64, Vec<&GroupStats>> = BTreeMap::new();
    for (_, r) in runs {
        for g in &r.by_difficulty {
            if let Ok(k) = g.key.parse::<i64>() {
                keys.entry(k).or_default().push(g);
            }
        }
    }
    ComparisonGroup {
        group,
        runs: runs.iter().map(|(_, r)| r.run.label.clone()).collect(),
        universe_people: runs
            .iter()
            .map(|(_, r)| r.run.universe_people)
            .max()
            .unwrap_or(0),
        overall: seed_stats("all".into(), &overall),
        by_difficulty: keys
            .into_iter()
            .map(|(k, gs)| seed_stats(k.to_string(), &gs))
            .collect(),
    }
}

/// Compares runs given as (group, report): runs of one group are seeds of one configuration
/// (means and standard errors over seeds and over questions); runs are also grouped by universe
/// size; with a `baseline` group, every other group's F1 gap to it. Errors on no runs and on a
/// baseline that names no group (listing the groups).
pub fn compare(runs: &[(String, EvalReport)], baseline: Option<&str>) -> crate::Result<Comparison> {
    if runs.is_empty() {
        return Err(crate::Error::Config(
            "a comparison needs at least one run".into(),
        ));
    }
    let mut order: Vec<&str> = Vec::new();
    for (g, _) in runs {
        if !order.contains(&g.as_str()) {
            order.push(g);
        }
    }
    let groups: Vec<ComparisonGroup> = order
        .iter()
        .map(|g| {
            let members: Vec<&(String, EvalReport)> =
                runs.iter().filter(|(name, _)| name == g).collect();
            comparison_group((*g).to_owned(), &members)
        })
        .collect();
    let gaps = match baseline {
        None => Vec::new(),
        Some(name) => {
            let base = groups.iter().find(|g| g.group == name).ok_or_else(|| {
                crate::Error::Config(format!(
                    "baseline {name:?} is not a group (groups: {})",
                    order.join(", ")
                ))
            })?;
            groups
                .iter()
                .filter(|g| g.group != name)
                .map(|g| gap(g, base))
                .collect()
        }
    };
    let mut sizes: BTreeMap<usize, Vec<&(String, EvalReport)>> = BTreeMap::new();
    for run in runs {
        sizes
            .entry(run.1.run.universe_people)
            .or_default()
            .push(run);
    }
    let by_universe = sizes
        .into_iter()
        .map(|(people, members)| comparison_group(format!("{people} people"), &members))
        .collect();
    Ok(Comparison {
        schema_version: REPORT_SCHEMA_VERSION,
        groups,
        by_universe,
        gaps,
    })
}

//! A curriculum over the question generator: a ladder of difficulty levels, a controller that
//! moves the level from a window of recent rewards, and fresh engine-verified questions drawn
//! from new universes at the current level.
//!
//! The controller follows reasoning-gym's per-dataset curriculum: once `window` rewards have
//! been reported at a level, their mean moves the level up (at least `success_threshold`), down
//! (at most `failure_threshold`) or leaves it; each move starts a new window. The default ladder
//! climbs relation hops first (PhantomEnvironments: hop count drives transfer, and the search
//! budget grows with it), then adds attribute constraints, comparisons and a larger universe.
//!
//! Questions come from universes no static dataset holds: universe `n` of a curriculum has the
//! seed [`crate::seed::derive`]`(seed, "curriculum/universe", n)` (skipping `exclude_seeds`, e.g.
//! a held-out universe), is generated at the level's size, and serves at most
//! `questions_per_universe` of its questions of the level's hop range, in a seeded order, before
//! the next universe is drawn (a level change draws the next universe at once). Every question is
//! engine-verified and certified answerable in the search environment, as every generated
//! question is.
//!
//! Determinism: the questions drawn depend only on the config and the sequence of rewards
//! reported; [`CurriculumState`] is everything that changes, serialisable, so a run resumes
//! exactly where it stopped.

use crate::question::{Family, Question, QuestionConfig};
use crate::retrieval::SearchIndex;
use crate::universe::UniverseConfig;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A curriculum config or state that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CurriculumError {
    /// The ladder has no level.
    #[error("the curriculum's ladder is empty")]
    EmptyLadder,
    /// The thresholds are not `0 <= failure < success <= 1`.
    #[error(
        "thresholds out of order: need 0 <= failure_threshold ({failure}) < success_threshold ({success}) <= 1"
    )]
    Thresholds {
        /// `success_threshold`.
        success: f64,
        /// `failure_threshold`.
        failure: f64,
    },
    /// A level is unusable.
    #[error("ladder level {level}: {message}")]
    Level {
        /// The level.
        level: usize,
        /// What is wrong.
        message: String,
    },
    /// Another knob is out of range.
    #[error("{knob} {message}")]
    Knob {
        /// The knob.
        knob: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A resume state belongs to another curriculum.
    #[error("the resume state is of a curriculum with {what} {state}, this one has {config}")]
    ForeignState {
        /// What differs (seed, ladder length).
        what: &'static str,
        /// The state's value.
        state: u64,
        /// The config's value.
        config: u64,
    },
    /// A reward outside [0, 1] (or not a number) was reported.
    #[error("reported reward {0} is not in [0, 1]")]
    Reward(f64),
    /// Universes kept failing to give a question of the level.
    #[error(
        "level {level}: {tried} universes in a row gave no question of {min_hops}..={max_hops} hops"
    )]
    NoQuestions {
        /// The level.
        level: usize,
        /// Universes tried.
        tried: usize,
        /// The level's hop range.
        min_hops: usize,
        /// The level's hop range.
        max_hops: usize,
    },
}

/// One rung of the ladder: what the generator is asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct Level {
    /// Question families.
    pub families: Vec<Family>,
    /// Fewest relation hops of a question served.
    pub min_hops: usize,
    /// Most relation hops of a question served (the generator's `max_hops`).
    pub max_hops: usize,
    /// Family trees of each universe (its size).
    pub num_family_trees: usize,
}

impl Default for Level {
    fn default() -> Self {
        Level::hops(1, 1)
    }
}

impl Level {
    /// Questions of the `hops` family with `min_hops..=max_hops` hops, in universes of 10 trees.
    pub fn hops(min_hops: usize, max_hops: usize) -> Self {
        Level {
            families: vec![Family::Hops],
            min_hops,
            max_hops,
            num_family_trees: 10,
        }
    }

    /// This level with other families.
    pub fn with_families(mut self, families: Vec<Family>) -> Self {
        self.families = families;
        self
    }

    /// This level in universes of `trees` family trees.
    pub fn with_trees(mut self, trees: usize) -> Self {
        self.num_family_trees = trees;
        self
    }
}

/// The knobs of a curriculum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct CurriculumConfig {
    /// Seed of the universes and of the order questions are served in.
    pub seed: u64,
    /// The levels, easiest first.
    pub ladder: Vec<Level>,
    /// The level a fresh curriculum starts at.
    pub start_level: usize,
    /// Mean reward of a window at or above which the level goes up (reasoning-gym: 0.70).
    pub success_threshold: f64,
    /// Mean reward of a window at or below which the level goes down (reasoning-gym: 0.10).
    pub failure_threshold: f64,
    /// Rewards per decision (reasoning-gym's `last_k`).
    pub window: usize,
    /// Questions served from one universe before the next is generated.
    pub questions_per_universe: usize,
    /// Questions the generator is asked for per cell (the pool of each universe).
    pub per_cell: usize,
    /// Universe seeds never drawn (a held-out universe).
    pub exclude_seeds: Vec<u64>,
}

impl Default for CurriculumConfig {
    fn default() -> Self {
        CurriculumConfig {
            seed: 1,
            ladder: vec![
                Level::hops(1, 1),
                Level::hops(2, 2),
                Level::hops(3, 3),
                Level::hops(4, 4),
                Level::hops(1, 3).with_families(vec![Family::HopsConstraints]),
                Level::hops(1, 3).with_families(vec![Family::HopsComparisons]),
                Level::hops(3, 5)
                    .with_families(vec![Family::Hops, Family::HopsConstraints])
                    .with_trees(40),
            ],
            start_level: 0,
            success_threshold: 0.7,
            failure_threshold: 0.1,
            window: 16,
            questions_per_universe: 32,
            per_cell: 10,
            exclude_seeds: Vec::new(),
        }
    }
}

impl CurriculumConfig {
    /// Checks every knob.
    pub fn validate(&self) -> Result<(), CurriculumError> {
        if self.ladder.is_empty() {
            return Err(CurriculumError::EmptyLadder);
        }
        let (s, f) = (self.success_threshold, self.failure_threshold);
        if !(s.is_finite() && f.is_finite() && 0.0 <= f && f < s && s <= 1.0) {
            return Err(CurriculumError::Thresholds {
                success: s,
                failure: f,
            });
        }
        let knob = |knob: &'static str, ok: bool, message: String| {
            if ok {
                Ok(())
            } else {
                Err(CurriculumError::Knob { knob, message })
            }
        };
        knob(
            "window",
            (1..=100_000).contains(&self.window),
            format!("must be in 1..=100000, got {}", self.window),
        )?;
        knob(
            "questions_per_universe",
            (1..=1_000_000).contains(&self.questions_per_universe),
            format!(
                "must be in 1..=1000000, got {}",
                self.questions_per_universe
            ),
        )?;
        knob(
            "per_cell",
            (1..=10_000).contains(&self.per_cell),
            format!("must be in 1..=10000, got {}", self.per_cell),
        )?;
        knob(
            "start_level",
            self.start_level < self.ladder.len(),
            format!(
                "{} is beyond the ladder's {} levels",
                self.start_level,
                self.ladder.len()
            ),
        )?;
        for (i, level) in self.ladder.iter().enumerate() {
            let bad = |message: String| Err(CurriculumError::Level { level: i, message });
            if level.families.is_empty() {
                return bad("no question family".into());
            }
            if level.families.contains(&Family::Base) {
                return bad("the base family has no hop knob; use hops families".into());
            }
            if level.min_hops > level.max_hops || !(1..=7).contains(&level.max_hops) {
                return bad(format!(
                    "hops {}..={} must satisfy min <= max, 1 <= max <= 7",
                    level.min_hops, level.max_hops
                ));
            }
            if !(1..=10_000).contains(&level.num_family_trees) {
                return bad(format!(
                    "num_family_trees must be in 1..=10000, got {}",
                    level.num_family_trees
                ));
            }
        }
        Ok(())
    }
}

/// Everything a curriculum changes as it runs: resume from it with [`Curriculum::resume`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurriculumState {
    /// The config's seed (a state resumes only the curriculum it came from).
    pub seed: u64,
    /// The current level.
    pub level: usize,
    /// Rewards reported at this level since its window last started.
    pub window: Vec<f64>,
    /// Rewards reported in all.
    pub reports: u64,
    /// Questions drawn in all.
    pub draws: u64,
    /// The universe being served (its number, not its seed).
    pub universe: u64,
    /// Questions served from it.
    pub served: usize,
    /// (reports so far, new level) at each level change.
    pub moves: Vec<(u64, usize)>,
}

/// A question drawn from the curriculum, with the index of its universe's articles.
#[derive(Debug, Clone)]
pub struct Draw {
    /// The question (engine-verified, certified answerable).
    pub question: Question,
    /// The search index of its universe (document ids are person ids).
    pub index: Arc<SearchIndex>,
    /// Its universe's seed.
    pub universe_seed: u64,
    /// The level it was drawn at.
    pub level: usize,
}

/// The questions of one universe at one level, in serving order.
struct Pool {
    universe: u64,
    level: usize,
    seed: u64,
    questions: Vec<Question>,
    index: Arc<SearchIndex>,
}

/// A running curriculum: [`Curriculum::draw`] serves questions, [`Curriculum::report`] takes
/// rewards and moves the level.
pub struct Curriculum {
    config: CurriculumConfig,
    state: CurriculumState,
    pool: Option<Pool>,
}

/// Universes tried in a row for one question before a level is called empty.
const MAX_EMPTY_UNIVERSES: usize = 8;

impl Curriculum {
    /// A fresh curriculum at `config.start_level`.
    pub fn new(config: CurriculumConfig) -> Result<Self, CurriculumError> {
        config.validate()?;
        let state = CurriculumState {
            seed: config.seed,
            level: config.start_level,
            window: Vec::new(),
            reports: 0,
            draws: 0,
            universe: 0,
            served: 0,
            moves: Vec::new(),
        };
        Ok(Curriculum {
            config,
            state,
            pool: None,
        })
    }

    /// The curriculum of `config` continued from `state`.
    pub fn resume(
        config: CurriculumConfig,
        state: CurriculumState,
    ) -> Result<Self, CurriculumError> {
        config.validate()?;
        if state.seed != config.seed {
            return Err(CurriculumError::ForeignState {
                what: "seed",
                state: state.seed,
                config: config.seed,
            });
        }
        if state.level >= config.ladder.len() {
            return Err(CurriculumError::ForeignState {
                what: "level",
                state: state.level as u64,
                config: config.ladder.len() as u64,
            });
        }
        if state.window.len() >= config.window
            || state.window.iter().any(|r| !(0.0..=1.0).contains(r))
        {
            return Err(CurriculumError::Knob {
                knob: "state.window",
                message: format!(
                    "holds {} rewards (at most {} in [0, 1] fit this config)",
                    state.window.len(),
                    config.window - 1
                ),
            });
        }
        Ok(Curriculum {
            config,
            state,
            pool: None,
        })
    }

    /// The config.
    pub fn config(&self) -> &CurriculumConfig {
        &self.config
    }

    /// The state (serialise it to resume later).
    pub fn state(&self) -> &CurriculumState {
        &self.state
    }

    /// The current level.
    pub fn level(&self) -> usize {
        self.state.level
    }

    /// The seed of universe `n`: the `n`-th derived seed not in `exclude_seeds`.
    fn universe_seed(&self, n: u64) -> u64 {
        let mut i = n;
        loop {
            let seed = crate::seed::derive(self.config.seed, "curriculum/universe", i);
            if !self.config.exclude_seeds.contains(&seed) {
                return seed;
            }
            // Skipping shifts later universes by one; the mapping stays a function of n.
            i += 1 << 40;
        }
    }

    /// Generates the pool of universe `n` at `level`.
    fn pool(&self, n: u64, level: usize) -> crate::Result<Pool> {
        let l = &self.config.ladder[level];
        let seed = self.universe_seed(n);
        let universe = UniverseConfig {
            seed,
            num_family_trees: l.num_family_trees,
            ..UniverseConfig::default()
        };
        let questions = QuestionConfig {
            seed,
            families: l.families.clone(),
            max_hops: l.max_hops,
            per_template: self.config.per_cell,
            easy_mode: universe.easy_mode,
            ..QuestionConfig::default()
        };
        let dataset =
            crate::dataset::build(&crate::dataset::BuildConfig::new(universe, Some(questions)))?;
        let index = dataset.index.ok_or_else(|| {
            crate::Error::Config("the curriculum's universe was built without an index".into())
        })?;
        let mut questions: Vec<Question> = dataset
            .questions
            .into_iter()
            .filter(|q| (l.min_hops..=l.max_hops).contains(&q.hops))
            .filter(|q| q.certificate.as_ref().is_none_or(|c| c.solvable))
            .collect();
        questions.shuffle(&mut crate::seed::stream(
            self.config.seed,
            "curriculum/order",
            n,
        ));
        Ok(Pool {
            universe: n,
            level,
            seed,
            questions,
            index,
        })
    }

    /// The next question at the current level.
    pub fn draw(&mut self) -> crate::Result<Draw> {
        let level = self.state.level;
        for _ in 0..MAX_EMPTY_UNIVERSES {
            let exhausted = self.state.served >= self.config.questions_per_universe;
            if exhausted {
                self.state.universe += 1;
                self.state.served = 0;
            }
            let current = self
                .pool
                .as_ref()
                .is_some_and(|p| p.universe == self.state.universe && p.level == level);
            if !current {
                self.pool = Some(self.pool(self.state.universe, level)?);
            }
            let pool = self.pool.as_ref().expect("just built");
            if let Some(q) = pool.questions.get(self.state.served) {
                self.state.served += 1;
                self.state.draws += 1;
                return Ok(Draw {
                    question: q.clone(),
                    index: pool.index.clone(),
                    universe_seed: pool.seed,
                    level,
                });
            }
            // This universe has no more questions of the level: the next one.
            self.state.served = self.config.questions_per_universe;
        }
        let l = &self.config.ladder[level];
        Err(CurriculumError::NoQuestions {
            level,
            tried: MAX_EMPTY_UNIVERSES,
            min_hops: l.min_hops,
            max_hops: l.max_hops,
        }
        .into())
    }

    /// Takes the reward of an episode of a drawn question; returns the level after it. Once a
    /// window is full its mean may move the level (a move starts a new window and serves the
    /// next universe at once).
    pub fn report(&mut self, reward: f64) -> Result<usize, CurriculumError> {
        if !(0.0..=1.0).contains(&reward) {
            return Err(CurriculumError::Reward(reward));
        }
        self.state.reports += 1;
        self.state.window.push(reward);
        if self.state.window.len() < self.config.window {
            return Ok(self.state.level);
        }
        let mean = self.state.window.iter().sum::<f64>() / self.state.window.len() as f64;
        self.state.window.clear();
        let top = self.config.ladder.len() - 1;
        let level = self.state.level;
        let next = if mean >= self.config.success_threshold {
            (level + 1).min(top)
        } else if mean <= self.config.failure_threshold {
            level.saturating_sub(1)
        } else {
            level
        };
        if next != level {
            self.state.level = next;
            self.state.moves.push((self.state.reports, next));
            self.state.universe += 1;
            self.state.served = 0;
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> CurriculumConfig {
        CurriculumConfig {
            ladder: vec![Level::hops(1, 1), Level::hops(2, 2)],
            window: 4,
            questions_per_universe: 3,
            per_cell: 4,
            ..CurriculumConfig::default()
        }
    }

    fn ids(c: &mut Curriculum, rewards: &[f64]) -> Vec<(String, usize, u64)> {
        rewards
            .iter()
            .map(|&r| {
                let d = c.draw().unwrap();
                c.report(r).unwrap();
                (d.question.id, d.level, d.universe_seed)
            })
            .collect()
    }

    #[test]
    fn the_level_follows_the_window_mean() {
        let mut c = Curriculum::new(small()).unwrap();
        for _ in 0..3 {
            assert_eq!(c.report(1.0).unwrap(), 0);
        }
        assert_eq!(c.report(0.8).unwrap(), 1, "mean 0.95 >= 0.7 moves up");
        for _ in 0..4 {
            c.report(1.0).unwrap();
        }
        assert_eq!(c.level(), 1, "the top level is the ceiling");
        for r in [0.0, 0.1, 0.0, 0.2] {
            c.report(r).unwrap();
        }
        assert_eq!(c.level(), 0, "mean 0.075 <= 0.1 moves down");
        for r in [0.5, 0.5, 0.5, 0.5] {
            c.report(r).unwrap();
        }
        assert_eq!(c.level(), 0, "between the thresholds it stays");
        assert_eq!(c.state().moves, vec![(4, 1), (12, 0)]);
        assert_eq!(c.report(1.5), Err(CurriculumError::Reward(1.5)));
        assert!(matches!(
            c.report(f64::NAN),
            Err(CurriculumError::Reward(_))
        ));
    }

    #[test]
    fn draws_are_fresh_verified_questions_at_the_level_and_deterministic() {
        let rewards = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0];
        let mut a = Curriculum::new(small()).unwrap();
        let first = ids(&mut a, &rewards);
        let mut b = Curriculum::new(small()).unwrap();
        assert_eq!(
            ids(&mut b, &rewards),
            first,
            "same seed and rewards, same draws"
        );
        assert!(first[..4].iter().all(|(_, level, _)| *level == 0));
        assert!(first[4..].iter().all(|(_, level, _)| *level == 1));
        // Three questions per universe, and a level change draws a new universe.
        let seeds: Vec<u64> = first.iter().map(|d| d.2).collect();
        assert_eq!(seeds[0], seeds[2]);
        assert_ne!(seeds[2], seeds[3]);
        assert_ne!(seeds[3], seeds[4]);
        let mut c = Curriculum::new(small()).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..5 {
            let d = c.draw().unwrap();
            let hops = c.config().ladder[d.level].max_hops;
            assert_eq!(d.question.hops, hops);
            assert!(d.question.certificate.as_ref().is_some_and(|c| c.solvable));
            assert!(!d.question.answers.is_empty());
            assert!(!d.index.is_empty());
            assert!(
                seen.insert((d.universe_seed, d.question.id)),
                "no question twice"
            );
        }
    }

    #[test]
    fn a_resumed_curriculum_continues_exactly() {
        let rewards = [1.0, 1.0, 0.5, 1.0, 1.0, 0.0, 0.25];
        let mut whole = Curriculum::new(small()).unwrap();
        let all = ids(&mut whole, &rewards);
        let mut first = Curriculum::new(small()).unwrap();
        let mut head = ids(&mut first, &rewards[..3]);
        let state: CurriculumState =
            serde_json::from_str(&serde_json::to_string(first.state()).unwrap()).unwrap();
        let mut resumed = Curriculum::resume(small(), state.clone()).unwrap();
        head.extend(ids(&mut resumed, &rewards[3..]));
        assert_eq!(head, all);
        let other = CurriculumConfig { seed: 2, ..small() };
        assert!(matches!(
            Curriculum::resume(other, state),
            Err(CurriculumError::ForeignState { what: "seed", .. })
        ));
    }

    #[test]
    fn excluded_seeds_are_never_drawn() {
        let plain = Curriculum::new(small()).unwrap();
        let first = plain.universe_seed(0);
        let c = Curriculum::new(CurriculumConfig {
            exclude_seeds: vec![first],
            ..small()
        })
        .unwrap();
        assert_ne!(c.universe_seed(0), first);
        assert_eq!(c.universe_seed(1), plain.universe_seed(1));
    }

    #[test]
    fn bad_configs_are_errors() {
        let bad = |c: CurriculumConfig| Curriculum::new(c).err().unwrap();
        assert_eq!(
            bad(CurriculumConfig {
                ladder: vec![],
                ..small()
            }),
            CurriculumError::EmptyLadder
        );
        assert!(matches!(
            bad(CurriculumConfig {
                success_threshold: 0.1,
                failure_threshold: 0.7,
                ..small()
            }),
            CurriculumError::Thresholds { .. }
        ));
        assert!(matches!(
            bad(CurriculumConfig {
                window: 0,
                ..small()
            }),
            CurriculumError::Knob { knob: "window", .. }
        ));
        assert!(matches!(
            bad(CurriculumConfig {
                ladder: vec![Level::hops(3, 2)],
                ..small()
            }),
            CurriculumError::Level { level: 0, .. }
        ));
        assert!(matches!(
            bad(CurriculumConfig {
                start_level: 5,
                ..small()
            }),
            CurriculumError::Knob {
                knob: "start_level",
                ..
            }
        ));
    }
}

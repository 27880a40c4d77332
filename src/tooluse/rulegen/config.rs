//! Generation options and difficulty knobs of rule-generated tool worlds.

use super::RuleGenError;

/// Generation options and difficulty knobs (inclusive ranges).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleGenConfig {
    /// Seed of the task streams.
    pub seed: u64,
    /// Relation hops from the user to the target (1 or 2).
    pub hops: (usize, usize),
    /// How many people may fit the description (more than one: the agent must ask which).
    pub candidates: (usize, usize),
    /// How many hidden slots the agent must ask for (at least 1; the target slot counts).
    pub slots: (usize, usize),
    /// People from other family trees added to the world.
    pub outsiders: usize,
    /// Candidates tried per task asked for before giving up.
    pub attempts_per_task: u64,
}

impl Default for RuleGenConfig {
    fn default() -> Self {
        RuleGenConfig {
            seed: 0,
            hops: (1, 2),
            candidates: (1, 3),
            slots: (1, 3),
            outsiders: 3,
            attempts_per_task: 50,
        }
    }
}

impl RuleGenConfig {
    /// Checks every knob.
    pub(super) fn validate(&self) -> Result<(), RuleGenError> {
        let bad = |m: &str| Err(RuleGenError::Config(m.into()));
        if self.hops.0 < 1 || self.hops.1 > 2 || self.hops.0 > self.hops.1 {
            return bad("hops must be a range within 1..=2");
        }
        if self.candidates.0 < 1 || self.candidates.0 > self.candidates.1 {
            return bad("candidates must be a range with a minimum of at least 1");
        }
        if self.slots.0 < 1 || self.slots.1 > 3 || self.slots.0 > self.slots.1 {
            return bad("slots must be a range within 1..=3");
        }
        if self.outsiders < 1 {
            return bad("outsiders must be at least 1 (the out-of-family rule needs one)");
        }
        Ok(())
    }
}

//! Rewards: answer scores for the search environment (set F1 against engine-verified gold) and
//! executable rubrics for tool-use trajectories (Prolog rules over trajectory facts).

pub mod answer;
pub mod rubric;
pub mod rubric_judge;
pub mod rubric_parse;

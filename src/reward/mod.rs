//! Rewards: executable rubrics for tool-use trajectories (Prolog rules over trajectory facts).

pub mod rubric;
pub mod rubric_parse;

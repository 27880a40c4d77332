//! Task-synthesis presets (`presets/synth/*.json`): the settings of `rulegym synth` a paper
//! states, looked up through the one preset registry ([`crate::preset::Shipped`]).

use super::PipelineConfig;
use crate::preset::Shipped;
use serde::{Deserialize, Serialize};

/// The tunable knobs of the synthesis pipeline, each optional: what a preset states, or what
/// flags override. [`Knobs::apply`] sets the ones given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Knobs {
    /// Teacher rollouts per task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollouts: Option<u32>,
    /// How the rubric is extracted from the rollouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extraction: Option<crate::synth::Extraction>,
    /// User simulator of teacher rollouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<crate::synth::UserKind>,
    /// Sampling temperature of the generating stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Sampling temperature of the teacher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher_temperature: Option<f64>,
    /// Agent turns per teacher rollout (also the tasks' `max_turns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// The filter's workflow-coverage threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_workflow_coverage: Option<f64>,
    /// The filter's best-rollout reward threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_best_reward: Option<f64>,
}

impl Knobs {
    /// Sets the knobs given in `config`, leaving the others as they are.
    pub fn apply(&self, config: &mut PipelineConfig) {
        if let Some(v) = self.rollouts {
            config.rollouts = v;
        }
        if let Some(v) = self.extraction {
            config.extraction = v;
        }
        if let Some(v) = self.user {
            config.user = v;
        }
        if let Some(v) = self.temperature {
            config.temperature = v;
        }
        if let Some(v) = self.teacher_temperature {
            config.teacher_temperature = v;
        }
        if let Some(v) = self.max_turns {
            config.max_turns = v;
        }
        if let Some(v) = self.min_workflow_coverage {
            config.min_workflow_coverage = v;
        }
        if let Some(v) = self.min_best_reward {
            config.min_best_reward = v;
        }
    }
}

/// A preset of `rulegym synth` ([`PipelineConfig`]): the settings a paper states,
/// as a versioned data file. A knob the file leaves out keeps the pipeline's default; explicit
/// flags override both ([`PipelineConfig::tuned`]). (No `deny_unknown_fields`: serde does not
/// support it beside `flatten`; the shipped files are checked key by key by a round-trip test.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SynthPreset {
    /// Its name (`synthagent`).
    pub name: String,
    /// Bumped whenever a value changes.
    pub version: u32,
    /// What it reproduces, and which knobs the paper leaves at our defaults.
    pub description: String,
    /// Where each value comes from in the paper, by knob.
    pub sources: std::collections::BTreeMap<String, String>,
    /// The knobs it sets.
    #[serde(flatten)]
    pub knobs: Knobs,
}

impl Shipped for SynthPreset {
    const KIND: &'static str = "synth preset";
    const FILES: &'static [(&'static str, &'static str)] = &[(
        "synthagent",
        include_str!("../../presets/synth/synthagent.json"),
    )];

    fn check(&self) -> crate::Result<()> {
        let mut config = PipelineConfig::default();
        self.knobs.apply(&mut config);
        config.validate().map_err(crate::Error::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synth_presets_parse_round_trip_and_carry_the_papers_numbers() {
        use crate::synth::{Extraction, UserKind};
        for &(name, json) in SynthPreset::FILES {
            let p = SynthPreset::named(name).unwrap();
            assert_eq!(p.name, name);
            let back = serde_json::to_value(&p).unwrap();
            let file: serde_json::Value = serde_json::from_str(json).unwrap();
            assert_eq!(back, file, "{name}");
            // Every knob the file sets has its source, and every source names a knob it sets.
            let set: std::collections::BTreeSet<&String> = back
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| !["name", "version", "description", "sources"].contains(&k.as_str()))
                .collect();
            assert_eq!(set, p.sources.keys().collect(), "{name}");
        }
        let sa = SynthPreset::named("synthagent").unwrap();
        assert_eq!(sa.knobs.rollouts, Some(4));
        assert_eq!(sa.knobs.extraction, Some(Extraction::PerTrajectory));
        assert_eq!(sa.knobs.user, Some(UserKind::Llm));
        assert_eq!(sa.knobs.max_turns, Some(16));
        assert_eq!(sa.knobs.min_best_reward, Some(0.0));
        // Numbers the paper does not give are not in the preset.
        assert_eq!(
            (
                sa.knobs.temperature,
                sa.knobs.teacher_temperature,
                sa.knobs.min_workflow_coverage
            ),
            (None, None, None)
        );
        assert!(sa.description.contains("min_best_reward is 0.0"));
        let config = PipelineConfig::from_preset("synthagent").unwrap();
        let default = PipelineConfig::default();
        assert_eq!(
            config,
            PipelineConfig {
                rollouts: 4,
                extraction: Extraction::PerTrajectory,
                max_turns: 16,
                min_best_reward: 0.0,
                ..default.clone()
            }
        );
        assert_eq!(config.min_workflow_coverage, default.min_workflow_coverage);
        let err = SynthPreset::named("synth-agent").unwrap_err().to_string();
        assert!(err.contains("valid: synthagent"), "{err}");
        let err = PipelineConfig::from_preset("phantomenvs").unwrap_err();
        assert!(
            matches!(&err, crate::synth::PipelineError::Config(m) if m.contains("valid: synthagent")),
            "{err}"
        );
    }
}

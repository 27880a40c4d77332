//! Presets: named configurations shipped as data, one versioned JSON file per preset under
//! `presets/` (embedded in the binary), so a paper's setup is a file to read and diff, not a
//! code path. A preset gives the base configuration; explicit flags override it.

use crate::question::QuestionConfig;
use crate::universe::UniverseConfig;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// The shipped presets: (name, JSON).
const PRESETS: [(&str, &str); 1] = [("phantomenvs", include_str!("../presets/phantomenvs.json"))];

/// A preset of `rulegym generate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// Its name (`phantomenvs`).
    pub name: String,
    /// Bumped whenever the preset's output changes.
    pub version: u32,
    /// What it reproduces.
    pub description: String,
    /// The universe (the seed stays the caller's).
    pub universe: UniverseConfig,
    /// The questions (the seed stays the caller's).
    pub questions: QuestionConfig,
}

impl Preset {
    /// The names of the shipped presets, comma-separated.
    pub fn names() -> String {
        PRESETS.map(|(name, _)| name).join(", ")
    }

    /// The shipped preset called `name`; an unknown name is an error listing the valid ones.
    pub fn named(name: &str) -> Result<Preset> {
        let (_, json) = PRESETS.iter().find(|(n, _)| *n == name).ok_or_else(|| {
            Error::Config(format!(
                "unknown preset {name:?} (valid: {})",
                Preset::names()
            ))
        })?;
        let preset: Preset = serde_json::from_str(json).map_err(|source| Error::Json {
            context: format!("parsing preset {name}"),
            source,
        })?;
        preset.universe.validate()?;
        preset.questions.validate()?;
        Ok(preset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_preset_parses_and_validates() {
        for (name, _) in PRESETS {
            let p = Preset::named(name).unwrap();
            assert_eq!(p.name, name);
        }
        let err = Preset::named("phantomenv").unwrap_err().to_string();
        assert!(err.contains("valid: phantomenvs"), "{err}");
    }
}

//! The question families and the comparison shapes of `hops+comparisons`, with their names.

use serde::{Deserialize, Serialize};

/// A question family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Family {
    /// PhantomWiki's grammar, every template.
    #[serde(rename = "base")]
    Base,
    /// Linear chains of 1 to 7 hops anchored on a name or an attribute ("the person whose hobby
    /// is chess"), asking who is at the end or one of their attributes; unique answer.
    #[serde(rename = "hops")]
    Hops,
    /// Chains with 0 to 3 attribute filters anywhere along them, unique answer.
    #[serde(rename = "hops+constraints")]
    HopsConstraints,
    /// Half single chains, half "Who is older, A or B?" over two chains (a zero-hop cell
    /// compares two anchors); at most one filter.
    #[serde(rename = "hops+comparisons")]
    HopsComparisons,
}

impl Family {
    /// All families.
    pub const ALL: [Family; 4] = [
        Family::Base,
        Family::Hops,
        Family::HopsConstraints,
        Family::HopsComparisons,
    ];

    /// The family's name (`hops+constraints`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Base => "base",
            Family::Hops => "hops",
            Family::HopsConstraints => "hops+constraints",
            Family::HopsComparisons => "hops+comparisons",
        }
    }

    /// Versioned id, bumped whenever the family's output for a fixed seed changes.
    pub fn version_id(self) -> &'static str {
        match self {
            Family::Base => "phantomwiki-base-v3",
            Family::Hops => "family-hops-v3",
            Family::HopsConstraints => "family-hops-constraints-v3",
            Family::HopsComparisons => "family-hops-comparisons-v3",
        }
    }
}

impl std::str::FromStr for Family {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!("unknown family {s:?} (base, hops, hops+constraints, hops+comparisons)")
            })
    }
}

/// A comparison shape of `hops+comparisons`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Comparison {
    /// "Who is older, A, or B?" (the paper's).
    Older,
    /// "Who is younger, A, or B?"
    Younger,
    /// "Who was born first, A, or B?"
    BornFirst,
    /// "Who is the oldest R of <chain>?"
    Oldest,
    /// "Who is the youngest R of <chain>?"
    Youngest,
    /// "Who has the most Rs among <chain>?"
    Most,
}

impl Comparison {
    /// Every shape.
    pub const ALL: [Comparison; 6] = [
        Comparison::Older,
        Comparison::Younger,
        Comparison::BornFirst,
        Comparison::Oldest,
        Comparison::Youngest,
        Comparison::Most,
    ];
    /// The shapes' names, for error messages.
    pub const NAMES: &'static str = "older, younger, born-first, oldest, youngest, most";

    /// The shape's name (`born-first`).
    pub fn name(self) -> &'static str {
        match self {
            Comparison::Older => "older",
            Comparison::Younger => "younger",
            Comparison::BornFirst => "born-first",
            Comparison::Oldest => "oldest",
            Comparison::Youngest => "youngest",
            Comparison::Most => "most",
        }
    }
}

impl std::str::FromStr for Comparison {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Comparison::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown comparison shape {s:?} (valid: {})",
                    Comparison::NAMES
                )
            })
    }
}

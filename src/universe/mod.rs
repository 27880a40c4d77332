//! The universe: people in family trees, with friendships, dates of birth, occupations and
//! hobbies, generated from one seed.
//!
//! Generation is a pure function of [`UniverseConfig`]: trees grow from per-tree ChaCha streams,
//! names, attributes and dates from per-person streams and friendships from one stream, so the
//! output is byte-identical across runs, machines and thread counts.

mod config;
mod dates;
mod facts;
mod friends;
mod names;
mod trees;
pub mod vocab;

pub use config::UniverseConfig;
pub use facts::{AttributeFact, FactsWriter};

/// Days since 1970-01-01 of an ISO `YYYY-MM-DD` date (proleptic Gregorian); `None` if malformed.
pub fn iso_to_days(iso: &str) -> Option<i64> {
    let mut parts = iso.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (parts.next()??, parts.next()??, parts.next()??);
    let valid = (1..=12).contains(&m) && (1..=31).contains(&d);
    valid.then(|| dates::days_from_civil(y, m, d))
}

use serde::{Deserialize, Serialize};

/// Index of a person in [`Universe::people`].
pub type PersonId = u32;

/// A person's gender (used by gendered relations; shown in articles, never asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Gender {
    /// Female.
    Female,
    /// Male.
    Male,
}

impl Gender {
    /// The lower-case word used in facts and articles.
    pub fn as_str(self) -> &'static str {
        match self {
            Gender::Female => "female",
            Gender::Male => "male",
        }
    }

    /// The other gender (spouses are one man and one woman).
    pub fn opposite(self) -> Gender {
        match self {
            Gender::Female => Gender::Male,
            Gender::Male => Gender::Female,
        }
    }
}

/// One person of the universe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Person {
    /// Unique full name, "First Last".
    pub name: String,
    /// Gender.
    pub gender: Gender,
    /// Date of birth, ISO `YYYY-MM-DD` with a zero-padded 4-digit year.
    pub dob: String,
    /// Occupation.
    pub occupation: String,
    /// Hobby.
    pub hobby: String,
    /// Index of the family tree.
    pub tree: u32,
    /// Parents, father first (empty or two).
    pub parents: Vec<PersonId>,
    /// Children in order of birth into the tree.
    pub children: Vec<PersonId>,
    /// Spouse, if married.
    pub spouse: Option<PersonId>,
    /// Friends, sorted by id.
    pub friends: Vec<PersonId>,
}

/// A generated universe.
#[derive(Debug, Clone, PartialEq)]
pub struct Universe {
    /// The configuration it was generated from.
    pub config: UniverseConfig,
    /// Everyone, in generation order (tree by tree).
    pub people: Vec<Person>,
}

impl Universe {
    /// Generates the universe for `config` (validated first).
    pub fn generate(config: &UniverseConfig) -> crate::Result<Universe> {
        config.validate()?;
        let skeletons = trees::grow_all(config);
        let people = names::name_people(config.seed, &skeletons)?;
        let dobs = dates::assign(config.seed, &skeletons);
        let friends = friends::sample(config.seed, skeletons.len(), config.friendship_k);
        let people = skeletons
            .into_iter()
            .zip(people)
            .zip(dobs)
            .zip(friends)
            .enumerate()
            .map(|(i, (((skeleton, name), dob), friends))| {
                let (occupation, hobby) = names::attributes(config.seed, i as u64);
                Person {
                    name,
                    gender: skeleton.gender,
                    dob,
                    occupation,
                    hobby,
                    tree: skeleton.tree,
                    parents: skeleton.parents,
                    children: skeleton.children,
                    spouse: skeleton.spouse,
                    friends,
                }
            })
            .collect();
        Ok(Universe {
            config: config.clone(),
            people,
        })
    }

    /// The person with this id.
    pub fn person(&self, id: PersonId) -> &Person {
        &self.people[id as usize]
    }

    /// Siblings of `id` (children of the same parents), in birth order.
    pub fn siblings(&self, id: PersonId) -> impl Iterator<Item = PersonId> + '_ {
        let parent = self.person(id).parents.first().copied();
        parent
            .into_iter()
            .flat_map(move |p| self.person(p).children.iter().copied())
            .filter(move |&s| s != id)
    }

    /// The Prolog facts of the universe (see `prolog/prelude.pl` for the predicates).
    pub fn facts(&self) -> String {
        FactsWriter::new(self).write()
    }
}

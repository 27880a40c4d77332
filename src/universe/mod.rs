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
pub(crate) mod vocab;

pub use config::UniverseConfig;
pub use facts::{AttributeFact, FactsWriter, dob_code, dob_text};

/// Days since 1970-01-01 of an ISO `YYYY-MM-DD` date (proleptic Gregorian); `None` if malformed.
pub fn iso_to_days(iso: &str) -> Option<i64> {
    let mut parts = iso.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (parts.next()??, parts.next()??, parts.next()??);
    let valid = (1..=12).contains(&m) && (1..=31).contains(&d);
    valid.then(|| dates::days_from_civil(y, m, d))
}

/// The year, month and day of a date written `YYYY-MM-DD` (4-digit year, zero-padded), whether
/// or not it is a calendar date; `None` for any other text.
pub(crate) fn iso_parts(iso: &str) -> Option<(u32, u32, u32)> {
    let b = iso.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || !digits(0..4) || !digits(5..7) {
        return None;
    }
    if !digits(8..10) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| iso[r].parse::<u32>().unwrap_or(0);
    Some((num(0..4), num(5..7), num(8..10)))
}

/// Whether `iso` is a valid calendar date written `YYYY-MM-DD` (4-digit year, zero-padded).
pub fn valid_iso_date(iso: &str) -> bool {
    let Some((y, m, d)) = iso_parts(iso) else {
        return false;
    };
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// Whether `ids` names someone twice.
fn repeats(ids: &[PersonId]) -> bool {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|w| w[0] == w[1])
}

/// A broken invariant of a universe: the person (index) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("person {person}: {message}")]
pub struct InvariantError {
    /// Index of the person the check failed on.
    pub person: usize,
    /// What is wrong.
    pub message: String,
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
#[derive(Debug, Clone)]
pub struct Universe {
    /// The configuration it was generated from.
    pub config: UniverseConfig,
    /// Everyone, in generation order (tree by tree). Build a universe with its people (the
    /// lookup tables of [`Universe::person_named`] and [`Universe::holders`] are built from
    /// them on first use).
    pub people: Vec<Person>,
    lookup: std::sync::OnceLock<Lookup>,
}

impl PartialEq for Universe {
    fn eq(&self, other: &Self) -> bool {
        self.config == other.config && self.people == other.people
    }
}

/// Lookup tables over a universe's people (lookups only: nothing iterates them).
#[derive(Debug, Clone, Default)]
struct Lookup {
    names: std::collections::HashMap<String, PersonId>,
    holders: std::collections::HashMap<(AttributeFact, String), Vec<PersonId>>,
    /// Every date of birth is `YYYY-MM-DD` ([`facts::dob_code`]).
    dobs_coded: bool,
}

impl Universe {
    /// Checks every invariant the generator guarantees and the rules rely on: at least one
    /// person; names non-empty, unique, free of control characters; attributes non-empty and
    /// free of control characters; valid ISO dates of birth; no or two distinct parents, a
    /// father then a mother, never oneself, no ancestry cycle; children and parents agree;
    /// spouses are mutual and of the other gender; friendships symmetric, without duplicates or
    /// oneself. Linear in the size of the universe.
    pub fn check_invariants(&self) -> Result<(), InvariantError> {
        let n = self.people.len();
        let fail = |person: usize, message: String| Err(InvariantError { person, message });
        if n == 0 {
            return fail(0, "the universe has no people".into());
        }
        if n > u32::MAX as usize {
            return fail(0, format!("{n} people are more than ids can count"));
        }
        let clean = |s: &str| !s.trim().is_empty() && !s.chars().any(char::is_control);
        let mut names = std::collections::HashSet::with_capacity(n);
        for (i, p) in self.people.iter().enumerate() {
            let id = i as PersonId;
            let known = |q: PersonId| (q as usize) < n;
            if !clean(&p.name) {
                return fail(
                    i,
                    format!("name {:?} is empty or has control characters", p.name),
                );
            }
            if !names.insert(p.name.as_str()) {
                return fail(i, format!("name {:?} is not unique", p.name));
            }
            for (field, value) in [("occupation", &p.occupation), ("hobby", &p.hobby)] {
                if !clean(value) {
                    return fail(
                        i,
                        format!("{field} {value:?} is empty or has control characters"),
                    );
                }
            }
            if !valid_iso_date(&p.dob) {
                return fail(
                    i,
                    format!("date of birth {:?} is not a valid YYYY-MM-DD date", p.dob),
                );
            }
            let all = p.parents.iter().chain(&p.children).chain(&p.friends);
            if let Some(q) = all.chain(p.spouse.iter()).find(|&&q| !known(q)) {
                return fail(i, format!("refers to person {q}, beyond the {n} people"));
            }
            match p.parents[..] {
                [] => {}
                [f, m] => {
                    if f == id || m == id {
                        return fail(i, "is their own parent".into());
                    }
                    let (father, mother) = (&self.people[f as usize], &self.people[m as usize]);
                    if father.gender != Gender::Male || mother.gender != Gender::Female {
                        return fail(i, "parents must be a father then a mother".into());
                    }
                }
                _ => {
                    return fail(i, format!("has {} parents (none or two)", p.parents.len()));
                }
            }
            for &q in &p.parents {
                if !self.people[q as usize].children.contains(&id) {
                    return fail(i, format!("parent {q} does not list them as a child"));
                }
            }
            if repeats(&p.children) {
                return fail(i, "children repeat someone".into());
            }
            for &c in &p.children {
                if !self.people[c as usize].parents.contains(&id) {
                    return fail(i, format!("child {c} does not list them as a parent"));
                }
            }
            if let Some(s) = p.spouse {
                let spouse = &self.people[s as usize];
                if s == id || spouse.spouse != Some(id) || spouse.gender == p.gender {
                    return fail(
                        i,
                        format!("spouse {s} is not a mutual spouse of the other gender"),
                    );
                }
            }
            if repeats(&p.friends) || p.friends.contains(&id) {
                return fail(i, "friends repeat someone or include themselves".into());
            }
            if let Some(&f) = p
                .friends
                .iter()
                .find(|&&f| !self.people[f as usize].friends.contains(&id))
            {
                return fail(i, format!("friend {f} does not list them as a friend"));
            }
        }
        // No ancestry cycle: Kahn's algorithm over parent -> child edges.
        let mut pending: Vec<usize> = self.people.iter().map(|p| p.parents.len()).collect();
        let mut ready: Vec<usize> = (0..n).filter(|&i| pending[i] == 0).collect();
        let mut seen = 0;
        while let Some(i) = ready.pop() {
            seen += 1;
            for &c in &self.people[i].children {
                let left = &mut pending[c as usize];
                *left = left.saturating_sub(1);
                if *left == 0 {
                    ready.push(c as usize);
                }
            }
        }
        if seen < n {
            let i = (0..n).find(|&i| pending[i] > 0).unwrap_or(0);
            return fail(i, "is their own ancestor (a cycle of parents)".into());
        }
        Ok(())
    }

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
        Ok(Universe::new(config.clone(), people))
    }

    /// A universe of `people` (ids are positions).
    pub fn new(config: UniverseConfig, people: Vec<Person>) -> Universe {
        Universe {
            config,
            people,
            lookup: std::sync::OnceLock::new(),
        }
    }

    fn lookup(&self) -> &Lookup {
        self.lookup.get_or_init(|| {
            let mut lookup = Lookup {
                dobs_coded: self
                    .people
                    .iter()
                    .all(|p| facts::dob_code(&p.dob).is_some()),
                ..Lookup::default()
            };
            for (i, p) in self.people.iter().enumerate() {
                lookup.names.insert(p.name.clone(), i as PersonId);
                for a in [AttributeFact::Dob, AttributeFact::Job, AttributeFact::Hobby] {
                    lookup
                        .holders
                        .entry((a, a.value(p).to_owned()))
                        .or_default()
                        .push(i as PersonId);
                }
            }
            lookup
        })
    }

    /// The person called `name` (names are unique).
    pub fn person_named(&self, name: &str) -> Option<PersonId> {
        let id = *self.lookup().names.get(name)?;
        // The tables are built once; a hit is still checked against the people.
        (self.people.get(id as usize)?.name == name).then_some(id)
    }

    /// Everyone whose `attribute` (date of birth, occupation or hobby) is `value`, by id.
    pub fn holders(&self, attribute: AttributeFact, value: &str) -> Vec<PersonId> {
        match attribute {
            AttributeFact::Dob | AttributeFact::Job | AttributeFact::Hobby => self
                .lookup()
                .holders
                .get(&(attribute, value.to_owned()))
                .cloned()
                .unwrap_or_default(),
            _ => (0..self.people.len() as PersonId)
                .filter(|&p| attribute.value(self.person(p)) == value)
                .collect(),
        }
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

    /// The Prolog facts of the universe (see `prolog/prelude.pl` for the predicates), people
    /// by name: the dataset's `facts.pl`.
    pub fn facts(&self) -> String {
        FactsWriter::new(self).write()
    }

    /// Whether every date of birth is `YYYY-MM-DD`, so the engine holds them as integers
    /// ([`facts::dob_code`]; otherwise as the atoms `facts.pl` has).
    pub fn dobs_coded(&self) -> bool {
        self.lookup().dobs_coded
    }

    /// The same facts with every person written as their id (an integer) and every date of
    /// birth as its [`facts::dob_code`] (when [`Universe::dobs_coded`]), the form rulegym's
    /// engine holds: typed queries name their anchors by id and the answers are named back
    /// ([`crate::question::Query::evaluate`]). Loading integers instead of names halves the
    /// consult at 10K people: no name enters scryer's atom table, whose every new atom copies
    /// the whole table (BENCHMARKS.md, issue 28).
    pub fn engine_facts(&self) -> String {
        FactsWriter::by_id(self).write()
    }
}

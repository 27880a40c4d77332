//! Names and attributes: unique full names (children and wives take the father's / husband's
//! surname) and per-person occupations and hobbies.

use super::trees::Skeleton;
use super::vocab::vocab;
use super::{Gender, PersonId};
use crate::seed;
use rand::Rng;
use rand::seq::IndexedRandom;
use std::collections::HashSet;

/// How many first names are tried per person before giving up on a unique full name.
const NAME_ATTEMPTS: usize = 1000;

/// Full names for every person, unique across the universe.
pub(crate) fn name_people(master: u64, people: &[Skeleton]) -> crate::Result<Vec<String>> {
    let mut surnames: Vec<Option<&'static str>> = vec![None; people.len()];
    for id in 0..people.len() {
        surname(master, people, id as PersonId, &mut surnames);
    }
    let v = vocab();
    let mut taken = HashSet::with_capacity(people.len());
    let mut names = Vec::with_capacity(people.len());
    for (id, person) in people.iter().enumerate() {
        let mut rng = seed::stream(master, "first-name", id as u64);
        let pool = match person.gender {
            Gender::Female => &v.female_first,
            Gender::Male => &v.male_first,
        };
        let last = surnames[id].expect("every surname was assigned above");
        let name = (0..NAME_ATTEMPTS)
            .map(|_| format!("{} {last}", pool.choose(&mut rng).expect("vocabulary is not empty")))
            .find(|name| !taken.contains(name))
            .ok_or_else(|| {
                crate::Error::Config(format!(
                    "could not find a unique name for person {id} (surname {last}) after {NAME_ATTEMPTS} tries: the universe is too large for the name vocabulary"
                ))
            })?;
        taken.insert(name.clone());
        names.push(name);
    }
    Ok(names)
}

/// A person's surname: a husband's for a wife, the father's for everyone else with parents, and
/// a fresh draw otherwise. Memoised; recursion depth is bounded by the number of generations.
fn surname(
    master: u64,
    people: &[Skeleton],
    id: PersonId,
    memo: &mut Vec<Option<&'static str>>,
) -> &'static str {
    if let Some(s) = memo[id as usize] {
        return s;
    }
    let person = &people[id as usize];
    let s = match (person.gender, person.spouse, person.parents.first()) {
        (Gender::Female, Some(husband), _) => surname(master, people, husband, memo),
        (_, _, Some(&father)) => surname(master, people, father, memo),
        _ => *vocab()
            .surnames
            .choose(&mut seed::stream(master, "surname", id as u64))
            .expect("vocabulary is not empty"),
    };
    memo[id as usize] = Some(s);
    s
}

/// Occupation and hobby of person `index` (hobby: a category, then an item, as the peer draws).
pub(crate) fn attributes(master: u64, index: u64) -> (String, String) {
    let v = vocab();
    let mut rng = seed::stream(master, "attributes", index);
    let occupation = v.occupations[rng.random_range(0..v.occupations.len())];
    let (_, hobbies) = &v.hobbies[rng.random_range(0..v.hobbies.len())];
    let hobby = hobbies[rng.random_range(0..hobbies.len())];
    (occupation.to_owned(), hobby.to_owned())
}

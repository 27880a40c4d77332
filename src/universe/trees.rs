//! Family-tree growth, PhantomWiki's algorithm with per-tree ChaCha streams.
//!
//! Per tree: start from one root; repeatedly pick a uniformly random member and either give it a
//! child (creating an opposite-gender spouse first if it has none) or two parents (only if it has
//! none), within `max_branching_factor` children per couple and `max_family_tree_depth`
//! generations. Stop at `>= max_family_tree_size` people (so trees hold max or max+1 people) or
//! after `10 * max_family_tree_size` attempts.

use super::{Gender, PersonId, UniverseConfig};
use crate::seed;
use rand::Rng;

/// The structure of one person before names, dates and attributes are drawn.
#[derive(Debug, Clone)]
pub(crate) struct Skeleton {
    pub gender: Gender,
    pub tree: u32,
    pub generation: i32,
    pub parents: Vec<PersonId>,
    pub children: Vec<PersonId>,
    pub spouse: Option<PersonId>,
}

/// Grows every tree; people are numbered tree by tree.
pub(crate) fn grow_all(config: &UniverseConfig) -> Vec<Skeleton> {
    let mut people =
        Vec::with_capacity(config.num_family_trees * (config.max_family_tree_size + 1));
    for tree in 0..config.num_family_trees {
        grow(config, tree as u32, &mut people);
    }
    people
}

fn random_gender(rng: &mut impl Rng) -> Gender {
    if rng.random_bool(0.5) {
        Gender::Female
    } else {
        Gender::Male
    }
}

fn grow(config: &UniverseConfig, tree: u32, people: &mut Vec<Skeleton>) {
    let mut rng = seed::stream(config.seed, "tree", tree as u64);
    let start = people.len();
    let new_person = |people: &mut Vec<Skeleton>, gender, generation| {
        people.push(Skeleton {
            gender,
            tree,
            generation,
            parents: Vec::new(),
            children: Vec::new(),
            spouse: None,
        });
        (people.len() - 1) as PersonId
    };
    let root_gender = random_gender(&mut rng);
    new_person(people, root_gender, 0);
    let (mut min_gen, mut max_gen) = (0i32, 0i32);
    let depth = config.max_family_tree_depth as i32;
    let fits = |g: i32, min_gen: i32, max_gen: i32| max_gen.max(g) - min_gen.min(g) < depth;

    for _ in 0..10 * config.max_family_tree_size {
        if people.len() - start >= config.max_family_tree_size {
            break;
        }
        let pick = rng.random_range(start..people.len()) as PersonId;
        let add_child = rng.random_bool(0.5);
        let p = &people[pick as usize];
        let (generation, gender, spouse, has_parents) =
            (p.generation, p.gender, p.spouse, !p.parents.is_empty());
        if add_child {
            if p.children.len() >= config.max_branching_factor
                || !fits(generation + 1, min_gen, max_gen)
            {
                continue;
            }
            let spouse = match spouse {
                Some(s) => s,
                None => {
                    let s = new_person(people, gender.opposite(), generation);
                    people[pick as usize].spouse = Some(s);
                    people[s as usize].spouse = Some(pick);
                    s
                }
            };
            let child = new_person(people, random_gender(&mut rng), generation + 1);
            let (father, mother) = if gender == Gender::Male {
                (pick, spouse)
            } else {
                (spouse, pick)
            };
            people[child as usize].parents = vec![father, mother];
            people[father as usize].children.push(child);
            people[mother as usize].children.push(child);
            max_gen = max_gen.max(generation + 1);
        } else {
            if has_parents || !fits(generation - 1, min_gen, max_gen) {
                continue;
            }
            let father = new_person(people, Gender::Male, generation - 1);
            let mother = new_person(people, Gender::Female, generation - 1);
            people[father as usize].spouse = Some(mother);
            people[mother as usize].spouse = Some(father);
            people[father as usize].children.push(pick);
            people[mother as usize].children.push(pick);
            people[pick as usize].parents = vec![father, mother];
            min_gen = min_gen.min(generation - 1);
        }
    }
}

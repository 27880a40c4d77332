//! One candidate task: a draw of the user, the relation path, the target, the action and its
//! value, the hidden slots and the people of the world.

use super::context::Context;
use super::{Action, RuleGenConfig, RuleTask};
use crate::relations::Relation;
use crate::tooluse::task::{HiddenContext, Rubric, Task};
use crate::universe::PersonId;
use rand::Rng;
use rand::seq::IndexedRandom;
use std::collections::BTreeSet;

/// The texts of the message tasks.
const MESSAGES: &[&str] = &[
    "Happy birthday, have a wonderful day!",
    "Dinner is at seven on Friday.",
    "Thank you for the lovely gift.",
    "Please call me back when you can.",
    "The family picnic moved to Sunday.",
    "Congratulations on the new job!",
    "I will pick you up at the station at noon.",
    "Get well soon, thinking of you.",
];

impl Context<'_> {
    /// Candidate `i`: a task and its uniqueness key, or `None` when this draw does not fit.
    pub(super) fn candidate(&self, config: &RuleGenConfig, i: u64) -> Option<(String, RuleTask)> {
        let mut rng = crate::seed::stream(config.seed, "tool-world", i);
        let u = self.universe;
        let user = *self.usable.choose(&mut rng)?;
        let hops = rng.random_range(config.hops.0..=config.hops.1);
        // Every path of `hops` relations whose end set fits the candidate range.
        let mut options: Vec<(Vec<&Relation>, Vec<Vec<PersonId>>)> = Vec::new();
        for &r1 in &self.relations {
            let l1 = r1.related(u, user);
            if l1.is_empty() {
                continue;
            }
            if hops == 1 {
                options.push((vec![r1], vec![vec![user], l1]));
                continue;
            }
            for &r2 in &self.relations {
                let mut l2: Vec<PersonId> = l1.iter().flat_map(|&p| r2.related(u, p)).collect();
                l2.sort_unstable();
                l2.dedup();
                l2.retain(|&p| p != user);
                if !l2.is_empty() {
                    options.push((vec![r1, r2], vec![vec![user], l1.clone(), l2]));
                }
            }
        }
        options.retain(|(_, levels)| {
            let last = levels.last().expect("levels");
            (config.candidates.0..=config.candidates.1).contains(&last.len())
                && levels.iter().flatten().all(|&p| self.unique[p as usize])
        });
        let (path, levels) = options.choose(&mut rng)?.clone();
        let candidates = levels.last().expect("levels").clone();
        let target = *candidates.choose(&mut rng)?;
        let action = match rng.random_range(0..3) {
            0 => Action::Update {
                field: "hobby".into(),
            },
            1 => Action::Update {
                field: "occupation".into(),
            },
            _ => Action::Message,
        };
        let value = match &action {
            Action::Update { field } => {
                let (pool, current) = if field == "hobby" {
                    (&self.hobbies, &u.person(target).hobby)
                } else {
                    (&self.occupations, &u.person(target).occupation)
                };
                let others: Vec<&String> = pool.iter().filter(|v| *v != current).collect();
                (*others.choose(&mut rng)?).clone()
            }
            Action::Message => (*MESSAGES.choose(&mut rng)?).to_owned(),
        };
        // Hidden slots: the target when ambiguous, then user_name / value by the knob.
        let ambiguous = candidates.len() > 1;
        let t = usize::from(ambiguous);
        let b_min = config.slots.0.saturating_sub(t).max(1 - t);
        let b_max = config.slots.1.saturating_sub(t).min(2).max(b_min);
        if b_min > 2 {
            return None;
        }
        let b = rng.random_range(b_min..=b_max);
        let (hide_user, hide_value) = match b {
            0 => (false, false),
            1 => {
                if rng.random_bool(0.5) {
                    (true, false)
                } else {
                    (false, true)
                }
            }
            _ => (true, true),
        };
        // The world: user, path, candidates, some more family, outsiders from other trees.
        let tree = u.person(user).tree;
        let mut people: BTreeSet<PersonId> = levels.iter().flatten().copied().collect();
        let p = u.person(user);
        let mut extra: Vec<PersonId> = p
            .parents
            .iter()
            .chain(p.spouse.iter())
            .chain(p.children.iter())
            .copied()
            .chain(u.siblings(user))
            .filter(|&q| self.unique[q as usize])
            .collect();
        extra.sort_unstable();
        extra.dedup();
        for q in extra.into_iter().take(4) {
            people.insert(q);
        }
        let mut outsiders: Vec<PersonId> = p
            .friends
            .iter()
            .copied()
            .filter(|&q| u.person(q).tree != tree && self.unique[q as usize])
            .take(config.outsiders)
            .collect();
        let mut tries = 0;
        while outsiders.len() < config.outsiders && tries < 50 {
            tries += 1;
            let q = *self.usable.choose(&mut rng)?;
            if u.person(q).tree != tree && !outsiders.contains(&q) {
                outsiders.push(q);
            }
        }
        if outsiders.is_empty() {
            return None;
        }
        people.extend(outsiders.iter().copied());
        // Slot values must not contain each other (the user's replies are matched by value).
        let names = |ids: &[PersonId]| ids.iter().map(|&q| self.name(q)).collect::<Vec<_>>();
        let user_name = self.name(user);
        let target_name = self.name(target);
        let all_names: Vec<String> = people.iter().map(|&q| self.name(q)).collect();
        let lower = |s: &str| s.to_lowercase();
        let mut values = vec![lower(&user_name), lower(&value)];
        values.extend(all_names.iter().map(|n| lower(n)));
        values.sort();
        values.dedup();
        for a in &values {
            for b in &values {
                if a != b && a.contains(b.as_str()) {
                    return None;
                }
            }
        }
        let family: Vec<String> = people
            .iter()
            .filter(|&&q| u.person(q).tree == tree)
            .map(|&q| self.name(q))
            .collect();
        let world = RuleTask {
            task: Task {
                id: String::new(),
                persona: String::new(),
                instruction: String::new(),
                hidden_context: HiddenContext::default(),
                tools: Vec::new(),
                initial_state: None,
                expected_state: None,
                workflow: Vec::new(),
                rubric: Rubric::default(),
                max_turns: None,
            },
            index: i,
            user: user_name,
            path: path.iter().map(|r| r.name.to_owned()).collect(),
            candidates: names(&candidates),
            target: target_name,
            action,
            value,
            family,
            outsiders: names(&outsiders),
        };
        let key = format!(
            "{}|{}|{}|{:?}|{}|{hide_user}{hide_value}",
            world.user,
            world.path.join(">"),
            world.target,
            world.action,
            world.value
        );
        let task = self.build(
            config, &world, &path, &levels, &people, hide_user, hide_value,
        );
        Some((key, RuleTask { task, ..world }))
    }
}

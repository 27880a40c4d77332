//! PhantomWiki's `facts.pl` -> a rulegym [`Universe`].

use super::*;

/// The stored predicates of PhantomWiki's `facts.pl`, with their arities.
const FACT_PREDICATES: [(&str, usize); 8] = [
    ("type", 2),
    ("gender", 2),
    ("parent", 2),
    ("dob", 2),
    ("friend_", 2),
    ("job", 2),
    ("hobby", 2),
    ("attribute", 1),
];

/// The facts of a PhantomWiki `facts.pl`, as read (names and values as text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PwFacts {
    /// `type(Name, person)`: the people, in file order.
    pub people: Vec<String>,
    /// `gender(Name, G)`.
    pub gender: Vec<(String, String)>,
    /// `dob(Name, D)`.
    pub dob: Vec<(String, String)>,
    /// `job(Name, J)`.
    pub job: Vec<(String, String)>,
    /// `hobby(Name, H)`.
    pub hobby: Vec<(String, String)>,
    /// `parent(Child, Parent)`.
    pub parent: Vec<(String, String)>,
    /// `friend_(A, B)`: each friendship once.
    pub friend: Vec<(String, String)>,
    /// `attribute(V)`: every attribute value (unused by rulegym; kept for counts).
    pub attributes: Vec<String>,
}

/// Reads the fact lines of a `facts.pl` listing dump. Lines of other predicates (PhantomWiki's
/// rules, SWI's own clauses and directives) are skipped; a line that starts with a stored
/// predicate must be exactly one ground fact of it.
pub fn parse_facts(text: &str, file: &str) -> Result<PwFacts> {
    let mut facts = PwFacts::default();
    for (i, line) in text.lines().enumerate() {
        let syntax = |message: String| -> Error {
            PhantomWikiError::Syntax {
                file: file.to_owned(),
                line: i + 1,
                message,
            }
            .into()
        };
        let Some(&(predicate, arity)) = FACT_PREDICATES.iter().find(|(p, _)| {
            line.strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('('))
        }) else {
            continue;
        };
        let term =
            parse_fact(line).map_err(|m| syntax(format!("not a {predicate}/{arity} fact: {m}")))?;
        let Term::Compound(_, args) = &term else {
            return Err(syntax(format!("not a {predicate}/{arity} fact")));
        };
        if args.len() != arity {
            return Err(syntax(format!(
                "{predicate} has {} arguments, expected {arity}",
                args.len()
            )));
        }
        let texts: Vec<String> = args
            .iter()
            .map(|a| {
                a.as_text().map(str::to_owned).ok_or_else(|| {
                    syntax(format!(
                        "argument {a} of {predicate} is not a string or atom"
                    ))
                })
            })
            .collect::<Result<_>>()?;
        let pair = || (texts[0].clone(), texts[1].clone());
        match predicate {
            "type" => {
                if texts[1] != "person" {
                    return Err(syntax(format!("unknown type {:?}", texts[1])));
                }
                facts.people.push(texts[0].clone());
            }
            "gender" => facts.gender.push(pair()),
            "dob" => facts.dob.push(pair()),
            "job" => facts.job.push(pair()),
            "hobby" => facts.hobby.push(pair()),
            "parent" => facts.parent.push(pair()),
            "friend_" => facts.friend.push(pair()),
            _ => facts.attributes.push(texts[0].clone()),
        }
    }
    if facts.people.is_empty() {
        return Err(facts_error(format!(
            "{file} holds no type(Name, person) facts"
        )));
    }
    Ok(facts)
}

/// Builds the rulegym universe the facts describe.
///
/// People are numbered by family tree, then by name; a family tree is a connected component of
/// the parent graph, numbered in order of its alphabetically first member. Parents are stored
/// father first, children by date of birth then name, the spouse is the co-parent, friendships
/// are made symmetric. The universe's `config` is descriptive only (PhantomWiki's output does not
/// record its generation knobs): tree count and largest tree size, other knobs at defaults, seed 0.
///
/// Errors when the facts break the model rulegym's rules rely on: every person exactly one
/// gender (female or male), date of birth, occupation and hobby; zero or two parents, one of
/// each gender; at most one co-parent per person (no half-siblings); no self-friendship.
pub fn import_universe(facts: &PwFacts) -> Result<Universe> {
    let mut names: Vec<&str> = facts.people.iter().map(String::as_str).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(facts_error(format!("{:?} is declared twice", w[0])));
    }
    let index_of = |name: &str| -> Result<usize> {
        names
            .binary_search(&name)
            .map_err(|_| facts_error(format!("{name:?} is not declared by type(_, person)")))
    };
    let n = names.len();

    // One value per person for each attribute.
    let single = |pairs: &[(String, String)], what: &str| -> Result<Vec<String>> {
        let mut values: Vec<Option<String>> = vec![None; n];
        for (name, value) in pairs {
            let slot = &mut values[index_of(name)?];
            if slot.is_some() {
                return Err(facts_error(format!("{name:?} has more than one {what}")));
            }
            *slot = Some(value.clone());
        }
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| v.ok_or_else(|| facts_error(format!("{:?} has no {what}", names[i]))))
            .collect()
    };
    let genders = single(&facts.gender, "gender")?
        .into_iter()
        .enumerate()
        .map(|(i, g)| match g.as_str() {
            "female" => Ok(Gender::Female),
            "male" => Ok(Gender::Male),
            other => Err(facts_error(format!(
                "{:?} has gender {other:?}; rulegym's universe has female and male only",
                names[i]
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    let dobs = single(&facts.dob, "dob")?;
    let jobs = single(&facts.job, "job")?;
    let hobbies = single(&facts.hobby, "hobby")?;

    // Parents: zero or two, one of each gender, father first.
    let mut parents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (child, parent) in &facts.parent {
        let (c, p) = (index_of(child)?, index_of(parent)?);
        if c == p {
            return Err(facts_error(format!("{child:?} is their own parent")));
        }
        if parents[c].contains(&p) {
            return Err(facts_error(format!(
                "parent({child:?}, {parent:?}) is stated twice"
            )));
        }
        parents[c].push(p);
    }
    for (c, ps) in parents.iter_mut().enumerate() {
        match ps[..] {
            [] => {}
            [a, b] if genders[a] != genders[b] => {
                if genders[a] == Gender::Female {
                    ps.swap(0, 1);
                }
            }
            [_, _] => {
                return Err(facts_error(format!(
                    "the parents of {:?} have the same gender",
                    names[c]
                )));
            }
            _ => {
                return Err(facts_error(format!(
                    "{:?} has {} parents; rulegym needs zero or two",
                    names[c],
                    ps.len()
                )));
            }
        }
    }
    // Spouses: the one co-parent.
    let mut spouse: Vec<Option<usize>> = vec![None; n];
    for ps in &parents {
        if let [f, m] = ps[..] {
            for (a, b) in [(f, m), (m, f)] {
                match spouse[a] {
                    None => spouse[a] = Some(b),
                    Some(s) if s == b => {}
                    Some(s) => {
                        return Err(facts_error(format!(
                            "{:?} has children with {:?} and with {:?}; rulegym's rules assume \
                             couples share all their children (no half-siblings)",
                            names[a], names[s], names[b]
                        )));
                    }
                }
            }
        }
    }

    // Trees: connected components of the parent graph (union-find).
    let mut root: Vec<usize> = (0..n).collect();
    fn find(root: &mut [usize], mut x: usize) -> usize {
        while root[x] != x {
            root[x] = root[root[x]];
            x = root[x];
        }
        x
    }
    for (c, ps) in parents.iter().enumerate() {
        for &p in ps {
            let (a, b) = (find(&mut root, c), find(&mut root, p));
            root[a.max(b)] = a.min(b);
        }
    }
    // Every root is the smallest index (alphabetically first name) of its component.
    let mut tree_of_root: BTreeMap<usize, u32> = BTreeMap::new();
    let tree: Vec<u32> = (0..n)
        .map(|i| {
            let r = find(&mut root, i);
            let next = tree_of_root.len() as u32;
            *tree_of_root.entry(r).or_insert(next)
        })
        .collect();
    // Final order: by tree, then by name.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (tree[i], i));
    let mut id_of = vec![0 as PersonId; n];
    for (id, &i) in order.iter().enumerate() {
        id_of[i] = id as PersonId;
    }

    // Friends: symmetric, no self-loops.
    let mut friends: Vec<BTreeSet<PersonId>> = vec![BTreeSet::new(); n];
    for (a, b) in &facts.friend {
        let (x, y) = (index_of(a)?, index_of(b)?);
        if x == y {
            return Err(facts_error(format!("{a:?} is their own friend")));
        }
        friends[x].insert(id_of[y]);
        friends[y].insert(id_of[x]);
    }
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (c, ps) in parents.iter().enumerate() {
        for &p in ps {
            children[p].push(c);
        }
    }
    let people: Vec<Person> = order
        .iter()
        .map(|&i| {
            let mut kids = children[i].clone();
            kids.sort_by(|&a, &b| (&dobs[a], names[a]).cmp(&(&dobs[b], names[b])));
            Person {
                name: names[i].to_owned(),
                gender: genders[i],
                dob: dobs[i].clone(),
                occupation: jobs[i].clone(),
                hobby: hobbies[i].clone(),
                tree: tree[i],
                parents: parents[i].iter().map(|&p| id_of[p]).collect(),
                children: kids.into_iter().map(|c| id_of[c]).collect(),
                spouse: spouse[i].map(|s| id_of[s]),
                friends: friends[i].iter().copied().collect(),
            }
        })
        .collect();
    let mut sizes: BTreeMap<u32, usize> = BTreeMap::new();
    for p in &people {
        *sizes.entry(p.tree).or_default() += 1;
    }
    let config = UniverseConfig {
        seed: 0,
        num_family_trees: tree_of_root.len(),
        max_family_tree_size: sizes.values().copied().max().unwrap_or(0),
        ..UniverseConfig::default()
    };
    Ok(Universe::new(config, people))
}

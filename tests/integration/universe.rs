//! Universes: invariants over many seeds, articles entailed by the engine, golden bytes.

use super::cli;
use proptest::prelude::*;
use rulegym::corpus::{self, ARTICLE_RELATIONS};
use rulegym::dataset::universe_files;
use rulegym::engine::{Engine, Term, Value, Var};
use rulegym::io::sha256_hex;
use rulegym::universe::{Gender, Universe, UniverseConfig, iso_to_days};
use std::collections::{BTreeSet, HashSet};

fn small(seed: u64, trees: usize) -> UniverseConfig {
    UniverseConfig {
        seed,
        num_family_trees: trees,
        ..Default::default()
    }
}

/// Generation of each person (child = parent + 1, spouses equal), relative per tree.
fn generations(u: &Universe) -> Vec<i64> {
    let mut gen_of: Vec<Option<i64>> = vec![None; u.people.len()];
    for start in 0..u.people.len() {
        if gen_of[start].is_some() {
            continue;
        }
        gen_of[start] = Some(0);
        let mut stack = vec![start as u32];
        while let Some(id) = stack.pop() {
            let g = gen_of[id as usize].unwrap();
            let p = u.person(id);
            let next = p
                .parents
                .iter()
                .map(|&q| (q, g - 1))
                .chain(p.children.iter().map(|&c| (c, g + 1)))
                .chain(p.spouse.iter().map(|&s| (s, g)));
            for (q, h) in next {
                match gen_of[q as usize] {
                    None => {
                        gen_of[q as usize] = Some(h);
                        stack.push(q);
                    }
                    Some(existing) => assert_eq!(existing, h, "inconsistent generations"),
                }
            }
        }
    }
    gen_of.into_iter().map(Option::unwrap).collect()
}

fn check_invariants(u: &Universe) {
    let c = &u.config;
    // Unique full names.
    let names: HashSet<&str> = u.people.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), u.people.len(), "full names are unique");
    // Tree sizes and depth.
    let gens = generations(u);
    for t in 0..c.num_family_trees as u32 {
        let members: Vec<usize> = (0..u.people.len())
            .filter(|&i| u.people[i].tree == t)
            .collect();
        assert!(
            members.len() <= c.max_family_tree_size + 1,
            "tree {t} has {}",
            members.len()
        );
        let lo = members.iter().map(|&i| gens[i]).min().unwrap();
        let hi = members.iter().map(|&i| gens[i]).max().unwrap();
        assert!(
            (hi - lo + 1) as usize <= c.max_family_tree_depth,
            "tree {t} spans {} generations",
            hi - lo + 1
        );
    }
    for (i, p) in u.people.iter().enumerate() {
        let id = i as u32;
        // Couples: one man and one woman, symmetric, with a common child.
        if let Some(s) = p.spouse {
            let spouse = u.person(s);
            assert_eq!(spouse.spouse, Some(id));
            assert_eq!(spouse.gender, p.gender.opposite());
            assert!(
                p.children.iter().any(|c| spouse.children.contains(c)),
                "couple without child"
            );
            let gap = (iso_to_days(&p.dob).unwrap() - iso_to_days(&spouse.dob).unwrap()).abs();
            assert!(
                gap <= 3650,
                "spouses {} and {} born {gap} days apart",
                p.name,
                spouse.name
            );
        }
        // Every child has two parents: a father and a mother married to each other.
        if !p.parents.is_empty() {
            assert_eq!(p.parents.len(), 2);
            let (f, m) = (u.person(p.parents[0]), u.person(p.parents[1]));
            assert_eq!((f.gender, m.gender), (Gender::Male, Gender::Female));
            assert_eq!(f.spouse, Some(p.parents[1]));
            assert!(f.children.contains(&id) && m.children.contains(&id));
            let me = iso_to_days(&p.dob).unwrap();
            for parent in [f, m] {
                let gap = me - iso_to_days(&parent.dob).unwrap();
                assert!(
                    (18 * 365..=45 * 365).contains(&gap),
                    "parent gap {gap} days"
                );
            }
            // Surname of the father (wives take their husband's instead).
            let surname = |n: &str| n.rsplit(' ').next().unwrap().to_owned();
            if p.gender == Gender::Male || p.spouse.is_none() {
                assert_eq!(surname(&p.name), surname(&f.name));
            }
        }
        for s in u.siblings(id) {
            let gap = (iso_to_days(&p.dob).unwrap() - iso_to_days(&u.person(s).dob).unwrap()).abs();
            assert!(gap == 0 || gap >= 300, "siblings born {gap} days apart");
        }
        if let Some(s) = p.spouse
            && p.gender == Gender::Female
        {
            assert_eq!(
                p.name.rsplit(' ').next(),
                u.person(s).name.rsplit(' ').next(),
                "wife takes husband's surname"
            );
        }
        // Dates: zero-padded ISO years.
        assert!(
            p.dob.len() == 10 && iso_to_days(&p.dob).is_some(),
            "{}",
            p.dob
        );
        // Friendships: symmetric, no self-loops, sorted.
        assert!(!p.friends.contains(&id));
        assert!(p.friends.windows(2).all(|w| w[0] < w[1]));
        for &f in &p.friends {
            assert!(u.person(f).friends.contains(&id));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn invariants_hold_for_many_seeds(
        seed in any::<u64>(),
        trees in 1usize..40,
        size in 1usize..25,
        depth in 1usize..12,
        branching in 1usize..6,
    ) {
        let config = UniverseConfig {
            seed, num_family_trees: trees, max_family_tree_size: size,
            max_family_tree_depth: depth, max_branching_factor: branching, ..Default::default()
        };
        let u = Universe::generate(&config).unwrap();
        check_invariants(&u);
    }
}

#[test]
fn default_universes_fill_their_trees_and_have_mean_degree_k() {
    for seed in 1..6 {
        let u = Universe::generate(&small(seed, 100)).unwrap();
        check_invariants(&u);
        for t in 0..100u32 {
            let n = u.people.iter().filter(|p| p.tree == t).count();
            assert!(n == 10 || n == 11, "tree {t} of seed {seed} has {n} people");
        }
        let degree =
            u.people.iter().map(|p| p.friends.len()).sum::<usize>() as f64 / u.people.len() as f64;
        assert!((degree - 3.0).abs() < 0.35, "mean degree {degree}");
        let lonely =
            u.people.iter().filter(|p| p.friends.is_empty()).count() as f64 / u.people.len() as f64;
        assert!(
            (0.02..0.09).contains(&lonely),
            "{lonely} have no friends (expected ~e^-3 = 5%)"
        );
    }
    let a = Universe::generate(&small(1, 100)).unwrap();
    let b = Universe::generate(&small(2, 100)).unwrap();
    assert_ne!(
        a.people[0].name, b.people[0].name,
        "different seeds, different universes"
    );
}

#[test]
fn bad_configs_are_rejected_with_the_knob_named() {
    for (config, knob) in [
        (
            UniverseConfig {
                num_family_trees: 0,
                ..Default::default()
            },
            "num_family_trees",
        ),
        (
            UniverseConfig {
                max_family_tree_size: 0,
                ..Default::default()
            },
            "max_family_tree_size",
        ),
        (
            UniverseConfig {
                max_family_tree_depth: 0,
                ..Default::default()
            },
            "max_family_tree_depth",
        ),
        (
            UniverseConfig {
                max_branching_factor: 0,
                ..Default::default()
            },
            "max_branching_factor",
        ),
        (
            UniverseConfig {
                friendship_k: f64::NAN,
                ..Default::default()
            },
            "friendship_k",
        ),
        (
            UniverseConfig {
                friendship_k: -1.0,
                ..Default::default()
            },
            "friendship_k",
        ),
    ] {
        let err = Universe::generate(&config).unwrap_err().to_string();
        assert!(err.contains(knob), "{err}");
    }
}

/// Parses "The sisters of N are A, B." into (relation or attribute predicate, values).
fn parse_sentence(line: &str, name: &str) -> (String, Vec<String>) {
    let rest = line
        .strip_prefix("The ")
        .unwrap()
        .strip_suffix('.')
        .unwrap();
    let (noun, rest) = rest.split_once(&format!(" of {name} ")).unwrap();
    let values = rest
        .strip_prefix("is ")
        .or_else(|| rest.strip_prefix("are "))
        .unwrap();
    let predicate = match noun {
        "date of birth" => "dob".to_owned(),
        "occupation" => "job".to_owned(),
        "hobby" | "gender" => noun.to_owned(),
        "friend" | "friends" => "friend".to_owned(),
        _ => ARTICLE_RELATIONS
            .iter()
            .find(|(s, p)| *s == noun || *p == noun)
            .unwrap_or_else(|| panic!("unknown noun {noun}"))
            .0
            .to_owned(),
    };
    let values = if rest.starts_with("are ") {
        values.split(", ").map(str::to_owned).collect()
    } else {
        vec![values.to_owned()]
    };
    (predicate, values)
}

#[test]
fn every_sentence_is_entailed_and_every_fact_is_stated() {
    let u = Universe::generate(&small(7, 30)).unwrap();
    let engine = Engine::with_facts(&u.facts()).unwrap();
    let y = Var::new("Y").unwrap();
    let predicates: Vec<&str> = ARTICLE_RELATIONS
        .iter()
        .map(|(r, _)| *r)
        .chain(["friend", "dob", "job", "hobby", "gender"])
        .collect();
    for (i, article) in corpus::articles(&u).iter().enumerate() {
        let name = &u.people[i].name;
        let mut stated = BTreeSet::new();
        for line in article.text.lines().filter(|l| l.starts_with("The ")) {
            let (predicate, values) = parse_sentence(line, name);
            for value in values {
                let goal = Term::compound(
                    predicate.as_str(),
                    [Term::atom(name.as_str()), Term::atom(value.as_str())],
                );
                assert!(engine.holds(&goal).unwrap(), "not entailed: {line}");
                stated.insert((predicate.clone(), value));
            }
        }
        for predicate in &predicates {
            let goal = Term::compound(*predicate, [Term::atom(name.as_str()), Term::var(&y)]);
            for row in engine.query(&goal, std::slice::from_ref(&y)).unwrap() {
                let Value::Atom(value) = &row[0] else {
                    panic!("{row:?}")
                };
                assert!(
                    stated.contains(&(predicate.to_string(), value.clone())),
                    "{predicate}({name}, {value}) is not stated in the article"
                );
            }
        }
        assert_eq!(
            article.facts.len(),
            stated.len(),
            "facts list matches sentences for {name}"
        );
    }
}

/// Golden SHA-256 of the default dataset (seed 1). Changing these is a dataset-version bump:
/// update `DATASET_VERSION` and CHANGELOG.md.
const GOLDEN: [(&str, &str); 3] = [
    (
        "facts.pl",
        "ead33c5207543b4006c6d30f46d99e12ef323dfc8ac8e979c191325ceba04c7e",
    ),
    (
        "articles.jsonl",
        "7bd62c7ac0eb7bbc43a4ffceeb86fd304d1dba485508b8b57c85eff25dbbab31",
    ),
    (
        "people.jsonl",
        "c142e3546355aa488abdb58e78b002cde2d0386c93821a79fd182cf1d22ff688",
    ),
];

#[test]
fn value_lookups_return_exactly_the_holders() {
    let u = Universe::generate(&small(7, 30)).unwrap();
    let engine = Engine::with_facts(&u.facts()).unwrap();
    let (v, p) = (Var::new("V").unwrap(), Var::new("P").unwrap());
    let holders = |predicate: &str, value: Term| -> BTreeSet<String> {
        let goal = Term::compound(predicate, [value, Term::var(&p)]);
        engine
            .query(&goal, std::slice::from_ref(&p))
            .unwrap()
            .into_iter()
            .map(|r| r[0].as_text().unwrap().to_owned())
            .collect()
    };
    for person in u.people.iter().step_by(7) {
        type Field = fn(&rulegym::universe::Person) -> &String;
        let fields: [(&str, Field); 3] = [
            ("has_dob", |q| &q.dob),
            ("has_job", |q| &q.occupation),
            ("has_hobby", |q| &q.hobby),
        ];
        for (predicate, field) in fields {
            let value = field(person);
            let want: BTreeSet<String> = u
                .people
                .iter()
                .filter(|q| field(q) == value)
                .map(|q| q.name.clone())
                .collect();
            assert_eq!(
                holders(predicate, Term::atom(value.as_str())),
                want,
                "{predicate} {value}"
            );
        }
    }
    // Unbound values enumerate every (value, person) pair once: dates are stored by year.
    let goal = Term::compound("has_dob", [Term::var(&v), Term::var(&p)]);
    let rows = engine.query(&goal, &[v.clone(), p.clone()]).unwrap();
    let got: BTreeSet<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r[0].as_text().unwrap().to_owned(),
                r[1].as_text().unwrap().to_owned(),
            )
        })
        .collect();
    let want: BTreeSet<(String, String)> = u
        .people
        .iter()
        .map(|q| (q.dob.clone(), q.name.clone()))
        .collect();
    assert_eq!(rows.len(), u.people.len());
    assert_eq!(got, want);
    assert!(holders("has_dob", Term::atom("1999-99-99")).is_empty());
    assert!(holders("has_dob", Term::atom("nodash")).is_empty());
}

fn dataset_hashes(threads: usize) -> Vec<(String, String)> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let u = Universe::generate(&UniverseConfig::default()).unwrap();
        let articles = corpus::articles(&u);
        universe_files(&u, &u.facts(), &articles, None, None)
            .unwrap()
            .into_iter()
            .map(|(name, bytes)| (name, sha256_hex(&bytes)))
            .collect()
    })
}

#[test]
fn default_dataset_bytes_are_golden_for_any_thread_count() {
    let one = dataset_hashes(1);
    let two = dataset_hashes(2);
    let four = dataset_hashes(4);
    assert_eq!(one, two);
    assert_eq!(one, four);
    for (file, want) in GOLDEN {
        let got = &one.iter().find(|(n, _)| n == file).unwrap().1;
        assert_eq!(
            got, want,
            "{file} changed: bump DATASET_VERSION and CHANGELOG.md if intended"
        );
    }
}

#[test]
fn cli_writes_a_verified_dataset_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    cli::generate_small(&out);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["config"]["seed"], 3);
    for (file, hash) in manifest["sha256"].as_object().unwrap() {
        let bytes = std::fs::read(out.join(file)).unwrap();
        assert_eq!(sha256_hex(&bytes), hash.as_str().unwrap(), "{file}");
    }
    // Refuses to overwrite without --force; bad flags fail with a message; nothing half-written.
    let again = cli::run(
        cli::rulegym()
            .args(["generate", "--quiet", "--out"])
            .arg(&out),
    );
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    let bad = cli::run(
        cli::rulegym()
            .args([
                "generate",
                "--quiet",
                "--max-family-tree-depth",
                "0",
                "--out",
            ])
            .arg(dir.path().join("bad")),
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("max_family_tree_depth"));
    assert!(!dir.path().join("bad").exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("demo")]);
}

#[test]
fn facts_load_in_swi_prolog_with_the_same_rule_base() {
    let Ok(status) = std::process::Command::new("swipl")
        .arg("--version")
        .output()
    else {
        super::skip::skip(
            "facts_load_in_swi_prolog",
            "swipl not installed (apt-get install swi-prolog-nox)",
            None,
        );
        return;
    };
    assert!(status.status.success());
    let u = Universe::generate(&small(5, 20)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let facts = dir.path().join("facts.pl");
    std::fs::write(&facts, u.facts()).unwrap();
    // The rule files are plain ISO Prolog apart from scryer's library imports.
    let rules: String = rulegym::engine::RULES
        .iter()
        .map(|(_, source)| {
            source
                .lines()
                .filter(|l| !l.starts_with(":- use_module"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let rules_path = dir.path().join("rules.pl");
    std::fs::write(&rules_path, rules).unwrap();
    let name = &u.people[3].name;
    let goal = format!(
        "consult('{}'), consult('{}'), aggregate_all(count, person(_,_,_,_,_,_,_,_), N), write(N), nl, \
         findall(Y, (friend(X, Y), X == '{}'), Fs), length(Fs, F), write(F), nl, halt.",
        rules_path.display(),
        facts.display(),
        name.replace('\'', "\\'")
    );
    let out = std::process::Command::new("swipl")
        .args(["-q", "-g", &goal])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(u.people.len().to_string().as_str()),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        lines.get(1).copied(),
        Some(u.people[3].friends.len().to_string().as_str())
    );
}

/// The facts the engine holds (`Universe::engine_facts`: people by id, dates as `YYYYMMDD`) are
/// the dataset's facts (`facts.pl`: people by name, dates as atoms) written differently: every
/// stored clause of both, loaded into two engines and read back, is the same once ids are named
/// and dates written out.
#[test]
fn engine_facts_are_the_named_facts_with_people_by_id() {
    let u = Universe::generate(&small(5, 25)).unwrap();
    assert!(u.dobs_coded());
    let by_name = Engine::with_facts(&u.facts()).unwrap();
    let by_id = Engine::with_facts(&u.engine_facts()).unwrap();
    let person = |v: &Value| match v {
        Value::Int(id) => Value::Atom(u.people[*id as usize].name.clone()),
        other => panic!("not a person id: {other:?}"),
    };
    let date = |v: &Value| match v {
        Value::Int(code) => Value::Atom(rulegym::universe::dob_text(*code).unwrap()),
        other => panic!("not a date code: {other:?}"),
    };
    let people = |v: &Value| match v {
        Value::List(items) => Value::List(items.iter().map(person).collect()),
        Value::Atom(nil) if nil == "[]" => v.clone(),
        other => panic!("not a list: {other:?}"),
    };
    for (predicate, arity) in rulegym::engine::FACT_PREDICATES {
        let vars: Vec<Var> = (0..*arity).map(Var::numbered).collect();
        let goal = Term::compound(*predicate, vars.iter().map(Term::var));
        let rows = |engine: &Engine| engine.query(&goal, &vars).unwrap();
        let named_rows: Vec<Vec<Value>> = rows(&by_name);
        let id_rows: Vec<Vec<Value>> = rows(&by_id)
            .iter()
            .map(|row| match *predicate {
                "person" => {
                    let mut row = row.clone();
                    row[0] = person(&row[0]);
                    row[2] = date(&row[2]);
                    for list in &mut row[5..] {
                        *list = people(list);
                    }
                    row
                }
                "with_dob" => {
                    let Value::Int(year) = row[0] else {
                        panic!("{row:?}")
                    };
                    let Value::List(pairs) = &row[1] else {
                        panic!("{row:?}")
                    };
                    let pairs = pairs
                        .iter()
                        .map(|pair| match pair {
                            Value::Compound(dash, args) => Value::Compound(
                                dash.clone(),
                                vec![date(&args[0]), person(&args[1])],
                            ),
                            other => panic!("{other:?}"),
                        })
                        .collect();
                    vec![Value::Atom(format!("{year:04}")), Value::List(pairs)]
                }
                _ => vec![row[0].clone(), people(&row[1])],
            })
            .collect();
        assert!(!named_rows.is_empty(), "{predicate}");
        assert_eq!(id_rows, named_rows, "{predicate}/{arity}");
    }
    // No name and no date is in the engine's facts.
    let engine_facts = u.engine_facts();
    assert!(!engine_facts.contains(&u.people[0].name));
    assert!(!engine_facts.contains(&u.people[0].dob));
}

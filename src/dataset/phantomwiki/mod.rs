//! PhantomWiki 1.0.3 compatibility: import one of its output directories and check that
//! rulegym's rule base, engine and article renderer reproduce it.
//!
//! - `facts.pl` (SWI-Prolog's `listing` dump: PhantomWiki's rules, dynamic declarations and the
//!   facts `type/2, gender/2, parent/2, dob/2, friend_/2, job/2, hobby/2, attribute/1`, every
//!   name and value a double-quoted string; `parent(Child, Parent)`) becomes a rulegym
//!   [`Universe`] ([`import_universe`]). Only lines of the stored fact predicates are read; each
//!   must be one complete fact, anything else is an error with its line number.
//! - `questions.json`: each question's `prolog.query` (atoms such as `friend(Y_4, Y_2)`,
//!   `sister("Kevin Worthy", Y_12)`, `job(Y_14, "doctor")`,
//!   `aggregate_all(count, distinct(friend(Y_3, Y_1)), Count_1)`, outermost first) and
//!   `prolog.answer` are compiled into a typed [`Query`] ([`compile_query`]) by a strict little
//!   parser, evaluated set-at-a-time by the engine, and compared with PhantomWiki's `answer`
//!   list as sets ([`verify_questions`]).
//! - Extended shapes of public PhantomWiki extensions (comparisons, superlatives, "the most",
//!   multi-attribute anchors) compile too ([`compile_record`] lets the text decide what a date
//!   comparison asks); [`verify_questions`] reports agree / disagree / errors / ambiguous /
//!   malformed, overall and per shape ([`SHAPES`]).
//! - `articles.json`: rulegym's article for each person is compared sentence by sentence with
//!   PhantomWiki's ([`compare_articles`]); a sentence whose list items come in another order is
//!   counted separately from a real difference.
//!
//! The parsers never panic: malformed input is an error naming the file, line or question.

use crate::corpus;
use crate::engine::{Engine, ReadError, ReadLimits, Term, read_clause, read_term};
use crate::question::text::question_text;
use crate::question::{Anchor, Attr, Chain, ChainStep, Query};
use crate::relations::relation;
use crate::universe::{Gender, Person, PersonId, Universe, UniverseConfig};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Errors while reading or interpreting PhantomWiki output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PhantomWikiError {
    /// A line of a file is not valid.
    #[error("{file}:{line}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The facts are well-formed but do not describe a universe rulegym can hold.
    #[error("facts: {0}")]
    Facts(String),
    /// A question's Prolog query is malformed or outside the supported grammar.
    #[error("query: {0}")]
    Query(String),
    /// A question's Prolog query is inconsistent in itself (a date comparison of a person with
    /// themself: both `dob` atoms on one variable, no chain to a second person).
    #[error("query: {0}")]
    Inconsistent(String),
}

fn facts_error(message: impl Into<String>) -> Error {
    PhantomWikiError::Facts(message.into()).into()
}

mod articles;
mod facts;
mod query;
mod questions;

pub use articles::*;
pub use facts::*;
pub use query::*;
pub use questions::*;

// ---------------------------------------------------------------------------------------------
// Terms: the engine's one term language, with errors worded for PhantomWiki's files
// ---------------------------------------------------------------------------------------------

/// Reads one term of a PhantomWiki file (`job(Y_14, "doctor")`); nothing may follow it.
pub fn parse_term(text: &str) -> std::result::Result<Term, String> {
    read_term(text, &ReadLimits::DEFAULT).map_err(|e| located(&e, text))
}

/// Reads one clause without a body, `term.` (the final full stop required, nothing after it).
pub fn parse_fact(text: &str) -> std::result::Result<Term, String> {
    read_clause(text, &ReadLimits::DEFAULT).map_err(|e| located(&e, text))
}

/// A reader error as "message at column N of "text"".
fn located(error: &ReadError, text: &str) -> String {
    let (_, column) = error.line_column(text);
    format!("{} at column {column} of {text:?}", error.message)
}

// ---------------------------------------------------------------------------------------------
// A whole directory
// ---------------------------------------------------------------------------------------------

/// A PhantomWiki output directory, read and imported.
#[derive(Debug, Clone)]
pub struct PwDir {
    /// The directory.
    pub dir: PathBuf,
    /// The imported universe.
    pub universe: Universe,
    /// The questions.
    pub questions: Vec<PwQuestion>,
    /// The articles, if `articles.json` exists.
    pub articles: Option<Vec<PwArticle>>,
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        context: format!("reading {}", path.display()),
        source,
    })
}

/// Reads `facts.pl`, `questions.json` and (if present) `articles.json` from `dir`.
pub fn read_dir(dir: &Path) -> Result<PwDir> {
    let facts_path = dir.join("facts.pl");
    let facts = parse_facts(&read(&facts_path)?, &facts_path.display().to_string())?;
    let universe = import_universe(&facts)?;
    let questions_path = dir.join("questions.json");
    let questions = parse_questions(
        &read(&questions_path)?,
        &questions_path.display().to_string(),
    )?;
    let articles_path = dir.join("articles.json");
    let articles = if articles_path.exists() {
        Some(parse_articles(
            &read(&articles_path)?,
            &articles_path.display().to_string(),
        )?)
    } else {
        None
    };
    Ok(PwDir {
        dir: dir.to_owned(),
        universe,
        questions,
        articles,
    })
}

/// Everything `rulegym phantomwiki verify` checks.
#[derive(Debug, Clone, Serialize)]
pub struct DirReport {
    /// People imported.
    pub people: usize,
    /// Family trees (connected components).
    pub trees: usize,
    /// The question checks.
    #[serde(flatten)]
    pub questions: VerifyReport,
    /// The article comparison (absent without `articles.json`).
    pub articles: Option<ArticleReport>,
}

impl DirReport {
    /// No question disagrees, fails or is malformed, and no article sentence differs (list
    /// order aside). Ambiguous questions do not fail the check: rulegym's answer agrees with a
    /// reading of the question, and the ambiguity is the generator's (they are reported apart).
    pub fn ok(&self) -> bool {
        self.questions.disagree == 0
            && self.questions.errors == 0
            && self.questions.malformed == 0
            && self
                .articles
                .as_ref()
                .is_none_or(ArticleReport::sentences_agree)
    }
}

/// Loads the imported universe into a fresh engine and verifies every question and article.
pub fn verify_dir(pw: &PwDir) -> Result<DirReport> {
    let engine = Engine::with_facts(&pw.universe.engine_facts())?;
    let questions = verify_questions(&pw.universe, &engine, &pw.questions);
    let articles = pw
        .articles
        .as_ref()
        .map(|a| compare_articles(&pw.universe, a));
    Ok(DirReport {
        people: pw.universe.people.len(),
        trees: pw.universe.config.num_family_trees,
        questions,
        articles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(atoms: &[&str], answer: &str) -> std::result::Result<Query, PhantomWikiError> {
        compile_query(
            &atoms.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            answer,
        )
    }

    #[test]
    fn terms_read_with_the_engine_reader_and_errors_name_the_column() {
        // The reader itself is tested in engine::term; here only the PhantomWiki wording.
        assert_eq!(
            parse_fact(r#"job("A", "doctor")."#).unwrap(),
            Term::compound("job", [Term::Str("A".into()), Term::Str("doctor".into())])
        );
        let err = parse_term("job(Y, \"x\") extra").unwrap_err();
        assert!(err.contains("at column 13 of"), "{err}");
        assert!(
            parse_fact("gender(\"A\", \"male\")").is_err(),
            "missing full stop"
        );
    }

    #[test]
    fn queries_compile() {
        let who = q(
            &[
                "friend(Y_4, Y_2)",
                "mother(Y_6, Y_4)",
                "job(Y_6, \"doctor\")",
            ],
            "Y_2",
        )
        .unwrap();
        assert_eq!(
            who,
            Query::Who(Chain {
                anchor: Anchor::Attribute {
                    attribute: Attr::Job,
                    value: "doctor".into()
                },
                steps: vec![
                    ChainStep::Hop("mother".into()),
                    ChainStep::Hop("friend".into())
                ],
            })
        );
        let what = q(&["dob(Y_3, Y_2)", "sister(\"Kevin Worthy\", Y_3)"], "Y_2").unwrap();
        assert_eq!(
            what,
            Query::What(
                Chain {
                    anchor: Anchor::Name("Kevin Worthy".into()),
                    steps: vec![ChainStep::Hop("sister".into())],
                },
                Attr::Dob
            )
        );
        let count = q(
            &[
                "aggregate_all(count, distinct(friend(Y_3, Y_1)), Count_1)",
                "hobby(Y_3, \"meditation\")",
            ],
            "Count_1",
        )
        .unwrap();
        assert!(matches!(count, Query::HowMany(_, ref r) if r == "friend"));
        let only_anchor = q(&["hobby(Y_2, \"meditation\")"], "Y_2").unwrap();
        assert!(matches!(only_anchor, Query::Who(ref c) if c.steps.is_empty()));
    }

    #[test]
    fn bad_queries_are_errors() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "Y"),
            (&["friend(Y_4, Y_2)"], "Y_2"),
            (&["frend(\"A\", Y_2)"], "Y_2"),
            (&["friend(\"A\", Y_2)"], "Y_3"),
            (&["friend(Y_4, Y_2)", "friend(\"A\", Y_5)"], "Y_2"),
            (&["friend(Y_4, Y_4)", "friend(\"A\", Y_4)"], "Y_4"),
            (
                &[
                    "aggregate_all(count, friend(Y_3, Y_1), C)",
                    "friend(\"A\", Y_3)",
                ],
                "C",
            ),
            (&["gender(Y_3, Y_2)", "friend(\"A\", Y_3)"], "Y_2"),
            (
                &["friend(Y_3, Y_2)", "dob(Y_5, Y_3)", "friend(\"A\", Y_5)"],
                "Y_2",
            ),
            (&["friend(\"A\", Y_2"], "Y_2"),
        ];
        for (atoms, answer) in cases {
            assert!(
                q(atoms, answer).is_err(),
                "{atoms:?} / {answer} must be refused"
            );
        }
    }

    fn named(name: &str, hops: &[&str]) -> Chain {
        Chain {
            anchor: Anchor::Name(name.into()),
            steps: hops.iter().map(|r| ChainStep::Hop((*r).into())).collect(),
        }
    }

    #[test]
    fn extended_queries_compile() {
        // Extension form (innermost first, the answer variable unbound): a date comparison.
        let cmp = q(
            &["dob(\"Ann B\", D1)", "dob(\"Bob B\", D2)", "D1 @< D2"],
            "X",
        )
        .unwrap();
        assert_eq!(cmp, Query::Older(named("Ann B", &[]), named("Bob B", &[])));
        // Reference form (outermost first), a chain and a multi-attribute side.
        let cmp = q(
            &[
                "CmpDL @< CmpDR",
                "dob(Y_a, CmpDL)",
                "dob(Y_b, CmpDR)",
                "friend(Y_1, Y_a)",
                "sibling(\"Ann B\", Y_1)",
                "hobby(Y_b, \"chess\")",
                "job(Y_b, \"cook\")",
                "dob(Y_b, \"0500-01-02\")",
            ],
            "Y",
        )
        .unwrap();
        // Outermost first: the last attribute atom is the anchor.
        let described = Chain {
            anchor: Anchor::Attribute {
                attribute: Attr::Dob,
                value: "0500-01-02".into(),
            },
            steps: vec![
                ChainStep::Filter {
                    attribute: Attr::Job,
                    value: "cook".into(),
                },
                ChainStep::Filter {
                    attribute: Attr::Hobby,
                    value: "chess".into(),
                },
            ],
        };
        assert_eq!(
            cmp,
            Query::Older(named("Ann B", &["sibling", "friend"]), described.clone())
        );
        assert_eq!(
            question_text(&Query::Younger(named("Ann B", &[]), described.clone())),
            "Who is younger, Ann B, or the person whose date of birth is 0500-01-02 and whose \
             occupation is cook and whose hobby is chess?"
        );
        // Superlatives, both forms and both comparison orders.
        let youngest = q(
            &[
                "child(\"Ann B\", X)",
                "dob(X, D)",
                "\\+ (child(\"Ann B\", Y), dob(Y, D2), Y \\= X, D2 @> D)",
            ],
            "X",
        )
        .unwrap();
        assert_eq!(
            youngest,
            Query::Youngest(named("Ann B", &[]), "child".into())
        );
        let oldest = q(
            &[
                "\\+ (sister(Y_2, Z), dob(Z, D2), Z \\= A, D @> D2)",
                "dob(A, D)",
                "sister(Y_2, A)",
                "friend(\"Ann B\", Y_2)",
            ],
            "A",
        )
        .unwrap();
        assert_eq!(
            oldest,
            Query::Oldest(named("Ann B", &["friend"]), "sister".into())
        );
        let most = q(
            &[
                "sibling(\"Ann B\", X)",
                "aggregate_all(count, distinct(child(X, Z)), C)",
                "\\+ (sibling(\"Ann B\", Y), Y \\= X, aggregate_all(count, distinct(child(Y, W)), C2), C2 > C)",
            ],
            "X",
        )
        .unwrap();
        assert_eq!(
            most,
            Query::MostRelatives(named("Ann B", &["sibling"]), "child".into())
        );
        // Several attributes on the answer variable: anchored on the first (the text's order).
        let multi = q(&["job(X, \"cook\")", "hobby(X, \"chess\")"], "X").unwrap();
        assert_eq!(
            question_text(&multi),
            "Who is the person whose occupation is cook and whose hobby is chess?"
        );
    }

    #[test]
    fn extended_atoms_compile_back() {
        let chains = [
            named("Ann B", &[]),
            named("Ann B", &["friend", "sibling"]),
            Chain {
                anchor: Anchor::Attribute {
                    attribute: Attr::Job,
                    value: "cook".into(),
                },
                steps: vec![
                    ChainStep::Filter {
                        attribute: Attr::Hobby,
                        value: "chess".into(),
                    },
                    ChainStep::Hop("child".into()),
                ],
            },
        ];
        for chain in chains {
            let mut queries = vec![
                Query::Oldest(chain.clone(), "sister".into()),
                Query::Youngest(chain.clone(), "friend".into()),
            ];
            if !chain.steps.is_empty() {
                queries.push(Query::MostRelatives(chain.clone(), "child".into()));
            }
            for query in queries {
                let (atoms, answer) = query.atoms();
                assert_eq!(
                    compile_query(&atoms, &answer),
                    Ok(query.clone()),
                    "{atoms:?}"
                );
            }
        }
    }

    #[test]
    fn bad_extended_queries_are_errors() {
        let cases: &[&[&str]] = &[
            // The negation asks about another relation.
            &[
                "child(\"A\", X)",
                "dob(X, D)",
                "\\+ (sister(\"A\", Y), dob(Y, D2), Y \\= X, D2 @> D)",
            ],
            // No comparison of the dates in the negation.
            &[
                "child(\"A\", X)",
                "dob(X, D)",
                "\\+ (child(\"A\", Y), dob(Y, D2), Y \\= X)",
            ],
            // Another candidate set in the negation.
            &[
                "sibling(\"A\", X)",
                "aggregate_all(count, distinct(child(X, Z)), C)",
                "\\+ (friend(\"A\", Y), Y \\= X, aggregate_all(count, distinct(child(Y, W)), C2), C2 > C)",
            ],
            // A date comparison with a side nothing leads to.
            &["D1 @< D2", "dob(Y_a, D1)", "dob(\"B\", D2)"],
            // An unused atom.
            &[
                "dob(\"A\", D1)",
                "dob(\"B\", D2)",
                "D1 @< D2",
                "friend(\"A\", Y)",
            ],
            // A count comparison.
            &[
                "aggregate_all(count, distinct(child(\"A\", X)), C1)",
                "aggregate_all(count, distinct(child(\"B\", Y)), C2)",
                "C1 > C2",
            ],
        ];
        for atoms in cases {
            assert!(q(atoms, "X").is_err(), "{atoms:?} must be refused");
        }
    }

    fn facts(text: &str) -> Result<Universe> {
        import_universe(&parse_facts(text, "facts.pl")?)
    }

    const PERSON: &str = "type(\"{N}\", person).\ngender(\"{N}\", \"{G}\").\ndob(\"{N}\", \"0500-01-0{D}\").\njob(\"{N}\", \"cook\").\nhobby(\"{N}\", \"chess\").\n";

    fn person(name: &str, gender: &str, day: u8) -> String {
        PERSON
            .replace("{N}", name)
            .replace("{G}", gender)
            .replace("{D}", &day.to_string())
    }

    #[test]
    fn a_small_family_imports() {
        let mut text = String::from("sibling(X, Y) :-\n    parent(X, A),\n    parent(Y, A).\n");
        text += &person("Ann B", "female", 1);
        text += &person("Bob B", "male", 2);
        text += &person("Cid B", "male", 3);
        text += &person("Dee B", "female", 4);
        text += &person("Eve Z", "female", 5);
        text += "parent(\"Cid B\", \"Ann B\").\nparent(\"Cid B\", \"Bob B\").\n";
        text += "parent(\"Dee B\", \"Bob B\").\nparent(\"Dee B\", \"Ann B\").\n";
        text += "friend_(\"Eve Z\", \"Ann B\").\n";
        let u = facts(&text).unwrap();
        assert_eq!(u.people.len(), 5);
        assert_eq!(u.config.num_family_trees, 2);
        let id = |n: &str| u.people.iter().position(|p| p.name == n).unwrap() as u32;
        let cid = u.person(id("Cid B"));
        assert_eq!(cid.parents, vec![id("Bob B"), id("Ann B")], "father first");
        assert_eq!(
            u.person(id("Ann B")).children,
            vec![id("Cid B"), id("Dee B")]
        );
        assert_eq!(u.person(id("Ann B")).spouse, Some(id("Bob B")));
        assert_eq!(u.person(id("Ann B")).friends, vec![id("Eve Z")]);
        assert_eq!(u.person(id("Eve Z")).friends, vec![id("Ann B")]);
        assert_ne!(u.person(id("Eve Z")).tree, cid.tree);
    }

    /// The PhantomEnvironments fork answers a date comparison whose sides denote several
    /// people with the winner of one pairing; rulegym counts such an answer ambiguous when it
    /// wins some pairing. Long friend chains on both sides make 10^4-10^5 pairings (the fork's
    /// "Who is older, the friend of the friend of the friend of ... of Don Johnson or the
    /// friend of the friend of the friend of the person whose hobby is neuroscience?": 295 x 67
    /// people, the gold Dion Russell winning only pairings past the 10,000th): each pairing
    /// must count, however many there are. Here 150 x 150 people born one a year; the gold is
    /// the 141st, who wins only against the 9 born after them.
    #[test]
    fn a_comparison_answer_winning_any_of_many_pairings_is_ambiguous() {
        let mut text = String::new();
        for i in 0..150u32 {
            text += &format!(
                "type(\"P{i:03} X\", person).\ngender(\"P{i:03} X\", \"female\").\n\
                 dob(\"P{i:03} X\", \"0{:03}-01-01\").\njob(\"P{i:03} X\", \"cook\").\n\
                 hobby(\"P{i:03} X\", \"chess\").\n",
                500 + i
            );
        }
        let u = facts(&text).unwrap();
        let engine = Engine::with_facts(&u.engine_facts()).unwrap();
        let record = |answer: &str, category: &str, cmp: &str| {
            serde_json::json!({
                "id": format!("{category}-{answer}"),
                "question": match category {
                    "comparison_age_younger" => "Who is younger, the person whose hobby is chess or the person whose hobby is chess?",
                    _ => "Who is older, the person whose hobby is chess or the person whose hobby is chess?",
                },
                "answer": [answer],
                "prolog": {"query": [
                    format!("CmpDL_1 {cmp} CmpDR_1"),
                    "dob(Y_2, CmpDL_1)", "dob(Y_3, CmpDR_1)",
                    "hobby(Y_2, \"chess\")", "hobby(Y_3, \"chess\")",
                ], "answer": "('Y_2', 'Y_3')"},
                "template": [], "type": 0, "difficulty": 0,
                "is_aggregation_question": false, "question_category": category,
            })
        };
        let json = serde_json::Value::Array(vec![
            record("P140 X", "comparison_age", "@<"),
            record("P009 X", "comparison_age_younger", "@>"),
            // Nobody of either side: no pairing gives it.
            record("Ada X", "comparison_age", "@<"),
        ]);
        let questions = parse_questions(&json.to_string(), "questions.json").unwrap();
        let report = verify_questions(&u, &engine, &questions);
        let outcome = |id: &str| {
            let is = |checks: &[QuestionCheck]| checks.iter().any(|c| c.id == id);
            match () {
                _ if is(&report.ambiguous_details) => "ambiguous",
                _ if is(&report.disagreements) => "disagree",
                _ => "other",
            }
        };
        assert_eq!(outcome("comparison_age-P140 X"), "ambiguous", "{report:#?}");
        assert_eq!(
            outcome("comparison_age_younger-P009 X"),
            "ambiguous",
            "{report:#?}"
        );
        assert_eq!(outcome("comparison_age-Ada X"), "disagree", "{report:#?}");
    }

    #[test]
    fn broken_families_are_errors() {
        let base = person("Ann B", "female", 1)
            + &person("Bob B", "male", 2)
            + &person("Cid B", "male", 3);
        let bad = [
            base.clone() + "parent(\"Cid B\", \"Ann B\").\n",
            base.clone() + "parent(\"Cid B\", \"Bob B\").\nparent(\"Cid B\", \"Cid B\").\n",
            base.clone() + "parent(\"Cid B\", \"Ann B\").\nparent(\"Cid B\", \"Nobody\").\n",
            base.clone() + "friend_(\"Ann B\", \"Ann B\").\n",
            base.clone() + "gender(\"Ann B\", \"female\").\n",
            base.replace(
                "gender(\"Bob B\", \"male\")",
                "gender(\"Bob B\", \"nonbinary\")",
            ),
            base.replace("dob(\"Bob B\", \"0500-01-02\").\n", ""),
            base.clone() + "parent(\"Cid B\", 42).\n",
            base.clone() + "parent(\"Cid B\") :- true.\n",
            String::from("gender(\"A\", \"male\").\n"),
        ];
        for text in bad {
            assert!(facts(&text).is_err(), "must be refused:\n{text}");
        }
        let mut half = base + &person("Dee C", "female", 4) + &person("Eli B", "male", 5);
        half += "parent(\"Cid B\", \"Ann B\").\nparent(\"Cid B\", \"Bob B\").\n";
        half += "parent(\"Eli B\", \"Dee C\").\nparent(\"Eli B\", \"Bob B\").\n";
        let err = facts(&half).unwrap_err().to_string();
        assert!(err.contains("half-siblings"), "{err}");
    }

    #[test]
    fn sentences_sort_their_lists() {
        assert_eq!(
            sorted_sentence("The friends of A are C D, B C."),
            "The friends of A are B C, C D."
        );
        assert_eq!(
            sorted_sentence("The hobby of A is chess."),
            "The hobby of A is chess."
        );
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(text in "\\PC{0,40}", atoms in proptest::collection::vec("[a-zA-Z_(),\" 0-9Y]{0,20}", 0..4)) {
            let _ = parse_term(&text);
            let _ = parse_fact(&text);
            let _ = parse_facts(&text, "x");
            let _ = compile_query(&atoms, "Y_2");
        }
    }
}

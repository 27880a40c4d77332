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
//! - `articles.json`: rulegym's article for each person is compared sentence by sentence with
//!   PhantomWiki's ([`compare_articles`]); a sentence whose list items come in another order is
//!   counted separately from a real difference.
//!
//! The parsers never panic: malformed input is an error naming the file, line or question.

use crate::corpus;
use crate::engine::Engine;
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
}

fn facts_error(message: impl Into<String>) -> Error {
    PhantomWikiError::Facts(message.into()).into()
}

// ---------------------------------------------------------------------------------------------
// Terms
// ---------------------------------------------------------------------------------------------

/// A Prolog term as written in PhantomWiki's files (the subset its facts and queries use).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PlTerm {
    /// A variable (`Y_4`, `Count_1`).
    Var(String),
    /// A double-quoted string.
    Str(String),
    /// An atom, plain (`count`) or quoted (`'O''Neil'`).
    Atom(String),
    /// An integer.
    Int(i64),
    /// A compound term `name(args...)`.
    Compound(String, Vec<PlTerm>),
}

impl PlTerm {
    /// The text of a string or an atom.
    pub fn text(&self) -> Option<&str> {
        match self {
            PlTerm::Str(s) | PlTerm::Atom(s) => Some(s),
            _ => None,
        }
    }
}

impl std::fmt::Display for PlTerm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlTerm::Var(v) => write!(f, "{v}"),
            PlTerm::Str(s) => write!(f, "{s:?}"),
            PlTerm::Atom(a) => write!(f, "'{}'", a.replace('\'', "\\'")),
            PlTerm::Int(n) => write!(f, "{n}"),
            PlTerm::Compound(name, args) => {
                write!(f, "{name}(")?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{a}")?;
                }
                write!(f, ")")
            }
        }
    }
}

/// Nesting deeper than this is refused (PhantomWiki's deepest term nests 3 levels).
const MAX_DEPTH: usize = 32;

struct TermParser<'a> {
    chars: Vec<char>,
    pos: usize,
    text: &'a str,
}

impl<'a> TermParser<'a> {
    fn new(text: &'a str) -> Self {
        TermParser {
            chars: text.chars().collect(),
            pos: 0,
            text,
        }
    }

    fn fail<T>(&self, message: impl std::fmt::Display) -> std::result::Result<T, String> {
        Err(format!(
            "{message} at column {} of {:?}",
            self.pos + 1,
            self.text
        ))
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, c: char) -> std::result::Result<(), String> {
        self.skip_ws();
        match self.peek() {
            Some(found) if found == c => {
                self.pos += 1;
                Ok(())
            }
            Some(found) => self.fail(format!("expected {c:?}, found {found:?}")),
            None => self.fail(format!("expected {c:?}, found the end")),
        }
    }

    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos == self.chars.len()
    }

    fn word(&mut self) -> String {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    /// A quoted string or atom; the opening delimiter is at `pos`.
    fn quoted(&mut self, delimiter: char) -> std::result::Result<String, String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return self.fail(format!("unterminated {delimiter}...{delimiter}")),
                Some(c) if c == delimiter => {
                    self.pos += 1;
                    if self.peek() == Some(delimiter) {
                        // A doubled delimiter stands for itself (ISO).
                        out.push(delimiter);
                        self.pos += 1;
                    } else {
                        return Ok(out);
                    }
                }
                Some('\\') => {
                    self.pos += 1;
                    let escaped = match self.peek() {
                        Some('\\') => '\\',
                        Some('"') => '"',
                        Some('\'') => '\'',
                        Some('`') => '`',
                        Some('n') => '\n',
                        Some('t') => '\t',
                        Some(other) => {
                            return self.fail(format!("unsupported escape \\{other}"));
                        }
                        None => return self.fail("unterminated escape"),
                    };
                    out.push(escaped);
                    self.pos += 1;
                }
                Some(c) if c.is_control() => {
                    return self.fail(format!("control character {c:?} inside quotes"));
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn term(&mut self, depth: usize) -> std::result::Result<PlTerm, String> {
        if depth > MAX_DEPTH {
            return self.fail(format!("terms nest deeper than {MAX_DEPTH}"));
        }
        self.skip_ws();
        let Some(c) = self.peek() else {
            return self.fail("expected a term, found the end");
        };
        let functor = match c {
            '"' => return self.quoted('"').map(PlTerm::Str),
            '\'' => self.quoted('\'')?,
            c if c.is_ascii_uppercase() || c == '_' => return Ok(PlTerm::Var(self.word())),
            c if c.is_ascii_lowercase() => self.word(),
            c if c.is_ascii_digit() || c == '-' => {
                let start = self.pos;
                self.pos += 1;
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.pos += 1;
                }
                let digits: String = self.chars[start..self.pos].iter().collect();
                return match digits.parse() {
                    Ok(n) => Ok(PlTerm::Int(n)),
                    Err(_) => {
                        self.pos = start;
                        self.fail(format!("{digits:?} is not a 64-bit integer"))
                    }
                };
            }
            other => return self.fail(format!("unexpected {other:?}")),
        };
        // A functor is followed immediately by its argument list (no space, as in Prolog).
        if self.peek() != Some('(') {
            return Ok(PlTerm::Atom(functor));
        }
        self.pos += 1;
        let mut args = vec![self.term(depth + 1)?];
        loop {
            self.skip_ws();
            match self.peek() {
                Some(',') => {
                    self.pos += 1;
                    args.push(self.term(depth + 1)?);
                }
                Some(')') => {
                    self.pos += 1;
                    return Ok(PlTerm::Compound(functor, args));
                }
                Some(other) => return self.fail(format!("expected ',' or ')', found {other:?}")),
                None => return self.fail("unterminated argument list"),
            }
        }
    }
}

/// Parses one term (`job(Y_14, "doctor")`); nothing may follow it.
pub fn parse_term(text: &str) -> std::result::Result<PlTerm, String> {
    let mut p = TermParser::new(text);
    let term = p.term(0)?;
    if !p.at_end() {
        return p.fail("unexpected text after the term");
    }
    Ok(term)
}

/// Parses one clause without a body, `term.` (the final full stop required, nothing after it).
pub fn parse_fact(text: &str) -> std::result::Result<PlTerm, String> {
    let mut p = TermParser::new(text);
    let term = p.term(0)?;
    p.expect('.')?;
    if !p.at_end() {
        return p.fail("unexpected text after the full stop");
    }
    Ok(term)
}

// ---------------------------------------------------------------------------------------------
// Facts -> Universe
// ---------------------------------------------------------------------------------------------

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
        let PlTerm::Compound(_, args) = &term else {
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
                a.text().map(str::to_owned).ok_or_else(|| {
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
    Ok(Universe { config, people })
}

// ---------------------------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------------------------

/// One atom of a PhantomWiki query, classified.
#[derive(Debug)]
enum Atom<'a> {
    /// `rel(X, Y)`: a relation of the rule base.
    Rel(&'a str, &'a PlTerm, &'a PlTerm),
    /// `attr(Person, Value)` for dob, job, hobby.
    Attr(Attr, &'a PlTerm, &'a PlTerm),
    /// `aggregate_all(count, distinct(rel(X, Y)), Count)`.
    Count(&'a str, &'a PlTerm, &'a PlTerm, &'a PlTerm),
}

fn query_error<T>(message: impl Into<String>) -> std::result::Result<T, PhantomWikiError> {
    Err(PhantomWikiError::Query(message.into()))
}

fn classify(term: &PlTerm) -> std::result::Result<Atom<'_>, PhantomWikiError> {
    let PlTerm::Compound(name, args) = term else {
        return query_error(format!("{term} is not a predicate call"));
    };
    let attr = match name.as_str() {
        "dob" => Some(Attr::Dob),
        "job" => Some(Attr::Job),
        "hobby" => Some(Attr::Hobby),
        _ => None,
    };
    match (name.as_str(), &args[..]) {
        (_, [person, value]) if attr.is_some() => {
            Ok(Atom::Attr(attr.expect("checked"), person, value))
        }
        ("aggregate_all", [PlTerm::Atom(count), PlTerm::Compound(distinct, inner), c])
            if count == "count" && distinct == "distinct" =>
        {
            match &inner[..] {
                [PlTerm::Compound(r, ra)] if ra.len() == 2 && relation(r).is_some() => {
                    Ok(Atom::Count(r, &ra[0], &ra[1], c))
                }
                _ => query_error(format!(
                    "{term}: expected aggregate_all(count, distinct(rel(X, Y)), Count) with a known relation"
                )),
            }
        }
        ("aggregate_all", _) => query_error(format!(
            "{term}: only aggregate_all(count, distinct(rel(X, Y)), Count) is supported \
             (a count without distinct counts proofs, not people)"
        )),
        (r, [x, y]) if relation(r).is_some() => Ok(Atom::Rel(r, x, y)),
        (other, args) => query_error(format!(
            "{other}/{} is not a relation of the rule base nor dob/job/hobby",
            args.len()
        )),
    }
}

/// Compiles a PhantomWiki query (atoms outermost first, as in `prolog.query`) and its answer
/// variable into a typed [`Query`].
///
/// Supported shape (PhantomWiki's grammar): the innermost atom is the anchor, either
/// `rel("Name", Y)` or `attr(Y, "value")`; each atom further out continues the chain from the
/// previous end with a fresh variable (`rel(Y, Z)`), or filters it (`attr(Y, "value")`); the
/// outermost atom may instead ask an attribute of the end (`attr(Y, Answer)`) or count relatives
/// (`aggregate_all(count, distinct(rel(Y, _)), Answer)`). Anything else is an error naming the
/// offending atom.
pub fn compile_query(
    atoms: &[String],
    answer: &str,
) -> std::result::Result<Query, PhantomWikiError> {
    let terms: Vec<PlTerm> = atoms
        .iter()
        .map(|a| parse_term(a).map_err(PhantomWikiError::Query))
        .collect::<std::result::Result<_, _>>()?;
    let classified: Vec<Atom> = terms
        .iter()
        .map(classify)
        .collect::<std::result::Result<_, _>>()?;
    let constant = |t: &PlTerm| match t {
        PlTerm::Str(s) | PlTerm::Atom(s) => Some(s.clone()),
        _ => None,
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut fresh = |t: &PlTerm, atom: &str| -> std::result::Result<String, PhantomWikiError> {
        match var_of(t) {
            Some(v) if seen.insert(v.clone()) => Ok(v),
            Some(v) => query_error(format!(
                "{atom}: variable {v} is used twice (only chains are supported)"
            )),
            None => query_error(format!("{atom}: expected a variable, found {t}")),
        }
    };
    let mut rest = classified.iter().zip(&terms).rev();
    let Some((innermost, term)) = rest.next() else {
        return query_error("empty query");
    };
    let shown = term.to_string();
    let (anchor, mut steps, mut end) = match innermost {
        Atom::Rel(r, x, y) if constant(x).is_some() => (
            Anchor::Name(constant(x).expect("checked")),
            vec![ChainStep::Hop((*r).to_owned())],
            fresh(y, &shown)?,
        ),
        Atom::Attr(attribute, p, v) if constant(v).is_some() => (
            Anchor::Attribute {
                attribute: *attribute,
                value: constant(v).expect("checked"),
            },
            Vec::new(),
            fresh(p, &shown)?,
        ),
        // "How many sisters does Kevin Worthy have?" / "What is the hobby of Ann Lee?": the
        // question applies directly to a named person.
        Atom::Count(r, x, y, c) if terms.len() == 1 && constant(x).is_some() => {
            fresh(y, &shown)?;
            if fresh(c, &shown)? != answer {
                return query_error(format!("{shown}: the answer variable is {answer}"));
            }
            let chain = Chain {
                anchor: Anchor::Name(constant(x).expect("checked")),
                steps: Vec::new(),
            };
            return Ok(Query::HowMany(chain, (*r).to_owned()));
        }
        Atom::Attr(attribute, p, v) if terms.len() == 1 && constant(p).is_some() => {
            if fresh(v, &shown)? != answer {
                return query_error(format!("{shown}: the answer variable is {answer}"));
            }
            let chain = Chain {
                anchor: Anchor::Name(constant(p).expect("checked")),
                steps: Vec::new(),
            };
            return Ok(Query::What(chain, *attribute));
        }
        _ => {
            return query_error(format!(
                "the innermost atom {shown} must be rel(\"Name\", Y) or attr(Y, \"value\")"
            ));
        }
    };
    enum Ask {
        What(Attr),
        HowMany(String),
    }
    let mut asked: Option<Ask> = None;
    let total = terms.len();
    for (position, (atom, term)) in rest.enumerate() {
        let shown = term.to_string();
        let outermost = position + 2 == total;
        let from_end = var_of(atom_subject(atom)).as_deref() == Some(end.as_str());
        if !from_end {
            return query_error(format!("{shown} does not continue the chain from {end}"));
        }
        match atom {
            Atom::Rel(r, _, y) => {
                steps.push(ChainStep::Hop((*r).to_owned()));
                end = fresh(y, &shown)?;
            }
            Atom::Attr(attribute, _, v) if constant(v).is_some() => {
                steps.push(ChainStep::Filter {
                    attribute: *attribute,
                    value: constant(v).expect("checked"),
                });
            }
            Atom::Attr(..) | Atom::Count(..) if !outermost => {
                return query_error(format!(
                    "{shown}: an attribute question or a count must be the outermost atom"
                ));
            }
            Atom::Attr(attribute, _, v) => {
                if fresh(v, &shown)? != answer {
                    return query_error(format!("{shown}: the answer variable is {answer}"));
                }
                asked = Some(Ask::What(*attribute));
            }
            Atom::Count(r, _, y, c) => {
                fresh(y, &shown)?;
                if fresh(c, &shown)? != answer {
                    return query_error(format!("{shown}: the answer variable is {answer}"));
                }
                asked = Some(Ask::HowMany((*r).to_owned()));
            }
        }
    }
    let chain = Chain { anchor, steps };
    match asked {
        Some(Ask::What(attribute)) => Ok(Query::What(chain, attribute)),
        Some(Ask::HowMany(r)) => Ok(Query::HowMany(chain, r)),
        None if end == answer => Ok(Query::Who(chain)),
        None => query_error(format!(
            "the answer variable {answer} is not the end of the chain ({end})"
        )),
    }
}

/// The person argument an atom applies to (its first argument).
fn atom_subject<'a>(atom: &Atom<'a>) -> &'a PlTerm {
    match atom {
        Atom::Rel(_, x, _) | Atom::Attr(_, x, _) | Atom::Count(_, x, _, _) => x,
    }
}

/// The name of a (non-anonymous) variable.
fn var_of(t: &PlTerm) -> Option<String> {
    match t {
        PlTerm::Var(v) if v != "_" => Some(v.clone()),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Questions
// ---------------------------------------------------------------------------------------------

/// `prolog` of a PhantomWiki question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PwProlog {
    /// Query atoms, outermost first.
    pub query: Vec<String>,
    /// The answer variable.
    pub answer: String,
}

/// One record of PhantomWiki's `questions.json` (fields rulegym does not use are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PwQuestion {
    /// PhantomWiki's id (a random uuid).
    #[serde(default)]
    pub id: String,
    /// The question text.
    pub question: String,
    /// PhantomWiki's answers.
    pub answer: Vec<String>,
    /// The Prolog query.
    pub prolog: PwProlog,
    /// Template index.
    #[serde(default, rename = "type")]
    pub template_index: Option<u64>,
}

/// Parses `questions.json` (a JSON array of question records).
pub fn parse_questions(json: &str, file: &str) -> Result<Vec<PwQuestion>> {
    serde_json::from_str(json).map_err(|source| Error::Json {
        context: format!("parsing {file} (PhantomWiki questions, --question-format json)"),
        source,
    })
}

/// The outcome of one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuestionCheck {
    /// Position in `questions.json`.
    pub index: usize,
    /// PhantomWiki's id.
    pub id: String,
    /// The question text.
    pub question: String,
    /// The query atoms.
    pub query: Vec<String>,
    /// PhantomWiki's answers, sorted and distinct.
    pub expected: Vec<String>,
    /// rulegym's engine answers (absent on error).
    pub got: Option<Vec<String>>,
    /// The native oracle's answers (absent on error).
    pub oracle: Option<Vec<String>>,
    /// What went wrong, for errors.
    pub error: Option<String>,
}

/// The summary `rulegym phantomwiki verify` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Questions read.
    pub questions: usize,
    /// Questions whose engine answers equal PhantomWiki's as sets.
    pub agree: usize,
    /// Questions whose answers differ.
    pub disagree: usize,
    /// Questions that could not be compiled or evaluated.
    pub errors: usize,
    /// Questions where the native oracle differs from the engine (a rulegym bug if non-zero).
    pub oracle_disagree: usize,
    /// Questions whose text rulegym renders differently from the typed query.
    pub text_differs: usize,
    /// The disagreeing questions.
    pub disagreements: Vec<QuestionCheck>,
    /// The questions that failed.
    pub error_details: Vec<QuestionCheck>,
    /// Up to 10 (PhantomWiki text, rulegym text) pairs that differ.
    pub text_examples: Vec<(String, String)>,
}

/// Compiles, evaluates (engine and oracle) and compares every question.
pub fn verify_questions(
    universe: &Universe,
    engine: &Engine,
    questions: &[PwQuestion],
) -> VerifyReport {
    let mut report = VerifyReport {
        questions: questions.len(),
        ..VerifyReport::default()
    };
    for (index, q) in questions.iter().enumerate() {
        let expected: BTreeSet<String> = q.answer.iter().cloned().collect();
        let mut check = QuestionCheck {
            index,
            id: q.id.clone(),
            question: q.question.clone(),
            query: q.prolog.query.clone(),
            expected: expected.iter().cloned().collect(),
            got: None,
            oracle: None,
            error: None,
        };
        let outcome = compile_query(&q.prolog.query, &q.prolog.answer)
            .map_err(Error::from)
            .and_then(|query| {
                let got = query.evaluate(engine)?;
                let oracle = query.evaluate_native(universe).map_err(Error::from)?;
                Ok((query, got, oracle))
            });
        match outcome {
            Err(e) => {
                check.error = Some(e.to_string());
                report.errors += 1;
                report.error_details.push(check);
            }
            Ok((query, got, oracle)) => {
                let text = question_text(&query);
                if text != q.question {
                    report.text_differs += 1;
                    if report.text_examples.len() < 10 {
                        report.text_examples.push((q.question.clone(), text));
                    }
                }
                if oracle != got {
                    report.oracle_disagree += 1;
                }
                let agree = got.iter().cloned().collect::<BTreeSet<_>>() == expected;
                check.got = Some(got);
                check.oracle = Some(oracle);
                if agree {
                    report.agree += 1;
                } else {
                    report.disagree += 1;
                    report.disagreements.push(check);
                }
            }
        }
    }
    report
}

// ---------------------------------------------------------------------------------------------
// Articles
// ---------------------------------------------------------------------------------------------

/// One record of PhantomWiki's `articles.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PwArticle {
    /// The person's name.
    pub title: String,
    /// The Markdown article.
    pub article: String,
    /// The facts it states (`sister("A", "B").`).
    #[serde(default)]
    pub facts: Vec<String>,
}

/// Parses `articles.json` (a JSON array; PhantomWiki's `--article-format json`).
pub fn parse_articles(json: &str, file: &str) -> Result<Vec<PwArticle>> {
    serde_json::from_str(json).map_err(|source| Error::Json {
        context: format!("parsing {file} (PhantomWiki articles, --article-format json)"),
        source,
    })
}

/// How one article differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArticleDiff {
    /// The article's title.
    pub title: String,
    /// `order` (same sentences, list items in another order), `text` or `facts`.
    pub kind: String,
    /// PhantomWiki's line (or fact).
    pub phantomwiki: String,
    /// rulegym's line (or fact).
    pub rulegym: String,
}

/// Article comparison summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ArticleReport {
    /// PhantomWiki articles read.
    pub articles: usize,
    /// Byte-identical articles.
    pub identical: usize,
    /// Articles with the same sentences where some list (friends, siblings, ...) is ordered
    /// differently.
    pub order_only: usize,
    /// Articles whose sentences differ.
    pub differ: usize,
    /// PhantomWiki titles that name nobody in the universe.
    pub missing: usize,
    /// People without a PhantomWiki article.
    pub people_without_article: usize,
    /// Articles whose stated facts differ as sets.
    pub facts_differ: usize,
    /// Up to 20 examples of each kind of difference.
    pub examples: Vec<ArticleDiff>,
}

impl ArticleReport {
    /// Same sentences for every person (list order aside) and the same facts.
    pub fn sentences_agree(&self) -> bool {
        self.differ == 0
            && self.missing == 0
            && self.people_without_article == 0
            && self.facts_differ == 0
    }
}

/// A sentence with its comma-separated list sorted ("The friends of N are B, A." -> "... A, B.").
fn sorted_sentence(line: &str) -> String {
    let Some(body) = line.strip_suffix('.') else {
        return line.to_owned();
    };
    let Some(at) = body.find(" are ") else {
        return line.to_owned();
    };
    let (head, list) = body.split_at(at + " are ".len());
    let mut items: Vec<&str> = list.split(", ").collect();
    items.sort_unstable();
    format!("{head}{}.", items.join(", "))
}

/// A fact as (predicate, argument texts), however it was quoted; `None` if it is not one.
fn fact_key(fact: &str) -> Option<(String, Vec<String>)> {
    match parse_fact(fact).ok()? {
        PlTerm::Compound(name, args) => {
            let texts = args
                .iter()
                .map(|a| a.text().map(str::to_owned))
                .collect::<Option<Vec<_>>>()?;
            Some((name, texts))
        }
        _ => None,
    }
}

/// Renders rulegym's article for every person and compares it with PhantomWiki's.
pub fn compare_articles(universe: &Universe, articles: &[PwArticle]) -> ArticleReport {
    let by_name: BTreeMap<&str, PersonId> = universe
        .people
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i as PersonId))
        .collect();
    let mut report = ArticleReport {
        articles: articles.len(),
        ..ArticleReport::default()
    };
    let mut covered = BTreeSet::new();
    let example = |report: &mut ArticleReport, diff: ArticleDiff| {
        if report
            .examples
            .iter()
            .filter(|e| e.kind == diff.kind)
            .count()
            < 20
        {
            report.examples.push(diff);
        }
    };
    for pw in articles {
        let Some(&id) = by_name.get(pw.title.as_str()) else {
            report.missing += 1;
            continue;
        };
        covered.insert(id);
        let ours = corpus::article(universe, id);
        if ours.text == pw.article {
            report.identical += 1;
        } else {
            let (a, b): (Vec<&str>, Vec<&str>) =
                (pw.article.lines().collect(), ours.text.lines().collect());
            let first_diff = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i));
            let same_sorted = a.len() == b.len()
                && a.iter()
                    .zip(&b)
                    .all(|(x, y)| x == y || sorted_sentence(x) == sorted_sentence(y));
            let kind = if same_sorted {
                report.order_only += 1;
                "order"
            } else {
                report.differ += 1;
                "text"
            };
            if let Some(i) = first_diff {
                example(
                    &mut report,
                    ArticleDiff {
                        title: pw.title.clone(),
                        kind: kind.to_owned(),
                        phantomwiki: a.get(i).unwrap_or(&"").to_string(),
                        rulegym: b.get(i).unwrap_or(&"").to_string(),
                    },
                );
            }
        }
        let theirs: BTreeSet<_> = pw.facts.iter().map(|f| fact_key(f).ok_or(f)).collect();
        let mine: BTreeSet<_> = ours.facts.iter().map(|f| fact_key(f).ok_or(f)).collect();
        if theirs != mine {
            report.facts_differ += 1;
            let show = |x: Option<&std::result::Result<(String, Vec<String>), &String>>| {
                x.map_or(String::new(), |f| format!("{f:?}"))
            };
            example(
                &mut report,
                ArticleDiff {
                    title: pw.title.clone(),
                    kind: "facts".to_owned(),
                    phantomwiki: show(theirs.difference(&mine).next()),
                    rulegym: show(mine.difference(&theirs).next()),
                },
            );
        }
    }
    report.people_without_article = universe.people.len() - covered.len();
    report
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
    /// Every question agrees and no article sentence differs (list order aside).
    pub fn ok(&self) -> bool {
        self.questions.disagree == 0
            && self.questions.errors == 0
            && self
                .articles
                .as_ref()
                .is_none_or(ArticleReport::sentences_agree)
    }
}

/// Loads the imported universe into a fresh engine and verifies every question and article.
pub fn verify_dir(pw: &PwDir) -> Result<DirReport> {
    let engine = Engine::with_facts(&pw.universe.facts())?;
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
    fn terms_parse() {
        assert_eq!(
            parse_term(r#"job(Y_14, "doctor")"#).unwrap(),
            PlTerm::Compound(
                "job".into(),
                vec![PlTerm::Var("Y_14".into()), PlTerm::Str("doctor".into())]
            )
        );
        assert_eq!(
            parse_fact(r#"parent("O'Neil \"X\"", 'a''b')."#).unwrap(),
            PlTerm::Compound(
                "parent".into(),
                vec![
                    PlTerm::Str("O'Neil \"X\"".into()),
                    PlTerm::Atom("a'b".into())
                ]
            )
        );
        for bad in [
            "",
            "job(",
            "job(Y, \"x\"",
            "job(Y \"x\")",
            "job(Y, \"x\") extra",
            "job(Y, \"a\\qb\")",
            "(",
            "99999999999999999999",
            "job(Y,)",
        ] {
            assert!(parse_term(bad).is_err(), "{bad:?} must not parse");
        }
        assert!(
            parse_fact("gender(\"A\", \"male\")").is_err(),
            "missing full stop"
        );
        let deep = "f(".repeat(100) + "a" + &")".repeat(100);
        assert!(parse_term(&deep).is_err());
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

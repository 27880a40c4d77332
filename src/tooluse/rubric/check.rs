//! The rubric rule-body checker: bodies are read by the shared reader ([`read_term`] under
//! [`RUBRIC_LIMITS`]), checked against a whitelist, rewritten (trajectory fact goals become
//! lookups in the facts term passed to each query) and re-rendered from the typed [`Term`]
//! through the engine's quoting, so task text never reaches scryer's reader directly.
//!
//! Accepted syntax is the reader's (see [`read_term`]): variables, atoms, 64-bit integers,
//! double-quoted strings, compound terms, lists with tails, parentheses and the operators
//! `;` `->` `,` `\+` `=` `\=` `==` `\==` `@<` `@>` `@=<` `@>=` `is` `=:=` `=\=` `<` `>` `=<` `>=`
//! `+` `-` `*` `//` `mod` and prefix `-`. No floats, no `0'c`, no operator definitions, no
//! directives, no clause heads. Limits: [`MAX_BODY_BYTES`], [`MAX_TOKENS`], [`MAX_DEPTH`],
//! [`MAX_ATOMS`] distinct atoms per rubric, [`MAX_TEXT`] characters per atom or string.

use crate::engine::{ReadLimits, read_term};
use crate::engine::{Term, Var};
use std::collections::{BTreeMap, BTreeSet};

/// Longest accepted rule body, in bytes.
pub const MAX_BODY_BYTES: usize = 8 * 1024;
/// Most tokens in one body.
pub const MAX_TOKENS: usize = 2_000;
/// Deepest term nesting in a body.
pub const MAX_DEPTH: usize = 48;
/// Most distinct atoms in one rubric (guards scryer's never-collected atom table).
pub const MAX_ATOMS: usize = 512;
/// Longest atom or string literal, in characters.
pub const MAX_TEXT: usize = 512;

/// The reader limits of one rule body.
pub const RUBRIC_LIMITS: ReadLimits = ReadLimits {
    max_bytes: MAX_BODY_BYTES,
    max_tokens: MAX_TOKENS,
    max_depth: MAX_DEPTH,
    max_text: MAX_TEXT,
};

/// The error for a rule body that cannot be accepted: a message with the byte offset.
pub type ParseError = String;

/// Trajectory fact predicates: `(name, arity, position in the facts term)`. Every fact with a
/// step has it as its first argument.
pub const FACTS: &[(&str, usize, usize)] = &[
    ("tool_call", 3, 1),
    ("tool_result", 3, 2),
    ("tool_error", 3, 3),
    ("asked_user", 2, 4),
    ("user_said", 2, 5),
    ("user_revealed", 2, 6),
    ("answered", 2, 7),
    ("said", 2, 8),
    ("stopped", 2, 9),
    ("final_state", 3, 10),
    ("state_matches", 1, 11),
    ("turns", 1, 12),
];

/// Number of arguments of the facts term.
pub const FACT_GROUPS: usize = 12;

/// Facts without a step argument.
fn stepless(name: &str) -> bool {
    matches!(name, "final_state" | "state_matches" | "turns")
}

/// Helpers from `prolog/rubric.pl` that read the facts: called as `rg_<name>(Facts, Args...)`.
pub const FACT_HELPERS: &[(&str, usize)] = &[
    ("called", 1),
    ("called", 2),
    ("first_call", 2),
    ("call_count", 2),
    ("revealed", 1),
    ("revealed_before", 2),
    ("state_field", 4),
];

/// Pure helpers from `prolog/rubric.pl`: called as `rg_<name>(Args...)`.
pub const PURE_HELPERS: &[(&str, usize)] = &[
    ("json_get", 3),
    ("json_pairs", 2),
    ("text_contains", 2),
    ("text_contains_ci", 2),
    ("len", 2),
];

/// Pure built-in predicates passed through unchanged.
pub const BUILTINS: &[(&str, usize)] = &[
    ("=", 2),
    ("\\=", 2),
    ("==", 2),
    ("\\==", 2),
    ("@<", 2),
    ("@>", 2),
    ("@=<", 2),
    ("@>=", 2),
    ("compare", 3),
    ("is", 2),
    ("=:=", 2),
    ("=\\=", 2),
    ("<", 2),
    (">", 2),
    ("=<", 2),
    (">=", 2),
    ("var", 1),
    ("nonvar", 1),
    ("atom", 1),
    ("number", 1),
    ("integer", 1),
    ("atomic", 1),
    ("compound", 1),
    ("is_list", 1),
    ("ground", 1),
    ("member", 2),
    ("memberchk", 2),
    ("append", 3),
    ("nth0", 3),
    ("nth1", 3),
    ("last", 2),
    ("msort", 2),
    ("sort", 2),
    ("reverse", 2),
    ("sum_list", 2),
    ("max_list", 2),
    ("min_list", 2),
    ("list_to_set", 2),
    ("between", 3),
    ("true", 0),
    ("fail", 0),
    ("false", 0),
];

const ARITH_COMPARE: &[&str] = &["is", "=:=", "=\\=", "<", ">", "=<", ">="];

/// A rule body after checking and rewriting, ready to become a clause.
#[derive(Debug, Clone)]
pub struct CheckedBody {
    /// The rewritten goal.
    pub goal: Term,
    /// The variable reported as the item's step, if any.
    pub step: Option<Var>,
}

/// Checks and rewrites rule bodies of one rubric (shares the atom budget across items).
pub struct Checker {
    atoms: BTreeSet<String>,
    vars: BTreeMap<String, Var>,
    fresh: usize,
    facts_var: Var,
    used: [bool; FACT_GROUPS],
}

impl Default for Checker {
    fn default() -> Self {
        Self::new()
    }
}

impl Checker {
    /// A checker with an empty atom budget.
    pub fn new() -> Self {
        Checker {
            atoms: BTreeSet::new(),
            vars: BTreeMap::new(),
            fresh: 0,
            facts_var: Var::new("F__").expect("valid variable"),
            used: [false; FACT_GROUPS],
        }
    }

    /// Which fact groups (positions 1..=[`FACT_GROUPS`] of the facts term, 0-based here) any
    /// checked body reads; the others need not be passed to queries.
    pub fn used_groups(&self) -> [bool; FACT_GROUPS] {
        self.used
    }

    /// The variable that holds the facts term in every clause.
    pub fn facts_var(&self) -> &Var {
        &self.facts_var
    }

    /// Parses, checks and rewrites one body. The variable `Step`, when the body uses it, is the
    /// reported step; otherwise the step of the first top-level fact goal.
    pub fn check(&mut self, src: &str) -> Result<CheckedBody, ParseError> {
        let ast = read_term(src, &RUBRIC_LIMITS).map_err(|e| e.to_string())?;
        self.vars.clear();
        self.fresh = 0;
        let mut auto_step: Option<Var> = None;
        let mut conjuncts = Vec::new();
        flatten_conj(&ast, &mut conjuncts);
        let mut goals = Vec::new();
        for conjunct in conjuncts {
            if auto_step.is_none()
                && let Term::Compound(name, args) = conjunct
                && FACTS.iter().any(|&(n, a, _)| n == name && a == args.len())
                && !stepless(name)
                && let Term::Var(v) = &args[0]
            {
                // `_` gets a fresh name here so the step can still be reported.
                let var = if v.is_anonymous() {
                    let var = self.fresh_var();
                    let mut args = args.clone();
                    args[0] = Term::Var(var.clone());
                    self.vars.insert(var.name().to_owned(), var.clone());
                    goals.push(self.goal(&Term::Compound(name.clone(), args), 0)?);
                    auto_step = Some(var);
                    continue;
                } else {
                    self.var(v.name())
                };
                auto_step = Some(var);
            }
            goals.push(self.goal(conjunct, 0)?);
        }
        let step = if self.vars.contains_key("Step") {
            Some(self.var("Step"))
        } else {
            auto_step
        };
        Ok(CheckedBody {
            goal: Term::and(goals),
            step,
        })
    }

    fn fresh_var(&mut self) -> Var {
        self.fresh += 1;
        Var::new(format!("A__{}", self.fresh)).expect("valid variable")
    }

    fn var(&mut self, name: &str) -> Var {
        if name == "_" {
            return self.fresh_var();
        }
        if let Some(v) = self.vars.get(name) {
            return v.clone();
        }
        // User variables are renamed so they can never clash with the clause's own variables.
        let v = Var::new(format!("V__{name}")).expect("a tokenized variable is valid");
        self.vars.insert(name.to_owned(), v.clone());
        v
    }

    fn atom(&mut self, text: &str) -> Result<(), ParseError> {
        if !self.atoms.contains(text) {
            if self.atoms.len() >= MAX_ATOMS {
                return Err(format!("rubric uses more than {MAX_ATOMS} distinct atoms"));
            }
            self.atoms.insert(text.to_owned());
        }
        Ok(())
    }

    fn goal(&mut self, ast: &Term, depth: usize) -> Result<Term, ParseError> {
        if depth > MAX_DEPTH {
            return Err(format!("goal nested deeper than {MAX_DEPTH} levels"));
        }
        let (name, args): (&str, &[Term]) = match ast {
            Term::Atom(a) => (a, &[]),
            Term::Compound(n, args) => (n, args),
            Term::Var(_) => {
                return Err("a variable cannot be called as a goal (call/N is not allowed)".into());
            }
            other => return Err(format!("{other} is not a goal")),
        };
        let arity = args.len();
        let meta = |s: &mut Self, a: &Term| s.goal(a, depth + 1);
        match (name, arity) {
            ("," | ";" | "->", 2) => {
                let a = meta(self, &args[0])?;
                let b = meta(self, &args[1])?;
                return Ok(Term::compound(name, [a, b]));
            }
            ("\\+" | "once", 1) => {
                let a = meta(self, &args[0])?;
                return Ok(Term::compound(name, [a]));
            }
            ("forall", 2) => {
                let a = meta(self, &args[0])?;
                let b = meta(self, &args[1])?;
                return Ok(Term::compound("forall", [a, b]));
            }
            ("findall", 3) => {
                let template = self.data(&args[0], depth + 1)?;
                let g = meta(self, &args[1])?;
                let list = self.data(&args[2], depth + 1)?;
                // Every solution is charged its size before it is copied (rg_findall/3), so the
                // inference budget bounds the memory findall can build, not just its steps.
                return Ok(Term::compound("rg_findall", [template, g, list]));
            }
            ("count", 2) => {
                let g = meta(self, &args[0])?;
                let n = self.data(&args[1], depth + 1)?;
                return Ok(Term::compound("rg_count", [g, n]));
            }
            _ => {}
        }
        if let Some(&(_, _, position)) = FACTS.iter().find(|&&(n, a, _)| n == name && a == arity) {
            self.used[position - 1] = true;
            // fact(Args) -> (arg(Position, F, L), member(fact(Args), L))
            let list = self.fresh_var();
            let data = args
                .iter()
                .map(|a| self.data(a, depth + 1))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Term::and([
                Term::compound(
                    "arg",
                    [
                        Term::Int(position as i64),
                        Term::var(&self.facts_var),
                        Term::var(&list),
                    ],
                ),
                Term::compound("member", [Term::compound(name, data), Term::var(&list)]),
            ]));
        }
        let data_args = |s: &mut Self| {
            args.iter()
                .map(|a| s.data(a, depth + 1))
                .collect::<Result<Vec<_>, ParseError>>()
        };
        if FACT_HELPERS.contains(&(name, arity)) {
            let group = match name {
                "revealed" | "revealed_before" => 6,
                "state_field" => 10,
                _ => 1,
            };
            self.used[group - 1] = true;
            let mut all = vec![Term::var(&self.facts_var)];
            all.extend(data_args(self)?);
            return Ok(Term::compound(format!("rg_{name}"), all));
        }
        if PURE_HELPERS.contains(&(name, arity)) {
            return Ok(Term::compound(format!("rg_{name}"), data_args(self)?));
        }
        if BUILTINS.contains(&(name, arity)) {
            if ARITH_COMPARE.contains(&name) {
                let first = usize::from(name == "is");
                for a in &args[first..] {
                    check_arith(a, 0)?;
                }
            }
            if arity == 0 {
                return Ok(Term::atom(name));
            }
            // Arithmetic, and the list predicates scryer lacks or that evaluate their
            // elements, run as the bounded versions in prolog/rubric.pl.
            let name = match guarded(name) {
                Some(guarded) => guarded,
                None => name,
            };
            return Ok(Term::compound(name, data_args(self)?));
        }
        Err(format!(
            "predicate {name}/{arity} is not allowed in rubric rules (allowed: trajectory facts \
             {}, helpers {}, {}, built-ins {}, control , ; -> \\+ once forall findall count)",
            list_names(FACTS.iter().map(|&(n, a, _)| (n, a))),
            list_names(FACT_HELPERS.iter().copied()),
            list_names(PURE_HELPERS.iter().copied()),
            list_names(BUILTINS.iter().copied()),
        ))
    }

    fn data(&mut self, ast: &Term, depth: usize) -> Result<Term, ParseError> {
        if depth > MAX_DEPTH {
            return Err(format!("term nested deeper than {MAX_DEPTH} levels"));
        }
        Ok(match ast {
            Term::Var(v) => Term::var(&self.var(v.name())),
            Term::Atom(a) => {
                self.atom(a)?;
                Term::atom(a.clone())
            }
            Term::Int(n) => Term::Int(*n),
            Term::Str(s) => Term::Str(s.clone()),
            Term::Compound(f, args) => {
                self.atom(f)?;
                let args = args
                    .iter()
                    .map(|a| self.data(a, depth + 1))
                    .collect::<Result<Vec<_>, _>>()?;
                Term::compound(f.clone(), args)
            }
            Term::List(items) => Term::List(
                items
                    .iter()
                    .map(|a| self.data(a, depth + 1))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Term::PartialList(items, tail) => {
                let items = items
                    .iter()
                    .map(|a| self.data(a, depth + 1))
                    .collect::<Result<Vec<_>, _>>()?;
                let tail = self.data(tail, depth + 1)?;
                items
                    .into_iter()
                    .rev()
                    .fold(tail, |acc, item| Term::compound(".", [item, acc]))
            }
        })
    }
}

/// The bounded version in `prolog/rubric.pl` of a whitelisted built-in, where there is one:
/// arithmetic checks every operand at run time (a variable may be bound to any expression) and
/// bounds every integer and result; `is_list`, `last`, `msort`, `max_list` and `min_list` are
/// not in scryer's libraries; `sum_list`, `max_list` and `min_list` evaluate their elements.
fn guarded(name: &str) -> Option<&'static str> {
    Some(match name {
        "is" => "rg_is",
        "=:=" => "rg_arith_eq",
        "=\\=" => "rg_arith_ne",
        "<" => "rg_arith_lt",
        ">" => "rg_arith_gt",
        "=<" => "rg_arith_le",
        ">=" => "rg_arith_ge",
        "is_list" => "rg_is_list",
        "last" => "rg_last",
        "msort" => "rg_msort",
        "sum_list" => "rg_sum_list",
        "max_list" => "rg_max_list",
        "min_list" => "rg_min_list",
        _ => return None,
    })
}

fn list_names(items: impl Iterator<Item = (&'static str, usize)>) -> String {
    items
        .map(|(n, a)| format!("{n}/{a}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn flatten_conj<'a>(ast: &'a Term, out: &mut Vec<&'a Term>) {
    match ast {
        Term::Compound(n, args) if n == "," && args.len() == 2 => {
            flatten_conj(&args[0], out);
            flatten_conj(&args[1], out);
        }
        other => out.push(other),
    }
}

/// Arithmetic may only use integers, variables and `+ - * // mod min max abs` (no `^`, `**`,
/// shifts or floats: one evaluation can never allocate an enormous number).
fn check_arith(ast: &Term, depth: usize) -> Result<(), ParseError> {
    if depth > MAX_DEPTH {
        return Err("arithmetic nested too deeply".into());
    }
    match ast {
        Term::Int(_) | Term::Var(_) => Ok(()),
        Term::Compound(op, args)
            if (matches!(op.as_str(), "+" | "-" | "*" | "//" | "mod" | "min" | "max")
                && args.len() == 2)
                || (matches!(op.as_str(), "-" | "abs") && args.len() == 1) =>
        {
            args.iter().try_for_each(|a| check_arith(a, depth + 1))
        }
        other => Err(format!(
            "arithmetic expression {other} is not allowed (integers, variables, + - * // mod \
             min max abs only)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(src: &str) -> String {
        Checker::new().check(src).unwrap().goal.render().unwrap()
    }

    fn parse_body(src: &str) -> Result<Term, ParseError> {
        read_term(src, &RUBRIC_LIMITS).map_err(|e| e.to_string())
    }

    #[test]
    fn parses_operators_and_lists() {
        let ast = parse_body("a(X), \\+ b(X) ; X = [1, -2 | T], Y is X + 2 * 3").unwrap();
        let Term::Compound(op, _) = &ast else {
            panic!()
        };
        assert_eq!(op, ";");
        assert!(parse_body("X = 'it''s', Y = \"q\\\"\"").is_ok());
        assert!(parse_body("X = 1.5").is_err());
        assert!(parse_body("a(").is_err());
        assert!(parse_body("a b").is_err());
        assert!(parse_body("X = 1 = 2").is_err());
        assert!(parse_body("true.").is_ok());
    }

    #[test]
    fn rewrites_facts_and_helpers() {
        let r = render("tool_call(S, book, Args), json_get(Args, city, \"Oslo\"), called(pay)");
        assert!(r.contains("'arg'(1,F__,A__1)"), "{r}");
        assert!(
            r.contains("'member'('tool_call'(V__S,'book',V__Args),A__1)"),
            "{r}"
        );
        assert!(r.contains("'rg_json_get'(V__Args,'city',\"Oslo\")"), "{r}");
        assert!(r.contains("'rg_called'(F__,'pay')"), "{r}");
    }

    #[test]
    fn step_is_explicit_or_the_first_fact() {
        let mut c = Checker::new();
        let b = c.check("answered(_, T), tool_call(Step, x, _)").unwrap();
        assert_eq!(b.step.unwrap().name(), "V__Step");
        let b = c.check("\\+ called(x), tool_call(_, y, _)").unwrap();
        assert_eq!(b.step.unwrap().name(), "A__1");
        let b = c.check("called(x)").unwrap();
        assert!(b.step.is_none());
    }

    #[test]
    fn rejects_non_whitelisted_and_hostile_bodies() {
        let mut c = Checker::new();
        for bad in [
            "halt",
            "assertz(x)",
            "retract(tool_call(_, _, _))",
            "write(hello)",
            "call(G)",
            "G",
            "X is 2 ^ 100000000",
            "X is 2 ** 10",
            "atom_codes(A, \"x\")",
            "length(L, 100000000)",
            "X = 1.0e10",
            "foo(X) :- bar",
            "consult('/etc/passwd')",
            "findall(X, halt, L)",
            "\\+ shell(\"ls\")",
        ] {
            assert!(c.check(bad).is_err(), "{bad} accepted");
        }
        let deep = format!("X = {}a{}", "f(".repeat(200), ")".repeat(200));
        assert!(c.check(&deep).unwrap_err().contains("deeper"));
        let flood: Vec<String> = (0..600).map(|i| format!("a{i}")).collect();
        let flood = format!("X = [{}]", flood.join(","));
        assert!(c.check(&flood).unwrap_err().contains("atoms"));
        assert!(c.check(&"x".repeat(MAX_BODY_BYTES + 1)).is_err());
    }
}

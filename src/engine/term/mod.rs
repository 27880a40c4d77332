//! The one Prolog term language of rulegym: typed terms, their renderer and the reader
//! ([`read_term`], [`read_clause`]) that the rubric checker and the PhantomWiki importer use.
//! Queries are built from typed terms and rendered with correct quoting, so user data can never
//! change the shape of a query; answers come back as [`Value`]s.

mod lex;
mod limits;
mod read;

pub use limits::{ReadError, ReadLimits};
pub use read::{read_clause, read_term};

use super::EngineError;
use std::fmt::Write as _;

/// A query variable. Names are validated (`[A-Z_][A-Za-z0-9_]*`), so rendering one can never
/// inject syntax.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Var(String);

impl Var {
    /// A variable with the given name; errors unless it is a valid Prolog variable name (names
    /// starting `Rulegym__` are reserved for the engine).
    pub fn new(name: impl Into<String>) -> Result<Self, EngineError> {
        let name = name.into();
        let mut chars = name.chars();
        let valid_start = chars
            .next()
            .is_some_and(|c| c.is_ascii_uppercase() || c == '_');
        let valid = valid_start
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            && name != "_"
            && !name.starts_with("Rulegym__");
        if valid {
            Ok(Var(name))
        } else {
            Err(EngineError::InvalidTerm(format!(
                "{name:?} is not a valid variable name"
            )))
        }
    }

    /// The `i`-th generated variable, `Y0`, `Y1`, ... (always valid).
    pub fn numbered(i: usize) -> Self {
        Var(format!("Y{i}"))
    }

    /// The anonymous variable `_` (every occurrence is a distinct variable).
    pub fn anonymous() -> Self {
        Var("_".to_owned())
    }

    /// Whether this is the anonymous variable `_`.
    pub fn is_anonymous(&self) -> bool {
        self.0 == "_"
    }

    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

/// A Prolog term built from typed parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// An atom; any text, rendered quoted and escaped.
    Atom(String),
    /// A 64-bit integer.
    Int(i64),
    /// A double-quoted string (a list of characters in scryer's default flags).
    Str(String),
    /// A variable.
    Var(Var),
    /// A compound term `name(args...)`; the functor is rendered quoted.
    Compound(String, Vec<Term>),
    /// A proper list.
    List(Vec<Term>),
    /// A partial list `[items | tail]`; `items` must not be empty.
    PartialList(Vec<Term>, Box<Term>),
}

impl Term {
    /// An atom term.
    pub fn atom(text: impl Into<String>) -> Self {
        Term::Atom(text.into())
    }

    /// An atom from raw bytes (e.g. a name read from a file); errors on invalid UTF-8 instead
    /// of guessing.
    pub fn atom_from_bytes(bytes: &[u8]) -> Result<Self, EngineError> {
        std::str::from_utf8(bytes)
            .map(Term::atom)
            .map_err(|e| EngineError::InvalidTerm(format!("atom text is not UTF-8: {e}")))
    }

    /// The text of an atom or a string; `None` for other terms.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Term::Atom(text) | Term::Str(text) => Some(text),
            _ => None,
        }
    }

    /// A variable term.
    pub fn var(var: &Var) -> Self {
        Term::Var(var.clone())
    }

    /// A compound term `functor(args...)`.
    pub fn compound(functor: impl Into<String>, args: impl IntoIterator<Item = Term>) -> Self {
        Term::Compound(functor.into(), args.into_iter().collect())
    }

    /// The conjunction of goals (`true` when empty).
    pub fn and(goals: impl IntoIterator<Item = Term>) -> Self {
        let goals: Vec<Term> = goals.into_iter().collect();
        goals
            .into_iter()
            .rev()
            .reduce(|acc, goal| Term::compound(",", [goal, acc]))
            .unwrap_or_else(|| Term::atom("true"))
    }

    /// Renders the term as Prolog text. Errors on text scryer cannot represent (NUL characters).
    pub fn render(&self) -> Result<String, EngineError> {
        let mut out = String::new();
        self.render_into(&mut out)?;
        Ok(out)
    }

    fn render_into(&self, out: &mut String) -> Result<(), EngineError> {
        match self {
            Term::Atom(text) => quote(text, '\'', out)?,
            Term::Int(n) => {
                // Negative numbers are parenthesised so `- 1` never parses as an operator term.
                if *n < 0 {
                    write!(out, "({n})").expect("writing to a String cannot fail");
                } else {
                    write!(out, "{n}").expect("writing to a String cannot fail");
                }
            }
            Term::Str(text) => quote(text, '"', out)?,
            Term::Var(var) => out.push_str(var.name()),
            Term::Compound(functor, args) => {
                if args.is_empty() {
                    return Err(EngineError::InvalidTerm(format!(
                        "compound {functor:?} needs at least one argument (use an atom)"
                    )));
                }
                quote(functor, '\'', out)?;
                out.push('(');
                for (i, arg) in args.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    arg.render_argument(out)?;
                }
                out.push(')');
            }
            Term::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.render_argument(out)?;
                }
                out.push(']');
            }
            Term::PartialList(items, tail) => {
                if items.is_empty() {
                    return Err(EngineError::InvalidTerm(
                        "a partial list needs at least one item (use the tail)".into(),
                    ));
                }
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.render_argument(out)?;
                }
                out.push('|');
                tail.render_argument(out)?;
                out.push(']');
            }
        }
        Ok(())
    }

    /// Renders an argument position; an atom that could be read as an operator is parenthesised
    /// (`(',')`, `('-')`, `(is)`), any other atom is written quoted as is (parsing a parenthesised
    /// atom costs scryer several times more).
    fn render_argument(&self, out: &mut String) -> Result<(), EngineError> {
        match self {
            Term::Atom(text) if may_be_operator(text) => {
                out.push('(');
                self.render_into(out)?;
                out.push(')');
                Ok(())
            }
            _ => self.render_into(out),
        }
    }
}

impl std::fmt::Display for Term {
    /// Writes [`Term::render`]'s text; a term that cannot be rendered (NUL characters, an empty
    /// compound or partial list) is written in its debug form instead.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.render() {
            Ok(text) => f.write_str(&text),
            Err(_) => write!(f, "{self:?}"),
        }
    }
}

/// Whether an atom's text could name an operator: solo and symbol-char atoms, and the
/// alphanumeric operators of ISO and scryer. Text with any other character (a space, a letter
/// next to a symbol) never does.
fn may_be_operator(text: &str) -> bool {
    const WORD_OPERATORS: [&str; 14] = [
        "is",
        "rem",
        "mod",
        "div",
        "xor",
        "dynamic",
        "discontiguous",
        "initialization",
        "meta_predicate",
        "module_transparent",
        "multifile",
        "public",
        "thread_local",
        "table",
    ];
    const SYMBOL_CHARS: &str = "#$&*+-./:<=>?@^~\\";
    text.is_empty()
        || matches!(text, "," | "|" | ";" | "!" | "[]" | "{}")
        || WORD_OPERATORS.contains(&text)
        || text.chars().all(|c| SYMBOL_CHARS.contains(c))
}

/// Appends `text` as a quoted Prolog atom (`'O\\'Neil'`). Errors on NUL characters.
pub fn write_atom(text: &str, out: &mut String) -> Result<(), EngineError> {
    quote(text, '\'', out)
}

/// Writes `text` between `delimiter`s with ISO escapes; every character round-trips.
fn quote(text: &str, delimiter: char, out: &mut String) -> Result<(), EngineError> {
    out.push(delimiter);
    // Most text (names, values) is printable ASCII without a backslash or the delimiter: as is.
    if text
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'\\' && u32::from(b) != u32::from(delimiter))
    {
        out.push_str(text);
        out.push(delimiter);
        return Ok(());
    }
    for c in text.chars() {
        match c {
            '\0' => {
                return Err(EngineError::InvalidTerm(format!(
                    "text {text:?} contains a NUL character"
                )));
            }
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == delimiter => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {
                write!(out, "\\x{:x}\\", c as u32).expect("writing to a String cannot fail")
            }
            c => out.push(c),
        }
    }
    out.push(delimiter);
    Ok(())
}

/// A value in an answer: a ground term read back from the engine.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    /// An atom.
    Atom(String),
    /// An integer (arbitrary-precision integers outside i64 become an error).
    Int(i64),
    /// A string (a list of characters).
    Str(String),
    /// A compound term.
    Compound(String, Vec<Value>),
    /// A list.
    List(Vec<Value>),
    /// A variable left unbound in the answer, by its printed name.
    Unbound(String),
}

impl Value {
    /// The text of an atom or a string; `None` for other values.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Atom(text) | Value::Str(text) => Some(text),
            _ => None,
        }
    }

    /// The integer, if this value is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoms_are_quoted_and_escaped() {
        let t = Term::compound("parent", [Term::atom("O'Neil \\ x\ny"), Term::Int(-3)]);
        assert_eq!(t.render().unwrap(), r"'parent'('O\'Neil \\ x\ny',(-3))");
        let ops = Term::compound(
            "f",
            [
                Term::atom(","),
                Term::atom("-"),
                Term::atom("is"),
                Term::atom("a b"),
            ],
        );
        assert_eq!(ops.render().unwrap(), "'f'((','),('-'),('is'),'a b')");
    }

    #[test]
    fn conjunction_nests_to_the_right() {
        let x = Var::new("X").unwrap();
        let t = Term::and([
            Term::compound("a", [Term::var(&x)]),
            Term::compound("b", [Term::var(&x)]),
            Term::compound("c", [Term::var(&x)]),
        ]);
        assert_eq!(t.render().unwrap(), "','('a'(X),','('b'(X),'c'(X)))");
        assert_eq!(Term::and([]).render().unwrap(), "'true'");
    }

    #[test]
    fn bad_names_and_nul_are_rejected() {
        assert!(Var::new("x").is_err());
        assert!(Var::new("X) :- halt").is_err());
        assert!(Var::new("_").is_err());
        assert!(Term::atom("a\0b").render().is_err());
        assert!(Term::compound("f", []).render().is_err());
        assert!(
            Term::PartialList(vec![], Box::new(Term::atom("t")))
                .render()
                .is_err()
        );
    }

    #[test]
    fn partial_lists_and_anonymous_variables_render() {
        let t = Term::PartialList(
            vec![Term::atom("a"), Term::Int(-1), Term::atom(",")],
            Box::new(Term::var(&Var::anonymous())),
        );
        assert_eq!(t.render().unwrap(), "['a',(-1),(',')|_]");
        assert!(Var::anonymous().is_anonymous());
        assert!(!Var::new("X").unwrap().is_anonymous());
        assert_eq!(t.to_string(), "['a',(-1),(',')|_]");
        assert!(Term::atom("a\0b").to_string().contains("Atom"));
    }
}

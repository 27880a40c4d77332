//! The one Prolog term reader: a strict lexer and operator-precedence parser from text to
//! [`Term`], shared by the rubric rule-body checker and the PhantomWiki importer.
//!
//! Accepted syntax: variables (`X`, `_Y`, `Y_14`; `_` is [`Var::anonymous`]), atoms (plain
//! `lower_case`, quoted `'it''s'`, symbol-char atoms such as `=..`, and the solo atoms `;` `!`),
//! 64-bit integers (`1_000` digit groups; `-` directly before the digits, in prefix position, is
//! a negative literal), double-quoted strings ([`Term::Str`]), compound terms (a functor,
//! quoted or not, immediately followed by `(`), lists `[a, b]`, partial lists `[a | T]`,
//! parentheses, `%` and `/* */` comments, and this fixed operator table:
//!
//! | priority | type | operators |
//! |---|---|---|
//! | 1100 | xfy | `;` |
//! | 1050 | xfy | `->` |
//! | 1000 | xfy | `,` |
//! | 900 | fy | `\+` |
//! | 700 | xfx | `=` `\=` `==` `\==` `@<` `@>` `@=<` `@>=` `is` `=:=` `=\=` `<` `>` `=<` `>=` |
//! | 500 | yfx | `+` `-` |
//! | 400 | yfx | `*` `//` `mod` |
//! | 200 | fy | `-` |
//!
//! Quoted atoms are never operators. Quoted text (atoms and strings alike) accepts the escapes
//! `\n \t \r \\ \' \" \`` and `\xHEX\`, and a doubled delimiter; any other escape, a raw
//! control character, or a NUL character anywhere is an error. No floats, no `0'c` or radix
//! numbers, no `{}` or back-quoted text, no operator definitions.
//!
//! Every error is a [`ReadError`] with the byte offset where reading failed; no input panics.
//! [`ReadLimits`] bounds the text length, the token count, the nesting depth (so recursion and
//! the resulting term stay small) and the length of any one name or quoted text.
//! [`Term::render`] output reads back to the same term.

use super::lex::{Lexer, Tok, Token};
use super::limits::{ReadError, ReadLimits};
use super::{Term, Var};

/// One term and nothing after it except whitespace, comments, and at most one final full stop.
pub fn read_term(src: &str, limits: &ReadLimits) -> Result<Term, ReadError> {
    let mut parser = Parser::new(src, limits)?;
    let (term, _, _) = parser.term(1200, 0)?;
    if parser.peek() == Some(&Tok::End) {
        parser.pos += 1;
    }
    parser.finish()?;
    Ok(term)
}

/// One clause `term.`: the final full stop is required; nothing may follow it but
/// whitespace/comments.
pub fn read_clause(src: &str, limits: &ReadLimits) -> Result<Term, ReadError> {
    let mut parser = Parser::new(src, limits)?;
    let (term, _, _) = parser.term(1200, 0)?;
    if parser.peek() != Some(&Tok::End) {
        return Err(parser.error(format!(
            "expected a full stop '.' after the clause, found {}",
            parser.describe()
        )));
    }
    parser.pos += 1;
    parser.finish()?;
    Ok(term)
}

// ---------------------------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Assoc {
    Xfx,
    Xfy,
    Yfx,
}

fn infix(name: &str) -> Option<(u32, Assoc)> {
    Some(match name {
        ";" => (1100, Assoc::Xfy),
        "->" => (1050, Assoc::Xfy),
        "," => (1000, Assoc::Xfy),
        "=" | "\\=" | "==" | "\\==" | "@<" | "@>" | "@=<" | "@>=" | "is" | "=:=" | "=\\=" | "<"
        | ">" | "=<" | ">=" => (700, Assoc::Xfx),
        "+" | "-" => (500, Assoc::Yfx),
        "*" | "//" | "mod" => (400, Assoc::Yfx),
        _ => return None,
    })
}

fn prefix(name: &str) -> Option<u32> {
    match name {
        "\\+" => Some(900),
        "-" => Some(200),
        _ => None,
    }
}

/// A parsed term with its priority and its height (levels of nesting below it).
type Parsed = (Term, u32, usize);

struct Parser<'a> {
    toks: Vec<Token>,
    pos: usize,
    end: usize,
    limits: &'a ReadLimits,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str, limits: &'a ReadLimits) -> Result<Self, ReadError> {
        if src.len() > limits.max_bytes {
            return Err(ReadError::new(
                limits.max_bytes,
                format!(
                    "text is {} bytes, more than the limit of {} bytes",
                    src.len(),
                    limits.max_bytes
                ),
            ));
        }
        if let Some(nul) = src.find('\0') {
            return Err(ReadError::new(nul, "NUL character"));
        }
        let toks = Lexer::tokens(src, limits)?;
        Ok(Parser {
            toks,
            pos: 0,
            end: src.len(),
            limits,
        })
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    fn offset(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |t| t.start)
    }

    fn error(&self, message: impl Into<String>) -> ReadError {
        ReadError::new(self.offset(), message)
    }

    /// The next token, in words, for messages.
    fn describe(&self) -> String {
        match self.peek() {
            None => "the end of the text".into(),
            Some(Tok::End) => "the full stop".into(),
            Some(Tok::Var(v)) => format!("variable {v}"),
            Some(Tok::Name(n)) => format!("'{n}'"),
            Some(Tok::Quoted(q)) => format!("quoted atom {q:?}"),
            Some(Tok::Int(n)) => format!("integer {n}"),
            Some(Tok::Str(s)) => format!("string {s:?}"),
            Some(Tok::Punct(c)) => format!("'{c}'"),
        }
    }

    fn expect(&mut self, c: char, context: &str) -> Result<(), ReadError> {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(format!(
                "expected '{c}'{context}, found {}",
                self.describe()
            )))
        }
    }

    /// After the term (and the full stop if any): only the end may follow.
    fn finish(&self) -> Result<(), ReadError> {
        if self.pos == self.toks.len() {
            return Ok(());
        }
        let after_stop = self.pos > 0 && self.toks[self.pos - 1].tok == Tok::End;
        Err(self.error(if after_stop {
            format!("unexpected text after the full stop: {}", self.describe())
        } else {
            format!(
                "unexpected text {} (missing operator or parenthesis?)",
                self.describe()
            )
        }))
    }

    fn too_deep(&self) -> ReadError {
        self.error(format!(
            "term nested deeper than {} levels",
            self.limits.max_depth
        ))
    }

    fn infix_here(&self) -> Option<(String, u32, Assoc)> {
        let name = match self.peek()? {
            Tok::Punct(',') => ",",
            Tok::Name(n) => n.as_str(),
            _ => return None,
        };
        infix(name).map(|(p, a)| (name.to_owned(), p, a))
    }

    /// A term of priority at most `max`, `depth` levels inside the whole term. Invariant:
    /// `depth + height <= max_depth` for the result.
    fn term(&mut self, max: u32, depth: usize) -> Result<Parsed, ReadError> {
        if depth > self.limits.max_depth {
            return Err(self.too_deep());
        }
        let (mut left, mut left_prec, mut height) = self.primary(max, depth)?;
        while let Some((name, prec, assoc)) = self.infix_here() {
            if prec > max {
                break;
            }
            let left_max = if assoc == Assoc::Yfx { prec } else { prec - 1 };
            if left_prec > left_max {
                return Err(self.error(format!(
                    "operator priority clash at '{name}' (add parentheses)"
                )));
            }
            let right_max = if assoc == Assoc::Xfy { prec } else { prec - 1 };
            self.pos += 1;
            let (right, _, right_height) = self.term(right_max, depth + 1)?;
            height = height.max(right_height) + 1;
            if depth + height > self.limits.max_depth {
                return Err(self.too_deep());
            }
            left = Term::Compound(name, vec![left, right]);
            left_prec = prec;
        }
        Ok((left, left_prec, height))
    }

    /// Arguments `(a, b, ...)` of a functor; the `(` is next.
    fn args(&mut self, depth: usize) -> Result<(Vec<Term>, usize), ReadError> {
        self.expect('(', "")?;
        let mut args = Vec::new();
        let mut height = 0;
        loop {
            let (arg, _, h) = self.term(999, depth + 1)?;
            args.push(arg);
            height = height.max(h + 1);
            match self.peek() {
                Some(Tok::Punct(',')) => self.pos += 1,
                Some(Tok::Punct(')')) => {
                    self.pos += 1;
                    return Ok((args, height));
                }
                _ => {
                    return Err(self.error(format!(
                        "expected ',' or ')' after an argument, found {}",
                        self.describe()
                    )));
                }
            }
        }
    }

    /// A list after its `[`.
    fn list(&mut self, depth: usize) -> Result<(Term, usize), ReadError> {
        if self.peek() == Some(&Tok::Punct(']')) {
            self.pos += 1;
            return Ok((Term::List(Vec::new()), 0));
        }
        let mut items = Vec::new();
        let mut height = 0;
        loop {
            let (item, _, h) = self.term(999, depth + 1)?;
            items.push(item);
            height = height.max(h + 1);
            match self.peek() {
                Some(Tok::Punct(',')) => self.pos += 1,
                Some(Tok::Punct(']')) => {
                    self.pos += 1;
                    return Ok((Term::List(items), height));
                }
                Some(Tok::Punct('|')) => {
                    self.pos += 1;
                    let (tail, _, h) = self.term(999, depth + 1)?;
                    self.expect(']', " after the tail of a list")?;
                    let height = height.max(h + 1);
                    return Ok((Term::PartialList(items, Box::new(tail)), height));
                }
                _ => {
                    return Err(self.error(format!(
                        "expected ',', '|' or ']' after a list item, found {}",
                        self.describe()
                    )));
                }
            }
        }
    }

    /// Whether the next token can start an operand (decides if a prefix operator applies).
    fn starts_term(&self) -> bool {
        match self.peek() {
            None | Some(Tok::End) => false,
            Some(Tok::Punct(c)) => matches!(c, '(' | '['),
            Some(Tok::Name(n)) => infix(n).is_none() || prefix(n).is_some(),
            Some(_) => true,
        }
    }

    fn int(&self, magnitude: u64, negative: bool, offset: usize) -> Result<Term, ReadError> {
        let value = if negative {
            0i64.checked_sub_unsigned(magnitude)
        } else {
            i64::try_from(magnitude).ok()
        };
        let sign = if negative { "-" } else { "" };
        value.map(Term::Int).ok_or_else(|| {
            ReadError::new(
                offset,
                format!("integer {sign}{magnitude} does not fit in 64 bits"),
            )
        })
    }

    fn primary(&mut self, max: u32, depth: usize) -> Result<Parsed, ReadError> {
        let offset = self.offset();
        let Some(token) = self.toks.get(self.pos).cloned() else {
            return Err(self.error("unexpected end of the text (expected a term)"));
        };
        if token.tok == Tok::End {
            return Err(self.error("unexpected full stop (expected a term)"));
        }
        self.pos += 1;
        match token.tok {
            Tok::Int(n) => Ok((self.int(n, false, offset)?, 0, 0)),
            Tok::Str(s) => Ok((Term::Str(s), 0, 0)),
            Tok::Var(name) => {
                let var = if name == "_" {
                    Var::anonymous()
                } else {
                    Var::new(name.as_str()).map_err(|_| {
                        ReadError::new(
                            offset,
                            format!(
                                "{name} is not an accepted variable name (the prefix Rulegym__ \
                                 is reserved)"
                            ),
                        )
                    })?
                };
                Ok((Term::Var(var), 0, 0))
            }
            Tok::Punct('(') => {
                let (t, _, h) = self.term(1200, depth + 1)?;
                self.expect(')', "")?;
                Ok((t, 0, h))
            }
            Tok::Punct('[') => {
                let (t, h) = self.list(depth)?;
                Ok((t, 0, h))
            }
            Tok::Punct(c) => Err(ReadError::new(
                offset,
                format!("unexpected '{c}' (expected a term)"),
            )),
            Tok::Quoted(name) => {
                if token.functional {
                    let (args, h) = self.args(depth)?;
                    Ok((Term::Compound(name, args), 0, h))
                } else {
                    Ok((Term::Atom(name), 0, 0))
                }
            }
            Tok::Name(name) => {
                if token.functional {
                    let (args, h) = self.args(depth)?;
                    return Ok((Term::Compound(name, args), 0, h));
                }
                if name == "-"
                    && let Some(next) = self.toks.get(self.pos)
                    && let Tok::Int(n) = next.tok
                    && next.start == token.end
                {
                    // A minus sign directly before a number is a negative literal.
                    self.pos += 1;
                    return Ok((self.int(n, true, offset)?, 0, 0));
                }
                if let Some(prec) = prefix(&name)
                    && self.starts_term()
                {
                    let prec = prec.min(max);
                    let (arg, _, h) = self.term(prec, depth + 1)?;
                    return Ok((Term::Compound(name, vec![arg]), prec, h + 1));
                }
                let prec = if infix(&name).is_some() || prefix(&name).is_some() {
                    1201.min(max)
                } else {
                    0
                };
                Ok((Term::Atom(name), prec, 0))
            }
            Tok::End => Err(ReadError::new(offset, "unexpected full stop")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: ReadLimits = ReadLimits::DEFAULT;

    fn term(src: &str) -> Term {
        read_term(src, &D).unwrap_or_else(|e| panic!("{src:?}: {e}"))
    }

    fn err(src: &str) -> String {
        match read_term(src, &D) {
            Ok(t) => panic!("{src:?} read as {t:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn var(name: &str) -> Term {
        Term::Var(Var::new(name).unwrap())
    }

    fn c(f: &str, args: impl IntoIterator<Item = Term>) -> Term {
        Term::compound(f, args)
    }

    fn a(text: &str) -> Term {
        Term::atom(text)
    }

    // Ported from the PhantomWiki parser's `terms_parse`.
    #[test]
    fn phantomwiki_terms_parse() {
        assert_eq!(
            term(r#"job(Y_14, "doctor")"#),
            c("job", [var("Y_14"), Term::Str("doctor".into())])
        );
        assert_eq!(
            read_clause(r#"parent("O'Neil \"X\"", 'a''b')."#, &D).unwrap(),
            c("parent", [Term::Str("O'Neil \"X\"".into()), a("a'b")])
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
            assert!(read_term(bad, &D).is_err(), "{bad:?} must not parse");
        }
        assert!(
            read_clause("gender(\"A\", \"male\")", &D).is_err(),
            "missing full stop"
        );
        let deep = "f(".repeat(100) + "a" + &")".repeat(100);
        assert!(read_term(&deep, &D).unwrap_err().message.contains("deeper"));
        assert_eq!(
            term("aggregate_all(count, distinct(friend(Y_3, Y_1)), Count_1)"),
            c(
                "aggregate_all",
                [
                    a("count"),
                    c("distinct", [c("friend", [var("Y_3"), var("Y_1")])]),
                    var("Count_1")
                ]
            )
        );
        assert_eq!(term("f(-3, 42)"), c("f", [Term::Int(-3), Term::Int(42)]));
        assert_eq!(term("-3"), Term::Int(-3));
        assert_eq!(term("'O''Neil'(x)"), c("O'Neil", [a("x")]));
    }

    #[test]
    fn clauses_need_exactly_one_full_stop() {
        let fact = c("f", [a("a")]);
        assert_eq!(read_clause("f(a).", &D).unwrap(), fact);
        assert_eq!(read_clause("f(a) .  % done\n", &D).unwrap(), fact);
        assert_eq!(read_clause("f(a)./* x */", &D).unwrap_err().offset, 4);
        assert_eq!(read_clause("/* c */ f(a). /* x */ ", &D).unwrap(), fact);
        assert_eq!(read_term("f(a).", &D).unwrap(), fact);
        assert_eq!(read_term("f(a)", &D).unwrap(), fact);
        assert_eq!(read_term("f(a).\n", &D).unwrap(), fact);
        for bad in ["f(a). g(b).", "f(a). .", "f(a)..", "f(a).g", "."] {
            assert!(read_term(bad, &D).is_err(), "{bad:?}");
            assert!(read_clause(bad, &D).is_err(), "{bad:?}");
        }
        assert!(err("f(a). b").contains("after the full stop"));
        assert!(
            read_clause("f(a) g", &D)
                .unwrap_err()
                .message
                .contains("expected a full stop")
        );
        assert_eq!(term("X = 1."), c("=", [var("X"), Term::Int(1)]));
        assert_eq!(term("X = a."), c("=", [var("X"), a("a")]));
    }

    #[test]
    fn operators_follow_the_table() {
        let t = term("a(X), \\+ b(X) ; X = [1, -2 | T], Y is X + 2 * 3");
        let x = || var("X");
        assert_eq!(
            t,
            c(
                ";",
                [
                    c(",", [c("a", [x()]), c("\\+", [c("b", [x()])])]),
                    c(
                        ",",
                        [
                            c(
                                "=",
                                [
                                    x(),
                                    Term::PartialList(
                                        vec![Term::Int(1), Term::Int(-2)],
                                        Box::new(var("T"))
                                    )
                                ]
                            ),
                            c(
                                "is",
                                [
                                    var("Y"),
                                    c("+", [x(), c("*", [Term::Int(2), Term::Int(3)])])
                                ]
                            )
                        ]
                    )
                ]
            )
        );
        // yfx groups to the left, xfy to the right.
        assert_eq!(
            term("1 - 2 - 3"),
            c("-", [c("-", [Term::Int(1), Term::Int(2)]), Term::Int(3)])
        );
        assert_eq!(term("a, b, c"), c(",", [a("a"), c(",", [a("b"), a("c")])]));
        assert_eq!(
            term("a -> b ; c"),
            c(";", [c("->", [a("a"), a("b")]), a("c")])
        );
        assert_eq!(
            term("X is 7 mod 2 // 1"),
            c(
                "is",
                [
                    var("X"),
                    c("//", [c("mod", [Term::Int(7), Term::Int(2)]), Term::Int(1)])
                ]
            )
        );
        // Minus: adjacent literal, prefix operator, infix operator, functional notation.
        assert_eq!(term("X - 1"), c("-", [var("X"), Term::Int(1)]));
        assert_eq!(term("X -1"), c("-", [var("X"), Term::Int(1)]));
        assert_eq!(term("- 1"), c("-", [Term::Int(1)]));
        assert_eq!(term("-(1)"), c("-", [Term::Int(1)]));
        assert_eq!(term("- (1)"), c("-", [Term::Int(1)]));
        assert_eq!(term("-a"), c("-", [a("a")]));
        assert_eq!(term("- -1"), c("-", [Term::Int(-1)]));
        assert_eq!(term("- - 1"), c("-", [c("-", [Term::Int(1)])]));
        assert_eq!(term("(-)"), a("-"));
        assert_eq!(term("X = -"), c("=", [var("X"), a("-")]));
        assert_eq!(term("\\+ (a, b)"), c("\\+", [c(",", [a("a"), a("b")])]));
        assert_eq!(term("f(;, !)"), c("f", [a(";"), a("!")]));
        assert!(err("X =.. Y").contains("missing operator"));
        // Quoted atoms are never operators.
        assert!(err("a '+' b").contains("missing operator"));
        assert_eq!(term("'+'(a, b)"), c("+", [a("a"), a("b")]));
        assert!(err("X = 1 = 2").contains("priority clash"));
        assert!(err("- = X").contains("priority clash"));
        assert!(err("a b").contains("unexpected text"));
        assert!(err("foo(X) :- bar").contains("missing operator or parenthesis?"));
        assert!(err("f (a)").contains("missing operator"));
        assert!(err("(a").contains("expected ')'"));
        assert!(err("[a").contains("expected ',', '|' or ']'"));
        assert!(err("[a|b").contains("expected ']'"));
        assert!(err("[a|b,c]").contains("expected ']'"));
        assert!(err("f(a|b)").contains("expected ',' or ')'"));
        assert!(err("a(").contains("unexpected end"));
        assert!(err("X = ").contains("unexpected end"));
        assert!(err("X = .").contains("unexpected full stop"));
        assert!(err("f(,)").contains("unexpected ','"));
        assert!(err("{a}").contains("unexpected character '{'"));
        assert!(err("a | b").contains("unexpected text"));
    }

    #[test]
    fn atoms_variables_lists_and_comments() {
        assert_eq!(term("_"), Term::Var(Var::anonymous()));
        assert_eq!(
            term("f(_, _Y, Y_14)"),
            c("f", [Term::Var(Var::anonymous()), var("_Y"), var("Y_14")])
        );
        assert!(err("Rulegym__X").contains("reserved"));
        assert_eq!(read_term("Rulegym__X", &D).unwrap_err().offset, 0);
        assert_eq!(term("[]"), Term::List(vec![]));
        assert_eq!(term("[ ]"), Term::List(vec![]));
        assert_eq!(term("'[]'"), a("[]"));
        assert_eq!(
            term("[a, [b]]"),
            Term::List(vec![a("a"), Term::List(vec![a("b")])])
        );
        assert_eq!(
            term("[a | [b | T]]"),
            Term::PartialList(
                vec![a("a")],
                Box::new(Term::PartialList(vec![a("b")], Box::new(var("T"))))
            )
        );
        assert_eq!(term("[(a, b)]"), Term::List(vec![c(",", [a("a"), a("b")])]));
        assert_eq!(term("fooBar_9"), a("fooBar_9"));
        assert_eq!(term("=.."), a("=.."));
        assert_eq!(term("''"), a(""));
        assert_eq!(term("\"\""), Term::Str(String::new()));
        assert_eq!(term("'\\x41\\\\x1F600\\'"), a("A😀"));
        assert_eq!(
            term("\"a\\n\\t\\r\\\\\\'\\\"\\`\""),
            Term::Str("a\n\t\r\\'\"`".into())
        );
        assert_eq!(term("\"say \"\"hi\"\"\""), Term::Str("say \"hi\"".into()));
        assert_eq!(term("'é ü 日本'"), a("é ü 日本"));
        assert_eq!(term("% c\nf(a, /* b */ c) % d"), c("f", [a("a"), a("c")]));
        assert_eq!(term("1_000_000"), Term::Int(1_000_000));
        assert_eq!(term("-9223372036854775808"), Term::Int(i64::MIN));
        assert_eq!(term("9223372036854775807"), Term::Int(i64::MAX));
        assert!(err("9223372036854775808").contains("64 bits"));
        assert!(err("- 9223372036854775808").contains("64 bits"));
        assert!(err("-9223372036854775809").contains("64 bits"));
        assert!(err("X = 1.5").contains("floats are not supported"));
        assert!(err("X = 1.0e10").contains("use integers"));
        assert!(err("0'a").contains("0'c"));
        assert!(err("0x1F").contains("radix"));
        assert!(err("/* open").contains("unterminated"));
        assert!(err("'open").contains("unterminated quoted text"));
        assert!(err("é").contains("unexpected character"));
    }

    #[test]
    fn quoted_text_is_strict() {
        for (bad, needle) in [
            ("'a\\qb'", "unsupported escape \\q"),
            ("'a\\0b'", "unsupported escape"),
            ("'a\\ab'", "unsupported escape"),
            ("'a\\\nb'", "unsupported escape: a backslash before '\\n'"),
            ("'a\\", "unterminated escape"),
            ("'\\x0\\'", "NUL"),
            ("'\\x00\\'", "NUL"),
            ("'\\xD800\\'", "not a Unicode character"),
            ("'\\x110000\\'", "not a Unicode character"),
            ("'\\xFFFFFFFFFFFF\\'", "not a Unicode character"),
            ("'\\x41'", "malformed \\x escape"),
            ("'\\x\\'", "malformed \\x escape"),
            ("'\\xg\\'", "malformed \\x escape"),
            ("'a\nb'", "control character"),
            ("\"a\tb\"", "control character"),
            ("'\u{7f}'", "control character"),
            ("'a\0b'", "NUL"),
            ("f(a). % \0", "NUL"),
        ] {
            let e = err(bad);
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
        assert_eq!(read_term("f('a\\qb')", &D).unwrap_err().offset, 4);
        assert_eq!(read_term("f(a, \0)", &D).unwrap_err().offset, 5);
    }

    #[test]
    fn limits_are_enforced() {
        let small = ReadLimits {
            max_bytes: 32,
            max_tokens: 5,
            max_depth: 3,
            max_text: 4,
        };
        let e = read_term(&"a".repeat(33), &small).unwrap_err();
        assert!(e.message.contains("bytes"), "{e}");
        assert!(read_term(&"a".repeat(4), &small).is_ok());
        // f ( a , b ) is 6 tokens; f(a) is 4.
        let e = read_term("f(a, b)", &small).unwrap_err();
        assert!(e.message.contains("tokens"), "{e}");
        assert!(read_term("f(a).", &small).is_ok());
        assert!(
            read_term(
                "f(g(h(a)))",
                &ReadLimits {
                    max_tokens: 100,
                    ..small
                }
            )
            .is_ok()
        );
        for deep in [
            "f(g(h(i(a))))",
            "[[[[a]]]]",
            "((((a))))",
            "1+2+3+4+5",
            "a=(b=(c=(d=e)))",
            "- - - - 1",
            "[a|[b|[c|[d]]]]",
        ] {
            let e = read_term(
                deep,
                &ReadLimits {
                    max_tokens: 100,
                    ..small
                },
            )
            .unwrap_err();
            assert!(e.message.contains("deeper"), "{deep}: {e}");
        }
        assert!(
            read_term(
                "1+2+3",
                &ReadLimits {
                    max_tokens: 100,
                    ..small
                }
            )
            .is_ok()
        );
        let e = read_term("'abcde'", &small).unwrap_err();
        assert!(e.message.contains("longer than 4"), "{e}");
        assert!(read_term("'abcd'", &small).is_ok());
        assert!(read_term("'a''b'", &small).is_ok());
        assert!(read_term("\"abcde\"", &small).is_err());
        assert!(
            read_term("abcde", &small)
                .unwrap_err()
                .message
                .contains("longer")
        );
        assert!(
            read_term("Abcde", &small)
                .unwrap_err()
                .message
                .contains("longer")
        );
        // A long left-nested operator chain is refused, not built (and not overflowed on drop).
        let chain = vec!["1"; 100_000].join("+");
        assert!(err(&chain).contains("deeper"));
        let parens = "(".repeat(100_000);
        assert!(err(&parens).contains("deeper"));
        let big = "a".repeat(ReadLimits::DEFAULT.max_bytes + 1);
        assert!(err(&big).contains("bytes"));
    }

    #[test]
    fn line_and_column() {
        let src = "f(a,\n  'b\\q')";
        let e = read_term(src, &D).unwrap_err();
        assert_eq!(e.offset, 9);
        assert_eq!(e.line_column(src), (2, 5));
        assert_eq!(ReadError::new(0, "x").line_column(""), (1, 1));
    }

    /// A small deterministic pseudo-random generator (xorshift64*).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len())]
        }
    }

    const TEXTS: &[&str] = &[
        "a",
        "foo_Bar9",
        "O'Neil",
        "it''s",
        "back\\slash",
        "new\nline",
        "tab\there",
        "cr\r",
        "日本語 é",
        "😀",
        ",",
        "-",
        "+",
        "is",
        "mod",
        "\\+",
        ";",
        "!",
        "[]",
        "{}",
        "|",
        "",
        "a b",
        "'",
        "\"",
        "`",
        ".",
        "=..",
        "\u{7f}\u{1b}\u{85}",
        "\u{200b}",
        "X",
        "_",
        "%",
        "/*",
        "*/",
        "\\x41\\",
    ];

    fn text(rng: &mut Rng) -> String {
        if rng.below(4) == 0 {
            let alphabet: Vec<char> = "ab'\"\\\n\t\r\u{1}\u{7f}é😀 ,|()[].%".chars().collect();
            (0..rng.below(8)).map(|_| *rng.pick(&alphabet)).collect()
        } else {
            (*rng.pick(TEXTS)).to_owned()
        }
    }

    fn gen_term(rng: &mut Rng, depth: usize) -> Term {
        let leaf = depth == 0 || rng.below(3) == 0;
        let choice = if leaf { rng.below(4) } else { 4 + rng.below(3) };
        let kids = |rng: &mut Rng, min: usize| -> Vec<Term> {
            (0..min + rng.below(3))
                .map(|_| gen_term(rng, depth - 1))
                .collect()
        };
        match choice {
            0 => Term::Atom(text(rng)),
            1 => Term::Str(text(rng)),
            2 => {
                let random = -(rng.next() as i64 >> 3);
                Term::Int(*rng.pick(&[0, 1, -1, 42, -3, i64::MAX, i64::MIN, 1_000_000_007, random]))
            }
            3 => {
                let name = *rng.pick(&["X", "_Y", "Y_14", "Count_1", "_", "A__1"]);
                Term::Var(if name == "_" {
                    Var::anonymous()
                } else {
                    Var::new(name).unwrap()
                })
            }
            4 => Term::Compound(text(rng), kids(rng, 1)),
            5 => Term::List(kids(rng, 0)),
            _ => Term::PartialList(kids(rng, 1), Box::new(gen_term(rng, depth - 1))),
        }
    }

    #[test]
    fn rendered_terms_read_back() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..3_000 {
            let t = gen_term(&mut rng, 4);
            let src = t.render().unwrap();
            assert_eq!(read_term(&src, &D).as_ref(), Ok(&t), "{src}");
            assert_eq!(
                read_clause(&format!("{src}."), &D).as_ref(),
                Ok(&t),
                "{src}"
            );
            assert_eq!(
                read_term(&format!(" {src} . "), &D).as_ref(),
                Ok(&t),
                "{src}"
            );
        }
        for t in [
            Term::compound("parent", [a("O'Neil \\ x\ny"), Term::Int(-3)]),
            c("f", [a(","), a("-"), a("is"), a("a b")]),
            Term::and([c("a", [var("X")]), c("b", [var("X")])]),
            Term::Int(i64::MIN),
        ] {
            assert_eq!(read_term(&t.render().unwrap(), &D), Ok(t));
        }
    }

    const FRAGMENTS: &[&str] = &[
        "f(",
        ")",
        "(",
        "[",
        "]",
        "|",
        ",",
        ", ",
        " ",
        ".",
        ". ",
        "-",
        "- ",
        "1",
        "9999999999",
        "99999999999999999999",
        "_",
        "X",
        "Y_1",
        "a",
        "'",
        "''",
        "'a'",
        "\"",
        "\"s\"",
        "\\",
        "\\+",
        "\\x",
        "\\x41\\",
        "\\n",
        "\\q",
        "=",
        "is",
        "mod",
        "+",
        "*",
        "//",
        ";",
        "->",
        "!",
        "%",
        "\n",
        "/*",
        "*/",
        "0'",
        "1.5",
        "é",
        "😀",
        "\0",
        "\t",
        "{",
        "Rulegym__Z",
        "0x",
        "1_",
    ];

    #[test]
    fn never_panics_on_arbitrary_text() {
        let mut rng = Rng(0x0123_4567_89AB_CDEF);
        let small = ReadLimits {
            max_bytes: 256,
            max_tokens: 40,
            max_depth: 6,
            max_text: 8,
        };
        let mut accepted = 0;
        for i in 0..20_000 {
            let len = if i % 4 == 0 {
                rng.below(24)
            } else {
                rng.below(6)
            };
            let src: String = (0..len).map(|_| *rng.pick(FRAGMENTS)).collect();
            let limits = if i % 2 == 0 { &D } else { &small };
            for result in [read_term(&src, limits), read_clause(&src, limits)] {
                match result {
                    Ok(t) => {
                        accepted += 1;
                        // Whatever reads renders, and the rendering reads back the same.
                        let text = t.render().unwrap();
                        assert_eq!(read_term(&text, &D), Ok(t), "{src:?}");
                    }
                    Err(e) => assert!(e.offset <= src.len(), "{src:?}: {e}"),
                }
            }
        }
        eprintln!("{accepted} of 40000 reads accepted");
        assert!(accepted > 1_000, "{accepted}");
        // Random bytes, lossily decoded.
        for _ in 0..2_000 {
            let bytes: Vec<u8> = (0..rng.below(40)).map(|_| rng.next() as u8).collect();
            let src = String::from_utf8_lossy(&bytes);
            let _ = read_term(&src, &D);
            let _ = read_clause(&src, &small);
        }
    }
}

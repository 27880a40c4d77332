//! The lexer of the term reader: Prolog tokens (variables, names, quoted atoms, integers,
//! strings, punctuation, the end full stop) with byte offsets, layout and comments skipped,
//! within the read's [`ReadLimits`].

use super::limits::{ReadError, ReadLimits};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Var(String),
    /// An unquoted atom: letters, symbol chars, or a solo character.
    Name(String),
    /// A quoted atom; never an operator.
    Quoted(String),
    /// An integer's magnitude (a sign is applied by the parser).
    Int(u64),
    Str(String),
    /// One of `( ) [ ] , |`.
    Punct(char),
    /// The full stop ending a clause.
    End,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) start: usize,
    pub(super) end: usize,
    /// `(` follows immediately (a functor).
    pub(super) functional: bool,
}

const SYMBOL_CHARS: &str = "+-*/\\^<>=~:.?@#&$";

pub(super) fn is_symbol_char(c: char) -> bool {
    SYMBOL_CHARS.contains(c)
}

pub(super) struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    limits: &'a ReadLimits,
}

impl<'a> Lexer<'a> {
    fn peek(&self) -> Option<char> {
        self.src.get(self.pos..)?.chars().next()
    }

    fn peek_second(&self) -> Option<char> {
        let mut chars = self.src.get(self.pos..)?.chars();
        chars.next();
        chars.next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn bump_while(&mut self, keep: impl Fn(char) -> bool) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(&keep) {
            self.bump();
        }
        self.src.get(start..self.pos).unwrap_or_default()
    }

    /// Splits `src` into tokens (layout and comments skipped), within `limits`.
    pub(super) fn tokens(src: &'a str, limits: &'a ReadLimits) -> Result<Vec<Token>, ReadError> {
        Lexer {
            src,
            pos: 0,
            limits,
        }
        .run()
    }

    fn run(mut self) -> Result<Vec<Token>, ReadError> {
        let mut toks = Vec::new();
        loop {
            self.skip_layout()?;
            let start = self.pos;
            let Some(c) = self.peek() else {
                return Ok(toks);
            };
            if toks.len() >= self.limits.max_tokens {
                return Err(ReadError::new(
                    start,
                    format!("text has more than {} tokens", self.limits.max_tokens),
                ));
            }
            let tok = if c.is_ascii_digit() {
                self.number(start)?
            } else if c == '_' || c.is_ascii_uppercase() {
                Tok::Var(self.name(start, |c| c.is_ascii_alphanumeric() || c == '_')?)
            } else if c.is_ascii_lowercase() {
                Tok::Name(self.name(start, |c| c.is_ascii_alphanumeric() || c == '_')?)
            } else if c == '\'' {
                Tok::Quoted(self.quoted(c)?)
            } else if c == '"' {
                Tok::Str(self.quoted(c)?)
            } else if "()[],|".contains(c) {
                self.bump();
                Tok::Punct(c)
            } else if c == ';' || c == '!' {
                self.bump();
                Tok::Name(c.to_string())
            } else if is_symbol_char(c) {
                let name = self.name(start, is_symbol_char)?;
                let ends = self
                    .peek()
                    .is_none_or(|next| next.is_whitespace() || next == '%');
                if name == "." && ends {
                    Tok::End
                } else {
                    Tok::Name(name)
                }
            } else {
                return Err(ReadError::new(start, format!("unexpected character {c:?}")));
            };
            toks.push(Token {
                tok,
                start,
                end: self.pos,
                functional: self.peek() == Some('('),
            });
        }
    }

    /// Skips whitespace and comments.
    fn skip_layout(&mut self) -> Result<(), ReadError> {
        loop {
            match self.peek() {
                Some(c) if c.is_whitespace() => {
                    self.bump();
                }
                Some('%') => {
                    self.bump_while(|c| c != '\n');
                }
                Some('/') if self.peek_second() == Some('*') => {
                    let start = self.pos;
                    let Some(len) = self.src.get(start + 2..).and_then(|rest| rest.find("*/"))
                    else {
                        return Err(ReadError::new(start, "unterminated /* comment"));
                    };
                    self.pos = start + 2 + len + 2;
                }
                _ => return Ok(()),
            }
        }
    }

    /// A run of characters accepted by `keep` (the first is known to be), within `max_text`.
    fn name(&mut self, start: usize, keep: impl Fn(char) -> bool) -> Result<String, ReadError> {
        let max_text = self.limits.max_text;
        let name = self.bump_while(keep);
        if name.chars().count() > max_text {
            return Err(ReadError::new(
                start,
                format!("name is longer than {max_text} characters"),
            ));
        }
        Ok(name.to_owned())
    }

    /// Digits with optional `_` separators.
    fn number(&mut self, start: usize) -> Result<Tok, ReadError> {
        let digits = self.bump_while(|c| c.is_ascii_digit() || c == '_');
        let value = digits
            .bytes()
            .filter(u8::is_ascii_digit)
            .try_fold(0u64, |n, d| {
                n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            });
        let digits: String = digits.chars().filter(|&c| c != '_').collect();
        let next = self.peek();
        if next == Some('.') && self.peek_second().is_some_and(|c| c.is_ascii_digit()) {
            return Err(ReadError::new(
                start,
                "floats are not supported; use integers",
            ));
        }
        let radix = digits == "0"
            && matches!(next, Some('x' | 'o' | 'b'))
            && self.peek_second().is_some_and(|c| c.is_ascii_hexdigit());
        if next == Some('\'') || radix {
            return Err(ReadError::new(
                start,
                "0'c character codes and radix numbers are not supported; use integers",
            ));
        }
        match value {
            Some(n) => Ok(Tok::Int(n)),
            None => Err(ReadError::new(
                start,
                format!("integer {digits} does not fit in 64 bits"),
            )),
        }
    }

    /// Quoted text; the opening `delimiter` is next.
    fn quoted(&mut self, delimiter: char) -> Result<String, ReadError> {
        let open = self.pos;
        self.bump();
        let mut out = String::new();
        let mut count = 0;
        loop {
            let at = self.pos;
            let Some(c) = self.bump() else {
                return Err(ReadError::new(
                    open,
                    format!("unterminated quoted text (missing closing {delimiter})"),
                ));
            };
            let c = if c == delimiter {
                if self.peek() != Some(delimiter) {
                    return Ok(out);
                }
                // A doubled delimiter stands for itself.
                self.bump();
                delimiter
            } else if c == '\\' {
                self.escape(at)?
            } else if c.is_control() {
                return Err(ReadError::new(
                    at,
                    format!(
                        "control character {c:?} inside quotes (write it as an escape: \\n, \\t, \
                         \\r or \\xHEX\\)"
                    ),
                ));
            } else {
                c
            };
            count += 1;
            if count > self.limits.max_text {
                return Err(ReadError::new(
                    open,
                    format!(
                        "quoted text is longer than {} characters",
                        self.limits.max_text
                    ),
                ));
            }
            out.push(c);
        }
    }

    /// The character an escape sequence stands for; the backslash (at `at`) was consumed.
    fn escape(&mut self, at: usize) -> Result<char, ReadError> {
        let Some(e) = self.bump() else {
            return Err(ReadError::new(at, "unterminated escape"));
        };
        Ok(match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '\\' | '\'' | '"' | '`' => e,
            'x' => {
                let mut code: u32 = 0;
                let mut digits = 0;
                loop {
                    match self.bump() {
                        Some(h) if h.is_ascii_hexdigit() => {
                            code = code * 16 + h.to_digit(16).unwrap_or(0);
                            digits += 1;
                            if code > 0x10_FFFF {
                                return Err(ReadError::new(
                                    at,
                                    "\\x escape is not a Unicode character",
                                ));
                            }
                        }
                        Some('\\') if digits > 0 => break,
                        _ => {
                            return Err(ReadError::new(
                                at,
                                "malformed \\x escape (expected hex digits and a closing \\)",
                            ));
                        }
                    }
                }
                if code == 0 {
                    return Err(ReadError::new(at, "NUL character in quoted text"));
                }
                char::from_u32(code)
                    .ok_or_else(|| ReadError::new(at, "\\x escape is not a Unicode character"))?
            }
            other => {
                let escape = if other.is_control() || other.is_whitespace() {
                    format!(": a backslash before {other:?}")
                } else {
                    format!(" \\{other}")
                };
                return Err(ReadError::new(
                    at,
                    format!(
                        "unsupported escape{escape} (supported: \\n \\t \\r \\\\ \\' \\\" \\` \
                         \\xHEX\\)"
                    ),
                ));
            }
        })
    }
}

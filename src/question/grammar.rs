//! PhantomWiki's question grammar and the depth-bounded enumeration of its templates.
//!
//! ```text
//! S   -> 'Who is' R '?' | 'What is' A '?' | 'How many' RN_p 'does' R_c 'have' '?'
//! R   -> 'the' RN 'of' R_c | 'the person whose' AN 'is' AV
//! R_c -> R | N
//! A   -> 'the' AN 'of' R
//! ```
//! A leaf has depth 1 and a node one more than its deepest child; placeholders are suffixed with
//! the level of their nonterminal in the tree (`<relation>_3`), as PhantomWiki writes them.
//! Depth 16 gives 38 templates, depth 20 gives 50.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Symbol {
    S,
    R,
    Rc,
    A,
    N,
    Rn,
    RnPlural,
    An,
    Av,
}

enum Item {
    Word(&'static str),
    Sym(Symbol),
}

use Item::{Sym, Word};

/// The productions of each nonterminal, in PhantomWiki's order.
fn productions(symbol: Symbol) -> Vec<Vec<Item>> {
    match symbol {
        Symbol::S => vec![
            vec![Word("Who is"), Sym(Symbol::R), Word("?")],
            vec![Word("What is"), Sym(Symbol::A), Word("?")],
            vec![
                Word("How many"),
                Sym(Symbol::RnPlural),
                Word("does"),
                Sym(Symbol::Rc),
                Word("have"),
                Word("?"),
            ],
        ],
        Symbol::R => vec![
            vec![Word("the"), Sym(Symbol::Rn), Word("of"), Sym(Symbol::Rc)],
            vec![
                Word("the person whose"),
                Sym(Symbol::An),
                Word("is"),
                Sym(Symbol::Av),
            ],
        ],
        Symbol::Rc => vec![vec![Sym(Symbol::R)], vec![Sym(Symbol::N)]],
        Symbol::A => vec![vec![
            Word("the"),
            Sym(Symbol::An),
            Word("of"),
            Sym(Symbol::R),
        ]],
        Symbol::N => vec![vec![Word("<name>")]],
        Symbol::Rn => vec![vec![Word("<relation>")]],
        Symbol::RnPlural => vec![vec![Word("<relation_plural>")]],
        Symbol::An => vec![vec![Word("<attribute_name>")]],
        Symbol::Av => vec![vec![Word("<attribute_value>")]],
    }
}

/// Every expansion of `symbol` at tree `level` whose depth is at most `budget`: (tokens, depth).
fn expand(symbol: Symbol, level: usize, budget: usize) -> Vec<(Vec<String>, usize)> {
    if budget < 2 {
        return Vec::new(); // a nonterminal and its leaf need depth 2
    }
    let mut out = Vec::new();
    for production in productions(symbol) {
        // Cartesian product of the children's expansions.
        let mut partial: Vec<(Vec<String>, usize)> = vec![(Vec::new(), 1)];
        for item in &production {
            let options: Vec<(Vec<String>, usize)> = match item {
                Word(w) if w.starts_with('<') => vec![(vec![format!("{w}_{level}")], 1)],
                Word(w) => vec![(vec![(*w).to_owned()], 1)],
                Sym(child) => expand(*child, level + 1, budget - 1),
            };
            partial = partial
                .iter()
                .flat_map(|(tokens, depth)| {
                    options.iter().map(move |(more, d)| {
                        let mut t = tokens.clone();
                        t.extend(more.iter().cloned());
                        (t, (*depth).max(*d))
                    })
                })
                .collect();
        }
        // Placeholders belong to the nonterminal itself (`<relation>_L` for RN at level L).
        out.extend(partial.into_iter().map(|(t, d)| (t, d + 1)));
    }
    out
}

/// What a question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ask {
    /// "Who is ...?": the people at the end of the chain.
    Who,
    /// "What is the <attribute> of ...?": their attribute values.
    What,
    /// "How many <relation> does ... have?": per person, the number of relatives.
    HowMany,
}

/// How a chain is anchored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnchorKind {
    /// A person's name.
    Name,
    /// "the person whose <attribute> is <value>".
    Attribute,
}

/// One template: the tokens of a derivation and the shape they describe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Template {
    /// Index in enumeration order (PhantomWiki's `type`).
    pub index: usize,
    /// Tokens, with placeholders such as `<relation>_3`.
    pub tokens: Vec<String>,
    /// Depth of the derivation.
    pub depth: usize,
    /// What the question asks for.
    pub ask: Ask,
    /// Number of `<relation>` slots in the chain (not counting a "How many" relation).
    pub hops: usize,
    /// How the chain is anchored.
    pub anchor: AnchorKind,
}

/// Every template of derivation depth at most `depth`, in PhantomWiki's order (by question
/// type, then deepest first).
pub fn templates(depth: usize) -> Vec<Template> {
    let mut all: Vec<(usize, Template)> = Vec::new();
    for (tokens, d) in expand(Symbol::S, 1, depth) {
        let ask = match tokens[0].as_str() {
            "Who is" => Ask::Who,
            "What is" => Ask::What,
            _ => Ask::HowMany,
        };
        let hops = tokens
            .iter()
            .filter(|t| t.starts_with("<relation>_"))
            .count();
        let anchor = if tokens.iter().any(|t| t == "the person whose") {
            AnchorKind::Attribute
        } else {
            AnchorKind::Name
        };
        let order = ask as usize;
        all.push((
            order,
            Template {
                index: 0,
                tokens,
                depth: d,
                ask,
                hops,
                anchor,
            },
        ));
    }
    all.sort_by(|(a, x), (b, y)| a.cmp(b).then(y.depth.cmp(&x.depth)));
    all.into_iter()
        .enumerate()
        .map(|(i, (_, mut t))| {
            t.index = i;
            t
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_phantomwiki() {
        let t16 = templates(16);
        assert_eq!(t16.len(), 38);
        let count = |ask| t16.iter().filter(|t| t.ask == ask).count();
        assert_eq!(
            (count(Ask::Who), count(Ask::What), count(Ask::HowMany)),
            (13, 12, 13)
        );
        assert_eq!(templates(20).len(), 50);
        assert!(t16.iter().all(|t| t.hops <= 6 && t.depth <= 16));
    }

    #[test]
    fn tokens_match_phantomwiki_fixture() {
        let t = templates(16);
        // Type 0 of PhantomWiki 1.0.3 at depth 16.
        let mut want: Vec<String> = vec!["Who is".into()];
        for level in [3, 5, 7, 9, 11, 13] {
            want.extend(["the".into(), format!("<relation>_{level}"), "of".into()]);
        }
        want.extend(
            [
                "the person whose",
                "<attribute_name>_15",
                "is",
                "<attribute_value>_15",
                "?",
            ]
            .map(String::from),
        );
        assert_eq!(t[0].tokens, want);
        assert_eq!(
            t[37].tokens,
            [
                "How many",
                "<relation_plural>_2",
                "does",
                "<name>_3",
                "have",
                "?"
            ]
            .map(String::from)
        );
        assert_eq!((t[12].hops, t[12].anchor), (0, AnchorKind::Attribute));
    }
}

//! PhantomWiki's Prolog queries -> typed rulegym [`Query`]s.

use super::*;

/// One atom of a PhantomWiki query, classified.
#[derive(Debug)]
enum Atom<'a> {
    /// `rel(X, Y)`: a relation of the rule base.
    Rel(&'a str, &'a Term, &'a Term),
    /// `attr(Person, Value)` for dob, job, hobby.
    Attr(Attr, &'a Term, &'a Term),
    /// `aggregate_all(count, distinct(rel(X, Y)), Count)`.
    Count(&'a str, &'a Term, &'a Term, &'a Term),
}

fn query_error<T>(message: impl Into<String>) -> std::result::Result<T, PhantomWikiError> {
    Err(PhantomWikiError::Query(message.into()))
}

fn classify(term: &Term) -> std::result::Result<Atom<'_>, PhantomWikiError> {
    let Term::Compound(name, args) = term else {
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
        ("aggregate_all", [Term::Atom(count), Term::Compound(distinct, inner), c])
            if count == "count" && distinct == "distinct" =>
        {
            match &inner[..] {
                [Term::Compound(r, ra)] if ra.len() == 2 && relation(r).is_some() => {
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
    let terms: Vec<Term> = atoms
        .iter()
        .map(|a| parse_term(a).map_err(PhantomWikiError::Query))
        .collect::<std::result::Result<_, _>>()?;
    let classified: Vec<Atom> = terms
        .iter()
        .map(classify)
        .collect::<std::result::Result<_, _>>()?;
    let constant = |t: &Term| match t {
        Term::Str(s) | Term::Atom(s) => Some(s.clone()),
        _ => None,
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut fresh = |t: &Term, atom: &str| -> std::result::Result<String, PhantomWikiError> {
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
fn atom_subject<'a>(atom: &Atom<'a>) -> &'a Term {
    match atom {
        Atom::Rel(_, x, _) | Atom::Attr(_, x, _) | Atom::Count(_, x, _, _) => x,
    }
}

/// The name of a (non-anonymous) variable.
fn var_of(t: &Term) -> Option<String> {
    match t {
        Term::Var(v) if !v.is_anonymous() => Some(v.name().to_owned()),
        _ => None,
    }
}

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
///
/// Extended shapes of public PhantomWiki extensions (atoms in any order; see
/// `compile_extension`): a date comparison `L @< R, dob(A, L), dob(B, R), <chain to A>,
/// <chain to B>` compiles to [`Query::Older`] (the same list serves "older", "younger" and
/// "born first": [`compile_record`] lets the question text decide); a superlative
/// `\+ (R(B, Z), dob(Z, D2), Z \= A, D2 @< D), dob(A, D), R(B, A), <chain to B>` to
/// [`Query::Oldest`] (`@>` to [`Query::Youngest`]); "the most Rs among <chain>",
/// `<chain to X>, aggregate_all(count, distinct(R(X, Z)), C), \+ (<chain to Y>, Y \= X,
/// aggregate_all(count, distinct(R(Y, W)), C2), C2 > C)`, to [`Query::MostRelatives`]; and
/// several `attr(X, "value")` atoms on the answer variable alone to [`Query::Who`] of a zero-hop
/// chain anchored on the first of them (the order of the question text).
pub fn compile_query(
    atoms: &[String],
    answer: &str,
) -> std::result::Result<Query, PhantomWikiError> {
    let terms: Vec<Term> = atoms
        .iter()
        .map(|a| parse_term(a).map_err(PhantomWikiError::Query))
        .collect::<std::result::Result<_, _>>()?;
    if terms.iter().any(is_extension_atom) {
        return compile_extension(&terms, answer);
    }
    if let Some(query) = multi_attribute(&terms, answer)? {
        return Ok(query);
    }
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

// ---------------------------------------------------------------------------------------------
// Extended shapes (public PhantomWiki extensions)
// ---------------------------------------------------------------------------------------------

/// Operators only the extended shapes use at the top level of a query.
fn is_extension_atom(term: &Term) -> bool {
    matches!(term, Term::Compound(name, args)
        if (args.len() == 2 && matches!(name.as_str(), "@<" | "@>" | ">" | "<"))
            || (args.len() == 1 && name == "\\+"))
}

/// `attr(X, "v1"), attr(X, "v2"), ...` (two or more, all on the answer variable): "the person
/// whose A1 is v1 and whose A2 is v2", anchored on the first atom (the text's order).
fn multi_attribute(
    terms: &[Term],
    answer: &str,
) -> std::result::Result<Option<Query>, PhantomWikiError> {
    if terms.len() < 2 {
        return Ok(None);
    }
    let mut filters = Vec::new();
    for term in terms {
        match classify(term) {
            Ok(Atom::Attr(attribute, p, v)) if var_of(p).as_deref() == Some(answer) => {
                match constant(v) {
                    Some(value) => filters.push((attribute, value)),
                    None => return Ok(None),
                }
            }
            _ => return Ok(None),
        }
    }
    let mut filters = filters.into_iter();
    let (attribute, value) = filters.next().expect("two or more");
    Ok(Some(Query::Who(Chain {
        anchor: Anchor::Attribute { attribute, value },
        steps: filters
            .map(|(attribute, value)| ChainStep::Filter { attribute, value })
            .collect(),
    })))
}

fn constant(t: &Term) -> Option<String> {
    match t {
        Term::Str(s) | Term::Atom(s) => Some(s.clone()),
        _ => None,
    }
}

/// One top-level (or negated) atom of an extended query.
#[derive(Debug)]
enum Ext<'a> {
    /// A relation, attribute or count atom of PhantomWiki's grammar.
    Base(Atom<'a>),
    /// `L @< R` (`earlier`) or `L @> R`.
    DateCmp {
        earlier: bool,
        l: &'a Term,
        r: &'a Term,
    },
    /// `L > R` (`greater`) or `L < R`.
    NumCmp {
        greater: bool,
        l: &'a Term,
        r: &'a Term,
    },
    /// `A \= B`.
    Neq(&'a Term, &'a Term),
    /// `\+ (G1, G2, ...)`, the conjuncts.
    Not(Vec<&'a Term>),
}

fn classify_ext(term: &Term) -> std::result::Result<Ext<'_>, PhantomWikiError> {
    if let Term::Compound(name, args) = term {
        match (name.as_str(), &args[..]) {
            ("@<" | "@>", [l, r]) => {
                return Ok(Ext::DateCmp {
                    earlier: name == "@<",
                    l,
                    r,
                });
            }
            (">" | "<", [l, r]) => {
                return Ok(Ext::NumCmp {
                    greater: name == ">",
                    l,
                    r,
                });
            }
            ("\\=", [l, r]) => return Ok(Ext::Neq(l, r)),
            ("\\+", [inner]) => {
                let mut conjuncts = Vec::new();
                let mut rest = inner;
                while let Term::Compound(comma, pair) = rest {
                    if comma != "," || pair.len() != 2 {
                        break;
                    }
                    conjuncts.push(&pair[0]);
                    rest = &pair[1];
                }
                conjuncts.push(rest);
                return Ok(Ext::Not(conjuncts));
            }
            _ => {}
        }
    }
    classify(term).map(Ext::Base)
}

fn same_var(t: &Term, name: &str) -> bool {
    var_of(t).as_deref() == Some(name)
}

/// The chain whose end is `end` (a name: the zero-step chain of that person), built backwards
/// from the relation and attribute atoms of `pool`; the atoms it uses are taken out of `pool`.
/// Atoms are read outermost first, as PhantomWiki writes them: of several attribute atoms on the
/// chain's first person, the last is the anchor ([`compile_record`] reorders such a group as
/// the question text does).
fn chain_to(
    end: &Term,
    pool: &mut [Option<(Ext<'_>, String)>],
) -> std::result::Result<Chain, PhantomWikiError> {
    if let Some(name) = constant(end) {
        return Ok(Chain {
            anchor: Anchor::Name(name),
            steps: Vec::new(),
        });
    }
    let Some(v) = var_of(end) else {
        return query_error(format!("{end} is neither a name nor a variable"));
    };
    chain_from(v, pool)
}

/// The chain whose end is the variable `v`; see [`chain_to`].
fn chain_from(
    mut v: String,
    pool: &mut [Option<(Ext<'_>, String)>],
) -> std::result::Result<Chain, PhantomWikiError> {
    let mut reversed: Vec<ChainStep> = Vec::new();
    loop {
        let mut filters: Vec<(Attr, String)> = Vec::new();
        let mut producer: Option<(String, Term)> = None;
        for slot in pool.iter_mut() {
            let take = match slot {
                Some((Ext::Base(Atom::Attr(attribute, p, value)), _)) if same_var(p, &v) => {
                    match constant(value) {
                        Some(value) => {
                            filters.push((*attribute, value));
                            true
                        }
                        None => false,
                    }
                }
                Some((Ext::Base(Atom::Rel(r, x, y)), shown)) if same_var(y, &v) => {
                    if producer.is_some() {
                        return query_error(format!(
                            "{shown}: two relations lead to {v} (only chains are supported)"
                        ));
                    }
                    producer = Some(((*r).to_owned(), (*x).clone()));
                    true
                }
                _ => false,
            };
            if take {
                *slot = None;
            }
        }
        match producer {
            Some((r, from)) => {
                reversed.extend(
                    filters
                        .into_iter()
                        .map(|(attribute, value)| ChainStep::Filter { attribute, value }),
                );
                reversed.push(ChainStep::Hop(r));
                if let Some(name) = constant(&from) {
                    reversed.reverse();
                    return Ok(Chain {
                        anchor: Anchor::Name(name),
                        steps: reversed,
                    });
                }
                match var_of(&from) {
                    Some(next) => v = next,
                    None => return query_error(format!("{from} is neither a name nor a variable")),
                }
            }
            None if filters.is_empty() => {
                return query_error(format!("no atom of the query leads to {v}"));
            }
            None => {
                let (attribute, value) = filters.pop().expect("not empty");
                reversed.extend(
                    filters
                        .into_iter()
                        .map(|(attribute, value)| ChainStep::Filter { attribute, value }),
                );
                reversed.reverse();
                return Ok(Chain {
                    anchor: Anchor::Attribute { attribute, value },
                    steps: reversed,
                });
            }
        }
    }
}

/// Every atom of `pool` must have been used.
fn all_used(pool: &[Option<(Ext<'_>, String)>]) -> std::result::Result<(), PhantomWikiError> {
    match pool.iter().flatten().next() {
        Some((_, shown)) => query_error(format!("{shown} is not part of the question's chains")),
        None => Ok(()),
    }
}

/// Takes the atom `a \= b` or `b \= a` from `pool`; whether there was one.
fn take_neq(pool: &mut [Option<(Ext<'_>, String)>], a: &str, b: &str) -> bool {
    take(pool, |e| match e {
        Ext::Neq(x, y)
            if (same_var(x, a) && same_var(y, b)) || (same_var(x, b) && same_var(y, a)) =>
        {
            Some(())
        }
        _ => None,
    })
    .is_some()
}

/// Takes the first atom of `pool` that `pick` accepts.
fn take<'a, T>(
    pool: &mut [Option<(Ext<'a>, String)>],
    mut pick: impl FnMut(&Ext<'a>) -> Option<T>,
) -> Option<T> {
    for slot in pool.iter_mut() {
        if let Some(found) = slot.as_ref().and_then(|(e, _)| pick(e)) {
            *slot = None;
            return Some(found);
        }
    }
    None
}

/// The extended shapes; see [`compile_query`].
fn compile_extension(terms: &[Term], answer: &str) -> std::result::Result<Query, PhantomWikiError> {
    let mut pool: Vec<Option<(Ext, String)>> = terms
        .iter()
        .map(|t| classify_ext(t).map(|e| Some((e, t.to_string()))))
        .collect::<std::result::Result<_, _>>()?;
    let negation = take(&mut pool, |e| match e {
        Ext::Not(conjuncts) => Some(conjuncts.clone()),
        _ => None,
    });
    if let Some(conjuncts) = negation {
        let inner: Vec<Option<(Ext, String)>> = conjuncts
            .iter()
            .map(|t| classify_ext(t).map(|e| Some((e, t.to_string()))))
            .collect::<std::result::Result<_, _>>()?;
        let counts = inner
            .iter()
            .flatten()
            .any(|(e, _)| matches!(e, Ext::Base(Atom::Count(..))));
        return if counts {
            most(pool, inner, answer)
        } else {
            superlative(pool, inner, answer)
        };
    }
    // "Who is older / younger / was born first, A or B?"
    if let Some((l, r)) = take(&mut pool, |e| match e {
        Ext::DateCmp { l, r, .. } => Some(((*l).clone(), (*r).clone())),
        _ => None,
    }) {
        let (Some(dl), Some(dr)) = (var_of(&l), var_of(&r)) else {
            return query_error(format!(
                "{l} / {r}: a date comparison must compare two variables"
            ));
        };
        let mut side = |date: &str| {
            take(&mut pool, |e| match e {
                Ext::Base(Atom::Attr(Attr::Dob, p, d)) if same_var(d, date) => Some((*p).clone()),
                _ => None,
            })
            .ok_or_else(|| {
                PhantomWikiError::Query(format!("no dob(_, {date}) atom for the comparison"))
            })
        };
        let (pa, pb) = (side(&dl)?, side(&dr)?);
        if pa.to_string() == pb.to_string() {
            return Err(PhantomWikiError::Inconsistent(format!(
                "both dates of the comparison belong to {pa}: a comparison needs two sides"
            )));
        }
        let a = chain_to(&pa, &mut pool)?;
        let b = chain_to(&pb, &mut pool)?;
        all_used(&pool)?;
        return Ok(Query::Older(a, b));
    }
    if pool
        .iter()
        .flatten()
        .any(|(e, _)| matches!(e, Ext::NumCmp { .. }))
    {
        return query_error(
            "a count comparison (\"Who has more Rs, A or B?\") is not a supported shape",
        );
    }
    query_error("an extended query needs a date comparison, or a negation (\\+) of one")
}

/// `\+ (R(B, Z), dob(Z, D2), Z \= A, D2 @< D), dob(A, D), R(B, A), <chain to B>`.
fn superlative(
    mut pool: Vec<Option<(Ext, String)>>,
    mut inner: Vec<Option<(Ext, String)>>,
    answer: &str,
) -> std::result::Result<Query, PhantomWikiError> {
    let fail = |m: &str| query_error(format!("superlative: {m}"));
    let Some(date) = take(&mut pool, |e| match e {
        Ext::Base(Atom::Attr(Attr::Dob, p, d)) if same_var(p, answer) => var_of(d),
        _ => None,
    }) else {
        return fail(&format!("no dob({answer}, D) atom"));
    };
    let Some((r, base)) = take(&mut pool, |e| match e {
        Ext::Base(Atom::Rel(r, b, a)) if same_var(a, answer) => {
            Some(((*r).to_owned(), (*b).clone()))
        }
        _ => None,
    }) else {
        return fail(&format!("no rel(_, {answer}) atom"));
    };
    let Some((r2, base2, other)) = take(&mut inner, |e| match e {
        Ext::Base(Atom::Rel(r, b, z)) => var_of(z).map(|z| ((*r).to_owned(), (*b).clone(), z)),
        _ => None,
    }) else {
        return fail("the negation has no relation atom");
    };
    if r2 != r || base2 != base {
        return fail(&format!(
            "the negation asks about {r2} of {base2}, the question about {r} of {base}"
        ));
    }
    let Some(date2) = take(&mut inner, |e| match e {
        Ext::Base(Atom::Attr(Attr::Dob, p, d)) if same_var(p, &other) => var_of(d),
        _ => None,
    }) else {
        return fail(&format!("the negation has no dob({other}, D2) atom"));
    };
    if !take_neq(&mut inner, &other, answer) {
        return fail(&format!("the negation has no {other} \\= {answer} atom"));
    }
    // `D2 @< D` (nobody born earlier) / `D @> D2`: the oldest; the reverse: the youngest.
    let Some(oldest) = take(&mut inner, |e| match e {
        Ext::DateCmp { earlier, l, r } if same_var(l, &date2) && same_var(r, &date) => {
            Some(*earlier)
        }
        Ext::DateCmp { earlier, l, r } if same_var(l, &date) && same_var(r, &date2) => {
            Some(!*earlier)
        }
        _ => None,
    }) else {
        return fail(&format!(
            "the negation has no comparison of {date2} and {date}"
        ));
    };
    all_used(&inner)?;
    let chain = chain_to(&base, &mut pool)?;
    all_used(&pool)?;
    rel(&r)?;
    Ok(if oldest {
        Query::Oldest(chain, r)
    } else {
        Query::Youngest(chain, r)
    })
}

/// `<chain to X>, aggregate_all(count, distinct(R(X, Z)), C),
/// \+ (<chain to Y>, Y \= X, aggregate_all(count, distinct(R(Y, W)), C2), C2 > C)`.
fn most(
    mut pool: Vec<Option<(Ext, String)>>,
    mut inner: Vec<Option<(Ext, String)>>,
    answer: &str,
) -> std::result::Result<Query, PhantomWikiError> {
    let fail = |m: &str| query_error(format!("most: {m}"));
    let Some((r, count)) = take(&mut pool, |e| match e {
        Ext::Base(Atom::Count(r, x, _, c)) if same_var(x, answer) => {
            var_of(c).map(|c| ((*r).to_owned(), c))
        }
        _ => None,
    }) else {
        return fail(&format!(
            "no aggregate_all(count, distinct(rel({answer}, _)), C) atom"
        ));
    };
    let Some((r2, other, count2)) = take(&mut inner, |e| match e {
        Ext::Base(Atom::Count(r, y, _, c)) => match (var_of(y), var_of(c)) {
            (Some(y), Some(c)) => Some(((*r).to_owned(), y, c)),
            _ => None,
        },
        _ => None,
    }) else {
        return fail("the negation has no count atom");
    };
    if r2 != r {
        return fail(&format!("the negation counts {r2}, the question {r}"));
    }
    if !take_neq(&mut inner, &other, answer) {
        return fail(&format!("the negation has no {other} \\= {answer} atom"));
    }
    if take(&mut inner, |e| match e {
        Ext::NumCmp { greater, l, r }
            if (*greater && same_var(l, &count2) && same_var(r, &count))
                || (!*greater && same_var(l, &count) && same_var(r, &count2)) =>
        {
            Some(())
        }
        _ => None,
    })
    .is_none()
    {
        return fail(&format!("the negation has no {count2} > {count} atom"));
    }
    let chain = chain_from(answer.to_owned(), &mut pool)?;
    all_used(&pool)?;
    let again = chain_from(other, &mut inner)?;
    all_used(&inner)?;
    if again != chain {
        return fail("the negation's candidates are not the question's");
    }
    rel(&r)?;
    Ok(Query::MostRelatives(chain, r))
}

fn rel(r: &str) -> std::result::Result<(), PhantomWikiError> {
    match relation(r) {
        Some(_) => Ok(()),
        None => query_error(format!("{r} is not a relation of the rule base")),
    }
}

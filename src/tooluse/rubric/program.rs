//! A task's rubric compiled to Prolog clauses ([`RubricProgram`]) and a trajectory rendered as
//! the facts term its rules read.

use super::*;

/// One compiled rubric item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompiledItem {
    /// Item id.
    pub id: String,
    /// Which list.
    pub kind: ItemKind,
    /// Description.
    pub description: String,
    /// Clause index (`None`: no rule, judged by an LLM).
    pub index: Option<u32>,
}

/// What a judge reads of the task besides the rubric: the instruction the agent was given and
/// what the user knew (slot name, value), in the task's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Brief {
    /// The instruction given to the agent.
    pub instruction: String,
    /// The hidden context's slots: name and value.
    pub known: Vec<(String, String)>,
}

/// A task's rubric compiled into Prolog clauses.
#[derive(Debug, Clone)]
pub struct RubricProgram {
    /// Items in rubric order.
    pub items: Vec<CompiledItem>,
    /// The per-task predicate name (`rg_item_<hash>`).
    pub predicate: String,
    /// The clauses (Prolog text rendered from checked terms).
    pub source: String,
    /// Tool names (atoms in facts); other names become `unknown("name")`.
    pub tools: BTreeSet<String>,
    /// Slot names.
    pub slots: BTreeSet<String>,
    /// Which fact groups the rules read.
    pub used: [bool; FACT_GROUPS],
    /// What a judge reads of the task.
    pub brief: Brief,
}

impl RubricProgram {
    /// Parses, checks and compiles every rule of `rubric`, whose facts name the tools `tools`
    /// and the slots of `brief` (a task compiles its own: `Task::rubric_program`).
    pub fn compile(
        rubric: &Rubric,
        tools: BTreeSet<String>,
        brief: Brief,
    ) -> Result<RubricProgram, RubricError> {
        let mut checker = Checker::new();
        let mut items = Vec::new();
        let mut clauses = Vec::new();
        for (kind, item) in rubric.items() {
            let index = match &item.rule {
                None => None,
                Some(rule) => {
                    let body = checker
                        .check(rule)
                        .map_err(|message| RubricError::Rejected {
                            item: item.id.clone(),
                            message,
                        })?;
                    let index = clauses.len() as u32 + 1;
                    let step = body
                        .step
                        .clone()
                        .unwrap_or_else(|| Var::new("S__").expect("valid"));
                    clauses.push((index, body.goal, step));
                    Some(index)
                }
            };
            items.push(CompiledItem {
                id: item.id.clone(),
                kind,
                description: item.description.clone(),
                index,
            });
        }
        let facts = checker.facts_var().clone();
        let render = |pred: &str| -> Result<String, RubricError> {
            let mut src = String::new();
            for (index, goal, step) in &clauses {
                let head = Term::compound(
                    pred,
                    [
                        Term::Int(i64::from(*index)),
                        Term::var(&facts),
                        Term::var(step),
                    ],
                );
                src.push_str(&Term::compound(":-", [head, goal.clone()]).render()?);
                src.push_str(".\n");
            }
            Ok(src)
        };
        let canonical = render("rg_item")?;
        let hash = hex::encode(&Sha256::digest(canonical.as_bytes())[..12]);
        let predicate = format!("rg_item_{hash}");
        let source = render(&predicate)?;
        Ok(RubricProgram {
            used: checker.used_groups(),
            items,
            predicate,
            source,
            tools,
            slots: brief.known.iter().map(|(name, _)| name.clone()).collect(),
            brief,
        })
    }

    /// Builds the facts term of a trajectory: groups no rule reads are passed empty; each group
    /// is in canonical order (by step, then by rendered text), so the result does not depend on
    /// the order of `trajectory.events`.
    pub fn facts_term(&self, trajectory: &Trajectory) -> Term {
        let mut groups: Vec<Vec<(u32, Term)>> = vec![Vec::new(); FACT_GROUPS];
        let used = self.used;
        let mut push = |group: usize, step: u32, term: &dyn Fn() -> Term| {
            if used[group - 1] {
                groups[group - 1].push((step, term()));
            }
        };
        let tool = |name: &str| {
            if self.tools.contains(name) {
                Term::atom(name)
            } else {
                Term::compound("unknown", [text(name)])
            }
        };
        for event in &trajectory.events {
            let step = event.step();
            let s = || Term::Int(i64::from(step));
            match event {
                Event::ToolCall { tool: t, args, .. } => push(1, step, &|| {
                    Term::compound("tool_call", [s(), tool(t), json_term(args, 0)])
                }),
                Event::ToolResult {
                    tool: t, result, ..
                } => push(2, step, &|| {
                    Term::compound("tool_result", [s(), tool(t), json_term(result, 0)])
                }),
                Event::ToolError {
                    tool: t, reason, ..
                } => push(3, step, &|| {
                    Term::compound("tool_error", [s(), tool(t), text(reason)])
                }),
                Event::AskedUser { text: t, .. } => {
                    push(4, step, &|| Term::compound("asked_user", [s(), text(t)]))
                }
                Event::UserSaid { text: t, .. } => {
                    push(5, step, &|| Term::compound("user_said", [s(), text(t)]))
                }
                Event::UserRevealed { slot, .. } => push(6, step, &|| {
                    let slot = if self.slots.contains(slot) {
                        Term::atom(slot.clone())
                    } else {
                        Term::compound("unknown", [text(slot)])
                    };
                    Term::compound("user_revealed", [s(), slot])
                }),
                Event::Answered { text: t, .. } => {
                    push(7, step, &|| Term::compound("answered", [s(), text(t)]))
                }
                Event::Said { text: t, .. } => {
                    push(8, step, &|| Term::compound("said", [s(), text(t)]))
                }
                Event::Stopped { marker, .. } => push(9, step, &|| {
                    Term::compound("stopped", [s(), Term::atom(marker.atom())])
                }),
            }
        }
        if let Some(state) = &trajectory.final_state {
            for (table, records) in state {
                for (key, record) in records {
                    push(10, 0, &|| {
                        Term::compound(
                            "final_state",
                            [
                                Term::atom(table.clone()),
                                text(key),
                                json_object(record.iter(), 0),
                            ],
                        )
                    });
                }
            }
        }
        if let Some(m) = trajectory.state_matches {
            push(11, 0, &|| {
                Term::compound(
                    "state_matches",
                    [Term::atom(if m { "true" } else { "false" })],
                )
            });
        }
        push(12, 0, &|| {
            Term::compound("turns", [Term::Int(i64::from(trajectory.turns))])
        });
        let args: Vec<Term> = groups
            .into_iter()
            .map(|mut g| {
                g.sort_by_key(|&(step, _)| step);
                canonical_ties(&mut g);
                Term::List(g.into_iter().map(|(_, t)| t).collect())
            })
            .collect();
        Term::compound("facts", args)
    }
}

/// Orders facts of the same step by their rendered text (only runs of equal steps are rendered).
fn canonical_ties(group: &mut [(u32, Term)]) {
    let mut start = 0;
    while start < group.len() {
        let mut end = start + 1;
        while end < group.len() && group[end].0 == group[start].0 {
            end += 1;
        }
        if end - start > 1 {
            let run = &mut group[start..end];
            let mut keyed: Vec<(String, Term)> = run
                .iter()
                .map(|(_, t)| (t.render().unwrap_or_default(), t.clone()))
                .collect();
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            for (slot, (_, t)) in run.iter_mut().zip(keyed) {
                slot.1 = t;
            }
        }
        start = end;
    }
}

/// Text as a Prolog string: cut at [`MAX_FACT_TEXT`] characters, NUL (which scryer cannot
/// represent) replaced by U+FFFD.
fn text(s: &str) -> Term {
    if s.len() <= MAX_FACT_TEXT && !s.contains('\0') {
        return Term::Str(s.to_owned());
    }
    Term::Str(
        s.chars()
            .take(MAX_FACT_TEXT)
            .map(|c| if c == '\0' { '\u{fffd}' } else { c })
            .collect(),
    )
}

/// Most keys of a JSON object passed as a term (scryer limits the arity of compound terms);
/// bigger objects become the atom `too_big`.
pub const MAX_JSON_KEYS: usize = 200;

/// A JSON value as a Prolog term: objects `obj("k1", V1, "k2", V2, ...)` with sorted keys (the
/// atom `obj` when empty), strings, integers, `num("1.5")` for other numbers,
/// `true`/`false`/`null`, lists. Nesting deeper than [`MAX_JSON_DEPTH`] becomes `too_deep`.
pub fn json_term(value: &Json, depth: usize) -> Term {
    if depth > MAX_JSON_DEPTH {
        return Term::atom("too_deep");
    }
    match value {
        Json::Null => Term::atom("null"),
        Json::Bool(b) => Term::atom(if *b { "true" } else { "false" }),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Term::Int(i),
            None => Term::compound("num", [Term::Str(n.to_string())]),
        },
        Json::String(s) => text(s),
        Json::Array(items) => Term::List(items.iter().map(|v| json_term(v, depth + 1)).collect()),
        Json::Object(map) => json_object(map.iter(), depth),
    }
}

fn json_object<'a>(
    pairs: impl ExactSizeIterator<Item = (&'a String, &'a Json)>,
    depth: usize,
) -> Term {
    if depth > MAX_JSON_DEPTH {
        return Term::atom("too_deep");
    }
    if pairs.len() > MAX_JSON_KEYS {
        return Term::atom("too_big");
    }
    let mut args = Vec::with_capacity(pairs.len() * 2);
    for (k, v) in pairs {
        args.push(text(k));
        args.push(json_term(v, depth + 1));
    }
    if args.is_empty() {
        Term::atom("obj")
    } else {
        Term::compound("obj", args)
    }
}

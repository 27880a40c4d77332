//! The search session's tools: their list (input schemas from [`super::args`]) and their calls,
//! on the session's own [`SearchSession`] when it is scored, on the world alone when browsing.

use super::SearchWorld;
use super::args::{AnswerArgs, PeopleArgs, SearchArgs, TitleArgs, ToolArgs, parse};
use super::error::ToolError;
use super::limits::{DEFAULT_K, DEFAULT_PAGE, MAX_K, MAX_PAGE};
use super::server::{ARTICLE_URI, Episode, lock, ok};
use crate::retrieval::Document;
use crate::search::session::{Reply, SearchSession};
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{Value, json};
use std::sync::Mutex;

/// The tools of a search session: `search`, `get_article`, `list_people`, and `answer` when the
/// session is scored.
pub(super) fn search_tools(w: &SearchWorld) -> Vec<Tool> {
    let mut tools = vec![
        Tool::new(
            "search",
            format!(
                "Search the corpus (one article per person of the universe). Returns the top k \
                 passages, best first (k: 1 to {MAX_K}, default {DEFAULT_K})."
            ),
            SearchArgs::input_schema().clone(),
        ),
        Tool::new(
            "get_article",
            "The article about one person, by its exact title (the person's full name); a title \
             differing only in case also matches.",
            TitleArgs::input_schema().clone(),
        ),
        Tool::new(
            "list_people",
            format!(
                "The names of the universe's people, a page at a time (offset from 0, limit 1 to \
                 {MAX_PAGE}, default {DEFAULT_PAGE}); `contains` keeps names containing the text \
                 (ignoring case)."
            ),
            PeopleArgs::input_schema().clone(),
        ),
    ];
    if w.question().is_some() {
        tools.push(Tool::new(
            "answer",
            "Give the final answer to the session's question (prompt `question`, resource \
             rulegym://question): all answers, separated by commas. Ends the episode and returns \
             its score (set F1 against the gold answers).",
            AnswerArgs::input_schema().clone(),
        ));
    }
    tools
}

/// Runs a tool call of a search session (blocking: retrieval is CPU work).
pub(super) fn call_search(
    w: &SearchWorld,
    episode: &Mutex<Episode>,
    name: &str,
    args: &JsonObject,
) -> Result<CallToolResult, ToolError> {
    let mut ep = lock(episode);
    let Episode::Search(session) = &mut *ep else {
        return Err(ToolError::Failed("not a search session".into()));
    };
    if let Some(s) = session.as_deref().filter(|s| s.done()) {
        return Err(over(s));
    }
    match name {
        "search" => {
            let a: SearchArgs = parse(name, args)?;
            let k = a.k.unwrap_or(DEFAULT_K);
            if a.query.trim().is_empty() {
                return Err(ToolError::BadArguments {
                    tool: name.into(),
                    message: "query is empty".into(),
                });
            }
            let (text, docs) = match session {
                Some(s) => match s.search(a.query.trim(), Some(k))? {
                    Reply::Passages { text, docs } => (text, docs),
                    Reply::Invalid { text } => (text, Vec::new()),
                    other => return ended(s, other),
                },
                None => {
                    let docs: Vec<Document> =
                        w.search(a.query.trim(), k)?.into_iter().cloned().collect();
                    (crate::search::information(&docs), docs)
                }
            };
            let results: Vec<Value> = docs
                .iter()
                .map(|d| json!({"id": d.id, "title": d.title(), "contents": d.contents}))
                .collect();
            Ok(ok(text.trim().to_owned(), json!({ "results": results })))
        }
        "get_article" => {
            let a: TitleArgs = parse(name, args)?;
            let found = match session {
                Some(s) => match s.get_article(a.title.trim()) {
                    Reply::Article(found) => found,
                    other => return ended(s, other),
                },
                None => w.article_by_title(a.title.trim()).cloned(),
            };
            match found {
                Some(d) => Ok(ok(
                    d.contents.clone(),
                    json!({"id": d.id, "title": d.title(), "contents": d.contents,
                           "uri": format!("{ARTICLE_URI}{}", d.id)}),
                )),
                None => {
                    let near = if a.title.trim().is_empty() {
                        Vec::new()
                    } else {
                        w.search(a.title.trim(), 3)?
                    };
                    let titles: Vec<&str> = near.iter().map(|d| d.title()).collect();
                    let hint = if titles.is_empty() {
                        String::new()
                    } else {
                        format!("; nearest titles: {}", titles.join(", "))
                    };
                    Err(ToolError::NoArticle {
                        title: a.title,
                        hint,
                    })
                }
            }
        }
        "list_people" => {
            let a: PeopleArgs = parse(name, args)?;
            let offset = a.offset.unwrap_or(0);
            let limit = a.limit.unwrap_or(DEFAULT_PAGE);
            let needle = a.contains.as_ref().map(|c| c.to_lowercase());
            let matching: Vec<&String> = w
                .people()
                .iter()
                .filter(|p| needle.as_ref().is_none_or(|n| p.to_lowercase().contains(n)))
                .collect();
            let total = matching.len();
            let page: Vec<&String> = matching.into_iter().skip(offset).take(limit).collect();
            let next = (offset.saturating_add(page.len()) < total).then(|| offset + page.len());
            let text = page
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            Ok(ok(
                text,
                json!({"people": page, "total": total, "offset": offset, "next_offset": next}),
            ))
        }
        "answer" => {
            let Some(s) = session else {
                return Err(ToolError::BadArguments {
                    tool: name.to_owned(),
                    message: "no such tool in this session".into(),
                });
            };
            let a: AnswerArgs = parse(name, args)?;
            match s.answer(&a.answer)? {
                Reply::Invalid { text } => Ok(ok(text.trim().to_owned(), json!({"done": false}))),
                reply => ended(s, reply),
            }
        }
        other => Err(ToolError::BadArguments {
            tool: other.to_owned(),
            message: "no such tool in this session".into(),
        }),
    }
}

/// Why a scored search session is over, as a tool error.
fn over(s: &SearchSession) -> ToolError {
    ToolError::EpisodeOver(format!("ended, score {}", s.reward()))
}

/// The result of the call that ended a scored search session: the score of an answer (F1, exact
/// match, precision, recall), or why it ended without one (the turn cap, the token budget).
fn ended(s: &SearchSession, reply: Reply) -> Result<CallToolResult, ToolError> {
    let Reply::Ended { metadata } = reply else {
        return Err(over(s));
    };
    let num = |k: &str| metadata.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let (f1, em, precision, recall) = (num("f1"), num("em"), num("precision"), num("recall"));
    let reason = metadata.get("reason").and_then(Value::as_str);
    let text = match reason {
        Some(why) if !metadata.contains_key("f1") => {
            format!("Episode over ({why}). Score: {}.", s.reward())
        }
        _ => format!(
            "Episode over. Score (F1): {f1} (exact match {em}, precision {precision}, recall \
             {recall})."
        ),
    };
    Ok(ok(
        text,
        json!({"score": s.reward(), "f1": f1, "em": em, "precision": precision,
               "recall": recall, "done": true, "reason": reason}),
    ))
}

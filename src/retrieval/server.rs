//! A Search-R1-compatible retrieval server (feature `server`).
//!
//! `POST /retrieve` takes `{"queries": [...], "topk": k, "return_scores": bool}` (Search-R1) or
//! `{"query": "..."}` (SkyRL) and answers `{"result": [[{"document": {"id", "contents"},
//! "score"}]]}`, one list per query (items are bare documents without `return_scores`).
//! `GET /health` reports the index. Malformed JSON, missing or empty queries, and a `topk` of 0
//! or above the corpus size get a 400 with a message.
//!
//! Concurrent requests are batched: handlers hand their queries to one batcher thread, which
//! takes everything pending (up to `max_batch` queries), encodes it and runs one flat search,
//! then answers each request. Scores are bit-identical whatever the batch (see
//! [`kernel`](super::kernel)), so batching never changes an answer.

use super::RetrievalError;
use super::index_file::SearchIndex;
use super::topk::Hit;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use std::sync::Arc;
use std::sync::mpsc;
use tokio::sync::oneshot;

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// `topk` when a request does not give one.
    pub default_topk: usize,
    /// Most queries encoded and searched together.
    pub max_batch: usize,
    /// Most queries accepted in one request.
    pub max_queries_per_request: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            default_topk: 3,
            max_batch: 256,
            max_queries_per_request: 4096,
        }
    }
}

impl ServerConfig {
    /// Checks that every limit is at least 1.
    pub fn validate(&self) -> Result<(), RetrievalError> {
        if self.default_topk == 0 || self.max_batch == 0 || self.max_queries_per_request == 0 {
            return Err(RetrievalError::Config(
                "server topk, max_batch and max_queries_per_request must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

struct Job {
    queries: Vec<String>,
    k: usize,
    reply: oneshot::Sender<Result<Vec<Vec<Hit>>, String>>,
}

struct AppState {
    index: Arc<SearchIndex>,
    cfg: ServerConfig,
    jobs: mpsc::Sender<Job>,
}

/// Runs the batcher: blocks for a job, drains what else is pending, searches once.
fn batcher(index: Arc<SearchIndex>, max_batch: usize, rx: mpsc::Receiver<Job>) {
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        let mut n = jobs[0].queries.len();
        while n < max_batch {
            match rx.try_recv() {
                Ok(j) => {
                    n += j.queries.len();
                    jobs.push(j);
                }
                Err(_) => break,
            }
        }
        let k = jobs.iter().map(|j| j.k).max().unwrap_or(1);
        let texts: Vec<&str> = jobs
            .iter()
            .flat_map(|j| j.queries.iter().map(String::as_str))
            .collect();
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| index.search(&texts, k)));
        match result {
            Ok(Ok(hits)) => {
                let mut it = hits.into_iter();
                for j in jobs {
                    let mut mine: Vec<Vec<Hit>> = it.by_ref().take(j.queries.len()).collect();
                    for h in &mut mine {
                        h.truncate(j.k);
                    }
                    let _ = j.reply.send(Ok(mine));
                }
            }
            Ok(Err(e)) => {
                for j in jobs {
                    let _ = j.reply.send(Err(e.to_string()));
                }
            }
            Err(_) => {
                for j in jobs {
                    let _ = j.reply.send(Err("internal error during search".into()));
                }
            }
        }
    }
}

/// The HTTP routes over an index; spawns the batcher thread.
pub fn router(index: Arc<SearchIndex>, cfg: ServerConfig) -> Result<Router, RetrievalError> {
    cfg.validate()?;
    let (tx, rx) = mpsc::channel();
    let idx = index.clone();
    let max_batch = cfg.max_batch;
    std::thread::Builder::new()
        .name("rulegym-retrieval-batcher".into())
        .spawn(move || batcher(idx, max_batch, rx))
        .map_err(|e| RetrievalError::Io("spawn batcher thread".into(), e))?;
    let state = Arc::new(AppState {
        index,
        cfg,
        jobs: tx,
    });
    Ok(Router::new()
        .route("/retrieve", post(retrieve))
        .route("/health", get(health))
        .with_state(state))
}

/// Serves `index` on `listener` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    index: Arc<SearchIndex>,
    cfg: ServerConfig,
) -> Result<(), RetrievalError> {
    let app = router(index, cfg)?;
    axum::serve(listener, app)
        .await
        .map_err(|e| RetrievalError::Io("serve".into(), e))
}

fn bad_request(msg: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": msg.into() });
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

async fn health(State(st): State<Arc<AppState>>) -> Response {
    let body = serde_json::json!({
        "status": "ok",
        "documents": st.index.len(),
        "dim": st.index.header().dim,
        "encoder": st.index.header().encoder_identity,
    });
    axum::Json(body).into_response()
}

/// A parsed, validated request.
struct Request {
    queries: Vec<String>,
    k: usize,
    scores: bool,
}

fn parse(body: &[u8], st: &AppState) -> Result<Request, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("malformed JSON: {e}"))?;
    let obj = v.as_object().ok_or("request body must be a JSON object")?;
    let queries: Vec<String> = match (obj.get("queries"), obj.get("query")) {
        (Some(_), Some(_)) => return Err("give either `queries` or `query`, not both".into()),
        (Some(qs), None) => {
            let arr = qs
                .as_array()
                .ok_or("`queries` must be an array of strings")?;
            arr.iter()
                .map(|q| q.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or("`queries` must be an array of strings")?
        }
        (None, Some(q)) => vec![q.as_str().ok_or("`query` must be a string")?.to_owned()],
        (None, None) => {
            return Err("missing `queries` (array of strings) or `query` (string)".into());
        }
    };
    if queries.is_empty() {
        return Err("`queries` is empty".into());
    }
    if queries.len() > st.cfg.max_queries_per_request {
        return Err(format!(
            "{} queries in one request; the limit is {}",
            queries.len(),
            st.cfg.max_queries_per_request
        ));
    }
    if let Some(i) = queries.iter().position(|q| q.trim().is_empty()) {
        return Err(format!("query {i} is empty"));
    }
    let n = st.index.len();
    let k = match obj.get("topk") {
        None | Some(serde_json::Value::Null) => st.cfg.default_topk.min(n.max(1)),
        Some(t) => {
            let k = t.as_u64().ok_or("`topk` must be a positive integer")?;
            if k == 0 || k > n as u64 {
                return Err(format!(
                    "`topk` {k} must be between 1 and the corpus size {n}"
                ));
            }
            k as usize
        }
    };
    let scores = match obj.get("return_scores") {
        None | Some(serde_json::Value::Null) => false,
        Some(b) => b.as_bool().ok_or("`return_scores` must be a boolean")?,
    };
    Ok(Request { queries, k, scores })
}

#[derive(Serialize)]
struct Out<T> {
    result: T,
}

#[derive(Serialize)]
struct Scored<'a> {
    document: &'a super::docs::Document,
    score: f32,
}

async fn retrieve(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let req = match parse(&body, &st) {
        Ok(r) => r,
        Err(msg) => return bad_request(msg),
    };
    if st.index.is_empty() {
        return bad_request("the index holds no documents");
    }
    let (tx, rx) = oneshot::channel();
    let job = Job {
        queries: req.queries,
        k: req.k,
        reply: tx,
    };
    if st.jobs.send(job).is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "search worker stopped").into_response();
    }
    let hits = match rx.await {
        Ok(Ok(h)) => h,
        Ok(Err(msg)) => return (StatusCode::INTERNAL_SERVER_ERROR, msg).into_response(),
        Err(_) => {
            return (StatusCode::SERVICE_UNAVAILABLE, "search worker stopped").into_response();
        }
    };
    let docs = st.index.docs();
    let body = if req.scores {
        let result: Vec<Vec<Scored>> = hits
            .iter()
            .map(|hs| {
                hs.iter()
                    .map(|h| Scored {
                        document: &docs[h.index as usize],
                        score: h.score,
                    })
                    .collect()
            })
            .collect();
        serde_json::to_vec(&Out { result })
    } else {
        let result: Vec<Vec<&super::docs::Document>> = hits
            .iter()
            .map(|hs| hs.iter().map(|h| &docs[h.index as usize]).collect())
            .collect();
        serde_json::to_vec(&Out { result })
    };
    match body {
        Ok(b) => ([(header::CONTENT_TYPE, "application/json")], b).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

//! A Search-R1-compatible retrieval server (feature `server`).
//!
//! `POST /retrieve` takes `{"queries": [...], "topk": k, "return_scores": bool}` (Search-R1) or
//! `{"query": "..."}` (SkyRL) and answers `{"result": [[{"document": {"id", "contents"},
//! "score"}]]}`, one list per query (items are bare documents without `return_scores`).
//! `GET /health` reports the index. Like Search-R1's own server, an empty `queries` list answers
//! `{"result": []}`, an empty query string gets an empty hit list, and a `topk` above the corpus
//! size is clamped to it; malformed JSON, a missing `queries`/`query` or a `topk` of 0 get a 400
//! with a message.
//!
//! Bounds (see [`RetrievalServerConfig`]): a request body over `max_body_bytes` or not received within
//! `body_timeout` is refused (413 / 408); more than `max_hits_per_request` hits (queries x topk)
//! or a response over `max_response_bytes` is a 413 before any search or serialisation; request
//! headers must arrive within `header_timeout`. Connections are the server's sessions, bounded
//! by the policy every rulegym server shares ([`crate::sessions`]): at most `max_sessions` at
//! once (one more is answered 503 and closed), one idle for `idle_timeout` or older than
//! `max_lifetime` is closed gracefully after its current request.
//!
//! Concurrent requests are batched: handlers hand their queries to one batcher thread, which
//! takes up to `max_batch` queries (and `max_batch_chars` characters) of everything pending,
//! encodes them in one pass and runs one search, and answers each request once all its queries
//! are found. The oldest request takes up to an eighth of each batch, then the requests with the
//! fewest queries left theirs (`plan_round`): a request of thousands of queries is served a
//! batch at a time, so a request arriving meanwhile waits for one batch, not for all of it, and
//! a request whose client went away is dropped between batches. Scores are bit-identical whatever the batch (see
//! [`kernel`](super::kernel); the dense encoder is batch-invariant), so batching never changes
//! an answer.

use super::RetrievalError;
use super::index_file::SearchIndex;
use super::topk::Hit;
use crate::sessions::SessionLimits;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Server settings and resource bounds.
#[derive(Clone, Debug)]
pub struct RetrievalServerConfig {
    /// `topk` when a request does not give one.
    pub default_topk: usize,
    /// Most queries encoded and searched together.
    pub max_batch: usize,
    /// Most characters of queries encoded together (at least one query): with a dense
    /// encoder, a batch's cost grows with its tokens, and requests arriving during a batch
    /// wait for it.
    pub max_batch_chars: usize,
    /// Most queries accepted in one request.
    pub max_queries_per_request: usize,
    /// Most hits (queries x topk) one request may ask for (413 beyond).
    pub max_hits_per_request: usize,
    /// Largest response body (413 beyond, decided before serialising).
    pub max_response_bytes: usize,
    /// Largest request body (413 beyond).
    pub max_body_bytes: usize,
    /// Time for a request's headers to arrive.
    pub header_timeout: Duration,
    /// Time for a request's body to arrive (408 beyond).
    pub body_timeout: Duration,
    /// Connections served at once, their idle timeout and longest life.
    pub sessions: SessionLimits,
}

impl Default for RetrievalServerConfig {
    fn default() -> Self {
        RetrievalServerConfig {
            default_topk: 3,
            max_batch: 256,
            max_batch_chars: 16_384,
            max_queries_per_request: 4096,
            max_hits_per_request: 65_536,
            max_response_bytes: 64 << 20,
            max_body_bytes: 4 << 20,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            sessions: SessionLimits::default(),
        }
    }
}

impl RetrievalServerConfig {
    /// Checks that every limit is positive.
    pub fn validate(&self) -> Result<(), RetrievalError> {
        let counts = [
            self.default_topk,
            self.max_batch,
            self.max_batch_chars,
            self.max_queries_per_request,
            self.max_hits_per_request,
            self.max_response_bytes,
            self.max_body_bytes,
        ];
        let times = [self.header_timeout, self.body_timeout];
        if counts.contains(&0) || times.iter().any(Duration::is_zero) {
            return Err(RetrievalError::Config(
                "server topk, batch, request, response, body and connection limits and timeouts \
                 must all be positive"
                    .into(),
            ));
        }
        self.sessions
            .validate()
            .map_err(|e| RetrievalError::Config(e.to_string()))
    }
}

struct Job {
    queries: Vec<String>,
    k: usize,
    reply: oneshot::Sender<Result<Vec<Vec<Hit>>, String>>,
}

struct AppState {
    index: Arc<SearchIndex>,
    cfg: RetrievalServerConfig,
    jobs: mpsc::Sender<Job>,
}

/// A job in the batcher: the hits of its first `hits.len()` queries are found.
struct Pending {
    job: Job,
    hits: Vec<Vec<Hit>>,
}

impl Pending {
    fn remaining(&self) -> usize {
        self.job.queries.len() - self.hits.len()
    }
}

/// How many queries of each pending job the next search takes, at most `max_batch` queries
/// and `max_chars` characters (at least one query). `lens[i]` lists the lengths in characters
/// of the next queries of job i (in arrival order), `left[i]` how many it has left. The oldest
/// job takes up to an eighth of the batch first, so it always progresses; then the jobs with
/// the fewest queries left take theirs, oldest first on a tie. A request arriving while one of
/// thousands of queries is served is thus in the next batch (shortest first: the least mean
/// waiting), equal requests are served first come first served, and the character bound keeps
/// a batch of long queries (a dense encoder's cost grows with their tokens) short.
fn plan_round(
    lens: &[Vec<usize>],
    left: &[usize],
    max_batch: usize,
    max_chars: usize,
) -> Vec<usize> {
    let mut take = vec![0; lens.len()];
    let (mut count, mut chars) = (0usize, 0usize);
    // Adds job i's next queries while the batch holds fewer than `max_queries` queries and
    // `max_chars` characters (an empty batch takes one query anyway).
    let mut grab = |i: usize, max_queries: usize, max_chars: usize, take: &mut [usize]| {
        while take[i] < lens[i].len() {
            let len = lens[i][take[i]];
            if count >= max_queries || (count > 0 && chars.saturating_add(len) > max_chars) {
                return;
            }
            take[i] += 1;
            count += 1;
            chars = chars.saturating_add(len);
        }
    };
    if lens.is_empty() {
        return take;
    }
    // The oldest job's eighth, of both bounds.
    grab(0, (max_batch / 8).max(1), max_chars / 8, &mut take);
    let mut order: Vec<usize> = (0..lens.len()).collect();
    order.sort_by_key(|&i| (left[i], i));
    for i in order {
        grab(i, max_batch, max_chars, &mut take);
    }
    take
}

/// Runs the batcher: blocks for a job when idle, adds every job pending, searches the next
/// [round](plan_round) of queries once, and answers each job when all its queries are found.
/// A job whose client went away is dropped before its next round.
fn batcher(index: Arc<SearchIndex>, max_batch: usize, max_chars: usize, rx: mpsc::Receiver<Job>) {
    let mut pending: Vec<Pending> = Vec::new();
    loop {
        if pending.is_empty() {
            match rx.recv() {
                Ok(job) => pending.push(Pending {
                    job,
                    hits: Vec::new(),
                }),
                Err(_) => return,
            }
        }
        while let Ok(job) = rx.try_recv() {
            pending.push(Pending {
                job,
                hits: Vec::new(),
            });
        }
        pending.retain(|p| !p.job.reply.is_closed());
        if pending.is_empty() {
            continue;
        }
        let remaining: Vec<Vec<usize>> = pending
            .iter()
            .map(|p| {
                p.job.queries[p.hits.len()..]
                    .iter()
                    .take(max_batch)
                    .map(|q| q.chars().count())
                    .collect()
            })
            .collect();
        let left: Vec<usize> = pending.iter().map(Pending::remaining).collect();
        let take = plan_round(&remaining, &left, max_batch, max_chars);
        let k = pending
            .iter()
            .zip(&take)
            .filter(|&(_, &t)| t > 0)
            .map(|(p, _)| p.job.k)
            .max()
            .unwrap_or(1);
        let texts: Vec<&str> = pending
            .iter()
            .zip(&take)
            .flat_map(|(p, &t)| {
                let from = p.hits.len();
                p.job.queries[from..from + t].iter().map(String::as_str)
            })
            .collect();
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| index.search(&texts, k)));
        let failure = match result {
            Ok(Ok(hits)) => {
                let mut it = hits.into_iter();
                for (p, &t) in pending.iter_mut().zip(&take) {
                    p.hits.extend(it.by_ref().take(t).map(|mut h| {
                        h.truncate(p.job.k);
                        h
                    }));
                }
                None
            }
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("internal error during search".to_owned()),
        };
        let mut kept = Vec::with_capacity(pending.len());
        for (p, &t) in pending.into_iter().zip(&take) {
            match &failure {
                Some(msg) if t > 0 => {
                    let _ = p.job.reply.send(Err(msg.clone()));
                }
                _ if p.remaining() == 0 => {
                    let _ = p.job.reply.send(Ok(p.hits));
                }
                _ => kept.push(p),
            }
        }
        pending = kept;
    }
}

/// The HTTP routes over an index; spawns the batcher thread.
pub fn router(
    index: Arc<SearchIndex>,
    cfg: RetrievalServerConfig,
) -> Result<Router, RetrievalError> {
    cfg.validate()?;
    let (tx, rx) = mpsc::channel();
    let idx = index.clone();
    let (max_batch, max_chars) = (cfg.max_batch, cfg.max_batch_chars);
    std::thread::Builder::new()
        .name("rulegym-retrieval-batcher".into())
        .spawn(move || batcher(idx, max_batch, max_chars, rx))
        .map_err(|e| RetrievalError::Io("spawn batcher thread".into(), e))?;
    let state = Arc::new(AppState {
        index,
        cfg,
        jobs: tx,
    });
    let max_body = state.cfg.max_body_bytes;
    Ok(Router::new()
        .route("/retrieve", post(retrieve))
        .route("/health", get(health))
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .with_state(state))
}

/// Serves `index` on `listener` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    index: Arc<SearchIndex>,
    cfg: RetrievalServerConfig,
) -> Result<(), RetrievalError> {
    let limits = crate::sessions::ConnectionLimits {
        sessions: cfg.sessions.clone(),
        header_timeout: cfg.header_timeout,
        max_body_bytes: cfg.max_body_bytes,
        body_timeout: cfg.body_timeout,
        drain_timeout: cfg.body_timeout,
    };
    let app = router(index, cfg)?;
    crate::sessions::serve_connections(listener, app, limits)
        .await
        .map_err(|e| RetrievalError::Config(e.to_string()))
}

fn bad_request(msg: impl Into<String>) -> Response {
    error(StatusCode::BAD_REQUEST, msg)
}

fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": msg.into() });
    (status, axum::Json(body)).into_response()
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
    if queries.len() > st.cfg.max_queries_per_request {
        return Err(format!(
            "{} queries in one request; the limit is {}",
            queries.len(),
            st.cfg.max_queries_per_request
        ));
    }
    let n = st.index.len();
    let k = match obj.get("topk") {
        None | Some(serde_json::Value::Null) => st.cfg.default_topk,
        Some(t) => {
            let k = t.as_u64().ok_or("`topk` must be a positive integer")?;
            if k == 0 {
                return Err("`topk` must be at least 1".into());
            }
            usize::try_from(k).unwrap_or(usize::MAX)
        }
    };
    // Like Search-R1's server: a topk above the corpus size returns the whole corpus.
    let k = k.min(n.max(1));
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

/// `POST /retrieve`. The body arrives read and bounded by the connection layer
/// ([`crate::sessions::serve_connections`]: 413 over `max_body_bytes`, 408 past
/// `body_timeout`).
async fn retrieve(State(st): State<Arc<AppState>>, body: axum::body::Bytes) -> Response {
    let req = match parse(&body, &st) {
        Ok(r) => r,
        Err(msg) => return bad_request(msg),
    };
    let asked = req.queries.len().saturating_mul(req.k);
    if asked > st.cfg.max_hits_per_request {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{} queries x topk {} = {asked} hits; the limit per request is {}",
                req.queries.len(),
                req.k,
                st.cfg.max_hits_per_request
            ),
        );
    }
    if st.index.is_empty() {
        return bad_request("the index holds no documents");
    }
    // Empty queries (Search-R1 sends `<search> </search>` as "") get no hits; the rest are
    // searched in one job.
    let searched: Vec<String> = req
        .queries
        .iter()
        .filter(|q| !q.trim().is_empty())
        .cloned()
        .collect();
    let found = if searched.is_empty() {
        Vec::new()
    } else {
        let (tx, rx) = oneshot::channel();
        let job = Job {
            queries: searched,
            k: req.k,
            reply: tx,
        };
        if st.jobs.send(job).is_err() {
            return (StatusCode::SERVICE_UNAVAILABLE, "search worker stopped").into_response();
        }
        match rx.await {
            Ok(Ok(h)) => h,
            Ok(Err(msg)) => return (StatusCode::INTERNAL_SERVER_ERROR, msg).into_response(),
            Err(_) => {
                return (StatusCode::SERVICE_UNAVAILABLE, "search worker stopped").into_response();
            }
        }
    };
    let mut found = found.into_iter();
    let hits: Vec<Vec<Hit>> = req
        .queries
        .iter()
        .map(|q| {
            if q.trim().is_empty() {
                Vec::new()
            } else {
                found.next().unwrap_or_default()
            }
        })
        .collect();
    let docs = st.index.docs();
    // The response size, bounded before anything is serialised (JSON escaping can at most
    // double text; 96 bytes of structure per hit).
    let estimate: usize = hits
        .iter()
        .flatten()
        .map(|h| {
            let d = &docs[h.index as usize];
            96 + 2 * (d.id.len() + d.contents.len())
        })
        .sum();
    if estimate > st.cfg.max_response_bytes {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the response would be about {estimate} bytes; the limit is {} (ask fewer \
                 queries or a smaller topk)",
                st.cfg.max_response_bytes
            ),
        );
    }
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

#[cfg(test)]
mod tests {
    use super::plan_round;

    #[test]
    fn a_round_serves_the_shortest_requests_and_the_oldest() {
        let plan = |counts: &[usize], max_batch: usize, max_chars: usize| {
            let lens: Vec<Vec<usize>> =
                counts.iter().map(|&n| vec![10; n.min(max_batch)]).collect();
            plan_round(&lens, counts, max_batch, max_chars)
        };
        // A request of 4,096 queries and a late one of 1: both are in the first batch.
        assert_eq!(plan(&[4096, 1], 256, usize::MAX), [255, 1]);
        // The oldest takes an eighth, then the shortest first.
        assert_eq!(plan(&[300, 300, 10], 256, usize::MAX), [246, 0, 10]);
        // Equal requests: first come, first served (whole requests, as a queue would).
        assert_eq!(
            plan(&[32; 12], 256, usize::MAX),
            [32, 32, 32, 32, 32, 32, 32, 32, 0, 0, 0, 0]
        );
        // Everything fits: everything is taken.
        assert_eq!(plan(&[3, 5, 1], 256, usize::MAX), [3, 5, 1]);
        assert_eq!(plan(&[], 256, 100), Vec::<usize>::new());
        // The character bound: 10-character queries, 45 characters.
        assert_eq!(plan(&[100, 100], 256, 45), [4, 0]);
        // One query longer than the bound still goes alone, never zero.
        assert_eq!(
            plan_round(&[vec![1000, 5], vec![5]], &[2, 1], 256, 100),
            [1, 0]
        );
        for (counts, max) in [(vec![7, 0, 9000, 1, 33], 256), (vec![1; 300], 256)] {
            let take = plan(&counts, max, usize::MAX);
            let total: usize = take.iter().sum();
            assert_eq!(total, max.min(counts.iter().sum()));
            assert!(take.iter().zip(&counts).all(|(t, r)| t <= r));
        }
    }
}

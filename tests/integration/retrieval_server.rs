//! Retrieval server on loopback: both request shapes, Search-R1 parity, malformed requests,
//! concurrency, and its bounds under valid, malformed, oversized and slow clients at once.

use rulegym::retrieval::server::RetrievalServerConfig;
use rulegym::retrieval::{IndexKind, SearchIndex, synthetic};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

#[path = "../support/server.rs"]
mod server;
pub use server::start;

/// One HTTP/1.1 request with `Connection: close`; returns (status, body).
pub fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status: u16 = resp.split(' ').nth(1).unwrap().parse().unwrap();
    let body = resp
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    (status, body)
}

fn check_result(index: &SearchIndex, queries: &[&str], k: usize, scores: bool, body: &str) {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let result = v["result"].as_array().unwrap();
    assert_eq!(result.len(), queries.len());
    for (q, got) in queries.iter().zip(result) {
        let want = &index.search(&[q], k).unwrap()[0];
        let got = got.as_array().unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            let doc = &index.docs()[w.index as usize];
            let d = if scores { &g["document"] } else { g };
            assert_eq!(d["id"].as_str().unwrap(), doc.id);
            assert_eq!(d["contents"].as_str().unwrap(), doc.contents);
            if scores {
                // Batched scores are bit-identical to a search of the query alone.
                assert_eq!(g["score"].as_f64().unwrap() as f32, w.score, "query {q}");
            }
        }
    }
}

#[test]
fn server_answers_both_shapes_rejects_malformed_and_survives_concurrent_load() {
    let (docs, named) = synthetic::corpus(500, 11);
    let n = docs.len();
    let index =
        Arc::new(SearchIndex::build(docs, &"builtin".parse().unwrap(), IndexKind::Flat).unwrap());
    let addr = start(index.clone(), RetrievalServerConfig::default());
    let (st, body) = http(addr, "GET", "/health", "");
    assert_eq!(st, 200, "{body}");
    assert!(body.contains("\"documents\":500"));

    let queries: Vec<String> = named.iter().map(|q| q.query.clone()).take(400).collect();
    let clients = 16;
    let per_client = 40;
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let index = index.clone();
            let queries = queries.clone();
            std::thread::spawn(move || {
                let mut ok = 0;
                let mut rejected = 0;
                for i in 0..per_client {
                    let q = &queries[(c * per_client + i) % queries.len()];
                    let q2 = &queries[(c * per_client + i + 7) % queries.len()];
                    match (c + i) % 9 {
                        0 => {
                            let body = serde_json::json!({"queries": [q, q2, q], "topk": 5, "return_scores": true});
                            let (st, b) = http(addr, "POST", "/retrieve", &body.to_string());
                            assert_eq!(st, 200, "{b}");
                            check_result(&index, &[q, q2, q], 5, true, &b);
                            ok += 1;
                        }
                        1 => {
                            let body = serde_json::json!({"query": q, "topk": 3, "return_scores": true});
                            let (st, b) = http(addr, "POST", "/retrieve", &body.to_string());
                            assert_eq!(st, 200, "{b}");
                            check_result(&index, &[q], 3, true, &b);
                            ok += 1;
                        }
                        2 => {
                            let body = serde_json::json!({"queries": [q2]});
                            let (st, b) = http(addr, "POST", "/retrieve", &body.to_string());
                            assert_eq!(st, 200, "{b}");
                            check_result(&index, &[q2], 3, false, &b);
                            ok += 1;
                        }
                        3 => {
                            // Search-R1 parity: an empty batch, an empty query, a topk above
                            // the corpus size.
                            let (st, b) = http(addr, "POST", "/retrieve", "{\"queries\": []}");
                            assert_eq!((st, b.as_str()), (200, "{\"result\":[]}"));
                            let body = serde_json::json!({"queries": [q, ""]});
                            let (st, b) = http(addr, "POST", "/retrieve", &body.to_string());
                            assert_eq!(st, 200, "{b}");
                            let v: Value = serde_json::from_str(&b).unwrap();
                            assert_eq!(v["result"][0].as_array().unwrap().len(), 3);
                            assert!(v["result"][1].as_array().unwrap().is_empty());
                            let body = serde_json::json!({"query": q, "topk": n + 1});
                            let (st, b) = http(addr, "POST", "/retrieve", &body.to_string());
                            assert_eq!(st, 200, "{b}");
                            check_result(&index, &[q], n, false, &b);
                            ok += 1;
                        }
                        bad => {
                            let body = match bad {
                                4 => "{\"queries\": [".to_string(),
                                5 => serde_json::json!({"query": q, "topk": 0}).to_string(),
                                6 => "{}".to_string(),
                                7 => serde_json::json!({"queries": [q, 3]}).to_string(),
                                _ => serde_json::json!({"queries": "not a list", "topk": -1}).to_string(),
                            };
                            let (st, b) = http(addr, "POST", "/retrieve", &body);
                            assert_eq!(st, 400, "{body} -> {b}");
                            let v: Value = serde_json::from_str(&b).unwrap();
                            assert!(!v["error"].as_str().unwrap().is_empty());
                            rejected += 1;
                        }
                    }
                }
                (ok, rejected)
            })
        })
        .collect();
    let (mut ok, mut rejected) = (0, 0);
    for h in handles {
        let (a, b) = h.join().expect("client thread failed");
        ok += a;
        rejected += b;
    }
    assert_eq!(ok + rejected, clients * per_client, "dropped requests");
    eprintln!("server load test: {ok} answered correctly, {rejected} rejected with 400, 0 dropped");
    let (st, _) = http(addr, "GET", "/health", "");
    assert_eq!(st, 200, "server still alive");
}

/// Sends raw bytes and returns the status line's code (0 when the server closed without one).
fn raw(addr: SocketAddr, bytes: &[u8]) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.write_all(bytes).unwrap();
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    resp.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[test]
fn bounds_hold_under_valid_malformed_oversized_and_slow_clients() {
    use std::time::{Duration, Instant};
    let (docs, named) = synthetic::corpus(1036, 5);
    let index =
        Arc::new(SearchIndex::build(docs, &"builtin".parse().unwrap(), IndexKind::Flat).unwrap());
    let cfg = RetrievalServerConfig {
        // Every client here is 127.0.0.1, so its share is the whole cap (attacks.rs tries
        // clients apart).
        sessions: rulegym::sessions::SessionLimits {
            max_sessions: 400,
            max_per_client: Some(400),
            ..Default::default()
        },
        header_timeout: Duration::from_millis(800),
        body_timeout: Duration::from_millis(800),
        max_body_bytes: 1 << 20,
        ..RetrievalServerConfig::default()
    };
    let addr = start(index.clone(), cfg);

    // 300 slow clients: half send part of the headers and stall, half send headers and part of
    // a body and stall. They hold connections, never the server.
    let slow: Vec<TcpStream> = (0..300)
        .map(|i| {
            let mut s = TcpStream::connect(addr).unwrap();
            if i % 2 == 0 {
                s.write_all(b"POST /retrieve HTTP/1.1\r\nHost: x\r\n")
                    .unwrap();
            } else {
                s.write_all(
                    b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"que",
                )
                .unwrap();
            }
            s
        })
        .collect();
    // Malformed and oversized clients in parallel.
    let noisy = std::thread::spawn(move || {
        let mut codes = Vec::new();
        let huge = serde_json::json!({"queries": vec!["who is the mother"; 4096], "topk": 1036});
        for i in 0..40 {
            let (st, _) = match i % 4 {
                0 => http(addr, "POST", "/retrieve", &huge.to_string()),
                1 => http(addr, "POST", "/retrieve", "{\"queries\": [1, 2"),
                // A body announced over the limit is refused before it is read.
                2 => (
                    raw(
                        addr,
                        b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n\r\n{\"q",
                    ),
                    String::new(),
                ),
                _ => http(addr, "POST", "/nowhere", "{}"),
            };
            codes.push(st);
        }
        codes
    });
    // The valid client: sequential requests, each timed.
    let mut latencies = Vec::new();
    for i in 0..300 {
        let body = serde_json::json!({"queries": [&named[i % named.len()].query], "topk": 3});
        let t = Instant::now();
        let (st, b) = http(addr, "POST", "/retrieve", &body.to_string());
        latencies.push(t.elapsed());
        assert_eq!(st, 200, "{b}");
    }
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    let p50 = latencies[latencies.len() / 2];
    eprintln!("valid requests beside 300 slow and 40 hostile clients: p50 {p50:?}, p99 {p99:?}");
    assert!(p99 < Duration::from_millis(50), "p99 {p99:?}");
    let codes = noisy.join().unwrap();
    for (i, code) in codes.iter().enumerate() {
        let expected = [413, 400, 413, 404][i % 4];
        assert_eq!(*code, expected, "hostile request {i}");
    }
    // The slow clients were cut off by the header or body timeout (408 for a stalled body).
    std::thread::sleep(Duration::from_millis(1500));
    let mut closed = 0;
    for mut s in slow {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = Vec::new();
        if s.read_to_end(&mut buf).is_ok() {
            closed += 1;
        }
    }
    assert_eq!(
        closed, 300,
        "every slow connection was closed by the server"
    );

    // Beyond the connection limit, a connection is answered 503 at once and closed.
    let cfg = RetrievalServerConfig {
        sessions: rulegym::sessions::SessionLimits {
            max_sessions: 4,
            ..Default::default()
        },
        ..RetrievalServerConfig::default()
    };
    let small = start(index, cfg);
    let held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(small).unwrap();
            s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n").unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    assert_eq!(raw(small, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"), 503);
    assert!(t.elapsed() < Duration::from_secs(2));
    drop(held);
}

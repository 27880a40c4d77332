//! Retrieval server on loopback: both request shapes, malformed requests, concurrency.
#![cfg(feature = "server")]

use rulegym::retrieval::server::ServerConfig;
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
    let addr = start(index.clone(), ServerConfig::default());
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
                        bad => {
                            let body = match bad {
                                3 => "{\"queries\": [".to_string(),
                                4 => "{\"queries\": []}".to_string(),
                                5 => serde_json::json!({"query": q, "topk": 0}).to_string(),
                                6 => serde_json::json!({"query": q, "topk": n + 1}).to_string(),
                                7 => serde_json::json!({"queries": [q, ""]}).to_string(),
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

//! Load test of `rulegym serve` on loopback: a 10,000-article synthetic corpus with the
//! built-in encoder, C concurrent keep-alive clients sending single-query (SkyRL-shape)
//! requests for a fixed time. Prints req/s, p50 and p99 latency and how often the top hit is
//! not the named person's article; asserts that every request got a 200.
//! `cargo bench --features server --bench retrieval_server [-- CLIENTS SECONDS]`

use rulegym::retrieval::server::RetrievalServerConfig;
use rulegym::retrieval::{IndexKind, SearchIndex, synthetic};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../tests/support/server.rs"]
mod server;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let clients: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(32);
    let secs: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let (docs, named) = synthetic::corpus(10_000, 1);
    let index =
        Arc::new(SearchIndex::build(docs, &"builtin".parse().unwrap(), IndexKind::Flat).unwrap());
    let addr = server::start(index.clone(), RetrievalServerConfig::default());
    let named = Arc::new(named);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let named = named.clone();
            std::thread::spawn(move || {
                let stream = TcpStream::connect(addr).unwrap();
                stream.set_nodelay(true).unwrap();
                let mut w = stream.try_clone().unwrap();
                let mut r = BufReader::new(stream);
                let mut lat = Vec::new();
                let mut wrong = 0usize;
                let mut failed = 0usize;
                let mut i = c * 7919;
                while Instant::now() < deadline {
                    let q = &named[i % named.len()];
                    i += 1;
                    let body = serde_json::json!({"query": q.query, "topk": 3}).to_string();
                    let t = Instant::now();
                    write!(w, "POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    let ok = line.starts_with("HTTP/1.1 200");
                    let mut len = 0usize;
                    loop {
                        line.clear();
                        r.read_line(&mut line).unwrap();
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap();
                        }
                    }
                    let mut buf = vec![0u8; len];
                    r.read_exact(&mut buf).unwrap();
                    lat.push(t.elapsed());
                    let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
                    let first = v["result"][0][0]["id"].as_str().unwrap_or("");
                    if !ok {
                        failed += 1;
                    } else if first != q.target.to_string() {
                        wrong += 1;
                    }
                }
                (lat, wrong, failed)
            })
        })
        .collect();
    let mut lat = Vec::new();
    let (mut wrong, mut failed) = (0, 0);
    for h in handles {
        let (l, w, f) = h.join().unwrap();
        lat.extend(l);
        wrong += w;
        failed += f;
    }
    let elapsed = start.elapsed().as_secs_f64();
    lat.sort();
    let p = |f: f64| lat[((lat.len() as f64 * f) as usize).min(lat.len() - 1)];
    println!(
        "server 10k articles builtin, {clients} keep-alive clients, {secs} s: {} requests, {:.0} req/s, p50 {:.2?}, p99 {:.2?}, non-200: {failed}, top-1 not the named article: {wrong}",
        lat.len(),
        lat.len() as f64 / elapsed,
        p(0.5),
        p(0.99)
    );
    assert_eq!(failed, 0, "requests failed");
}

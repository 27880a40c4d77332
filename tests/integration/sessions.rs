//! The session policy every network server shares (`rulegym::sessions`), under a hostile
//! client: `rulegym mcp --transport http` flooded with abandoned sessions (the requests the PyPI
//! `mcp` client sends: `initialize` with protocol 2025-06-18, then `notifications/initialized`
//! and `tools/call`), and `rulegym serve`-style connections left idle. Resident memory is read
//! from the server process's `/proc/PID/status`.

use super::attacks::{Server, rss_kib};
use super::cli::{generate_small, rulegym};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One POST to /mcp on its own connection: (status, session id header, JSON-RPC message if any).
fn post(addr: SocketAddr, session: Option<&str>, body: &Value) -> (u16, Option<String>, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = body.to_string();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(id) = session {
        head.push_str(&format!(
            "mcp-session-id: {id}\r\nmcp-protocol-version: 2025-06-18\r\n"
        ));
    }
    write!(s, "{head}\r\n{body}").unwrap();
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    let (head, rest) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let id = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("mcp-session-id")
            .then(|| v.trim().to_string())
    });
    // An SSE stream (`data: {...}` lines, possibly chunked) or a JSON body.
    let message = rest
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .chain(std::iter::once(rest.trim()))
        .find_map(|d| {
            serde_json::from_str::<Value>(d)
                .ok()
                .filter(|v| v.is_object())
        })
        .unwrap_or(Value::Null);
    (status, id, message)
}

fn initialize(addr: SocketAddr) -> (u16, Option<String>, Value) {
    post(
        addr,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "flood", "version": "0"}}}),
    )
}

/// A session that completed the handshake: its id.
fn open_session(addr: SocketAddr) -> String {
    let (status, id, init) = initialize(addr);
    assert_eq!(status, 200, "{init}");
    let id = id.expect("a session id");
    let (status, _, _) = post(
        addr,
        Some(&id),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(status, 202);
    id
}

/// DELETE /mcp for a session: the status.
fn delete(addr: SocketAddr, id: &str) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nmcp-session-id: {id}\r\n\
         mcp-protocol-version: 2025-06-18\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    resp.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn search(addr: SocketAddr, id: &str, n: u64) -> (u16, Value) {
    let (status, _, v) = post(
        addr,
        Some(id),
        &json!({"jsonrpc": "2.0", "id": n + 2, "method": "tools/call",
                "params": {"name": "search", "arguments": {"query": "who is the mother", "k": 2}}}),
    );
    (status, v)
}

#[test]
fn abandoned_mcp_sessions_are_capped_and_reclaimed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    generate_small(&data);
    let cap = 1024usize;
    let idle = Duration::from_secs(6);
    // One client floods and calls (all from 127.0.0.1), so its share is the whole cap here;
    // `attacks.rs` tries the per-client share.
    let server = Server::mcp(
        &data,
        &[
            "--idle-timeout",
            "6",
            "--max-lifetime",
            "600",
            "--max-sessions-per-client",
            "1024",
        ],
    );
    let addr = server.addr;

    // The baseline is a server that has already held the cap's worth of sessions once (opened,
    // then closed with DELETE) and handed the memory back: its session maps, runtime threads
    // and allocator arenas are at their working size, so what the flood leaves behind shows.
    let burst: Vec<String> = (0..cap).map(|_| open_session(addr)).collect();
    for id in &burst {
        assert_eq!(delete(addr, id), 202);
    }
    std::thread::sleep(Duration::from_secs(4));
    let valid = open_session(addr);
    let (status, hits) = search(addr, &valid, 0);
    assert_eq!(status, 200);
    assert_eq!(hits["result"]["isError"], false, "{hits}");
    let start_kib = server.rss_kib();

    // 20,000 abandoned sessions from 4 threads (initialize, never DELETE), a valid client
    // calling a tool throughout, and the server's RSS sampled every 50 ms.
    let total = 20_000u64;
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let flood: Vec<_> = (0..4)
        .map(|_| {
            let next = next.clone();
            std::thread::spawn(move || {
                let (mut ok, mut busy, mut other) = (0u64, 0u64, Vec::new());
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    let (status, id, body) = initialize(addr);
                    match status {
                        200 if id.is_some() => ok += 1,
                        503 => {
                            busy += 1;
                            assert_eq!(body["error"]["code"], -32000, "{body}");
                        }
                        s => other.push((s, body.to_string())),
                    }
                }
                (ok, busy, other)
            })
        })
        .collect();
    let pid = server.pid();
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(50));
            }
            peak
        })
    };
    let t0 = Instant::now();
    let mut latencies = Vec::new();
    let mut n = 1;
    while next.load(Ordering::Relaxed) < total {
        let t = Instant::now();
        let (status, hits) = search(addr, &valid, n);
        latencies.push(t.elapsed());
        assert_eq!(status, 200, "the valid client is never refused: {hits}");
        assert_eq!(hits["result"]["isError"], false, "{hits}");
        n += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let (mut ok, mut busy) = (0, 0);
    for h in flood {
        let (o, b, other) = h.join().unwrap();
        assert!(other.is_empty(), "unexpected answers: {:?}", &other[..1]);
        ok += o;
        busy += b;
    }
    let flood_s = t0.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let peak_kib = sampler.join().unwrap();
    latencies.sort();
    let p50 = latencies[latencies.len() / 2];
    let p99 = latencies[latencies.len() * 99 / 100];
    let per_session = peak_kib.saturating_sub(start_kib) as f64 / cap as f64;
    eprintln!(
        "flood: {total} initializes in {flood_s:.1} s ({:.0}/s): {ok} sessions, {busy} refused 503; \
         RSS {start_kib} KiB at start, peak {peak_kib} KiB (~{per_session:.0} KiB per live session \
         at the cap of {cap}); valid client {} calls, p50 {p50:?}, p99 {p99:?}",
        total as f64 / flood_s,
        latencies.len()
    );
    assert_eq!(ok + busy, total);
    // The valid client holds one slot; the flood gets the rest.
    assert!(
        ok >= cap as u64 - 1,
        "the cap admits {cap} sessions: {ok} + the valid one"
    );
    // Bound: the cap times 256 KiB (the issue measured ~52 KB a session) plus 32 MiB.
    let bound = start_kib + cap as u64 * 256 + 32 * 1024;
    assert!(
        peak_kib <= bound,
        "peak RSS {peak_kib} KiB over the bound {bound} KiB"
    );
    assert!(p99 < Duration::from_millis(50), "valid client p99 {p99:?}");

    // Idle sessions are reclaimed: after the idle timeout and a reap, memory is back within
    // 10% of the start, the valid client's (now idle) session is gone, and the cap admits a
    // full set of fresh sessions again.
    // (Polled: on a loaded machine the reaper's ticks come late; 10 s past the timeout bounds it.)
    let flood_end = Instant::now();
    let after_kib = loop {
        std::thread::sleep(Duration::from_millis(250));
        let kib = server.rss_kib();
        if kib * 10 <= start_kib * 11 || flood_end.elapsed() > idle + Duration::from_secs(10) {
            break kib;
        }
    };
    eprintln!(
        "{:.1} s after the flood: RSS {after_kib} KiB (start {start_kib} KiB)",
        flood_end.elapsed().as_secs_f64()
    );
    assert!(
        after_kib * 10 <= start_kib * 11,
        "RSS {after_kib} KiB not within 10% of {start_kib} KiB"
    );
    // The valid client's session idles out too (it stopped calling at the flood's end).
    std::thread::sleep((idle + Duration::from_secs(2)).saturating_sub(flood_end.elapsed()));
    let (status, _) = search(addr, &valid, n);
    assert_eq!(status, 404, "an idle session is closed");
    let t = Instant::now();
    let fresh: Vec<String> = (0..cap).map(|_| initialize(addr).1.unwrap()).collect();
    assert_eq!(fresh.len(), cap);
    let (status, _, body) = initialize(addr);
    assert!(
        t.elapsed() < idle,
        "refilling took longer than the idle timeout"
    );
    assert_eq!(status, 503, "one over the cap: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too many sessions"),
        "{body}"
    );
    // DELETE frees a slot at once.
    assert_eq!(delete(addr, &fresh[0]), 202);
    let (status, id, _) = initialize(addr);
    assert_eq!(status, 200);
    assert!(id.is_some());
}

#[test]
fn bad_session_flags_are_refused_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    generate_small(&data);
    for flags in ["--max-sessions=0", "--idle-timeout=0", "--max-lifetime=-1"] {
        let out = rulegym()
            .args(["mcp", "--dataset"])
            .arg(&data)
            .args(["--transport", "http", "--port", "0"])
            .arg(flags)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flags:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("max sessions") || err.contains("timeout") || err.contains("seconds"),
            "{flags:?}: {err}"
        );
    }
}

#[test]
fn idle_and_old_connections_of_serve_are_closed() {
    use rulegym::retrieval::server::RetrievalServerConfig;
    use rulegym::retrieval::{IndexKind, SearchIndex, synthetic};
    use rulegym::sessions::SessionLimits;
    let (docs, _) = synthetic::corpus(64, 5);
    let index =
        Arc::new(SearchIndex::build(docs, &"builtin".parse().unwrap(), IndexKind::Flat).unwrap());
    let cfg = RetrievalServerConfig {
        sessions: SessionLimits {
            max_sessions: 8,
            idle_timeout: Duration::from_millis(400),
            max_lifetime: Duration::from_secs(2),
            ..Default::default()
        },
        ..RetrievalServerConfig::default()
    };
    let addr = super::retrieval_server::start(index, cfg);
    let request = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    // Bytes read; 0 when the server closed (or reset) the connection.
    let read_some = |s: &mut TcpStream| {
        let mut buf = [0u8; 4096];
        s.read(&mut buf).unwrap_or(0)
    };
    // Idle: one request on a keep-alive connection, then silence; the server closes it.
    let mut idle = TcpStream::connect(addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    idle.write_all(request).unwrap();
    assert!(read_some(&mut idle) > 0);
    let t = Instant::now();
    assert_eq!(read_some(&mut idle), 0, "closed by the server");
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "idle connection closed after {waited:?}"
    );
    // Busy: a request every 100 ms keeps it open until its lifetime ends.
    let mut busy = TcpStream::connect(addr).unwrap();
    busy.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t = Instant::now();
    let mut served = 0;
    loop {
        if busy.write_all(request).is_err() || read_some(&mut busy) == 0 {
            break;
        }
        served += 1;
        std::thread::sleep(Duration::from_millis(100));
        assert!(t.elapsed() < Duration::from_secs(6), "never closed");
    }
    let lived = t.elapsed();
    assert!(
        lived >= Duration::from_millis(1900) && served >= 10,
        "closed after {lived:?} and {served} requests"
    );
}

#[test]
fn a_busy_mcp_session_ends_at_its_lifetime() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    generate_small(&data);
    let server = Server::mcp(
        &data,
        &[
            "--idle-timeout",
            "60",
            "--max-lifetime",
            "2",
            "--max-sessions",
            "4",
        ],
    );
    let id = open_session(server.addr);
    let t = Instant::now();
    let mut n = 0;
    // A call every 100 ms: never idle, yet closed once it is 2 s old (a reap runs every 0.5 s).
    let ended = loop {
        let (status, _) = search(server.addr, &id, n);
        if status != 200 {
            break status;
        }
        n += 1;
        assert!(t.elapsed() < Duration::from_secs(8), "never closed");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(ended, 404, "a closed session is unknown");
    let lived = t.elapsed();
    assert!(
        lived >= Duration::from_millis(1900) && n >= 10,
        "closed after {lived:?} and {n} calls"
    );
}

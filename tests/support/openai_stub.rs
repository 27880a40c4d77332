//! A local OpenAI-compatible chat-completions server on an ephemeral loopback port whose answers
//! come from a function of the request body, shared by the tool-use tests
//! (`tests/integration/tool_env.rs`) and the simulator bench (`benches/rubric.rs`), which both
//! include this file with `#[path]`.

#![allow(dead_code)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A local OpenAI-compatible server whose answers come from `policy(request body)`. The first
/// `fail_first` requests get a 500 (the client must retry).
pub fn serve(
    policy: impl Fn(&Value) -> Value + Send + Sync + 'static,
    fail_first: u64,
) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicU64::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let n = seen.fetch_add(1, Ordering::SeqCst);
            let (status, text) = if n < fail_first {
                (
                    "500 Internal Server Error",
                    "{\"error\": \"busy\"}".to_owned(),
                )
            } else {
                let request: Value = serde_json::from_slice(&body).unwrap();
                let message = policy(&request);
                let finish = if message.get("tool_calls").is_some() {
                    "tool_calls"
                } else {
                    "stop"
                };
                let reply = json!({"id": "x", "object": "chat.completion", "choices": [
                    {"index": 0, "message": message, "finish_reason": finish}]});
                ("200 OK", reply.to_string())
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    (format!("http://{addr}/v1"), count)
}

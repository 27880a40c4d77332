//! `rulegym mcp` over stdio, spoken as raw JSON-RPC lines (the Python suite drives it with the
//! PyPI `mcp` client over both transports): the handshake, the tool list, a search, a scored
//! answer, and errors that leave the server running.

use super::cli::{generate_small, rulegym};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Stdio};

struct Client {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Client {
    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns its response (skipping notifications).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    fn call(&mut self, tool: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": args}))
    }
}

#[test]
fn stdio_session_search_answer_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    generate_small(&data);
    let question: Value = serde_json::from_str(
        std::fs::read_to_string(data.join("questions.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let mut child = rulegym()
        .args(["mcp", "--dataset"])
        .arg(&data)
        .args(["--question", question["id"].as_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut c = Client {
        stdin: child.stdin.take().unwrap(),
        stdout: BufReader::new(child.stdout.take().unwrap()),
        next_id: 0,
    };
    let init = c.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "rulegym-test", "version": "0"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "rulegym", "{init}");
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let tools = c.request("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // A scored session has the scored tools only: the same in every protocol.
    assert_eq!(names, ["answer", "get_article", "search"]);

    let hits = c.call("search", json!({"query": question["question"]}));
    assert_eq!(hits["result"]["isError"], false, "{hits}");
    assert_eq!(
        hits["result"]["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // Errors: an unknown tool is a JSON-RPC error, bad arguments a tool error.
    let unknown = c.call("nope", json!({}));
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool"),
        "{unknown}"
    );
    let bad = c.call("search", json!({"query": "x", "k": 2}));
    assert_eq!(bad["result"]["isError"], true, "{bad}");

    let gold = question["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect::<Vec<_>>()
        .join(", ");
    let answered = c.call("answer", json!({"answer": gold}));
    assert_eq!(
        answered["result"]["structuredContent"]["score"], 1.0,
        "{answered}"
    );
    let after = c.call("search", json!({"query": "x"}));
    assert_eq!(after["result"]["isError"], true, "{after}");

    drop(c);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the server exits cleanly at EOF: {status:?}"
    );
}

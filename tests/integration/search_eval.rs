//! `rulegym eval` end to end against a scripted OpenAI-compatible server started in the test:
//! the oracle policy (replies from the proof-derived oracle trajectories) scores F1 = 1, a garbage
//! policy scores 0, injected 429/503s are retried, a dead endpoint fails loudly.

use super::cli;
use rulegym::dataset::load_universe;
use rulegym::env::eval::{EvalReport, restore_stop};
use rulegym::env::oracle::replay;
use rulegym::env::search::{Retriever, SearchEnvConfig};
use rulegym::io::read_jsonl;
use rulegym::llm::openai::completions_url;
use rulegym::question::Question;
use rulegym::retrieval::SearchIndex;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Clone, Copy, PartialEq)]
enum Policy {
    Oracle,
    Garbage,
}

struct Script {
    policy: Policy,
    /// Question text -> the oracle's assistant turns.
    oracle: HashMap<String, Vec<String>>,
    requests: AtomicUsize,
    injected_failures: AtomicUsize,
    /// Requests already failed once.
    failed: std::sync::Mutex<std::collections::HashSet<String>>,
}

fn read_request(stream: &mut TcpStream) -> Option<Value> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())?;
    while buf.len() < header_end + len {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    serde_json::from_slice(&buf[header_end..header_end + len]).ok()
}

fn respond(stream: &mut TcpStream, status: &str, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nRetry-After: 0\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

fn handle(script: &Script, mut stream: TcpStream) {
    let Some(request) = read_request(&mut stream) else {
        return respond(&mut stream, "400 Bad Request", "{}");
    };
    script.requests.fetch_add(1, Ordering::Relaxed);
    assert_eq!(request["stop"], json!(["</search>", "</answer>"]));
    assert_eq!(request["model"], "scripted");
    let messages = request["messages"].as_array().unwrap();
    let prompt = messages[0]["content"].as_str().unwrap();
    let question = prompt
        .rsplit_once("Question: ")
        .map(|(_, q)| q.trim_end_matches('\n'))
        .unwrap();
    let turn = messages.iter().filter(|m| m["role"] == "assistant").count();
    // One request in ~7 (by question and turn) fails on its first attempt with 503, 429 or 408:
    // the client must retry; the retry succeeds.
    let key = format!("{turn}:{question}");
    let h = key
        .bytes()
        .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
    if h % 7 == 3 && script.failed.lock().unwrap().insert(key) {
        script.injected_failures.fetch_add(1, Ordering::Relaxed);
        let status = match h / 7 % 3 {
            0 => "503 Service Unavailable",
            1 => "429 Too Many Requests",
            _ => "408 Request Timeout",
        };
        return respond(&mut stream, status, "{\"error\": \"busy\"}");
    }
    // Observations come back as user messages after each assistant turn.
    assert_eq!(
        messages.len(),
        1 + 2 * turn,
        "prompt, then (assistant, user) pairs"
    );
    let action = match script.policy {
        Policy::Oracle => script.oracle[question][turn].clone(),
        Policy::Garbage if question.len() % 2 == 0 => {
            "<think>no idea</think>\n<answer> Xyzzy Plugh </answer>".to_owned()
        }
        Policy::Garbage => "I will not use any tags.".to_owned(),
    };
    // Like vLLM: the stop string is cut off; stop_reason names it on even turns only.
    let (text, stop) = match ["</search>", "</answer>"]
        .iter()
        .find(|s| action.ends_with(**s))
    {
        Some(s) => (action[..action.len() - s.len()].to_owned(), Some(*s)),
        None => (action, None),
    };
    let mut choice = json!({
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
    });
    if turn % 2 == 0 {
        choice["stop_reason"] = json!(stop);
    }
    let body =
        json!({"id": "x", "object": "chat.completion", "model": "scripted", "choices": [choice]});
    respond(&mut stream, "200 OK", &body.to_string());
}

fn serve(script: Arc<Script>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let script = script.clone();
            std::thread::spawn(move || handle(&script, stream));
        }
    });
    url
}

fn rulegym(args: &[&str], paths: &[(&str, &Path)]) -> std::process::Output {
    let mut cmd = cli::rulegym();
    cmd.args(args);
    for (flag, path) in paths {
        cmd.arg(flag).arg(path);
    }
    cmd.output().unwrap()
}

fn eval(
    dir: &Path,
    data: &Path,
    index: &Path,
    url: &str,
    name: &str,
    extra: &[&str],
) -> (std::process::Output, std::path::PathBuf) {
    let out = dir.join(name);
    let mut args = vec![
        "eval",
        "--endpoint",
        url,
        "--model",
        "scripted",
        "--concurrency",
        "4",
        "--retries",
        "3",
        "--backoff-ms",
        "1",
        "--timeout",
        "30",
    ];
    args.extend_from_slice(extra);
    let output = rulegym(
        &args,
        &[("--dataset", data), ("--index", index), ("--out", &out)],
    );
    (output, out)
}

fn read_report(out: &Path) -> (EvalReport, Vec<Value>) {
    let report: EvalReport =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let lines = read_jsonl(&out.join("trajectories.jsonl")).unwrap();
    (report, lines)
}

#[test]
fn eval_end_to_end_oracle_one_garbage_zero() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let index = dir.path().join("index.bin");
    cli::generate_small(&data);
    let o = rulegym(
        &["index"],
        &[
            ("--corpus", &data.join("articles.jsonl")),
            ("--out", &index),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let universe = load_universe(&data).unwrap();
    let questions: Vec<Question> = read_jsonl(&data.join("questions.jsonl")).unwrap();
    let retriever: Arc<dyn Retriever> = Arc::new(SearchIndex::load(&index).unwrap());
    let mut oracle = HashMap::new();
    for q in &questions {
        let t = replay(&universe, retriever.clone(), &SearchEnvConfig::default(), q).unwrap();
        let turns: Vec<String> = t
            .messages
            .iter()
            .filter(|m| m.role == "assistant")
            .map(|m| m.content.clone())
            .collect();
        oracle.insert(q.question.clone(), turns);
    }

    // (a) The oracle policy: every episode answers the gold set, F1 = EM = 1.
    let script = Arc::new(Script {
        policy: Policy::Oracle,
        oracle: oracle.clone(),
        requests: AtomicUsize::new(0),
        injected_failures: AtomicUsize::new(0),
        failed: Default::default(),
    });
    let url = serve(script.clone());
    let cache = dir.path().join("llm-cache");
    let cache_arg = cache.to_str().unwrap();
    let (o, out) = eval(
        dir.path(),
        &data,
        &index,
        &url,
        "oracle",
        &["--max-turns", "1000", "--cache", cache_arg],
    );
    let errors: Vec<String> = std::fs::read_to_string(out.join("trajectories.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|l| l["error"].as_str().map(str::to_owned))
        .collect();
    assert!(
        o.status.success(),
        "{}\n{errors:?}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (report, lines) = read_report(&out);
    assert_eq!(report.overall.n, questions.len());
    assert_eq!((report.overall.f1, report.overall.em), (1.0, 1.0));
    assert_eq!(report.overall.errors, 0);
    assert!(
        script.injected_failures.load(Ordering::Relaxed) > 0,
        "retries exercised"
    );
    assert_eq!(lines.len(), questions.len());
    for (line, q) in lines.iter().zip(&questions) {
        assert_eq!(line["id"], q.id.as_str(), "trajectories in question order");
        assert_eq!(line["f1"], 1.0);
        assert_eq!(line["end"], "answer");
        // The oracle searches exactly as the proof needs.
        assert_eq!(line["searches"], line["oracle_searches"]);
        assert_eq!(line["turns"], oracle[&q.question].len());
        let messages = line["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2 * oracle[&q.question].len());
        assert!(
            messages[1]["content"]
                .as_str()
                .unwrap()
                .ends_with("</search>")
                || oracle[&q.question].len() == 1
        );
    }
    let hops: Vec<usize> = report
        .by_hops
        .iter()
        .map(|g| g.key.parse().unwrap())
        .collect();
    assert!(
        hops.len() > 1 && hops.windows(2).all(|w| w[0] < w[1]),
        "{hops:?}"
    );
    assert_eq!(
        report.by_hops.iter().map(|g| g.n).sum::<usize>(),
        questions.len()
    );
    assert!(report.by_family.iter().all(|g| g.f1 == 1.0));
    assert!(
        report
            .by_hops
            .iter()
            .all(|g| g.searches == g.oracle_searches)
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    for svg in [
        "f1_by_hops.svg",
        "f1_by_difficulty.svg",
        "searches_by_hops.svg",
        "f1_by_family.svg",
    ] {
        let text = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(
            text.trim_start().starts_with("<svg") && text.trim_end().ends_with("</svg>"),
            "{svg}"
        );
        assert!(html.contains(&format!("<img src=\"{svg}\"")), "{svg} shown");
    }
    assert!(
        std::fs::read_to_string(out.join("searches_by_hops.svg"))
            .unwrap()
            .contains("Search scaling")
    );

    // The recorded exchanges replay offline: no endpoint (a closed port), the same bytes.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let (o, replayed) = eval(
        dir.path(),
        &data,
        &index,
        &closed,
        "oracle-replay",
        &["--max-turns", "1000", "--cache", cache_arg, "--replay-only"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read(replayed.join("trajectories.jsonl")).unwrap(),
        std::fs::read(out.join("trajectories.jsonl")).unwrap()
    );

    // (b) Garbage: wrong answers and tag-less turns until the cap; F1 = 0 everywhere.
    let script = Arc::new(Script {
        policy: Policy::Garbage,
        oracle: HashMap::new(),
        requests: AtomicUsize::new(0),
        injected_failures: AtomicUsize::new(0),
        failed: Default::default(),
    });
    let url = serve(script);
    let (o, out) = eval(
        dir.path(),
        &data,
        &index,
        &url,
        "garbage",
        &["--max-turns", "3"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (report, lines) = read_report(&out);
    assert_eq!(report.overall.n, questions.len());
    assert_eq!(
        (report.overall.f1, report.overall.em, report.overall.errors),
        (0.0, 0.0, 0)
    );
    let ends: std::collections::BTreeSet<&str> =
        lines.iter().map(|l| l["end"].as_str().unwrap()).collect();
    assert_eq!(ends, ["answer", "turn cap"].into_iter().collect());
    assert!(lines.iter().all(|l| l["turns"].as_u64().unwrap() <= 3));

    // (c) A dead endpoint: episodes record the error, the command fails and says so.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let (o, out) = eval(dir.path(), &data, &index, &dead, "dead", &["--limit", "3"]);
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("3 of 3 episodes failed"), "{stderr}");
    let (report, lines) = read_report(&out);
    assert_eq!(report.overall.errors, 3);
    assert!(
        lines
            .iter()
            .all(|l| l["end"] == "error" && l["error"].as_str().unwrap().contains("gave up"))
    );
}

#[test]
fn stop_strings_and_urls() {
    assert_eq!(
        restore_stop("<search> a", Some("stop"), Some("</search>")),
        "<search> a</search>"
    );
    assert_eq!(
        restore_stop("<think>x</think><answer> b", Some("stop"), None),
        "<think>x</think><answer> b</answer>"
    );
    assert_eq!(
        restore_stop("<search>a</search>", Some("stop"), None),
        "<search>a</search>"
    );
    assert_eq!(
        restore_stop("<answer> b", Some("length"), None),
        "<answer> b"
    );
    assert_eq!(restore_stop("no tags", Some("stop"), None), "no tags");
    assert_eq!(
        restore_stop("<search>q</search> <answer> z", Some("stop"), None),
        "<search>q</search> <answer> z</answer>"
    );
    assert_eq!(
        completions_url("http://h:1/v1/"),
        "http://h:1/v1/chat/completions"
    );
    assert_eq!(
        completions_url("http://h:1"),
        "http://h:1/v1/chat/completions"
    );
    assert_eq!(
        completions_url("https://x/api/chat/completions"),
        "https://x/api/chat/completions"
    );
}

//! `rulegym eval` end to end against a scripted OpenAI-compatible server started in the test:
//! the oracle policy (replies from the proof-derived oracle trajectories) scores F1 = 1, a garbage
//! policy scores 0, injected 429/503s are retried, a dead endpoint fails loudly.

use super::cli;
use rulegym::dataset::load_universe;
use rulegym::eval::{EvalReport, restore_stop};
use rulegym::io::read_jsonl;
use rulegym::llm::openai::completions_url;
use rulegym::question::Question;
use rulegym::retrieval::SearchIndex;
use rulegym::search::oracle::replay;
use rulegym::search::{Retriever, SearchEnvConfig};
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
    /// The last request body.
    last: std::sync::Mutex<Option<Value>>,
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
    *script.last.lock().unwrap() = Some(request.clone());
    assert_eq!(request["stop"], json!(["</search>", "</answer>"]));
    assert_eq!(request["model"], "scripted");
    let messages = request["messages"].as_array().unwrap();
    // An environment preset may open with a system message.
    let system = usize::from(messages[0]["role"] == "system");
    let prompt = messages[system]["content"].as_str().unwrap();
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
        system + 1 + 2 * turn,
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
            .filter(|m| m.role == rulegym::llm::Role::Assistant)
            .map(|m| m.content_str().to_owned())
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
        last: Default::default(),
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
        assert!(
            html.contains(&format!("<img class=\"figure\" src=\"{svg}\"")),
            "{svg} shown"
        );
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
        last: Default::default(),
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

    // (c) A dead endpoint: the command fails, says why (the first episode's error) and writes
    // no report of zeros that could be read as a model's score.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let (o, out) = eval(dir.path(), &data, &index, &dead, "dead", &["--limit", "3"]);
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("all 3 episodes failed against the endpoint; nothing was written")
            && stderr.contains("gave up"),
        "{stderr}"
    );
    assert!(!out.join("report.json").exists());
    assert!(!out.join("trajectories.jsonl").exists());
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

fn record(id: usize, difficulty: u32, f1: f64, searches: usize) -> rulegym::eval::EpisodeRecord {
    rulegym::eval::EpisodeRecord {
        id: format!("q{id}"),
        family: "hops".into(),
        hops: difficulty as usize,
        difficulty,
        split: rulegym::question::Split::Val,
        answers: vec!["Ann Lee".into()],
        messages: Vec::new(),
        f1,
        em: f1,
        precision: f1,
        recall: f1,
        token_f1: Some(f1),
        answer: Some("Ann Lee".into()),
        searches,
        oracle_searches: difficulty as usize,
        turns: searches + 1,
        gold_retrieved: true,
        end: "answer".into(),
        error: None,
    }
}

fn run_info(label: &str, people: usize) -> rulegym::eval::RunInfo {
    rulegym::eval::RunInfo {
        label: label.into(),
        temperature: 1.0,
        top_p: Some(1.0),
        max_tokens: 500,
        top_k: 3,
        end_on_invalid: true,
        max_action_tokens: Some(500),
        max_context_tokens: Some(32768),
        token_counter: "approx-chars/4".into(),
        universe_people: people,
        ..Default::default()
    }
}

/// A minimal JSON Schema check (type, const, required, properties, additionalProperties: false,
/// items, $ref to #/$defs): enough for rulegym's report schemas, strict on unknown fields.
fn check_schema(value: &Value, schema: &Value, root: &Value, path: &str) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").unwrap();
        return check_schema(value, &root["$defs"][name], root, path);
    }
    if let Some(c) = schema.get("const") {
        assert_eq!(value, c, "{path}");
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => panic!("bad type at {path}"),
        };
        let ok = types.iter().any(|t| match *t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "number" => value.is_number(),
            "integer" => value.is_u64() || value.is_i64(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            _ => false,
        });
        assert!(ok, "{path}: {value} is not {types:?}");
    }
    if let Some(obj) = value.as_object() {
        let props = schema["properties"].as_object();
        for req in schema["required"].as_array().into_iter().flatten() {
            assert!(
                obj.contains_key(req.as_str().unwrap()),
                "{path}: missing {req}"
            );
        }
        for (k, v) in obj {
            let sub = props.and_then(|p| p.get(k));
            match sub {
                Some(sub) => check_schema(v, sub, root, &format!("{path}.{k}")),
                None => assert!(
                    schema.get("additionalProperties") != Some(&Value::Bool(false)),
                    "{path}: {k} is not in the schema"
                ),
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), value.as_array()) {
        for (i, v) in arr.iter().enumerate() {
            check_schema(v, items, root, &format!("{path}[{i}]"));
        }
    }
}

/// Opens `page` in headless Chromium and returns the `data-figures-rendered` mark its script
/// sets once every image has loaded; `None` (with a loud SKIPPED line, a failure under CI) when
/// no chromium is installed (scripts/apt-packages.txt installs it).
fn rendered_in_chromium(page: &Path) -> Option<String> {
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::process::Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    let Some(browser) = browser else {
        super::skip::skip(
            "browser rendering check",
            "no chromium (apt-get install chromium)",
            None,
        );
        return None;
    };
    let profile = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--allow-file-access-from-files",
            "--virtual-time-budget=10000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mark = dom
        .split("data-figures-rendered=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("no render mark in the DOM:\n{dom}"));
    Some(mark.to_owned())
}

/// Standard errors by hand, the comparison over seeds and universe sizes, the versioned JSON
/// schemas, deterministic bytes, and every figure rendered by a real browser.
#[test]
fn eval_report_errors_comparison_schema_and_browser() {
    use rulegym::eval::{REPORT_SCHEMA_VERSION, compare, report, write_comparison, write_outputs};
    let dir = tempfile::tempdir().unwrap();
    // Run a: difficulty 1 -> F1 {1, 0, 1, 1}, difficulty 2 -> {0, 1}; searches 1 / 3.
    let a: Vec<_> = [(1, 1.0), (1, 0.0), (1, 1.0), (1, 1.0), (2, 0.0), (2, 1.0)]
        .iter()
        .enumerate()
        .map(|(i, &(d, f))| record(i, d, f, if d == 1 { 1 } else { 3 }))
        .collect();
    let ra = report(&a, "m", "http://x/v1", 20, run_info("a", 1029));
    assert_eq!(ra.schema_version, REPORT_SCHEMA_VERSION);
    // Overall F1 = 4/6; sample sd = sqrt(((1/3)^2 * 4 + (2/3)^2 * 2) / 5) = sqrt(4/15); SE = that / sqrt(6).
    assert!((ra.overall.f1 - 4.0 / 6.0).abs() < 1e-12);
    let se = (4.0f64 / 15.0).sqrt() / 6f64.sqrt();
    assert!(
        (ra.overall.f1_se - se).abs() < 1e-12,
        "{}",
        ra.overall.f1_se
    );
    assert_eq!(ra.overall.token_f1, Some(ra.overall.f1));
    let d1 = &ra.by_difficulty[0];
    assert_eq!((d1.key.as_str(), d1.n, d1.searches_se), ("1", 4, 0.0));
    // Runs b (same group, another seed) and c (a 10K universe).
    let b: Vec<_> = (0..6)
        .map(|i| record(i, 1 + (i as u32 % 2), 0.5, 2))
        .collect();
    let rb = report(&b, "m", "http://x/v1", 20, run_info("b", 1029));
    let rc = report(&b, "m", "http://x/v1", 20, run_info("c", 10344));
    let runs = [
        ("qwen".into(), ra.clone()),
        ("qwen".into(), rb.clone()),
        ("llama".into(), rc.clone()),
    ];
    let comparison = compare(&runs, Some("llama")).unwrap();
    assert!(compare(&runs, None).unwrap().gaps.is_empty());
    let err = compare(&runs, Some("phi")).unwrap_err().to_string();
    assert!(err.contains("groups: qwen, llama"), "{err}");
    // The gap qwen - llama: run means (4/6, 1/2) against 1/2; SE from qwen's seeds and
    // llama's questions (one run).
    let gap = &comparison.gaps[0];
    assert_eq!(
        (gap.group.as_str(), gap.baseline.as_str()),
        ("qwen", "llama")
    );
    assert!((gap.overall.f1_gap - ((4.0 / 6.0 + 0.5) / 2.0 - 0.5)).abs() < 1e-12);
    let (qwen, llama) = (&comparison.groups[0].overall, &comparison.groups[1].overall);
    assert!(
        (gap.overall.f1_gap_se - (qwen.f1_se_seeds.powi(2) + llama.f1_se_questions.powi(2)).sqrt())
            .abs()
            < 1e-12
    );
    assert_eq!(gap.by_difficulty.len(), 2);
    let g = &comparison.groups[0];
    assert_eq!(
        (g.group.as_str(), g.overall.runs, g.overall.n),
        ("qwen", 2, 12)
    );
    // Mean of run means (4/6 and 1/2), SE over seeds = |difference| / 2.
    assert!((g.overall.f1 - (4.0 / 6.0 + 0.5) / 2.0).abs() < 1e-12);
    assert!((g.overall.f1_se_seeds - (4.0 / 6.0 - 0.5) / 2.0).abs() < 1e-12);
    // Pooled over the 12 questions: values {1,0,1,1,0,1} and six 0.5s.
    let pooled: Vec<f64> = a.iter().chain(&b).map(|r| r.f1).collect();
    let (_, pooled_se) = rulegym::eval::mean_se(&pooled);
    assert!((g.overall.f1_se_questions - pooled_se).abs() < 1e-12);
    let sizes: Vec<usize> = comparison
        .by_universe
        .iter()
        .map(|u| u.universe_people)
        .collect();
    assert_eq!(sizes, [1029, 10344]);
    assert!(compare(&[], None).is_err());

    // Outputs, twice: the same bytes.
    let out = dir.path().join("run-a");
    write_outputs(&out, &a, &ra).unwrap();
    let cmp = dir.path().join("cmp");
    write_comparison(&cmp, &comparison).unwrap();
    let again = dir.path().join("cmp2");
    write_comparison(&again, &comparison).unwrap();
    for f in [
        "comparison.json",
        "search_scaling.svg",
        "universe_size.svg",
        "comparison.html",
    ] {
        assert_eq!(
            std::fs::read(cmp.join(f)).unwrap(),
            std::fs::read(again.join(f)).unwrap(),
            "{f} deterministic"
        );
    }
    // The versioned schemas accept exactly what is written.
    let schemas = crate::repo().join("schemas");
    for (file, schema) in [
        (out.join("report.json"), "eval-report.schema.json"),
        (cmp.join("comparison.json"), "eval-comparison.schema.json"),
    ] {
        let value: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let schema: Value =
            serde_json::from_slice(&std::fs::read(schemas.join(schema)).unwrap()).unwrap();
        assert_eq!(
            schema["properties"]["schema_version"]["const"],
            json!(REPORT_SCHEMA_VERSION)
        );
        check_schema(&value, &schema, &schema, "$");
    }
    let svg = std::fs::read_to_string(cmp.join("search_scaling.svg")).unwrap();
    assert!(
        svg.contains("qwen (2 runs)") && svg.contains("llama (1 run)"),
        "legend"
    );
    assert!(svg.contains("<polygon"), "error bands drawn");
    let svg = std::fs::read_to_string(cmp.join("universe_size.svg")).unwrap();
    assert!(svg.contains("1029 people") && svg.contains("10344 people"));

    // The CLI writes the same comparison from the report files; bad specs are errors.
    let run_b = dir.path().join("run-b");
    write_outputs(&run_b, &b, &rb).unwrap();
    let run_c = dir.path().join("run-c");
    write_outputs(&run_c, &b, &rc).unwrap();
    let cli_cmp = dir.path().join("cli-cmp");
    let arg = |g: &str, d: &Path| format!("{g}={}", d.display());
    let o = rulegym(
        &[
            "eval-compare",
            "--run",
            &arg("qwen", &out),
            "--run",
            &arg("qwen", &run_b),
            "--run",
            &arg("llama", &run_c),
            "--baseline",
            "llama",
        ],
        &[("--out", &cli_cmp)],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("qwen: 2 run(s)"), "{stdout}");
    assert!(stdout.contains("qwen - llama: F1 gap +0.083"), "{stdout}");
    for f in [
        "comparison.json",
        "search_scaling.svg",
        "universe_size.svg",
        "comparison.html",
    ] {
        assert_eq!(
            std::fs::read(cli_cmp.join(f)).unwrap(),
            std::fs::read(cmp.join(f)).unwrap(),
            "{f}: CLI and library agree"
        );
    }
    for (spec, expect) in [
        ("no-equals-sign".to_owned(), "expected GROUP=DIR"),
        (format!("={}", out.display()), "the group name is empty"),
        (
            "g=/nonexistent/run".to_owned(),
            "reading /nonexistent/run/report.json",
        ),
    ] {
        let o = rulegym(&["eval-compare", "--run", &spec], &[("--out", &cli_cmp)]);
        assert!(!o.status.success(), "{spec}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(expect), "{spec}: {err}");
    }
    // tools play: a preset without tool-use settings is an error naming those that have some.
    let o = rulegym(
        &[
            "tools",
            "play",
            "--preset",
            "phantomenvs",
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ],
        &[
            ("--tasks", &dir.path().join("none.jsonl")),
            ("--out", &dir.path().join("play")),
        ],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("presets with some: synthagent"), "{err}");

    // A real browser renders every figure of both pages.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let figures = html.matches("<img class=\"figure\"").count();
    assert_eq!(figures, 5);
    if let Some(mark) = rendered_in_chromium(&out.join("report.html")) {
        assert_eq!(mark, "5/5");
        assert_eq!(
            rendered_in_chromium(&cmp.join("comparison.html")).unwrap(),
            "2/2"
        );
        // A broken figure is caught: the check is not vacuous.
        std::fs::write(cmp.join("universe_size.svg"), "not an svg").unwrap();
        assert_eq!(
            rendered_in_chromium(&cmp.join("comparison.html")).unwrap(),
            "1/2"
        );
    }
}

/// `eval --preset phantomenvs --sampling-preset llama`: the paper's system message and prompt
/// reach the endpoint with the family's temperature and top-p, the per-turn cap as max_tokens,
/// the 20-turn evaluation cap and the 32,768-token budget; a tag-less turn ends the episode;
/// --top-p overrides the family; token F1 is reported; out-of-range values and unknown presets
/// are errors naming the valid choices.
#[test]
fn eval_presets_sampling_and_bad_input() {
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
    let script = Arc::new(Script {
        policy: Policy::Garbage,
        oracle: HashMap::new(),
        requests: AtomicUsize::new(0),
        injected_failures: AtomicUsize::new(0),
        failed: Default::default(),
        last: Default::default(),
    });
    let url = serve(script.clone());
    let (o, out) = eval(
        dir.path(),
        &data,
        &index,
        &url,
        "preset",
        &[
            "--preset",
            "phantomenvs",
            "--sampling-preset",
            "llama",
            "--token-f1",
            "--limit",
            "6",
            "--label",
            "llama-run",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let request = script.last.lock().unwrap().clone().unwrap();
    assert_eq!(request["temperature"], 0.6);
    assert_eq!(request["top_p"], 0.9);
    assert_eq!(request["max_tokens"], 500);
    assert_eq!(request["messages"][0]["role"], "system");
    assert!(
        request["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("helpful and harmless")
    );
    let (report, lines) = read_report(&out);
    assert_eq!(report.max_turns, 20);
    assert_eq!(report.run.label, "llama-run");
    assert_eq!(report.run.env_preset.as_deref(), Some("phantomenvs"));
    assert_eq!(report.run.stage.as_deref(), Some("eval"));
    assert_eq!(report.run.max_context_tokens, Some(32768));
    assert_eq!(report.run.token_counter, "approx-chars/4");
    assert!(report.run.universe_people > 0);
    assert_eq!(report.overall.token_f1, Some(0.0));
    assert_eq!(lines.len(), 6);
    for l in &lines {
        // Garbage answers wrongly or writes no tags; without tags the preset ends the episode
        // at once (the default would retry until the turn cap).
        assert_eq!(l["turns"], 1, "{l}");
        assert!(l["token_f1"].is_number());
    }
    // --top-p overrides the family's.
    let (o, _) = eval(
        dir.path(),
        &data,
        &index,
        &url,
        "top-p",
        &["--sampling-preset", "phi", "--top-p", "0.5", "--limit", "1"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let request = script.last.lock().unwrap().clone().unwrap();
    assert_eq!(
        (request["temperature"].as_f64(), request["top_p"].as_f64()),
        (Some(0.8), Some(0.5))
    );
    assert_eq!(request["max_tokens"], 1024, "no preset: the old default");
    assert_eq!(
        request["messages"][0]["role"], "user",
        "no preset: no system message"
    );

    for (args, expect) in [
        (
            vec!["--sampling-preset", "gpt"],
            "unknown sampling preset \"gpt\" (valid: llama, phi, qwen)",
        ),
        (vec!["--top-p", "1.5"], "top_p must be in (0, 1], got 1.5"),
        (vec!["--top-p", "0"], "top_p must be in (0, 1]"),
        (
            vec!["--temperature", "3"],
            "temperature must be in [0, 2], got 3",
        ),
        (
            vec!["--max-tokens", "0"],
            "max_tokens (per turn) must be at least 1",
        ),
        (vec!["--preset", "nope"], "valid: phantomenvs, synthagent"),
        (
            vec!["--preset", "phantomenvs", "--stage", "dev"],
            "invalid value 'dev' for '--stage <STAGE>'",
        ),
        (
            vec!["--max-context-tokens", "0"],
            "max_context_tokens must be in 1..=",
        ),
    ] {
        let (o, _) = eval(dir.path(), &data, &index, &url, "bad", &args);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

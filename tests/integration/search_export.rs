//! `rulegym export`: verl and SkyRL rows of the search tasks, read back from parquet (in Rust and,
//! when the test venv exists, with pyarrow) and JSONL.

use super::cli;
use rulegym::export::parquet::read_parquet_json;
use rulegym::export::search::{row_json, rows};
use rulegym::export::{ExportFormat, ExportOptions, export};
use rulegym::io::read_jsonl;
use rulegym::question::Question;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn generate(dir: &Path) -> Vec<Question> {
    cli::generate_small(dir);
    read_jsonl(&dir.join("questions.jsonl")).unwrap()
}

/// pyarrow (the trainers' parquet reader; `datasets` reads parquet with it) reads `path` as
/// `rows`. Skipped loudly without the test venv, and a failure when `CI` is set.
fn assert_pyarrow_reads(path: &Path, rows: &[Value], name: &str) {
    let Ok(python) = std::env::var("RULEGYM_TEST_PYTHON") else {
        super::skip::skip(
            &format!("pyarrow read-back of {name} parquet"),
            "RULEGYM_TEST_PYTHON is unset (scripts/test.sh sets it)",
            None,
        );
        return;
    };
    let script = "import sys, json, pyarrow.parquet as pq\n\
                  print(json.dumps(pq.read_table(sys.argv[1]).to_pylist()))";
    let out = Command::new(python)
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(read, rows, "{name}: pyarrow reads the same rows");
}

fn check_row(row: &Value, q: &Question, i: usize, format: ExportFormat) {
    assert_eq!(row["data_source"], "rulegym_search");
    let prompt = row["prompt"].as_array().unwrap();
    assert_eq!(prompt.len(), 1);
    assert_eq!(prompt[0]["role"], "user");
    let content = prompt[0]["content"].as_str().unwrap();
    assert!(
        content.ends_with(&format!("Question: {}\n", q.question)),
        "{content}"
    );
    assert!(content.starts_with("Answer the given question."));
    let (spec, label, value) = match format {
        ExportFormat::Verl => ("reward_model", "ability", "fact-reasoning"),
        ExportFormat::Skyrl => ("reward_spec", "env_class", "rulegym-search-v1"),
        ExportFormat::Trl => panic!("TRL rows are flat: see export_trl_rows_read_back"),
    };
    assert_eq!(row[label], value);
    let key = if format == ExportFormat::Verl {
        "style"
    } else {
        "method"
    };
    assert_eq!(row[spec][key], "rule");
    let target: Vec<String> =
        serde_json::from_value(row[spec]["ground_truth"]["target"].clone()).unwrap();
    assert_eq!(target, q.answers);
    let extra = &row["extra_info"];
    assert_eq!(extra["index"], i);
    assert_eq!(extra["id"], q.id.as_str());
    assert_eq!(extra["split"], q.split.as_str());
    assert_eq!(extra["family"], q.family.name());
    assert_eq!(extra["hops"], q.hops);
    assert_eq!(extra["difficulty"], q.difficulty);
    assert_eq!(extra["question"], q.question.as_str());
}

#[test]
fn export_verl_and_skyrl_rows_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let questions = generate(&data);
    assert!(questions.len() > 50, "{} questions", questions.len());
    assert!(
        questions.iter().any(|q| q.answers.len() > 1),
        "multi-answer rows covered"
    );
    for format in [ExportFormat::Verl, ExportFormat::Skyrl] {
        let name = format!("{format:?}").to_lowercase();
        // The CLI records the dataset's index (absolute) in every row, for SkyRL's env.
        let index = data.join("index.idx");
        assert!(index.is_file(), "generate writes the dataset's index");
        let options = ExportOptions {
            format,
            index_path: std::path::absolute(&index)
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            ..ExportOptions::default()
        };
        // Library: parquet and JSONL hold the same rows.
        let pq = dir.path().join(format!("{name}.parquet"));
        let jl = dir.path().join(format!("{name}.jsonl"));
        assert_eq!(export(&pq, &questions, &options).unwrap(), questions.len());
        export(&jl, &questions, &options).unwrap();
        let from_parquet = read_parquet_json(&pq).unwrap();
        let from_jsonl: Vec<Value> = std::fs::read_to_string(&jl)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(from_parquet.len(), questions.len());
        assert_eq!(from_parquet, from_jsonl, "{name}: parquet and JSONL agree");
        let expected: Vec<Value> = rows(&questions, &options)
            .unwrap()
            .iter()
            .map(|r| row_json(r, &options))
            .collect();
        assert_eq!(from_parquet, expected);
        for (i, (row, q)) in from_parquet.iter().zip(&questions).enumerate() {
            check_row(row, q, i, format);
        }
        // CLI: same bytes as the library; --split filters.
        let cli_out = dir.path().join(format!("cli-{name}.parquet"));
        cli::run_ok(
            cli::rulegym()
                .args(["export", "--format", &name, "--dataset"])
                .arg(&data)
                .arg("--out")
                .arg(&cli_out),
        );
        assert_eq!(
            std::fs::read(&cli_out).unwrap(),
            std::fs::read(&pq).unwrap()
        );
        let val = dir.path().join(format!("val-{name}.jsonl"));
        cli::run_ok(
            cli::rulegym()
                .args(["export", "--split", "val", "--format", &name, "--dataset"])
                .arg(&data)
                .arg("--out")
                .arg(&val),
        );
        let n_val = questions
            .iter()
            .filter(|q| q.split == rulegym::question::Split::Val)
            .count();
        let text = std::fs::read_to_string(&val).unwrap();
        assert_eq!(text.lines().count(), n_val);
        assert!(text.lines().all(|l| l.contains("\"split\":\"val\"")));
        // pyarrow reads the file as the trainers do.
        assert_pyarrow_reads(&pq, &from_jsonl, &name);
    }
    // Bad format: an error naming it and the valid ones.
    let out = cli::run(
        cli::rulegym()
            .args(["export", "--format", "openrlhf", "--dataset"])
            .arg(&data)
            .arg("--out")
            .arg(dir.path().join("x.parquet")),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'openrlhf'") && err.contains("[possible values: verl, skyrl, trl]"),
        "{err}"
    );
}

/// TRL rows: flat columns (`prompt`, `answers`, the question's metadata, `environment`), the
/// same rows from parquet and JSONL, the CLI's bytes equal to the library's, and pyarrow reads
/// the parquet file (TRL loads it through `datasets`, which reads parquet with pyarrow).
#[test]
fn export_trl_rows_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let questions = generate(&data);
    let index = std::path::absolute(data.join("index.idx")).unwrap();
    let options = ExportOptions {
        format: ExportFormat::Trl,
        index_path: index.to_string_lossy().into_owned(),
        ..ExportOptions::default()
    };
    let pq = dir.path().join("trl.parquet");
    let jl = dir.path().join("trl.jsonl");
    assert_eq!(export(&pq, &questions, &options).unwrap(), questions.len());
    export(&jl, &questions, &options).unwrap();
    let from_parquet = read_parquet_json(&pq).unwrap();
    let from_jsonl: Vec<Value> = read_jsonl(&jl).unwrap();
    assert_eq!(from_parquet, from_jsonl, "parquet and JSONL agree");
    for (row, q) in from_jsonl.iter().zip(&questions) {
        let prompt = row["prompt"].as_array().unwrap();
        assert_eq!(prompt.len(), 1);
        assert_eq!(prompt[0]["role"], "user");
        let content = prompt[0]["content"].as_str().unwrap();
        assert!(content.ends_with(&format!("Question: {}\n", q.question)));
        let answers: Vec<String> = serde_json::from_value(row["answers"].clone()).unwrap();
        assert_eq!(answers, q.answers);
        assert_eq!(row["id"], q.id.as_str());
        assert_eq!(row["question"], q.question.as_str());
        assert_eq!(row["split"], q.split.as_str());
        assert_eq!(row["family"], q.family.name());
        assert_eq!(row["hops"], q.hops);
        assert_eq!(row["difficulty"], q.difficulty);
        assert_eq!(row["kind"], q.kind.as_str());
        assert_eq!(row["index_path"], options.index_path.as_str());
        assert_eq!(row["environment"], "rulegym_search");
        assert!(
            row.get("env_config").is_none(),
            "default config: no env_config"
        );
        assert!(row.get("extra_info").is_none(), "TRL rows are flat");
    }
    for (name, file) in [("jsonl", &jl), ("parquet", &pq)] {
        let out = dir.path().join(format!("cli.{name}"));
        cli::run_ok(
            cli::rulegym()
                .args(["export", "--format", "trl", "--dataset"])
                .arg(&data)
                .arg("--out")
                .arg(&out),
        );
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(file).unwrap());
    }
    // A preset's configuration travels in env_config, in JSONL and parquet alike.
    let preset = |name: &str| {
        let out = dir.path().join(name);
        cli::run_ok(
            cli::rulegym()
                .args(["export", "--format", "trl", "--preset", "phantomenvs"])
                .arg("--dataset")
                .arg(&data)
                .arg("--out")
                .arg(&out),
        );
        out
    };
    let rows: Vec<Value> = read_jsonl(&preset("preset.jsonl")).unwrap();
    assert_eq!(rows[0]["prompt"][0]["role"], "system");
    let config: Value = serde_json::from_str(rows[0]["env_config"].as_str().unwrap()).unwrap();
    assert_eq!(config["max_turns"], 10);
    assert_eq!(read_parquet_json(&preset("preset.parquet")).unwrap(), rows);
    assert_pyarrow_reads(&pq, &from_jsonl, "trl");
}

/// `export --preset phantomenvs` carries the paper's system message and prompt; `--prompt` and
/// `--system-prompt` replace them; an unknown preset or stage is an error naming the valid ones;
/// a preset without search settings says which presets have some.
#[test]
fn export_preset_and_prompt_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let questions = generate(&data);
    let export_with = |name: &str, extra: &[&str]| -> Vec<Value> {
        let out = dir.path().join(format!("{name}.jsonl"));
        cli::run_ok(
            cli::rulegym()
                .args(["export", "--format", "skyrl", "--dataset"])
                .arg(&data)
                .arg("--out")
                .arg(&out)
                .args(extra),
        );
        read_jsonl(&out).unwrap()
    };
    let plain = export_with("plain", &[]);
    assert_eq!(
        plain[0]["prompt"].as_array().unwrap().len(),
        1,
        "no system message by default"
    );
    let pe = export_with("pe", &["--preset", "phantomenvs"]);
    assert_eq!(pe.len(), questions.len());
    let prompt = pe[0]["prompt"].as_array().unwrap();
    assert_eq!(prompt[0]["role"], "system");
    assert!(
        prompt[0]["content"]
            .as_str()
            .unwrap()
            .contains("helpful and harmless")
    );
    let user = prompt[1]["content"].as_str().unwrap();
    assert!(user.contains("sub-questions"));
    assert!(user.contains(&questions[0].question));
    let pe_eval = export_with("pe-eval", &["--preset", "phantomenvs", "--stage", "eval"]);
    assert_eq!(
        pe_eval[0]["prompt"], pe[0]["prompt"],
        "same prompt at both stages"
    );
    // The environment configuration travels with the rows (rulegym.skyrl.SearchEnv reads it):
    // the termination rule, the stage's turn cap and budgets; default rows have no such field.
    assert!(plain[0]["extra_info"].get("env_config").is_none());
    for (rows, turns, context) in [(&pe, 10, 8192), (&pe_eval, 20, 32768)] {
        let config: Value =
            serde_json::from_str(rows[0]["extra_info"]["env_config"].as_str().unwrap()).unwrap();
        assert_eq!(config["end_on_invalid"], true);
        assert_eq!(config["max_turns"], turns);
        assert_eq!(config["max_context_tokens"], context);
        assert_eq!(config["max_action_tokens"], 500);
    }
    // The parquet file holds the same rows (the schema gains extra_info.env_config).
    let pq = dir.path().join("pe.parquet");
    cli::run_ok(
        cli::rulegym()
            .args([
                "export",
                "--format",
                "skyrl",
                "--preset",
                "phantomenvs",
                "--dataset",
            ])
            .arg(&data)
            .arg("--out")
            .arg(&pq),
    );
    assert_eq!(read_parquet_json(&pq).unwrap(), pe);

    let prompt_file = dir.path().join("prompt.txt");
    std::fs::write(&prompt_file, "Q: {question}\nA:").unwrap();
    let system_file = dir.path().join("system.txt");
    std::fs::write(&system_file, "Be brief.").unwrap();
    let custom = export_with(
        "custom",
        &[
            "--preset",
            "phantomenvs",
            "--prompt",
            prompt_file.to_str().unwrap(),
            "--system-prompt",
            system_file.to_str().unwrap(),
        ],
    );
    let prompt = custom[0]["prompt"].as_array().unwrap();
    assert_eq!(prompt[0]["content"], "Be brief.");
    assert_eq!(
        prompt[1]["content"].as_str().unwrap(),
        format!("Q: {}\nA:", questions[0].question)
    );

    for (args, expect) in [
        (
            vec!["--preset", "phantom"],
            "unknown environment preset \"phantom\" (valid: phantomenvs, synthagent)",
        ),
        (
            vec!["--preset", "phantomenvs", "--stage", "test"],
            "[possible values: train, eval]",
        ),
        (
            vec!["--preset", "synthagent"],
            "has no search-environment settings (presets with some: phantomenvs)",
        ),
    ] {
        let out = cli::run(
            cli::rulegym()
                .args(["export", "--format", "verl", "--dataset"])
                .arg(&data)
                .arg("--out")
                .arg(dir.path().join("bad.jsonl"))
                .args(&args),
        );
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    let bad_prompt = dir.path().join("bad-prompt.txt");
    std::fs::write(&bad_prompt, "no placeholder").unwrap();
    let out = cli::run(
        cli::rulegym()
            .args(["export", "--format", "verl", "--dataset"])
            .arg(&data)
            .arg("--out")
            .arg(dir.path().join("bad.jsonl"))
            .arg("--prompt")
            .arg(&bad_prompt),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("{question}"));
}

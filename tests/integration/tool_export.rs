//! `rulegym export --tasks`: verl and SkyRL rows of tool-use tasks read back from parquet and
//! JSONL, verl's tool and interaction configs parsed as YAML (tool schemas equal the tasks'),
//! prompts equal the environment's, and the bytes are deterministic.

use rulegym::env::Environment;
use rulegym::export::ExportFormat;
use rulegym::export::parquet::read_parquet_json;
use rulegym::export::tooluse::{
    ExportedTool, INTERACTION_NAME, SKYRL_TOOL_ENV, ToolExportOptions, VERL_INTERACTION_CLASS,
    VERL_TOOL_AGENT, VERL_TOOL_AGENT_CLASS, VERL_TOOL_CLASS, agent_loop_config_path, export_tasks,
    interaction_config_path, tool_config_path, tool_rows, verl_visible_schema,
};
use rulegym::tooluse::env::{Protocol, ToolEnv, ToolEnvConfig};
use rulegym::tooluse::rubric::{RubricScorer, ScoreConfig};
use rulegym::tooluse::task::{Task, ValidateOptions, load_tasks};
use rulegym::tooluse::user::RuleUser;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// `rulegym ARGS` run to success (`cli::run_ok`): its stdout.
fn cli(args: &[&str]) -> String {
    String::from_utf8(super::cli::run_ok(super::cli::rulegym().args(args)).stdout).unwrap()
}

/// A universe and `count` generated tasks under `dir`; returns the task file.
fn tasks_file(dir: &Path, count: usize) -> std::path::PathBuf {
    let universe = dir.join("u");
    let tasks = dir.join("tasks.jsonl");
    let (u, t) = (universe.to_str().unwrap(), tasks.to_str().unwrap());
    cli(&[
        "generate",
        "--quiet",
        "--num-family-trees",
        "6",
        "--seed",
        "5",
        "--out",
        u,
    ]);
    cli(&[
        "tools",
        "generate",
        "--universe",
        u,
        "--count",
        &count.to_string(),
        "--out",
        t,
    ]);
    tasks
}

fn yaml(path: &Path) -> Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The prompt a fresh environment of `task` starts with under `protocol`.
fn env_prompt(task: &Task, protocol: Protocol, scorer: &Arc<RubricScorer>) -> Value {
    let world = Arc::new(task.clone().compile(ValidateOptions::default()).unwrap());
    let config = ToolEnvConfig {
        protocol,
        ..ToolEnvConfig::default()
    };
    let user = Box::new(RuleUser::new(task));
    let mut env = ToolEnv::new(world, None, user, scorer.clone(), config);
    serde_json::to_value(env.reset().unwrap()).unwrap()
}

#[test]
fn verl_and_skyrl_task_rows_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = tasks_file(dir.path(), 12);
    let tasks = load_tasks(&file, ValidateOptions::default()).unwrap();
    assert_eq!(tasks.len(), 12);
    let scorer = Arc::new(RubricScorer::new(ScoreConfig::default()).unwrap());
    let names: Vec<&str> = tasks[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.len() >= 5, "{names:?}");

    // verl, through the CLI.
    let out = dir.path().join("verl/train.parquet");
    let printed = cli(&[
        "export",
        "--tasks",
        file.to_str().unwrap(),
        "--format",
        "verl",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(printed.contains("wrote 12 verl rows"), "{printed}");
    let rows = read_parquet_json(&out).unwrap();
    assert_eq!(rows.len(), tasks.len());
    for (i, (row, task)) in rows.iter().zip(&tasks).enumerate() {
        assert_eq!(row["data_source"], "rulegym_tools");
        assert_eq!(row["ability"], "tool-use");
        assert_eq!(row["agent_name"], VERL_TOOL_AGENT);
        assert_eq!(row["prompt"], env_prompt(task, Protocol::OpenAi, &scorer));
        assert_eq!(row["prompt"][1]["content"], task.instruction.as_str());
        assert!(
            !row["prompt"][0]["content"]
                .as_str()
                .unwrap()
                .contains("<tools>"),
            "verl renders the tools through its chat template"
        );
        assert_eq!(row["reward_model"]["style"], "rule");
        assert_eq!(
            row["reward_model"]["ground_truth"]["task_id"],
            task.id.as_str()
        );
        let extra = &row["extra_info"];
        assert_eq!(extra["index"], i);
        assert_eq!(extra["split"], "train");
        assert_eq!(extra["id"], task.id.as_str());
        let kwargs = extra["tools_kwargs"].as_object().unwrap();
        assert_eq!(kwargs.len(), names.len());
        for name in &names {
            assert_eq!(
                kwargs[*name]["create_kwargs"]["task_id"],
                task.id.as_str(),
                "{name}"
            );
        }
        let interaction = &extra["interaction_kwargs"];
        assert_eq!(interaction["name"], INTERACTION_NAME);
        assert_eq!(interaction["task_id"], task.id.as_str());
        let back = Task::from_json(interaction["task"].as_str().unwrap()).unwrap();
        assert_eq!(&back, task, "the row rebuilds the task exactly");
    }

    // The tool config lists every tool once, with the task's OpenAI schema in the form verl
    // keeps (constraints folded into descriptions).
    let tools = yaml(&tool_config_path(&out));
    let entries = tools["tools"].as_array().unwrap();
    assert_eq!(entries.len(), names.len());
    for (entry, tool) in entries.iter().zip(&tasks[0].tools) {
        assert_eq!(entry["class_name"], VERL_TOOL_CLASS);
        assert_eq!(entry["config"]["type"], "native");
        assert_eq!(
            entry["tool_schema"],
            verl_visible_schema(&tool.openai_schema())
        );
    }
    for task in &tasks {
        for tool in &task.tools {
            assert!(
                entries
                    .iter()
                    .any(|e| e["tool_schema"] == verl_visible_schema(&tool.openai_schema()))
            );
        }
    }
    let agent_loop = yaml(&agent_loop_config_path(&out));
    assert_eq!(agent_loop[0]["name"], VERL_TOOL_AGENT);
    assert_eq!(agent_loop[0]["_target_"], VERL_TOOL_AGENT_CLASS);
    let interaction = yaml(&interaction_config_path(&out));
    let entry = &interaction["interaction"][0];
    assert_eq!(entry["name"], INTERACTION_NAME);
    assert_eq!(entry["class_name"], VERL_INTERACTION_CLASS);
    assert_eq!(entry["config"]["max_turns"], 16);

    // JSONL holds the same rows as the parquet file.
    let jsonl = dir.path().join("verl/train.jsonl");
    let options = ToolExportOptions::default();
    export_tasks(&jsonl, &tasks, &options).unwrap();
    let lines: Vec<Value> = rulegym::io::read_jsonl(&jsonl).unwrap();
    assert_eq!(lines, rows);

    // SkyRL: the Hermes prompt, the env id rulegym.skyrl registers, the task in extra_info.
    let out = dir.path().join("skyrl.parquet");
    let options = ToolExportOptions {
        format: ExportFormat::Skyrl,
        ..ToolExportOptions::default()
    };
    let files = export_tasks(&out, &tasks, &options).unwrap();
    assert_eq!(files, vec![out.clone()], "no YAML for SkyRL");
    let rows = read_parquet_json(&out).unwrap();
    for (i, (row, task)) in rows.iter().zip(&tasks).enumerate() {
        assert_eq!(row["env_class"], SKYRL_TOOL_ENV);
        assert_eq!(row["reward_spec"]["method"], "rule");
        assert_eq!(
            row["reward_spec"]["ground_truth"]["task_id"],
            task.id.as_str()
        );
        assert_eq!(row["prompt"], env_prompt(task, Protocol::Hermes, &scorer));
        assert_eq!(row["extra_info"]["index"], i);
        let back = Task::from_json(row["extra_info"]["task"].as_str().unwrap()).unwrap();
        assert_eq!(&back, task);
    }
}

#[test]
fn task_export_is_deterministic_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let file = tasks_file(dir.path(), 5);
    let tasks = load_tasks(&file, ValidateOptions::default()).unwrap();
    let options = ToolExportOptions::default();
    let read = |p: &Path| std::fs::read(p).unwrap();
    let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    let fa = export_tasks(&a, &tasks, &options).unwrap();
    let fb = export_tasks(&b, &tasks, &options).unwrap();
    assert_eq!(
        fa.len(),
        4,
        "rows, tool, interaction and agent loop configs"
    );
    for (x, y) in fa.iter().zip(&fb) {
        assert_eq!(read(x), read(y), "{} vs {}", x.display(), y.display());
    }
    // No temporary files left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // One tool name with two schemas (LLM-made tasks often bring two different `send_email`s):
    // see `two_schemas_of_one_tool_name_export_as_two_tools`.
    assert!(tool_rows(&[], &options).is_err());

    // Bad input through the CLI: an error message, not a panic.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"id\": \"x\"}\n").unwrap();
    let out = super::cli::run(
        super::cli::rulegym()
            .args([
                "export",
                "--tasks",
                bad.to_str().unwrap(),
                "--format",
                "verl",
            ])
            .args(["--out", dir.path().join("bad.parquet").to_str().unwrap()]),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.jsonl") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

#[test]
fn two_schemas_of_one_tool_name_export_as_two_tools() {
    let dir = tempfile::tempdir().unwrap();
    let file = tasks_file(dir.path(), 3);
    let tasks = load_tasks(&file, ValidateOptions::default()).unwrap();
    // Task b's first tool has the name of a's and another schema; task c lacks a's last tool.
    let a = tasks[0].clone();
    let mut b = tasks[1].clone();
    b.id = "b-task".into();
    b.tools[0].description.push_str(" (another service)");
    let mut c = tasks[2].clone();
    c.id = "c-task".into();
    let name = a.tools[0].name.clone();
    c.tools.pop();
    c.validate(ValidateOptions::default()).unwrap();
    let mixed = vec![a.clone(), b.clone(), c.clone()];
    let options = ToolExportOptions::default();
    let export = tool_rows(&mixed, &options).unwrap();

    let variants: Vec<&ExportedTool> = export.tools.iter().filter(|t| t.tool == name).collect();
    assert_eq!(variants.len(), 2);
    for (variant, task) in variants.iter().zip([&a, &b]) {
        assert!(variant.renamed());
        let (stem, hash) = variant.name.split_once("__").unwrap();
        assert_eq!(stem, name);
        assert_eq!(hash.len(), 8);
        let mut schema = task.tools[0].openai_schema();
        schema["function"]["name"] = variant.name.clone().into();
        assert_eq!(variant.schema, schema);
    }
    assert_ne!(variants[0].name, variants[1].name);
    // Names without a conflict are kept.
    for tool in export.tools.iter().filter(|t| t.tool != name) {
        assert_eq!(tool.name, tool.tool);
        assert!(!tool.renamed());
    }
    assert_eq!(export.tools.len(), a.tools.len() + 1);

    let out = dir.path().join("mixed.parquet");
    export_tasks(&out, &mixed, &options).unwrap();
    let rows = read_parquet_json(&out).unwrap();
    let entries = yaml(&tool_config_path(&out))["tools"]
        .as_array()
        .unwrap()
        .clone();
    let schemas: Vec<Value> = entries.iter().map(|e| e["tool_schema"].clone()).collect();
    assert_eq!(
        schemas,
        export
            .tools
            .iter()
            .map(|t| verl_visible_schema(&t.schema))
            .collect::<Vec<_>>()
    );
    for (row, task) in rows.iter().zip(&mixed) {
        let kwargs = row["extra_info"]["tools_kwargs"].as_object().unwrap();
        assert_eq!(kwargs.len(), export.tools.len());
        for tool in &export.tools {
            let create = &kwargs[&tool.name]["create_kwargs"];
            assert_eq!(create["task_id"], task.id.as_str());
            let own = task.tools.iter().any(|t| {
                let mut s = t.openai_schema();
                s["function"]["name"] = tool.name.clone().into();
                s == tool.schema
            });
            match (tool.renamed(), own) {
                (true, true) => assert_eq!(create["tool"], name.as_str()),
                (true, false) => assert_eq!(create["tool"], ""),
                (false, _) => assert!(create.get("tool").is_none(), "{create}"),
            }
        }
        // The system prompt names the task's own tools, as exported.
        let system = row["prompt"][0]["content"].as_str().unwrap();
        let (_, listed) = system.rsplit_once("this request has only these: ").unwrap();
        let listed: Vec<&str> = listed.trim_end_matches('.').split(", ").collect();
        assert_eq!(listed.len(), task.tools.len());
        for (exported, tool) in listed.iter().zip(&task.tools) {
            let e = export.tools.iter().find(|t| t.name == *exported).unwrap();
            assert_eq!(e.tool, tool.name);
        }
    }
    // Deterministic, and JSONL holds the same rows.
    let again = dir.path().join("again.parquet");
    export_tasks(&again, &mixed, &options).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&again).unwrap());
    let jsonl = dir.path().join("mixed.jsonl");
    export_tasks(&jsonl, &mixed, &options).unwrap();
    let lines: Vec<Value> = rulegym::io::read_jsonl(&jsonl).unwrap();
    assert_eq!(lines, rows);
}

/// verl keeps only `type`, `description` and `enum` of a parameter (and `type`, `properties`,
/// `required` of the parameters object): everything else is folded into the descriptions, so
/// the model still reads every constraint.
#[test]
fn verl_visible_schema_folds_what_verl_drops() {
    let schema = serde_json::json!({
        "type": "function",
        "function": {
            "name": "book",
            "description": "Book seats.",
            "parameters": {
                "type": "object",
                "properties": {
                    "seats": {"type": "array", "items": {"type": "string", "minLength": 2},
                              "minItems": 1, "description": "Seat codes."},
                    "class": {"type": "string", "enum": ["economy", "business"]},
                    "note": {"oneOf": [{"type": "string"}, {"type": "null"}]},
                    "count": {"const": 2}
                },
                "required": ["seats"],
                "additionalProperties": false
            }
        }
    });
    let got = verl_visible_schema(&schema);
    let f = &got["function"];
    assert_eq!(
        f["description"],
        "Book seats. (Parameters JSON Schema: {\"additionalProperties\":false})"
    );
    assert_eq!(
        f["parameters"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["properties", "required", "type"]
    );
    let p = &f["parameters"]["properties"];
    assert_eq!(
        p["seats"],
        serde_json::json!({"type": "array", "description":
            "Seat codes. (JSON Schema: {\"items\":{\"minLength\":2,\"type\":\"string\"},\"minItems\":1})"})
    );
    assert_eq!(
        p["class"],
        serde_json::json!({"type": "string", "enum": ["economy", "business"]})
    );
    assert_eq!(p["note"]["type"], serde_json::json!(["string", "null"]));
    assert_eq!(p["count"]["type"], "integer");
    assert_eq!(p["count"]["description"], "(JSON Schema: {\"const\":2})");
    // A schema already in verl's form is unchanged.
    let plain = serde_json::json!({"type": "function", "function": {"name": "f", "description": "d",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}});
    assert_eq!(verl_visible_schema(&plain), plain);
}

/// `export --tasks --preset synthagent`: SynthAgent's 16 turns, which is rulegym's default, so
/// the files are byte-identical to a plain export; a preset without tool-use settings is an
/// error naming the presets that have some.
#[test]
fn task_export_with_the_synthagent_preset() {
    let dir = tempfile::tempdir().unwrap();
    let file = tasks_file(dir.path(), 3);
    let plain = dir.path().join("plain/train.parquet");
    let preset = dir.path().join("preset/train.parquet");
    for (out, extra) in [(&plain, vec![]), (&preset, vec!["--preset", "synthagent"])] {
        let mut args = vec![
            "export",
            "--tasks",
            file.to_str().unwrap(),
            "--format",
            "verl",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        cli(&args);
    }
    assert_eq!(
        yaml(&interaction_config_path(&preset))["interaction"][0]["config"]["max_turns"],
        16
    );
    for name in [
        "train.parquet",
        "train_tool_config.yaml",
        "train_interaction_config.yaml",
    ] {
        let a = std::fs::read(plain.with_file_name(name)).unwrap();
        let b = std::fs::read(preset.with_file_name(name)).unwrap();
        assert_eq!(a, b, "{name}");
    }
    let out = super::cli::run(
        super::cli::rulegym()
            .args([
                "export",
                "--tasks",
                file.to_str().unwrap(),
                "--format",
                "verl",
            ])
            .args(["--preset", "phantomenvs"])
            .args(["--out", dir.path().join("x.parquet").to_str().unwrap()]),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no tool-use environment settings (presets with some: synthagent)"),
        "{stderr}"
    );
}

/// TRL rows of tool-use tasks: flat `prompt` (the TRL system prompt, the instruction),
/// `task_id`, `task`, `split`, `environment`; tasks with the same tools share an environment,
/// tasks with other tools get another; parquet and JSONL agree; no verl configs are written.
#[test]
fn trl_task_rows_read_back() {
    use rulegym::export::tooluse::{TRL_TOOL_SYSTEM_PROMPT, trl_environment};
    let dir = tempfile::tempdir().unwrap();
    let file = tasks_file(dir.path(), 6);
    let tasks = load_tasks(&file, ValidateOptions::default()).unwrap();
    let jl = dir.path().join("trl.jsonl");
    let pq = dir.path().join("trl.parquet");
    for out in [&jl, &pq] {
        let (f, o) = (file.to_str().unwrap(), out.to_str().unwrap());
        cli(&["export", "--format", "trl", "--tasks", f, "--out", o]);
    }
    let rows: Vec<Value> = rulegym::io::read_jsonl(&jl).unwrap();
    assert_eq!(read_parquet_json(&pq).unwrap(), rows);
    assert_eq!(rows.len(), tasks.len());
    for (row, task) in rows.iter().zip(&tasks) {
        assert_eq!(row["task_id"], task.id.as_str());
        assert_eq!(row["split"], "train");
        assert_eq!(row["prompt"][0]["role"], "system");
        assert_eq!(row["prompt"][0]["content"], TRL_TOOL_SYSTEM_PROMPT);
        assert_eq!(row["prompt"][1]["content"], task.instruction.as_str());
        let back: Task = serde_json::from_str(row["task"].as_str().unwrap()).unwrap();
        assert_eq!(&back, task);
        let env = row["environment"].as_str().unwrap();
        assert_eq!(env, trl_environment(task));
        assert!(env.starts_with("rulegym_tools_") && env.len() == "rulegym_tools_".len() + 8);
    }
    // Same tools, same environment; other tools, another one.
    for (a, b) in tasks.iter().zip(tasks.iter().skip(1)) {
        let same_tools = a.tools == b.tools;
        assert_eq!(same_tools, trl_environment(a) == trl_environment(b));
    }
    assert!(
        !dir.path().join("trl_tool_config.yaml").exists(),
        "TRL needs no verl config files"
    );
}

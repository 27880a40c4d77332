//! The SynthAgent LLM pipeline, offline: a scripted LLM answers every stage from the recorded
//! answers in `tests/fixtures/synth/` (plays the teacher, the tool simulator and the user too),
//! with one malformed answer per faulty persona. Checks the kept tasks run in the tool
//! environment and score as expected, every fault is dropped with its reason, runs resume
//! without asking again, and outputs are byte-identical across concurrency and offline replay.

use rulegym::llm::{
    ChatMessage, ChatRequest, ChatResponse, FunctionCall, LlmBackend, LlmError, Role,
    ScriptedBackend, ToolCall, assistant_text,
};
use rulegym::synth::{
    self, Extraction, PipelineConfig, PipelineError, Reject, RejectReason, SynthItem, SynthStage,
};
use rulegym::tooluse::env::{Protocol, ToolEnv, ToolEnvConfig, openai_call, play_episode};
use rulegym::tooluse::mock_tools::{MappingConfig, MappingSimulator};
use rulegym::tooluse::rubric::{RubricScorer, ScoreConfig};
use rulegym::tooluse::task::{ValidateOptions, load_tasks};
use rulegym::tooluse::user::RuleUser;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const DRAFT: &str = include_str!("../fixtures/synth/draft.txt");
const TOOLS: &str = include_str!("../fixtures/synth/tools.txt");
const REWRITE: &str = include_str!("../fixtures/synth/rewrite.txt");
const RUBRIC: &str = include_str!("../fixtures/synth/rubric.txt");

fn personas_fixture() -> PathBuf {
    crate::repo().join("tests/fixtures/synth/personas.txt")
}

/// Faulty personas (by bakery number): the stage that must drop them and the reason.
const FAULTS: &[(usize, &str, RejectReason)] = &[
    (3, "draft", RejectReason::TruncatedJson),
    (4, "draft", RejectReason::MissingTag),
    (5, "draft", RejectReason::ToolWithoutSchema),
    (6, "draft", RejectReason::WorkflowSize),
    (7, "draft", RejectReason::ForbiddenBehaviour),
    (8, "draft", RejectReason::Truncated),
    (9, "tools", RejectReason::OutputsNotSimulatable),
    (10, "tools", RejectReason::DistractorCount),
    (11, "tools", RejectReason::ForbiddenToolDropped),
    (12, "tools", RejectReason::InvalidShape),
    (13, "rewrite", RejectReason::InstructionNotOneSentence),
    (14, "rewrite", RejectReason::InstructionLeaksSlot),
    (15, "rewrite", RejectReason::InvalidSlots),
    (16, "rollouts", RejectReason::RolloutsUnusable),
    (17, "rubric", RejectReason::RuleRejected),
    (18, "rubric", RejectReason::MissingTag),
    (19, "rubric", RejectReason::WorkflowLink),
    (20, "rubric", RejectReason::TruncatedJson),
    (21, "filter", RejectReason::WorkflowUnexecuted),
    (22, "filter", RejectReason::BestRolloutFails),
];

/// The JSON text inside `<tag>...</tag>`.
fn body<'a>(answer: &'a str, tag: &str) -> &'a str {
    let start = answer.find(&format!("<{tag}>")).unwrap() + tag.len() + 2;
    let end = answer.find(&format!("</{tag}>")).unwrap();
    &answer[start..end]
}

/// The answer with its JSON edited.
fn edit(answer: &str, tag: &str, f: impl FnOnce(&mut Value)) -> String {
    let mut v: Value = serde_json::from_str(body(answer, tag)).unwrap();
    f(&mut v);
    format!("<{tag}>\n{v}\n</{tag}>")
}

fn cut(answer: &str, tag: &str, bytes: usize) -> String {
    format!("<{tag}>{}</{tag}>", &body(answer, tag)[..bytes])
}

/// Edits the rubric answer of (bakery, request seed); per-trajectory extraction asks with each
/// rollout's seed (rollout r of the default config: seed r).
type RubricEdit = fn(usize, u64, &mut Value);

/// The scripted LLM: answers by stage (recognised from the prompt), counts calls per stage (and
/// per `stage@bakery`), and can refuse stages, fail one (stage, bakery) with a transport error,
/// or edit the rubric answers of clean bakeries by request seed.
#[derive(Default)]
struct Script {
    calls: Mutex<BTreeMap<String, u64>>,
    refuse: Vec<&'static str>,
    fail: Option<(&'static str, usize)>,
    rubric_edit: Option<RubricEdit>,
}

fn bakery(request: &ChatRequest) -> usize {
    let text: String = request.messages.iter().map(|m| m.content_str()).collect();
    text.match_indices("bakery ")
        .filter_map(|(i, m)| {
            let digits: String = text[i + m.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .next()
        .unwrap_or(usize::MAX)
}

fn stage_of(request: &ChatRequest) -> String {
    let first = request.messages.first().map_or("", |m| m.content_str());
    if let Some(rest) = first.strip_prefix("# rulegym synth: ") {
        rest.split(' ').next().unwrap_or_default().to_owned()
    } else if first.starts_with("You are a user talking") {
        "user".into()
    } else if first.starts_with("You simulate the tool") {
        "sim".into()
    } else {
        "unknown".into()
    }
}

fn tool_call_response(calls: Vec<ToolCall>) -> ChatResponse {
    ChatResponse {
        message: ChatMessage {
            role: Role::Assistant,
            content: None,
            tool_calls: calls,
            tool_call_id: None,
        },
        finish_reason: Some("tool_calls".into()),
        stop_reason: None,
    }
}

impl Script {
    fn calls(&self, stage: &str) -> u64 {
        self.calls.lock().unwrap().get(stage).copied().unwrap_or(0)
    }

    fn answer(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let stage = stage_of(request);
        let n = bakery(request);
        {
            let mut calls = self.calls.lock().unwrap();
            *calls.entry(stage.clone()).or_default() += 1;
            *calls.entry(format!("{stage}@{n}")).or_default() += 1;
        }
        if self.refuse.contains(&stage.as_str()) {
            return Err(LlmError::Script(format!("stage {stage} must not be asked")));
        }
        if self.fail == Some((stage.as_str(), n)) {
            return Err(LlmError::Transport("injected failure".into()));
        }
        let with_n = |s: &str| s.replace("{N}", &n.to_string());
        let text = match (stage.as_str(), n) {
            ("draft", 3) => cut(&with_n(DRAFT), "task", 150),
            ("draft", 4) => body(&with_n(DRAFT), "task").to_owned(),
            ("draft", 5) => edit(&with_n(DRAFT), "task", |v| {
                v["tools"][2].as_object_mut().unwrap().remove("outputs");
            }),
            ("draft", 6) => edit(&with_n(DRAFT), "task", |v| {
                v["workflow"].as_array_mut().unwrap().truncate(3);
            }),
            ("draft", 7) => edit(&with_n(DRAFT), "task", |v| {
                v["forbidden"]["tool"] = json!("delete_all");
            }),
            ("draft", 8) => {
                let mut r = assistant_text(&with_n(DRAFT)[..60]);
                r.finish_reason = Some("length".into());
                return Ok(r);
            }
            ("draft", _) => with_n(DRAFT),
            ("tools", 9) => edit(TOOLS, "tools", |v| {
                v["tools"][1]["outputs"]["properties"]["eta"] = json!({"type": "string"});
            }),
            ("tools", 10) => edit(TOOLS, "tools", |v| {
                v["tools"].as_array_mut().unwrap().pop();
            }),
            ("tools", 11) => edit(TOOLS, "tools", |v| {
                v["tools"].as_array_mut().unwrap().remove(1);
                v["dropped"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "place_order", "reason": "risky"}));
            }),
            ("tools", 12) => edit(TOOLS, "tools", |v| {
                v["tools"][0].as_object_mut().unwrap().remove("kind");
            }),
            ("tools", _) => TOOLS.to_owned(),
            ("rewrite", 13) => edit(&with_n(REWRITE), "rewrite", |v| {
                v["instruction"] = json!(format!("Please order some flour. It is for bakery {n}."));
            }),
            ("rewrite", 14) => edit(&with_n(REWRITE), "rewrite", |v| {
                v["instruction"] = json!(format!("Please order rye flour for bakery {n}."));
            }),
            ("rewrite", 15) => edit(&with_n(REWRITE), "rewrite", |v| {
                v["slots"][0]["name"] = json!("Flour Type");
            }),
            ("rewrite", _) => with_n(REWRITE),
            ("teacher", _) => return Ok(teacher(request, n == 16)),
            ("user", _) => return Ok(user(request)),
            ("sim", _) => return Ok(simulator(request)),
            ("rubric", 17) => edit(RUBRIC, "rubric", |v| {
                v["subgoals"][0]["rule"] = json!("revealed(product), halt");
            }),
            ("rubric", 18) => body(RUBRIC, "rubric").to_owned(),
            ("rubric", 19) => edit(RUBRIC, "rubric", |v| {
                v["subgoals"][2].as_object_mut().unwrap().remove("workflow");
            }),
            ("rubric", 20) => cut(RUBRIC, "rubric", 200),
            ("rubric", 21) => edit(RUBRIC, "rubric", |v| {
                for goal in v["subgoals"].as_array_mut().unwrap().iter_mut().skip(1) {
                    goal["rule"] = json!("called(cancel_order)");
                }
            }),
            ("rubric", 22) => edit(RUBRIC, "rubric", |v| {
                v["forbidden"][2]["rule"] = json!("tool_call(Step, send_email, _)");
            }),
            ("rubric", _) => match self.rubric_edit {
                Some(f) => edit(RUBRIC, "rubric", |v| f(n, request.seed.unwrap_or(0), v)),
                None => RUBRIC.to_owned(),
            },
            (other, _) => return Err(LlmError::Script(format!("unexpected request {other}"))),
        };
        Ok(assistant_text(&text))
    }
}

/// The teacher: asks for the four details, searches, orders, emails, answers. `broken`: every
/// tool call has truncated JSON arguments.
fn teacher(request: &ChatRequest, broken: bool) -> ChatResponse {
    let m = &request.messages;
    let k = m.iter().filter(|m| m.role == Role::Assistant).count();
    let replies: Vec<String> = m
        .iter()
        .filter(|m| m.role == Role::User)
        .skip(1)
        .map(|m| m.content_str().trim().trim_end_matches('.').to_owned())
        .collect();
    let reply = |i: usize| replies.get(i).cloned().unwrap_or_default();
    let call = |name: &str, args: Value| {
        let mut c = openai_call(&format!("call{k}"), name, &args);
        if broken {
            c.function = FunctionCall {
                name: name.into(),
                arguments: "{\"product\": ".into(),
            };
        }
        tool_call_response(vec![c])
    };
    match k {
        0 => assistant_text("Which flour product do you need?"),
        1 => assistant_text("What quantity do you need, in kg?"),
        2 => assistant_text("On what date should it be delivered?"),
        3 => assistant_text("Which email address should get the confirmation?"),
        4 => call("search_catalog", json!({"product": reply(0)})),
        5 => {
            let found: Value = m
                .iter()
                .rev()
                .find(|m| m.role == Role::Tool)
                .and_then(|t| serde_json::from_str(t.content_str()).ok())
                .unwrap_or_default();
            let kg: i64 = reply(1).parse().unwrap_or(0);
            let sku = found["items"][0]["sku"].clone();
            call(
                "place_order",
                json!({"sku": sku, "kg": kg, "date": reply(2)}),
            )
        }
        6 => call(
            "send_email",
            json!({"to": reply(3), "body": "Your flour order is confirmed."}),
        ),
        _ => assistant_text(
            "<answer>Ordered 40 kg of rye flour for 2025-03-14 and emailed the \
             confirmation.</answer>",
        ),
    }
}

fn user(request: &ChatRequest) -> ChatResponse {
    let question = request
        .messages
        .last()
        .unwrap()
        .content_str()
        .to_lowercase();
    let reply = if question.contains("flour") {
        "Rye flour."
    } else if question.contains("quantity") {
        "40."
    } else if question.contains("date") {
        "2025-03-14."
    } else if question.contains("email") {
        "anna@bakery.example."
    } else {
        "I don't know."
    };
    assistant_text(reply)
}

fn simulator(request: &ChatRequest) -> ChatResponse {
    let system = request.messages[0].content_str();
    let tool = system.split('`').nth(1).unwrap_or_default();
    let response = match tool {
        "search_catalog" => json!({"items": [{"sku": "RYE-7", "price": 3}]}),
        "place_order" => json!({"order_id": "ORD-1", "status": "confirmed"}),
        "send_email" => json!({"sent": true}),
        _ => json!({"cancelled": true}),
    };
    assistant_text(&response.to_string())
}

fn backend(script: &Arc<Script>) -> Arc<dyn LlmBackend> {
    let script = script.clone();
    Arc::new(ScriptedBackend::new(move |r| script.answer(r)))
}

fn config(root: &Path, cache: &str, concurrency: usize) -> PipelineConfig {
    PipelineConfig {
        out: root.join("out"),
        cache: Some(root.join(cache)),
        model: "teacher-model".into(),
        concurrency,
        ..PipelineConfig::default()
    }
}

/// Every file under `dir` with its bytes (relative paths).
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

fn assert_same_tree(a: &Path, b: &Path) {
    let (ta, tb) = (tree(a), tree(b));
    assert_eq!(
        ta.keys().collect::<Vec<_>>(),
        tb.keys().collect::<Vec<_>>(),
        "{} vs {}",
        a.display(),
        b.display()
    );
    for (name, bytes) in &ta {
        assert!(bytes == &tb[name], "{name} differs");
    }
}

fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    rulegym::io::read_jsonl(path).unwrap()
}

fn id(n: usize) -> String {
    format!("synth-{n:05}")
}

#[test]
fn clean_personas_become_tasks_that_run_and_every_fault_is_dropped_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let script = Arc::new(Script::default());
    let config = config(dir.path(), "cache", 4);
    let report = synth::run(&config, Some(&personas_fixture()), Some(backend(&script))).unwrap();
    assert_eq!(report.tasks, Some(3), "{report:#?}");
    let out = &config.out;

    // Every faulty persona is dropped by the right stage, with the right reason; nothing else.
    let mut rejected = BTreeMap::new();
    for stage in SynthStage::ALL {
        let rejects: Vec<Reject> = read_jsonl(&out.join(format!("{}.rejects.jsonl", stage.name())));
        for r in rejects {
            assert_eq!(r.stage, stage.name());
            assert_eq!(r.version, stage.version());
            assert!(!r.detail.is_empty());
            rejected.insert(r.id.clone(), (r.stage.clone(), r.reason));
        }
    }
    let expected: BTreeMap<String, (String, RejectReason)> = FAULTS
        .iter()
        .map(|&(n, stage, reason)| (id(n), (stage.to_owned(), reason)))
        .collect();
    assert_eq!(rejected, expected);
    let rubric_rejects: Vec<Reject> = read_jsonl(&out.join("rubric.rejects.jsonl"));
    let halt = rubric_rejects.iter().find(|r| r.id == id(17)).unwrap();
    assert!(
        halt.detail.contains("halt/0 is not allowed"),
        "{}",
        halt.detail
    );
    assert!(halt.answer.as_deref().unwrap().contains("halt"));

    // The kept tasks validate, carry the versions of every stage, and the teacher passed them.
    let tasks = load_tasks(&out.join("tasks.jsonl"), ValidateOptions::default()).unwrap();
    let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, [id(0), id(1), id(2)]);
    let kept: Vec<SynthItem> = read_jsonl(&out.join("filter.jsonl"));
    for item in &kept {
        assert_eq!(
            item.versions,
            [
                "draft.v1",
                "tools.v1",
                "rewrite.v1",
                "teacher.v1",
                "rubric.v1",
                "filter.v1"
            ]
        );
        let verdict = item.verdict.as_ref().unwrap();
        assert_eq!(verdict.rewards, [1.0, 1.0]);
        assert_eq!(verdict.mean_coverage, 1.0);
        assert_eq!(item.distractors, ["cancel_order"]);
        assert_eq!(item.dropped[0].name, "compute_total");
    }
    let task = &tasks[0];
    assert_eq!(task.instruction, "Please order some flour for bakery 0.");
    assert_eq!(task.hidden_context.slots.len(), 4);
    assert_eq!(task.tools.len(), 4);
    assert_eq!(task.rubric.subgoals.len(), 6);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["prompts"][4]["version"], "rubric.v1");
    assert_eq!(manifest["tasks"], 3);

    // The environment accepts the task: replaying the teacher's best rollout against the
    // teacher's mapping (no LLM) and the rule-based user scores 1.
    let world = Arc::new(task.clone().compile(ValidateOptions::default()).unwrap());
    let scorer = Arc::new(RubricScorer::new(ScoreConfig::default()).unwrap());
    let mapping_path = out.join("mappings").join(format!("{}.json", task.id));
    let mapping = || {
        Arc::new(
            MappingSimulator::new(
                &task.id,
                Some(mapping_path.clone()),
                None,
                MappingConfig::default(),
            )
            .unwrap(),
        )
    };
    assert_eq!(mapping().len(), 3);
    let best = &kept[0].rollouts[kept[0].verdict.as_ref().unwrap().best];
    let turns: Vec<ChatMessage> = best
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .cloned()
        .collect();
    let next = Arc::new(Mutex::new(0usize));
    let agent = ScriptedBackend::new(move |_| {
        let mut i = next.lock().unwrap();
        *i += 1;
        Ok(ChatResponse {
            message: turns[*i - 1].clone(),
            finish_reason: None,
            stop_reason: None,
        })
    });
    let env_config = ToolEnvConfig {
        max_turns: 16,
        protocol: Protocol::OpenAi,
        ..ToolEnvConfig::default()
    };
    let mut env = ToolEnv::new(
        world.clone(),
        Some(mapping()),
        Box::new(RuleUser::new(task)),
        scorer.clone(),
        env_config.clone(),
    );
    let episode = play_episode(&mut env, &agent, "replay", None, None).unwrap();
    assert_eq!(episode.reward, 1.0, "{:#?}", episode.result);

    // An agent that orders 80 kg at once breaks two forbidden rules and scores 0.
    let greedy = ScriptedBackend::new(|r: &ChatRequest| {
        let k = r
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        Ok(if k == 0 {
            let args = json!({"sku": "RYE-7", "kg": 80, "date": "2025-03-14"});
            tool_call_response(vec![openai_call("c0", "place_order", &args)])
        } else {
            assistant_text("<answer>Ordered.</answer>")
        })
    });
    let mut env = ToolEnv::new(
        world,
        Some(mapping()),
        Box::new(RuleUser::new(task)),
        scorer,
        env_config,
    );
    let episode = play_episode(&mut env, &greedy, "greedy", None, None).unwrap();
    assert_eq!(episode.reward, 0.0);
    let violated: Vec<&str> = episode
        .result
        .items
        .iter()
        .filter(|i| i.id.starts_with("no_") && i.step.is_some())
        .map(|i| i.id.as_str())
        .collect();
    assert_eq!(violated, ["no_surplus", "no_assumed_details"]);
}

#[test]
fn outputs_are_identical_across_concurrency_and_in_offline_replay() {
    let root = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        root.path().join("a"),
        root.path().join("b"),
        root.path().join("c"),
    );
    let personas = personas_fixture();
    let one = Arc::new(Script::default());
    synth::run(
        &config(&a, "cache", 1),
        Some(&personas),
        Some(backend(&one)),
    )
    .unwrap();
    // The same run through the observer: one Started (with the items to do), one Item per
    // item and one Finished per stage, in stage order, as the report counts them.
    let four = Arc::new(Script::default());
    let mut events = Vec::new();
    let report = synth::run_observed(
        &config(&b, "cache", 4),
        Some(&personas),
        Some(backend(&four)),
        &mut |e| events.push(e),
    )
    .unwrap();
    let mut expected = Vec::new();
    for (summary, &stage) in report.stages.iter().zip(synth::SynthStage::ALL.iter()) {
        assert_eq!(summary.stage, stage.name());
        expected.push(synth::SynthEvent::Started {
            stage,
            items: summary.processed,
        });
        expected.extend(std::iter::repeat_n(
            synth::SynthEvent::Item,
            summary.processed,
        ));
        expected.push(synth::SynthEvent::Finished(stage));
    }
    assert_eq!(report.stages.len(), synth::SynthStage::ALL.len());
    assert_eq!(events, expected);
    assert_same_tree(&a.join("out"), &b.join("out"));
    assert_same_tree(&a.join("cache"), &b.join("cache"));
    assert_eq!(
        one.calls.lock().unwrap().clone(),
        four.calls.lock().unwrap().clone()
    );

    // Replay-only from a's cache, no backend at all: the same bytes.
    let replay = PipelineConfig {
        cache: Some(a.join("cache")),
        replay_only: true,
        ..config(&c, "unused", 3)
    };
    synth::run(&replay, Some(&personas), None).unwrap();
    assert_same_tree(&a.join("out"), &c.join("out"));
    assert!(!c.join("unused").exists());
}

#[test]
fn a_killed_run_resumes_without_asking_again_for_finished_items() {
    let root = tempfile::tempdir().unwrap();
    let personas = root.path().join("personas.txt");
    let lines: Vec<String> = [0, 1, 2, 3, 9, 13, 16, 21]
        .iter()
        .map(|n| format!("Owner of bakery {n}, a small family business that bakes rye bread"))
        .collect();
    std::fs::write(&personas, lines.join("\n") + "\n").unwrap();
    let reference = root.path().join("reference");
    let clean = Arc::new(Script::default());
    synth::run(
        &config(&reference, "cache", 2),
        Some(&personas),
        Some(backend(&clean)),
    )
    .unwrap();

    // First run: stops after the tools stage, where bakery 1's request failed.
    let run = root.path().join("run");
    let failing = Arc::new(Script {
        fail: Some(("tools", 1)),
        ..Script::default()
    });
    let first = PipelineConfig {
        stages: vec![SynthStage::Draft, SynthStage::Tools, SynthStage::Rewrite],
        ..config(&run, "cache1", 2)
    };
    let err = synth::run(&first, Some(&personas), Some(backend(&failing))).unwrap_err();
    assert!(
        matches!(&err, PipelineError::ItemsFailed { stage: "tools", count: 1, first } if first.contains("injected")),
        "{err}"
    );
    assert!(!run.join("out/rewrite.jsonl").exists());
    // ... and its last write was cut short.
    let tools = run.join("out/tools.jsonl");
    let bytes = std::fs::read(&tools).unwrap();
    std::fs::write(&tools, &bytes[..bytes.len() - 40]).unwrap();

    // The rerun (new, empty cache) asks nothing of the draft stage, redoes only bakery 1 and the
    // cut line in the tools stage, and ends with the reference's bytes.
    let second = Arc::new(Script {
        refuse: vec!["draft"],
        ..Script::default()
    });
    synth::run(
        &config(&run, "cache2", 3),
        Some(&personas),
        Some(backend(&second)),
    )
    .unwrap();
    assert_eq!(second.calls("draft"), 0);
    assert_eq!(second.calls("tools"), 2);
    assert_eq!(second.calls("rewrite"), clean.calls("rewrite"));
    assert_same_tree(&reference.join("out"), &run.join("out"));

    // A third run has nothing left to do: no request at all, same bytes.
    let idle = Arc::new(Script {
        refuse: vec![
            "draft", "tools", "rewrite", "teacher", "user", "sim", "rubric",
        ],
        ..Script::default()
    });
    synth::run(
        &config(&run, "cache3", 1),
        Some(&personas),
        Some(backend(&idle)),
    )
    .unwrap();
    assert!(idle.calls.lock().unwrap().is_empty());
    assert_same_tree(&reference.join("out"), &run.join("out"));
}

#[test]
fn bad_configs_and_missing_inputs_are_errors_not_rejects() {
    let root = tempfile::tempdir().unwrap();
    let personas = personas_fixture();
    let base = config(root.path(), "cache", 1);
    for bad in [
        PipelineConfig {
            concurrency: 0,
            ..base.clone()
        },
        PipelineConfig {
            rollouts: 1,
            ..base.clone()
        },
        PipelineConfig {
            stages: vec![SynthStage::Tools, SynthStage::Draft],
            ..base.clone()
        },
        PipelineConfig {
            min_workflow_coverage: f64::NAN,
            ..base.clone()
        },
    ] {
        let err = synth::run(&bad, Some(&personas), None).unwrap_err();
        assert!(matches!(err, PipelineError::Config(_)), "{err}");
    }
    // The draft stage needs personas; a later stage needs the previous stage's file.
    let err = synth::run(
        &PipelineConfig {
            replay_only: true,
            ..base.clone()
        },
        None,
        None,
    );
    assert!(matches!(
        err,
        Err(PipelineError::Input { stage: "draft", .. })
    ));
    let rubric_only = PipelineConfig {
        stages: vec![SynthStage::Rubric],
        replay_only: true,
        ..base.clone()
    };
    let err = synth::run(&rubric_only, None, None).unwrap_err();
    assert!(
        matches!(
            err,
            PipelineError::Input {
                stage: "rubric",
                ..
            }
        ),
        "{err}"
    );
    // Replay-only with an empty cache: every item fails, none is recorded as rejected or done.
    let replay = PipelineConfig {
        replay_only: true,
        stages: vec![SynthStage::Draft],
        ..base
    };
    let err = synth::run(&replay, Some(&personas), None).unwrap_err();
    assert!(
        matches!(&err, PipelineError::ItemsFailed { stage: "draft", count: 23, first } if first.contains("replay")),
        "{err}"
    );
    let out = root.path().join("out");
    assert_eq!(std::fs::read(out.join("draft.jsonl")).unwrap(), b"");
    assert_eq!(std::fs::read(out.join("draft.rejects.jsonl")).unwrap(), b"");
}

#[test]
fn cli_replays_a_recorded_run_offline() {
    let root = tempfile::tempdir().unwrap();
    let personas = personas_fixture();
    let recorded = config(&root.path().join("lib"), "cache", 2);
    let script = Arc::new(Script::default());
    synth::run(&recorded, Some(&personas), Some(backend(&script))).unwrap();
    let out = root.path().join("cli");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rulegym"))
        .args(["synth", "--model", "teacher-model", "--replay-only", "-q"])
        .args(["--stages", "draft,tools,rewrite,rollouts,rubric,filter"])
        .arg("--personas")
        .arg(&personas)
        .arg("--cache")
        .arg(recorded.cache_dir())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["tasks"], 3);
    assert_eq!(summary["stages"][0]["reasons"]["missing_tag"], 1);
    assert_same_tree(&recorded.out, &out);
    // Without an endpoint and without --replay-only, the CLI refuses to start.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rulegym"))
        .args(["synth", "--model", "m", "--out"])
        .arg(root.path().join("none"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--endpoint is required"));
}

#[test]
fn edited_stage_records_cannot_write_outside_the_output_or_default_mapping_arguments() {
    let root = tempfile::tempdir().unwrap();
    let personas = write_personas(root.path(), &[0, 1]);
    let full = config(root.path(), "cache", 1);
    let script = Arc::new(Script::default());
    synth::run(&full, Some(&personas), Some(backend(&script))).unwrap();
    let out = &full.out;
    let filter_only = PipelineConfig {
        stages: vec![SynthStage::Filter],
        replay_only: true,
        ..full.clone()
    };
    let rubric = out.join("rubric.jsonl");
    let original = std::fs::read_to_string(&rubric).unwrap();

    // A record id that would name a mapping file outside the output never gets that far.
    std::fs::write(&rubric, original.replace(&id(0), "../escaped")).unwrap();
    let err = synth::run(&filter_only, None, None).unwrap_err();
    assert!(err.to_string().contains("../escaped"), "{err}");
    assert!(!out.join("escaped.json").exists());

    // Mapping arguments that are not JSON are an error, not silently null.
    let edited: Vec<String> = original
        .lines()
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).unwrap();
            if v["id"] == id(0) {
                v["mapping"][0]["args"] = json!("{\"a\":");
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&rubric, edited.join("\n") + "\n").unwrap();
    let err = synth::run(&filter_only, None, None).unwrap_err();
    assert!(
        matches!(&err, PipelineError::Input { stage: "filter", message } if message.contains("not JSON")),
        "{err}"
    );
    assert!(
        !out.join("mappings")
            .join(format!("{}.json", id(0)))
            .exists()
    );
}

/// A personas file of the given bakeries (default ids `synth-00000`, ... in file order).
fn write_personas(dir: &Path, bakeries: &[usize]) -> PathBuf {
    let path = dir.join(format!("personas-{bakeries:?}.txt").replace([' ', ','], ""));
    let lines: Vec<String> = bakeries
        .iter()
        .map(|n| format!("Owner of bakery {n}, a small family business that bakes rye bread"))
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn a_rerun_with_other_personas_recomputes_changed_ids_and_drops_removed_ones() {
    let root = tempfile::tempdir().unwrap();
    let first = write_personas(root.path(), &[0, 1, 2, 21]);
    // Same default ids: synth-00001 is now another persona, synth-00003 is gone.
    let second = write_personas(root.path(), &[0, 21, 2]);
    let reference = root.path().join("reference");
    let script = Arc::new(Script::default());
    synth::run(
        &config(&reference, "cache", 2),
        Some(&second),
        Some(backend(&script)),
    )
    .unwrap();

    let run = root.path().join("run");
    let old = Arc::new(Script::default());
    synth::run(
        &config(&run, "cache1", 2),
        Some(&first),
        Some(backend(&old)),
    )
    .unwrap();
    let new = Arc::new(Script::default());
    let report = synth::run(
        &config(&run, "cache2", 2),
        Some(&second),
        Some(backend(&new)),
    )
    .unwrap();
    // Only the changed persona is asked for again, in every LLM stage.
    assert_eq!(new.calls("draft"), 1);
    assert_eq!(new.calls("tools"), 1);
    assert_eq!(new.calls("rewrite"), 1);
    assert_eq!(new.calls("rubric"), 1);
    let draft = &report.stages[0];
    assert_eq!(
        (draft.recomputed, draft.orphaned, draft.processed),
        (1, 1, 1)
    );
    // Nothing of the old synth-00001 (bakery 1) or synth-00003 is left anywhere.
    assert_same_tree(&reference.join("out"), &run.join("out"));
    for stage in SynthStage::ALL {
        let text =
            std::fs::read_to_string(run.join(format!("out/{}.jsonl", stage.name()))).unwrap();
        assert!(
            !text.contains("bakery 1,") && !text.contains(&id(3)),
            "{}",
            stage.name()
        );
    }
}

#[test]
fn changed_settings_recompute_the_stages_that_use_them() {
    let root = tempfile::tempdir().unwrap();
    let personas = write_personas(root.path(), &[0, 1, 21, 22]);
    let changed = |dir: &Path, cache: &str| PipelineConfig {
        rollouts: 3,
        min_best_reward: 0.0,
        ..config(dir, cache, 2)
    };
    let reference = root.path().join("reference");
    let script = Arc::new(Script::default());
    synth::run(
        &changed(&reference, "cache"),
        Some(&personas),
        Some(backend(&script)),
    )
    .unwrap();

    let run = root.path().join("run");
    let old = Arc::new(Script::default());
    let before = synth::run(
        &config(&run, "cache1", 2),
        Some(&personas),
        Some(backend(&old)),
    )
    .unwrap();
    // The stages before the teacher rollouts do not depend on --rollouts: nothing asked there.
    let new = Arc::new(Script {
        refuse: vec!["draft", "tools", "rewrite"],
        ..Script::default()
    });
    let after = synth::run(
        &changed(&run, "cache2"),
        Some(&personas),
        Some(backend(&new)),
    )
    .unwrap();
    assert_eq!(new.calls("teacher"), old.calls("teacher") / 2 * 3);
    assert_eq!(new.calls("rubric"), old.calls("rubric"));
    let recomputed: Vec<usize> = after.stages.iter().map(|s| s.recomputed).collect();
    assert_eq!(recomputed, [0, 0, 0, 4, 4, 0]);
    // min_best_reward 0 keeps bakery 22, whose best rollout breaks a forbidden rule.
    assert_eq!((before.tasks, after.tasks), (Some(2), Some(3)));
    assert_same_tree(&reference.join("out"), &run.join("out"));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run.join("out/manifest.json")).unwrap()).unwrap();
    assert_eq!(
        (&manifest["rollouts"], &manifest["min_best_reward"]),
        (&json!(3), &json!(0.0))
    );
    let kept: Vec<SynthItem> = read_jsonl(&run.join("out/rubric.jsonl"));
    assert!(kept.iter().all(|k| k.rollouts.len() == 3));

    // Filter settings alone: only the filter runs again (no LLM at all), same bytes as a fresh
    // run with them.
    let strict = |dir: &Path, cache: &str| PipelineConfig {
        min_best_reward: 1.0,
        ..changed(dir, cache)
    };
    let reference2 = root.path().join("reference2");
    synth::run(
        &strict(&reference2, "cache"),
        Some(&personas),
        Some(backend(&Arc::new(Script::default()))),
    )
    .unwrap();
    let idle = Arc::new(Script {
        refuse: vec![
            "draft", "tools", "rewrite", "teacher", "user", "sim", "rubric",
        ],
        ..Script::default()
    });
    let report = synth::run(
        &strict(&run, "cache3"),
        Some(&personas),
        Some(backend(&idle)),
    )
    .unwrap();
    assert!(idle.calls.lock().unwrap().is_empty());
    assert_eq!(report.tasks, Some(2));
    assert_same_tree(&reference2.join("out"), &run.join("out"));
}

#[test]
fn reading_a_stage_file_does_not_rewrite_it_and_stale_upstream_files_stop_the_run() {
    let root = tempfile::tempdir().unwrap();
    let personas = write_personas(root.path(), &[0, 1, 2]);
    let base = config(root.path(), "cache", 2);
    let script = Arc::new(Script::default());
    let draft_only = PipelineConfig {
        stages: vec![SynthStage::Draft],
        ..base.clone()
    };
    synth::run(&draft_only, Some(&personas), Some(backend(&script))).unwrap();
    let draft = base.out.join("draft.jsonl");
    let complete = std::fs::read(&draft).unwrap();
    // A writer cut short (or still writing) left half a line.
    let mut partial = complete.clone();
    partial.extend_from_slice(b"{\"id\":\"synth-00009\",\"pers");
    std::fs::write(&draft, &partial).unwrap();
    let tools_only = PipelineConfig {
        stages: vec![SynthStage::Tools],
        ..base.clone()
    };
    let report = synth::run(&tools_only, None, Some(backend(&script))).unwrap();
    assert_eq!(report.stages[0].input, 3);
    assert_eq!(
        std::fs::read(&draft).unwrap(),
        partial,
        "the tools stage changed draft.jsonl"
    );
    // The draft stage owns its file: resuming it drops the partial line and asks nothing.
    let idle = Arc::new(Script {
        refuse: vec!["draft"],
        ..Script::default()
    });
    synth::run(&draft_only, Some(&personas), Some(backend(&idle))).unwrap();
    assert_eq!(std::fs::read(&draft).unwrap(), complete);

    // Later stages may not build on files that other settings produced: the run stops before
    // writing anything, naming the stale stage and what to do.
    let other_model = PipelineConfig {
        model: "other-model".into(),
        stages: vec![SynthStage::Rewrite],
        ..base.clone()
    };
    let err = synth::run(&other_model, None, Some(backend(&script))).unwrap_err();
    assert!(
        matches!(
            &err,
            PipelineError::Stale {
                stage: "draft",
                count: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("fresh output directory"), "{err}");
    assert!(!base.out.join("rewrite.jsonl").exists());
    // A draft file from another personas file is caught by the tools records built on it.
    let edited = String::from_utf8(complete.clone())
        .unwrap()
        .replace("bakery 2,", "bakery 7,");
    std::fs::write(&draft, edited).unwrap();
    let rewrite = PipelineConfig {
        stages: vec![SynthStage::Rewrite],
        ..base.clone()
    };
    let err = synth::run(&rewrite, None, Some(backend(&script))).unwrap_err();
    assert!(
        matches!(&err, PipelineError::Stale { stage: "draft", count: 1, first } if *first == id(2)),
        "{err}"
    );
    assert!(!base.out.join("rewrite.jsonl").exists());
}

#[test]
fn cli_refuses_an_unset_api_key_variable() {
    let root = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rulegym"))
        .args([
            "synth",
            "--model",
            "m",
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "-q",
        ])
        .args(["--api-key-env", "RULEGYM_TEST_NO_SUCH_KEY_VAR"])
        .arg("--personas")
        .arg(personas_fixture())
        .arg("--out")
        .arg(root.path().join("out"))
        .env_remove("RULEGYM_TEST_NO_SUCH_KEY_VAR")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("RULEGYM_TEST_NO_SUCH_KEY_VAR") && stderr.contains("not set"),
        "{stderr}"
    );
}

/// The default test config with `rollouts` teacher rollouts and per-trajectory extraction.
fn per_trajectory(root: &Path, cache: &str, concurrency: usize, rollouts: u32) -> PipelineConfig {
    PipelineConfig {
        rollouts,
        extraction: Extraction::PerTrajectory,
        ..config(root, cache, concurrency)
    }
}

fn rubric_of(out: &Path, n: usize) -> SynthItem {
    let kept: Vec<SynthItem> = read_jsonl(&out.join("rubric.jsonl"));
    kept.into_iter().find(|k| k.id == id(n)).unwrap()
}

#[test]
fn synth_per_trajectory_asks_once_per_usable_rollout_and_keeps_a_shared_body_as_written() {
    let root = tempfile::tempdir().unwrap();
    let personas = write_personas(root.path(), &[0, 1, 2]);
    let script = Arc::new(Script::default());
    let config = per_trajectory(&root.path().join("per"), "cache", 2, 4);
    let report = synth::run(&config, Some(&personas), Some(backend(&script))).unwrap();
    assert_eq!(report.tasks, Some(3));
    let rollouts: Vec<SynthItem> = read_jsonl(&config.out.join("rollouts.jsonl"));
    let usable: usize = rollouts
        .iter()
        .map(|i| i.rollouts.iter().filter(|r| r.usable).count())
        .sum();
    assert_eq!(usable, 12);
    // One request per usable rollout (each with its rollout's seed, so rollouts with the same
    // facts are not one cached request).
    assert_eq!(script.calls("rubric"), 12);
    for n in 0..3 {
        assert_eq!(script.calls(&format!("rubric@{n}")), 4);
    }

    // Answers that agree merge into exactly the rubric one joint answer gives.
    let joint_script = Arc::new(Script::default());
    let joint = PipelineConfig {
        extraction: Extraction::Joint,
        ..per_trajectory(&root.path().join("joint"), "cache", 2, 4)
    };
    synth::run(&joint, Some(&personas), Some(backend(&joint_script))).unwrap();
    assert_eq!(joint_script.calls("rubric"), 3);
    for n in 0..3 {
        let (a, b) = (rubric_of(&config.out, n), rubric_of(&joint.out, n));
        assert_eq!((&a.rubric, &a.subgoal_steps), (&b.rubric, &b.subgoal_steps));
    }
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(config.out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["extraction"], "per-trajectory");
    assert_eq!(manifest["rollouts"], 4);
}

/// Rollout 1 finds other ways to two sub-goals (one of them under a new id) and writes another
/// forbidden body; rollout 2 writes one body with other spacing (the same term) and one with a
/// final full stop; rollout 3 ends a body with a comment, names its step-2 item differently, and
/// calls an interaction `searched` (taken by the step-2 group).
fn varied_answers(_bakery: usize, seed: u64, v: &mut Value) {
    match seed {
        1 => {
            v["subgoals"][1]["rule"] = json!("tool_call(_, search_catalog, _)");
            v["subgoals"].as_array_mut().unwrap().push(json!({
                "id": "looked_up", "workflow": 2, "description": "used the catalogue",
                "rule": "called(search_catalog)"
            }));
            v["forbidden"][2]["rule"] =
                json!("tool_call(Step, cancel_order, A), json_get(A, order_id, _)");
        }
        2 => {
            v["subgoals"][1]["rule"] = json!(
                "tool_call(_,search_catalog,A),json_get(A,product,P),text_contains_ci(P,\"rye\")"
            );
            v["subgoals"][4]["rule"] =
                json!("called(send_email, A), json_get(A, to, \"anna@bakery.example\").");
        }
        3 => {
            v["subgoals"][1]["id"] = json!("catalog_search");
            v["subgoals"][4]["rule"] = json!("called(send_email) % any address");
            v["interactions"][3]["id"] = json!("searched");
        }
        _ => {}
    }
}

#[test]
fn synth_per_trajectory_merge_ors_the_bodies_of_one_workflow_step_deterministically() {
    let root = tempfile::tempdir().unwrap();
    let personas = write_personas(root.path(), &[0, 1, 2]);
    let script = || {
        Arc::new(Script {
            rubric_edit: Some(varied_answers),
            ..Script::default()
        })
    };
    let a = per_trajectory(&root.path().join("a"), "cache", 1, 4);
    let first = script();
    let report = synth::run(&a, Some(&personas), Some(backend(&first))).unwrap();
    assert_eq!(first.calls("rubric"), 12);
    // Every merged rubric loads, and the teacher's rollouts pass it.
    assert_eq!(report.tasks, Some(3), "{report:#?}");
    let item = rubric_of(&a.out, 1);
    let rubric = item.rubric.as_ref().unwrap();
    let ids = |items: &[rulegym::tooluse::task::RubricItem]| -> Vec<String> {
        items.iter().map(|i| i.id.clone()).collect()
    };
    assert_eq!(
        ids(&rubric.forbidden),
        ["no_surplus", "no_assumed_details", "no_cancel"]
    );
    // One item per workflow step, under its first id and description.
    assert_eq!(
        ids(&rubric.subgoals),
        [
            "learned_details",
            "searched",
            "found",
            "ordered",
            "emailed",
            "confirmed"
        ]
    );
    assert_eq!(item.subgoal_steps, [1, 2, 3, 4, 5, 6]);
    assert_eq!(
        rubric.subgoals[1].description,
        "searched the catalogue for rye flour"
    );
    // An id taken by an earlier group gets the first free suffix.
    assert_eq!(
        ids(&rubric.interactions),
        [
            "asked_product",
            "asked_amount",
            "asked_date",
            "asked_email",
            "searched_2"
        ]
    );
    let rule = |item: &rulegym::tooluse::task::RubricItem| item.rule.clone().unwrap();
    // Distinct bodies of one step, OR-ed in order of first appearance; a body with other
    // spacing only is the same body.
    assert_eq!(
        rule(&rubric.subgoals[1]),
        "(tool_call(_, search_catalog, A), json_get(A, product, P), text_contains_ci(P, \"rye\")) \
         ; (tool_call(_, search_catalog, _)) ; (called(search_catalog))"
    );
    // A final full stop is dropped inside the parentheses; a trailing comment ends its line.
    assert_eq!(
        rule(&rubric.subgoals[4]),
        "(tool_call(_, send_email, A), json_get(A, to, \"anna@bakery.example\")) ; \
         (called(send_email, A), json_get(A, to, \"anna@bakery.example\")) ; \
         (called(send_email) % any address\n)"
    );
    assert_eq!(
        rule(&rubric.forbidden[2]),
        "(tool_call(Step, cancel_order, _)) ; \
         (tool_call(Step, cancel_order, A), json_get(A, order_id, _))"
    );
    // A body every answer shares stays as written.
    assert_eq!(
        rule(&rubric.subgoals[0]),
        "revealed(product), revealed(amount), revealed(date)"
    );

    // The same bytes at another concurrency, with another cache.
    let b = per_trajectory(&root.path().join("b"), "cache", 3, 4);
    synth::run(&b, Some(&personas), Some(backend(&script()))).unwrap();
    assert_same_tree(&a.out, &b.out);
}

/// Bakery 1: rollout 2's answer has a rule outside the whitelist. Bakery 2: rollout 1's answer
/// links a sub-goal to no step. Bakery 23: every answer is valid, but their distinct bodies
/// together are longer than a rule body may be.
fn some_invalid_answers(bakery: usize, seed: u64, v: &mut Value) {
    match (bakery, seed) {
        (1, 2) => v["subgoals"][0]["rule"] = json!("revealed(product), halt"),
        (2, 1) => {
            v["subgoals"][2].as_object_mut().unwrap().remove("workflow");
        }
        (23, _) => {
            let text: String = std::iter::repeat_n(char::from(b'a' + seed as u8), 500).collect();
            let checks: Vec<String> = (0..5).map(|_| format!("T \\== \"{text}\"")).collect();
            v["subgoals"][5]["rule"] = json!(format!(
                "answered(_, T), text_contains_ci(T, \"ordered\"), {}",
                checks.join(", ")
            ));
        }
        _ => {}
    }
}

#[test]
fn synth_per_trajectory_an_invalid_answer_rejects_the_task_with_its_reason() {
    let root = tempfile::tempdir().unwrap();
    let personas = write_personas(root.path(), &[0, 1, 2, 17, 23]);
    let script = Arc::new(Script {
        rubric_edit: Some(some_invalid_answers),
        ..Script::default()
    });
    let config = per_trajectory(root.path(), "cache", 2, 4);
    let report = synth::run(&config, Some(&personas), Some(backend(&script))).unwrap();
    assert_eq!(report.tasks, Some(1));
    let rejects: Vec<Reject> = read_jsonl(&config.out.join("rubric.rejects.jsonl"));
    // Ids follow the file order: bakery 17 is synth-00003, bakery 23 synth-00004.
    let reject = |bakery: usize| {
        let n = [0, 1, 2, 17, 23].iter().position(|&b| b == bakery).unwrap();
        rejects.iter().find(|r| r.id == id(n)).unwrap()
    };
    assert_eq!(rejects.len(), 4);

    // Some answers invalid: the first invalid one rejects the task with its own reason, names
    // its rollout and is recorded; the rollouts after it are not asked.
    let r = reject(1);
    assert_eq!(r.reason, RejectReason::RuleRejected);
    assert!(
        r.detail
            .starts_with("per-trajectory answer for rollout 2 (3 of 4 usable): ")
            && r.detail.contains("halt/0 is not allowed"),
        "{}",
        r.detail
    );
    assert!(r.answer.as_deref().unwrap().contains("halt"));
    assert_eq!(script.calls("rubric@1"), 3);
    let r = reject(2);
    assert_eq!(r.reason, RejectReason::WorkflowLink);
    assert!(
        r.detail.contains("rollout 1 (2 of 4 usable)"),
        "{}",
        r.detail
    );
    assert_eq!(script.calls("rubric@2"), 2);
    // All answers invalid: rejected by the first.
    let r = reject(17);
    assert_eq!(r.reason, RejectReason::RuleRejected);
    assert!(
        r.detail.contains("rollout 0 (1 of 4 usable)"),
        "{}",
        r.detail
    );
    assert_eq!(script.calls("rubric@17"), 1);
    // Valid answers whose merge fails the whitelist's limits: a coded reject of the merge,
    // recording every answer.
    let r = reject(23);
    assert_eq!(r.reason, RejectReason::RuleRejected);
    assert!(
        r.detail.starts_with("merged rubric of 4 answers: "),
        "{}",
        r.detail
    );
    let answer = r.answer.as_deref().unwrap();
    assert!(answer.starts_with("=== rollout 0 ===\n") && answer.contains("=== rollout 3 ==="));
    assert_eq!(script.calls("rubric@23"), 4);
    assert_eq!(script.calls("rubric@0"), 4);
}

#[test]
fn synth_resume_with_the_other_extraction_mode_recomputes_the_rubric_stage() {
    let root = tempfile::tempdir().unwrap();
    let personas = write_personas(root.path(), &[0, 1, 21, 22]);
    let reference = per_trajectory(&root.path().join("reference"), "cache", 2, 2);
    synth::run(
        &reference,
        Some(&personas),
        Some(backend(&Arc::new(Script::default()))),
    )
    .unwrap();

    let run = root.path().join("run");
    let joint = config(&run, "cache1", 2);
    synth::run(
        &joint,
        Some(&personas),
        Some(backend(&Arc::new(Script::default()))),
    )
    .unwrap();
    let joint_tree = tree(&joint.out);
    // Only the rubric stage depends on the mode: one request per usable rollout, nothing else.
    let only_rubric = || {
        Arc::new(Script {
            refuse: vec!["draft", "tools", "rewrite", "teacher", "user", "sim"],
            ..Script::default()
        })
    };
    let new = only_rubric();
    let report = synth::run(
        &per_trajectory(&run, "cache2", 2, 2),
        Some(&personas),
        Some(backend(&new)),
    )
    .unwrap();
    assert_eq!(new.calls("rubric"), 8);
    let recomputed: Vec<usize> = report.stages.iter().map(|s| s.recomputed).collect();
    assert_eq!(recomputed, [0, 0, 0, 0, 4, 0]);
    assert_same_tree(&reference.out, &run.join("out"));

    // Back to joint (its answers are in the first run's cache): recomputed again, no request,
    // the first run's bytes.
    let idle = Arc::new(Script {
        refuse: vec![
            "draft", "tools", "rewrite", "teacher", "user", "sim", "rubric",
        ],
        ..Script::default()
    });
    let report = synth::run(&joint, Some(&personas), Some(backend(&idle))).unwrap();
    assert!(idle.calls.lock().unwrap().is_empty());
    let recomputed: Vec<usize> = report.stages.iter().map(|s| s.recomputed).collect();
    assert_eq!(recomputed, [0, 0, 0, 0, 4, 0]);
    assert!(tree(&joint.out) == joint_tree);

    // A later stage run alone on the other mode's rubric file stops as stale.
    let filter_only = PipelineConfig {
        stages: vec![SynthStage::Filter],
        ..per_trajectory(&run, "cache2", 2, 2)
    };
    let err = synth::run(&filter_only, None, Some(backend(&idle))).unwrap_err();
    assert!(
        matches!(
            &err,
            PipelineError::Stale {
                stage: "rubric",
                count: 4,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn synth_cli_preset_synthagent_is_the_library_preset_and_flags_override_it() {
    let root = tempfile::tempdir().unwrap();
    let personas = write_personas(root.path(), &[0, 1]);
    let cli = |out: &Path, cache: &Path, flags: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rulegym"))
            .args(["synth", "--model", "teacher-model", "--replay-only", "-q"])
            .args(flags)
            .arg("--personas")
            .arg(&personas)
            .arg("--cache")
            .arg(cache)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap()
    };
    // A run recorded with the library's preset replays under --preset synthagent.
    let recorded = PipelineConfig {
        out: root.path().join("lib/out"),
        cache: Some(root.path().join("lib/cache")),
        model: "teacher-model".into(),
        ..PipelineConfig::from_preset("synthagent").unwrap()
    };
    let script = Arc::new(Script::default());
    synth::run(&recorded, Some(&personas), Some(backend(&script))).unwrap();
    assert_eq!(script.calls("rubric"), 8);
    let out = root.path().join("cli");
    let o = cli(&out, &recorded.cache_dir(), &["--preset", "synthagent"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_tree(&recorded.out, &out);

    // Flags override the preset: these give back the defaults, so a default run replays.
    let plain = config(&root.path().join("plain"), "cache", 2);
    synth::run(
        &plain,
        Some(&personas),
        Some(backend(&Arc::new(Script::default()))),
    )
    .unwrap();
    let out = root.path().join("cli-plain");
    let flags = [
        "--preset",
        "synthagent",
        "--rollouts",
        "2",
        "--extraction",
        "joint",
        "--min-best-reward",
        "1.0",
    ];
    let o = cli(&out, &plain.cache_dir(), &flags);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_tree(&plain.out, &out);

    // An unknown preset is an error naming the valid ones, before anything is written.
    let out = root.path().join("cli-unknown");
    let o = cli(&out, &plain.cache_dir(), &["--preset", "synthagent2"]);
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("unknown synth preset") && stderr.contains("valid: synthagent"),
        "{stderr}"
    );
    assert!(!out.exists());
}

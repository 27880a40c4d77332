//! Executable rubrics: rewards of hand-built trajectories, reward properties, hostile rules.

use proptest::prelude::*;
use rulegym::tooluse::rubric::{
    Event, ItemStatus, RewardVariant, RubricError, RubricScorer, ScoreConfig, Trajectory,
};
use rulegym::tooluse::task::{Task, ValidateOptions};
use serde_json::json;
use std::sync::OnceLock;

#[path = "../support/trip.rs"]
mod trip;
pub use trip::trip_task;

fn scorer() -> &'static RubricScorer {
    static SCORER: OnceLock<RubricScorer> = OnceLock::new();
    SCORER.get_or_init(|| RubricScorer::new(ScoreConfig::default()).expect("engine starts"))
}

fn good_events() -> Vec<Event> {
    let mut events = trip::ask_destination_and_date();
    events.extend(trip::search_flights(
        3,
        json!([{"flight_id": "OS123", "price": 120}]),
    ));
    events.extend([
        Event::ToolCall {
            step: 4,
            tool: "book_flight".into(),
            args: json!({"flight_id": "OS123", "date": "2024-06-03"}),
        },
        Event::Answered {
            step: 5,
            text: "Your flight OS123 is Booked.".into(),
        },
    ]);
    events
}

fn good_trajectory() -> Trajectory {
    let state = json!({"bookings": {"OS123": {"date": "2024-06-03"}}});
    Trajectory {
        events: good_events(),
        final_state: Some(serde_json::from_value(state).unwrap()),
        state_matches: Some(true),
        turns: 5,
    }
}

fn score(task: &Task, t: &Trajectory) -> rulegym::tooluse::rubric::RubricResult {
    let program = task.rubric_program().unwrap();
    scorer().score(&program, t, None).unwrap()
}

#[test]
fn good_trajectory_scores_one_with_steps() {
    let task = trip_task();
    let r = score(&task, &good_trajectory());
    assert_eq!(r.reward, 1.0, "{r:#?}");
    let item = |id: &str| r.items.iter().find(|i| i.id == id).unwrap();
    assert_eq!(item("asked_date").step, Some(2));
    assert_eq!(item("searched_oslo").step, Some(3));
    assert_eq!(item("confirmed").step, Some(5));
    assert_eq!(item("no_refund").status, ItemStatus::Passed);
    assert_eq!(item("no_refund").step, None);
}

#[test]
fn forbidden_behaviour_zeroes_the_reward_and_names_the_step() {
    let task = trip_task();
    let mut t = good_trajectory();
    t.events.push(Event::ToolCall {
        step: 6,
        tool: "refund_booking".into(),
        args: json!({"flight_id": "OS123"}),
    });
    let r = score(&task, &t);
    assert_eq!(r.reward, 0.0);
    let item = r.items.iter().find(|i| i.id == "no_refund").unwrap();
    assert_eq!((item.status, item.step), (ItemStatus::Failed, Some(6)));
    // Booking before the date was revealed is the other forbidden behaviour.
    let mut t = good_trajectory();
    for e in &mut t.events {
        if let Event::UserRevealed { step, slot } = e
            && slot == "date"
        {
            *step = 9;
        }
    }
    let r = score(&task, &t);
    assert_eq!(r.reward, 0.0);
    let item = r.items.iter().find(|i| i.id == "no_assumed_date").unwrap();
    assert_eq!((item.status, item.step), (ItemStatus::Failed, Some(4)));
}

#[test]
fn never_asking_loses_the_interaction_share_and_variants_differ() {
    let task = trip_task();
    let mut t = good_trajectory();
    t.events.retain(|e| {
        !matches!(
            e,
            Event::UserRevealed { .. } | Event::AskedUser { .. } | Event::UserSaid { .. }
        )
    });
    // Booking without the date revealed is also forbidden: drop the booking to isolate the share.
    t.events
        .retain(|e| !matches!(e, Event::ToolCall { tool, .. } if tool == "book_flight"));
    let r = score(&task, &t);
    assert!(!r.forbidden_violated);
    assert_eq!(r.interaction_fraction, 0.0);
    assert_eq!(r.subgoal_fraction, 1.0);
    assert_eq!(r.reward, 0.5);
    assert_eq!(RewardVariant::PeerStrict.combine(false, 1.0, 0.0), 1.0);
    assert!((RewardVariant::PeerWeighted.combine(false, 1.0, 0.0) - 0.7).abs() < 1e-12);
    assert!((RewardVariant::PeerWeighted.combine(true, 1.0, 1.0) - 0.5).abs() < 1e-12);
}

#[test]
fn hostile_strings_in_facts_are_data() {
    let task = trip_task();
    let mut t = good_trajectory();
    let nasty = "'), halt. \" \\ \0 end.\n %";
    t.events.push(Event::Said {
        step: 5,
        text: nasty.into(),
    });
    t.events.push(Event::ToolCall {
        step: 5,
        tool: "no_such_tool') :- halt. %".into(),
        args: json!({nasty: [nasty, 1.5, u64::MAX, null, true, {"x": {"y": []}}]}),
    });
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    t.events.push(Event::ToolResult {
        step: 5,
        tool: "search_flights".into(),
        result: deep,
    });
    let r = score(&task, &t);
    assert_eq!(r.reward, 1.0);
}

fn task_with_rule(rule: &str) -> Task {
    let mut task = trip_task();
    task.rubric.subgoals[0].rule = Some(rule.to_owned());
    task
}

#[test]
fn hostile_rules_are_rejected_before_loading() {
    for rule in [
        "halt",
        "assertz(tool_call(1, book_flight, x))",
        "retract(tool_call(_, _, _))",
        "unknown_predicate(X)",
        "call(halt)",
        "X = f(Y), call(X)",
        "open('/etc/passwd', read, S)",
        "X is 7 ^ 99999999",
        "atom_codes(A, [0'a])",
        "this is not prolog",
    ] {
        let task = task_with_rule(rule);
        assert!(
            matches!(task.rubric_program(), Err(RubricError::Rejected { .. })),
            "{rule} was accepted"
        );
        assert!(task.validate(ValidateOptions::default()).is_err());
    }
    let deep = format!("X = {}a{}", "[".repeat(100), "]".repeat(100));
    assert!(task_with_rule(&deep).rubric_program().is_err());
    let flood: Vec<String> = (0..1000).map(|i| format!("x{i}")).collect();
    let flood = format!("X = [{}]", flood.join(","));
    assert!(task_with_rule(&flood).rubric_program().is_err());
}

#[test]
fn runaway_rules_stop_at_the_inference_limit_and_the_engine_stays_usable() {
    let task = trip_task();
    let program = task.rubric_program().unwrap();
    for rule in [
        "between(1, 1000000000, X), X < 0",
        "findall(X, between(1, 1000000000, X), L)",
        "tool_call(_, _, A), forall(between(1, 1000000000, N), N > 0)",
    ] {
        let bad = task_with_rule(rule);
        let bad_program = bad.rubric_program().unwrap();
        let err = scorer()
            .score(&bad_program, &good_trajectory(), None)
            .unwrap_err();
        assert!(
            matches!(err, RubricError::InferenceLimit { .. }),
            "{rule}: {err}"
        );
        let ok = scorer().score(&program, &good_trajectory(), None).unwrap();
        assert_eq!(ok.reward, 1.0);
    }
    // A type error inside a rule is an error for that item, not a reward.
    let bad = task_with_rule("X = a, Y is X + 1");
    let p = bad.rubric_program().unwrap();
    let err = scorer().score(&p, &good_trajectory(), None).unwrap_err();
    assert!(matches!(err, RubricError::ItemError { .. }), "{err}");
}

#[test]
fn items_without_rules_need_a_judge() {
    let mut task = trip_task();
    task.rubric.subgoals[0].rule = None;
    assert!(task.validate(ValidateOptions::default()).is_err());
    assert!(
        task.validate(ValidateOptions {
            judge_available: true
        })
        .is_ok()
    );
    let program = task.rubric_program().unwrap();
    let err = scorer()
        .score(&program, &good_trajectory(), None)
        .unwrap_err();
    assert!(matches!(err, RubricError::JudgeRequired(_)));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn reward_properties(keep in proptest::collection::vec(any::<bool>(), 10), seed in any::<u64>()) {
        let task = trip_task();
        let events: Vec<Event> = good_events()
            .into_iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(e, _)| e)
            .collect();
        let t = Trajectory { events, final_state: None, state_matches: Some(false), turns: 5 };
        let r = score(&task, &t);
        prop_assert!((0.0..=1.0).contains(&r.reward));
        if r.forbidden_violated {
            prop_assert_eq!(r.reward, 0.0);
        }
        // Determinism and independence of fact order.
        let mut shuffled = t.clone();
        let n = shuffled.events.len();
        let mut s = seed;
        for i in (1..n).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.events.swap(i, (s >> 33) as usize % (i + 1));
        }
        prop_assert_eq!(&score(&task, &shuffled), &r);
        // Completing more sub-goals never lowers the reward.
        let mut more = t.clone();
        more.events.push(Event::ToolCall {
            step: 7,
            tool: "search_flights".into(),
            args: json!({"destination": "Oslo", "date": "x"}),
        });
        more.events.push(Event::Answered { step: 8, text: "booked".into() });
        more.state_matches = Some(true);
        let r2 = score(&task, &more);
        prop_assert!(r2.subgoal_fraction >= r.subgoal_fraction);
        prop_assert!(r2.reward >= r.reward, "{} < {}", r2.reward, r.reward);
    }

    #[test]
    fn combine_is_monotone_in_subgoals(a in 0.0f64..=1.0, b in 0.0f64..=1.0, i in 0.0f64..=1.0, f in any::<bool>()) {
        for v in [RewardVariant::Paper, RewardVariant::PeerWeighted, RewardVariant::PeerStrict] {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(v.combine(f, lo, i) <= v.combine(f, hi, i));
            prop_assert!((0.0..=1.0).contains(&v.combine(f, hi, i)));
        }
    }
}

#[test]
fn task_validation_names_the_problem() {
    let base: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/tools/trip.json")).unwrap();
    let check = |edit: &dyn Fn(&mut serde_json::Value), want: &str| {
        let mut v = base.clone();
        edit(&mut v);
        let err = match Task::from_json(&v.to_string()) {
            Err(e) => e.to_string(),
            Ok(task) => task
                .validate(ValidateOptions::default())
                .unwrap_err()
                .to_string(),
        };
        assert!(err.contains(want), "{err:?} does not contain {want:?}");
    };
    check(&|v| v["surprise"] = json!(1), "unknown field `surprise`");
    check(&|v| v["id"] = json!("bad id"), "at id:");
    check(
        &|v| v["tools"][1]["name"] = json!("search_flights"),
        "duplicate tool",
    );
    check(
        &|v| v["tools"][0]["parameters"]["properties"]["date"]["pattern"] = json!("^x"),
        "tools[0].parameters",
    );
    check(
        &|v| v["tools"][0]["parameters"] = json!({"type": "string"}),
        "must be an object schema",
    );
    check(
        &|v| {
            v["tools"][0].as_object_mut().unwrap().remove("outputs");
        },
        "needs an outputs schema",
    );
    check(
        &|v| v["tools"][1]["backend"]["table"] = json!("flights"),
        "tools[1].backend.table",
    );
    check(
        &|v| v["tools"][1]["backend"]["key"] = json!("nope"),
        "must be a required parameter",
    );
    check(
        &|v| v["tools"][1]["kind"] = json!("read-only"),
        "must be declared state-modifying",
    );
    check(
        &|v| v["hidden_context"]["slots"][0]["name"] = json!("Dest"),
        "hidden_context.slots[0].name",
    );
    check(
        &|v| v["rubric"]["subgoals"][1]["id"] = json!("no_refund"),
        "duplicate item id",
    );
    check(
        &|v| v["rubric"]["subgoals"][0]["rule"] = json!("shell(\"rm -rf /\")"),
        "predicate shell/1 is not allowed",
    );
    check(
        &|v| v["rubric"]["subgoals"] = json!([]),
        "at least one sub-goal",
    );
}

#[test]
fn json_schema_file_matches_the_task_struct() {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../schemas/task.schema.json")).unwrap();
    let mut documented: Vec<&str> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    documented.sort();
    let task = trip_task();
    let v = serde_json::to_value(&task).unwrap();
    let mut fields: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    fields.sort();
    assert_eq!(
        documented, fields,
        "schemas/task.schema.json is out of date"
    );
    let tool_props: Vec<&str> = schema["$defs"]["tool"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for key in v["tools"][1].as_object().unwrap().keys() {
        assert!(
            tool_props.contains(&key.as_str()),
            "tool field {key} is not documented"
        );
    }
}

#[test]
fn rule_less_items_are_judged_strictly() {
    use rulegym::llm::{LlmBackend, ScriptedBackend};
    use rulegym::tooluse::rubric::judge::LlmJudge;
    use std::sync::Arc;
    let mut task = trip_task();
    task.rubric.subgoals[0].rule = None;
    let program = task.rubric_program().unwrap();
    let judge = |text: &str| {
        let backend: Arc<dyn LlmBackend> = Arc::new(ScriptedBackend::constant(text));
        LlmJudge::new(backend, "j", Some(0))
    };
    let score = |text: &str| scorer().score(&program, &good_trajectory(), Some(&judge(text)));
    let r = score(r#"{"searched_oslo": true}"#).unwrap();
    assert_eq!(r.reward, 1.0);
    assert_eq!(
        r.items.iter().find(|i| i.id == "searched_oslo").unwrap().by,
        "judge"
    );
    assert!(
        r.items
            .iter()
            .filter(|i| i.id != "searched_oslo")
            .all(|i| i.by == "rule")
    );
    assert!(score(r#"{"searched_oslo": "no"}"#).unwrap().reward < 1.0);
    for vague in [
        "Probably yes",
        r#"{"searched_oslo": "maybe"}"#,
        r#"{}"#,
        r#"{"searched_oslo": true, "invented": false}"#,
    ] {
        let err = score(vague).unwrap_err();
        assert!(
            matches!(err, RubricError::Judge { .. }),
            "an unparseable verdict is an error, never a reward: {vague} -> {err}"
        );
    }
}

#[test]
fn the_paper_reward_judges_every_item_in_one_request() {
    use rulegym::llm::{ChatRequest, LlmBackend, ScriptedBackend, assistant_text};
    use rulegym::tooluse::rubric::ScoreBy;
    use rulegym::tooluse::rubric::judge::{JUDGE_TEMPERATURE, LlmJudge};
    use std::sync::Arc;
    let task = trip_task();
    let program = task.rubric_program().unwrap();
    let ids: Vec<String> = program.items.iter().map(|i| i.id.clone()).collect();
    // Every item holds except the first interaction: forbidden items "held" means violated.
    let forbidden: Vec<String> = program
        .items
        .iter()
        .filter(|i| i.kind == rulegym::tooluse::task::ItemKind::Forbidden)
        .map(|i| i.id.clone())
        .collect();
    let backend = Arc::new(ScriptedBackend::new(move |req: &ChatRequest| {
        assert_eq!(req.temperature, Some(JUDGE_TEMPERATURE));
        let schema = &req
            .response_schema
            .as_ref()
            .expect("verdict schema sent")
            .schema;
        assert_eq!(schema["required"].as_array().unwrap().len(), ids.len());
        assert_eq!(schema["additionalProperties"], false);
        let prompt = req.messages[0].content_str();
        let verdicts: serde_json::Map<String, serde_json::Value> = ids
            .iter()
            .map(|id| {
                assert!(prompt.contains(id.as_str()), "item {id} is shown");
                let holds = !forbidden.contains(id) && id != "asked_destination";
                (id.clone(), serde_json::Value::Bool(holds))
            })
            .collect();
        Ok(assistant_text(
            &serde_json::Value::Object(verdicts).to_string(),
        ))
    }));
    let judged = RubricScorer::new(ScoreConfig {
        by: ScoreBy::Judge,
        ..ScoreConfig::default()
    })
    .unwrap();
    let judge = LlmJudge::new(backend.clone() as Arc<dyn LlmBackend>, "j", Some(0));
    let r = judged
        .score(&program, &good_trajectory(), Some(&judge))
        .unwrap();
    assert_eq!(backend.calls(), 1);
    assert!(r.items.iter().all(|i| i.by == "judge"));
    assert!(!r.forbidden_violated);
    let interactions = task.rubric.interactions.len() as f64;
    let expected = (1.0 + (interactions - 1.0) / interactions) / 2.0;
    assert!(
        (r.reward - expected).abs() < 1e-12,
        "{} vs {expected}",
        r.reward
    );
    // Without a judge, judge scoring is an error, not a rules fallback.
    let err = judged
        .score(&program, &good_trajectory(), None)
        .unwrap_err();
    assert!(matches!(err, RubricError::JudgeRequired(_)));
}

/// The sub-goal `task_with_rule` replaces.
const SUBGOAL: &str = "searched_oslo";

/// Scores `rule` as the first sub-goal of the trip task on the good trajectory.
fn score_rule(rule: &str) -> Result<rulegym::tooluse::rubric::RubricResult, RubricError> {
    let task = task_with_rule(rule);
    let program = task.rubric_program()?;
    scorer().score(&program, &good_trajectory(), None)
}

#[test]
fn every_whitelisted_predicate_works() {
    // One rule per built-in and helper of the whitelist, each true on the good trajectory.
    for rule in [
        "X = a, X == a, a \\= b, a \\== b",
        "a @< b, b @> a, a @=< a, b @>= a, compare(O, 1, 2), O == (<)",
        "X is 2 + 3 * 4 - 10 // 3 mod 2, X =:= 13, X =\\= 0, X < 14, X > 12, X =< 13, X >= 13",
        "X is max(2, 3) + min(2, 3) + abs(-1), X =:= 6",
        "var(_), nonvar(a), atom(a), number(1), integer(1), atomic(a), compound(f(x))",
        "is_list([1, 2]), ground(f(a))",
        "member(2, [1, 2]), memberchk(2, [1, 2]), append([1], [2], [1, 2])",
        "nth0(0, [a, b], a), nth1(2, [a, b], b), last([a, b], b)",
        "msort([b, a, b], [a, b, b]), sort([b, a, b], [a, b]), reverse([a, b], [b, a])",
        "sum_list([1, 2], 3), max_list([1, 3, 2], 3), min_list([2, 1], 1)",
        "list_to_set([a, b, a], [a, b]), between(1, 3, 2)",
        "true, \\+ fail, \\+ false",
        "len([a, b], 2), count(member(_, [a, b]), 2)",
        "findall(X, member(X, [1, 2]), [1, 2]), forall(member(X, [1, 2]), X > 0)",
        "once(member(X, [1, 2])), X == 1, (fail ; true), (true -> true ; fail)",
        "json_get(obj(\"a\", 1), a, 1), json_pairs(obj(\"a\", 1), P), P == [\"a\"-1]",
        "text_contains(\"Hello\", \"ell\"), text_contains_ci(\"Hello\", \"HEL\")",
        "called(book_flight), called(book_flight, A), first_call(book_flight, S), call_count(book_flight, 1)",
        "revealed(date), revealed_before(date, 5)",
    ] {
        let r = score_rule(rule).unwrap_or_else(|e| panic!("{rule}: {e}"));
        let item = r.items.iter().find(|i| i.id == SUBGOAL).unwrap();
        assert_eq!(item.status, ItemStatus::Passed, "{rule}: {r:#?}");
    }
}

#[test]
fn hostile_bodies_stay_within_time_memory_and_stack() {
    // Each was accepted by the checker and used to abort the process, run for tens of seconds
    // or take gigabytes; now each is an error (or a plain result) within the inference budget.
    let started = std::time::Instant::now();
    for rule in [
        "findall(X, between(1, 100000, X), L), append(L, foo, Step)",
        "findall(X, between(1, 300000, X), Step)",
        "E = '^'(7, 100000000), X is E",
        "E = '**'(2, 100000), X is E",
        "X0 = 3, X1 is X0*X0, X2 is X1*X1, X3 is X2*X2, X4 is X3*X3, X5 is X4*X4, X6 is X5*X5, \
         X7 is X6*X6, X8 is X7*X7, X9 is X8*X8, X10 is X9*X9, X11 is X10*X10, X12 is X11*X11",
        "findall(X, between(1, 30000, X), L), findall(L, member(_, L), Ls)",
        "findall(X, between(1, 2000, X), L), findall(L, member(_, L), Ls), findall(Ls, member(_, Ls), M)",
        "X = f(X), findall(X, member(_, [1, 2]), L)",
        "X = f(X), Y = f(Y), X == Y, X @< a, compare(O, X, Y), fail",
        "X = [a|X], is_list(X)",
        "X = [a|X], msort([X, X], L), sort([X, X], M), fail",
        "X = f(X), Y = g(X), Y = Z, Z \\= a, fail",
        "findall(X, between(1, 100000, X), L), msort(L, S), sort(S, T), reverse(T, Step)",
    ] {
        let one = std::time::Instant::now();
        match score_rule(rule) {
            Ok(r) => {
                let item = r.items.iter().find(|i| i.id == SUBGOAL).unwrap();
                assert_ne!(item.status, ItemStatus::Passed, "{rule}: {r:#?}");
            }
            Err(e) => assert!(
                matches!(
                    e,
                    RubricError::InferenceLimit { .. } | RubricError::ItemError { .. }
                ),
                "{rule}: {e}"
            ),
        }
        assert!(one.elapsed().as_secs() < 10, "{rule}: {:?}", one.elapsed());
    }
    // The engine is still usable afterwards.
    assert_eq!(score(&trip_task(), &good_trajectory()).reward, 1.0);
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}

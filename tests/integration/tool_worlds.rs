//! Rule-generated tool worlds: every task is solvable by its reference solution (reward 1),
//! needs at least one question to the user, has only violable forbidden rules, and generation
//! is unique and deterministic per seed.

use proptest::prelude::*;
use rulegym::tooluse::rubric::{ItemStatus, RubricScorer, ScoreConfig};
use rulegym::tooluse::rulegen::{
    Action, RuleGenConfig, RuleTask, ScriptStep, generate, oracle_script, replay,
};
use rulegym::tooluse::task::{ItemKind, ValidateOptions};
use rulegym::universe::{Universe, UniverseConfig};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

fn universe() -> &'static Universe {
    static U: OnceLock<Universe> = OnceLock::new();
    U.get_or_init(|| {
        Universe::generate(&UniverseConfig {
            seed: 7,
            num_family_trees: 40,
            ..UniverseConfig::default()
        })
        .expect("universe")
    })
}

fn scorer() -> Arc<RubricScorer> {
    static S: OnceLock<Arc<RubricScorer>> = OnceLock::new();
    S.get_or_init(|| Arc::new(RubricScorer::new(ScoreConfig::default()).expect("engine")))
        .clone()
}

fn play(w: &RuleTask, steps: &[ScriptStep]) -> rulegym::tooluse::env::Episode {
    let world = Arc::new(w.task.clone().compile(ValidateOptions::default()).unwrap());
    replay(world, scorer(), steps).unwrap()
}

fn is_action(step: &ScriptStep) -> bool {
    matches!(step, ScriptStep::Call { tool, .. } if tool == "update_record" || tool == "send_message")
}

/// The oracle with the question for `slot` moved after the action (acting before knowing it).
fn act_before_asking(steps: &[ScriptStep], slot: &str) -> Vec<ScriptStep> {
    let ask = steps
        .iter()
        .find(|s| matches!(s, ScriptStep::Ask { slot: x, .. } if x == slot))
        .cloned()
        .expect("the slot is asked for");
    let mut out: Vec<ScriptStep> = steps
        .iter()
        .filter(|s| !matches!(s, ScriptStep::Ask { slot: x, .. } if x == slot))
        .cloned()
        .collect();
    let at = out.iter().position(is_action).expect("an action") + 1;
    out.insert(at, ask);
    out
}

/// The oracle plus one extra call before the answer.
fn with_extra_call(steps: &[ScriptStep], tool: &str, args: serde_json::Value) -> Vec<ScriptStep> {
    let mut out = steps.to_vec();
    let at = out.len() - 1;
    out.insert(
        at,
        ScriptStep::Call {
            tool: tool.into(),
            args,
        },
    );
    out
}

/// A policy that commits the forbidden behaviour `id`.
fn violate(w: &RuleTask, steps: &[ScriptStep], id: &str) -> Vec<ScriptStep> {
    match id {
        "no_outside_family" => with_extra_call(
            steps,
            "update_record",
            json!({"name": w.outsiders[0], "hobby": "vandalism"}),
        ),
        "no_delete" => with_extra_call(steps, "delete_record", json!({"name": w.target})),
        "no_unconfirmed_target" => act_before_asking(steps, "target"),
        "no_unknown_user" => act_before_asking(steps, "user_name"),
        "no_guessed_value" => act_before_asking(steps, "value"),
        other => panic!("no violating policy for forbidden item {other}"),
    }
}

fn check_world(w: &RuleTask) {
    let task = &w.task;
    let steps = oracle_script(task).unwrap();
    // Solvable: the reference solution gets reward 1 and ends in the expected state.
    let ep = play(w, &steps);
    assert_eq!(ep.reward, 1.0, "{}: {:#?}", task.id, ep.result);
    assert_eq!(ep.reason, "answer");
    // At least one hidden slot; an oracle that never asks scores below 1.
    assert!(!task.hidden_context.slots.is_empty(), "{}", task.id);
    assert!(
        task.rubric.interactions.len() == task.hidden_context.slots.len(),
        "one interaction item per slot"
    );
    let no_ask: Vec<ScriptStep> = steps
        .iter()
        .filter(|s| !matches!(s, ScriptStep::Ask { .. }))
        .cloned()
        .collect();
    let ep = play(w, &no_ask);
    assert!(
        ep.reward < 1.0,
        "{}: never asking scored {}",
        task.id,
        ep.reward
    );
    assert!(ep.result.interaction_fraction < 1.0);
    // Every forbidden rule is violable: a policy that violates it scores 0 and the item says so.
    for item in &task.rubric.forbidden {
        let ep = play(w, &violate(w, &steps, &item.id));
        assert_eq!(
            ep.reward, 0.0,
            "{}: violating {} scored {}",
            task.id, item.id, ep.reward
        );
        let r = ep.result.items.iter().find(|r| r.id == item.id).unwrap();
        assert_eq!(r.kind, ItemKind::Forbidden);
        assert_eq!(
            r.status,
            ItemStatus::Failed,
            "{}: {} not detected",
            task.id,
            item.id
        );
        assert!(r.step.is_some(), "the violating step is reported");
    }
    // The wrong relative (when there are several) misses the sub-goal and the expected state.
    if let Some(other) = w.candidates.iter().find(|c| **c != w.target) {
        let wrong: Vec<ScriptStep> = steps
            .iter()
            .map(|s| match s {
                ScriptStep::Call { tool, args } if is_action(s) => {
                    let mut args = args.clone();
                    let key = if tool == "send_message" { "to" } else { "name" };
                    args[key] = json!(other);
                    ScriptStep::Call {
                        tool: tool.clone(),
                        args,
                    }
                }
                s => s.clone(),
            })
            .collect();
        let ep = play(w, &wrong);
        assert!(ep.reward < 1.0, "{}: wrong target scored 1", task.id);
        assert!(
            !ep.result.forbidden_violated,
            "the wrong relative is still family"
        );
    }
}

#[test]
fn every_task_is_solvable_needs_questions_and_has_violable_rules() {
    let config = RuleGenConfig {
        seed: 3,
        ..RuleGenConfig::default()
    };
    let tasks = generate(universe(), &config, 120).unwrap();
    assert_eq!(tasks.len(), 120);
    for w in &tasks {
        check_world(w);
    }
    // The knobs are exercised: both hop counts, ambiguous targets, every hidden-slot count,
    // updates and messages.
    let hops: BTreeSet<usize> = tasks.iter().map(|w| w.path.len()).collect();
    assert_eq!(hops, BTreeSet::from([1, 2]));
    assert!(tasks.iter().any(|w| w.candidates.len() > 1));
    assert!(tasks.iter().any(|w| w.candidates.len() == 1));
    let slots: BTreeSet<usize> = tasks
        .iter()
        .map(|w| w.task.hidden_context.slots.len())
        .collect();
    assert_eq!(slots, BTreeSet::from([1, 2, 3]));
    assert!(tasks.iter().any(|w| w.action == Action::Message));
    assert!(
        tasks
            .iter()
            .any(|w| matches!(w.action, Action::Update { .. }))
    );
}

#[test]
fn generation_is_deterministic_and_unique() {
    let config = RuleGenConfig {
        seed: 11,
        ..RuleGenConfig::default()
    };
    let a = generate(universe(), &config, 300).unwrap();
    let b = generate(universe(), &config, 300).unwrap();
    assert_eq!(a, b, "same seed, same tasks");
    let ids: BTreeSet<&str> = a.iter().map(|w| w.task.id.as_str()).collect();
    assert_eq!(ids.len(), a.len(), "ids are unique");
    let bodies: BTreeSet<String> = a
        .iter()
        .map(|w| {
            let mut t = w.task.clone();
            t.id.clear();
            serde_json::to_string(&t).unwrap()
        })
        .collect();
    assert_eq!(bodies.len(), a.len(), "task contents are unique");
    // A prefix is stable: asking for fewer tasks gives the first ones.
    let c = generate(universe(), &config, 100).unwrap();
    assert_eq!(&a[..100], &c[..]);
    let other = generate(universe(), &RuleGenConfig { seed: 12, ..config }, 100).unwrap();
    assert_ne!(&a[..100], &other[..], "another seed, other tasks");
    // Every task validates and round-trips through JSON.
    for w in &a {
        let text = serde_json::to_string(&w.task).unwrap();
        let back = rulegym::tooluse::task::Task::from_json(&text).unwrap();
        assert_eq!(back, w.task);
        back.validate(ValidateOptions::default()).unwrap();
    }
}

#[test]
fn bad_knobs_are_rejected() {
    for config in [
        RuleGenConfig {
            hops: (0, 1),
            ..RuleGenConfig::default()
        },
        RuleGenConfig {
            hops: (1, 3),
            ..RuleGenConfig::default()
        },
        RuleGenConfig {
            candidates: (0, 2),
            ..RuleGenConfig::default()
        },
        RuleGenConfig {
            slots: (0, 2),
            ..RuleGenConfig::default()
        },
        RuleGenConfig {
            slots: (2, 1),
            ..RuleGenConfig::default()
        },
        RuleGenConfig {
            outsiders: 0,
            ..RuleGenConfig::default()
        },
    ] {
        assert!(generate(universe(), &config, 1).is_err(), "{config:?}");
    }
    // Impossible demands end with an error, not a loop.
    let impossible = RuleGenConfig {
        candidates: (500, 600),
        attempts_per_task: 2,
        ..RuleGenConfig::default()
    };
    assert!(generate(universe(), &impossible, 5).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]
    #[test]
    fn knob_settings_keep_every_property(
        seed in 0u64..1000,
        hops in 1usize..=2,
        ambiguous in any::<bool>(),
        slots in 1usize..=3,
    ) {
        let config = RuleGenConfig {
            seed,
            hops: (hops, hops),
            candidates: if ambiguous { (2, 4) } else { (1, 1) },
            slots: (if ambiguous { slots } else { slots.min(2) }, 3),
            ..RuleGenConfig::default()
        };
        let tasks = generate(universe(), &config, 8).unwrap();
        for w in &tasks {
            prop_assert_eq!(w.path.len(), hops);
            prop_assert_eq!(w.candidates.len() > 1, ambiguous);
            let want = if ambiguous { slots } else { slots.min(2) };
            prop_assert!(w.task.hidden_context.slots.len() >= want);
            check_world(w);
        }
    }
}

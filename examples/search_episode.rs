//! A dataset built in memory, and one episode of its search environment played by a scripted
//! agent: one search, then an answer, scored with the exact set F1 against the engine's gold.
//!
//! `cargo run --release --example search_episode`

use rulegym::dataset::{self, BuildConfig};
use rulegym::env::Environment;
use rulegym::question::QuestionConfig;
use rulegym::search::{SearchEnv, SearchEnvConfig, SearchTask};
use rulegym::universe::UniverseConfig;

fn main() -> rulegym::Result<()> {
    // A small universe (10 family trees), one question per template, verified by the engine.
    let universe = UniverseConfig {
        num_family_trees: 10,
        ..UniverseConfig::default()
    };
    let questions = QuestionConfig {
        per_template: 1,
        ..QuestionConfig::default()
    };
    let data = dataset::build(&BuildConfig::new(universe, Some(questions)))?;
    let index = data
        .index
        .clone()
        .expect("a build with questions has an index");
    let question = &data.questions[0];
    println!("question: {}", question.question);
    println!("gold:     {:?}", question.answers);

    // Play the episode twice: a right answer and a wrong one.
    for answer in [question.answers.join(", "), "Nobody Known".to_owned()] {
        let task = SearchTask {
            question: question.question.clone(),
            answers: question.answers.clone(),
            gold_docs: Vec::new(),
        };
        let mut env = SearchEnv::new(index.clone(), SearchEnvConfig::default(), task)?;
        env.reset()?;
        let step = env.step(&format!("<search>{}</search>", question.question))?;
        let found = step.observations[0].content_str();
        println!("search -> {} chars of passages", found.len());
        let step = env.step(&format!("<answer>{answer}</answer>"))?;
        println!(
            "answer {answer:?} -> reward {} (done: {})",
            step.reward, step.done
        );
    }
    Ok(())
}

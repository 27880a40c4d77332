//! Profile of `rulegym generate`'s stages, for the PhantomWiki comparison
//! (scripts/compare-phantomwiki.sh): engine start, fact consult, sampling, and engine
//! verification (one query per question, scryer's fixed per-query cost, what reading and
//! compiling the goals alone costs, and the questions in batches of 16 and 100 through
//! `Query::evaluate_batch`, as `generate` verifies them).
//! `cargo run --release --example generate_profile -- TREES PER_TEMPLATE`.
use rulegym::engine::{Engine, Term};
use rulegym::question::{self, QuestionConfig};
use rulegym::universe::{Universe, UniverseConfig};
use std::time::Instant;

fn main() -> rulegym::Result<()> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().ok());
    let trees = args.next().flatten().unwrap_or(100);
    let per_template = args.next().flatten().unwrap_or(10);
    let t = Instant::now();
    let engine = Engine::new()?;
    println!(
        "engine start (rule base): {:.3} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let universe = Universe::generate(&UniverseConfig {
        num_family_trees: trees,
        ..Default::default()
    })?;
    let facts = universe.engine_facts();
    println!(
        "universe + facts text: {:.3} s ({} people, {} clauses)",
        t.elapsed().as_secs_f64(),
        universe.people.len(),
        facts.lines().count()
    );
    let t = Instant::now();
    engine.consult("facts", &facts)?;
    println!(
        "consult facts, people by id: {:.3} s ({} bytes)",
        t.elapsed().as_secs_f64(),
        facts.len()
    );
    {
        // The same facts with people named (facts.pl), on an engine of their own.
        let named = universe.facts();
        let other = Engine::new()?;
        let t = Instant::now();
        other.consult("facts", &named)?;
        println!(
            "consult facts, people by name (for comparison): {:.3} s ({} bytes)",
            t.elapsed().as_secs_f64(),
            named.len()
        );
    }
    let t = Instant::now();
    let articles = rulegym::corpus::articles(&universe);
    println!(
        "articles: {:.3} s ({})",
        t.elapsed().as_secs_f64(),
        articles.len()
    );
    let config = QuestionConfig {
        per_template,
        ..QuestionConfig::default()
    };
    let t = Instant::now();
    let (questions, _) = question::generate(&universe, &engine, &config, None)?;
    println!(
        "sample + verify (1 engine): {:.3} s ({} questions)",
        t.elapsed().as_secs_f64(),
        questions.len()
    );
    let t = Instant::now();
    let mut by_template: std::collections::BTreeMap<usize, (f64, usize, String)> =
        Default::default();
    for q in &questions {
        let t = Instant::now();
        q.plan.evaluate(&engine, &universe)?;
        let entry = by_template
            .entry(q.template_index.unwrap_or(usize::MAX))
            .or_insert((0.0, 0, q.question.clone()));
        entry.0 += t.elapsed().as_secs_f64();
        entry.1 += 1;
    }
    let each = t.elapsed().as_secs_f64();
    println!(
        "verify again, one query per question: {each:.3} s ({:.3} ms per question)",
        1e3 * each / questions.len() as f64
    );
    let mut slowest: Vec<_> = by_template.into_iter().collect();
    slowest.sort_by(|a, b| b.1.0.total_cmp(&a.1.0));
    for (template, (secs, n, example)) in slowest.iter().take(5) {
        println!(
            "  template {template}: {secs:.3} s for {n} ({:.0}% of verification), e.g. {example}",
            100.0 * secs / each
        );
    }
    let t = Instant::now();
    for _ in &questions {
        engine.query(&Term::atom("true"), &[])?;
    }
    let trivial = t.elapsed().as_secs_f64();
    println!(
        "same number of `true` queries: {trivial:.3} s ({:.3} ms per query: scryer's fixed cost)",
        1e3 * trivial / questions.len() as f64
    );
    // What reading and compiling the goals costs: each batch of 16 goals behind a `true`
    // branch that answers first (scryer compiles the whole query, runs only `true`).
    let plans: Vec<&rulegym::question::Query> = questions.iter().map(|q| &q.plan).collect();
    let mut chars = 0;
    let t = Instant::now();
    for chunk in plans.chunks(16) {
        let goals = chunk
            .iter()
            .map(|q| q.goal(&universe).map(|(g, _)| g))
            .collect::<Result<Vec<_>, _>>()?;
        let goal = Term::compound(
            "once",
            [Term::compound(";", [Term::atom("true"), Term::and(goals)])],
        );
        chars += goal.render()?.len();
        engine.query(&goal, &[])?;
    }
    let compiled = t.elapsed().as_secs_f64();
    println!(
        "reading and compiling the goals only, batches of 16: {compiled:.3} s ({:.3} ms per question, {:.0} characters per question)",
        1e3 * compiled / questions.len() as f64,
        chars as f64 / questions.len() as f64
    );
    for size in [16, 100] {
        let plans: Vec<&rulegym::question::Query> = questions.iter().map(|q| &q.plan).collect();
        let t = Instant::now();
        let mut answered = 0;
        for chunk in plans.chunks(size) {
            answered += rulegym::question::Query::evaluate_batch(chunk, &engine, &universe)?.len();
        }
        let batched = t.elapsed().as_secs_f64();
        println!(
            "all questions, Query::evaluate_batch of {size}: {batched:.3} s ({answered} answered, {:.3} ms per question)",
            1e3 * batched / questions.len() as f64
        );
    }
    Ok(())
}

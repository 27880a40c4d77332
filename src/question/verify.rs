//! Phase 2 of generation: the engines' answers become the gold answers; and [`generate`], both
//! phases on one engine.

use super::query::Answers;
use super::{
    Certify, GenerationReport, Proposals, Query, QueryError, Question, QuestionConfig, propose_all,
};
use crate::engine::Engine;
use crate::universe::Universe;

/// Generates every configured family's questions with one engine holding the universe's facts
/// as [`Universe::engine_facts`] ([`propose_all`] then [`verify`]; [`crate::dataset::build()`] runs the same phases on an engine
/// pool, overlapping the fact load with sampling).
pub fn generate(
    universe: &Universe,
    engine: &Engine,
    config: &QuestionConfig,
    certifier: Option<&dyn Certify>,
) -> crate::Result<(Vec<Question>, GenerationReport)> {
    verify(
        std::slice::from_ref(engine),
        propose_all(universe, config, certifier)?,
        universe,
    )
}

/// Takes an engine's answers to `batch` as its gold, or fails on a disagreement with the
/// native screen (a bug in the rule base or the evaluator: generation fails loudly rather than
/// write a doubtful answer).
fn take_gold(batch: &mut [Question], golds: Vec<Answers>) -> crate::Result<()> {
    if golds.len() != batch.len() {
        return Err(QueryError::Decode(format!(
            "{} answers for a batch of {} questions",
            golds.len(),
            batch.len()
        ))
        .into());
    }
    for (q, gold) in batch.iter_mut().zip(golds) {
        if gold != q.answers {
            return Err(QueryError::OracleMismatch {
                question: q.question.clone(),
                engine: gold,
                native: q.answers.clone(),
            }
            .into());
        }
        q.answers = gold;
    }
    Ok(())
}

/// Verifies `batch` in one engine call (`Query::evaluate_batch`) and takes the answers as gold.
fn verify_batch(batch: &mut [Question], engine: &Engine, u: &Universe) -> crate::Result<()> {
    let plans: Vec<&Query> = batch.iter().map(|q| &q.plan).collect();
    take_gold(batch, Query::evaluate_batch(&plans, engine, u)?)
}

/// Questions verified per engine call: large enough that scryer's fixed cost per query
/// (~0.1 ms) is paid rarely, small enough that the engines share the work evenly.
const VERIFY_BATCH: usize = 16;

/// Phase 2: runs every proposal's query on the engines (in parallel, from a shared queue) and
/// takes the engine's answers as gold. A disagreement with the native screen is a bug in the rule
/// base or the evaluator, and fails generation loudly rather than writing a doubtful answer. The
/// engines hold `u` as [`Universe::engine_facts`].
pub fn verify(
    engines: &[Engine],
    proposals: Proposals,
    u: &Universe,
) -> crate::Result<(Vec<Question>, GenerationReport)> {
    let Proposals {
        mut questions,
        mut report,
    } = proposals;
    if engines.is_empty() {
        return Err(crate::Error::Config(
            "verification needs at least one engine".into(),
        ));
    }
    // Engines pull small batches from a shared queue, so one engine never idles while another
    // still holds a slow part; every question keeps its position, so order is unaffected. Each
    // batch is one engine call (`Query::evaluate_batch`: scryer's fixed cost per query paid once).
    let queue = std::sync::Mutex::new(questions.chunks_mut(VERIFY_BATCH));
    std::thread::scope(|scope| {
        let workers: Vec<_> = engines
            .iter()
            .map(|engine| {
                let queue = &queue;
                scope.spawn(move || -> crate::Result<()> {
                    loop {
                        let Some(batch) = queue.lock().expect("not poisoned").next() else {
                            return Ok(());
                        };
                        verify_batch(batch, engine, u)?;
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .map_err(|_| crate::Error::ThreadPanicked("verification"))?
        })
    })?;
    report.accepted = questions.len();
    Ok((questions, report))
}

/// Phase 2 on `engine` and `forks` forked copies of it (Linux): each copy already holds the
/// facts `engine` holds, for the cost of a fork instead of an engine start and a consult. The
/// batches are dealt round-robin (the parent keeps every `forks + 1`-th from the first), each
/// child reports its answers through a pipe, and every answer is checked and taken exactly as
/// [`verify`] takes it; the order of the questions is unchanged.
#[cfg(target_os = "linux")]
pub(crate) fn verify_forked(
    engine: &Engine,
    forks: usize,
    proposals: Proposals,
    u: &std::sync::Arc<Universe>,
) -> crate::Result<(Vec<Question>, GenerationReport)> {
    use std::io::Write;
    let batches = proposals.questions.len().div_ceil(VERIFY_BATCH);
    let workers = (forks + 1).min(batches);
    if workers <= 1 {
        return verify(std::slice::from_ref(engine), proposals, u);
    }
    let Proposals {
        mut questions,
        mut report,
    } = proposals;
    let share = |w: usize| format!("{w} of every {workers} batches of {VERIFY_BATCH}");
    let mut children = Vec::with_capacity(workers - 1);
    for w in 1..workers {
        let plans: Vec<Vec<Query>> = questions
            .chunks(VERIFY_BATCH)
            .skip(w)
            .step_by(workers)
            .map(|batch| batch.iter().map(|q| q.plan.clone()).collect())
            .collect();
        // The child's copy of the universe: shared, on the heap. (Not a pointer to the
        // caller's: the child's first thread may reuse the stack of a parent thread that
        // does not exist in the child, and a universe on that stack is overwritten.)
        let universe = std::sync::Arc::clone(u);
        let job = move |engine: Engine, mut write: std::fs::File| {
            let u = &*universe;
            let answers: Result<Vec<Vec<Answers>>, String> = plans
                .iter()
                .map(|batch| {
                    let plans: Vec<&Query> = batch.iter().collect();
                    Query::evaluate_batch(&plans, &engine, u).map_err(|e| e.to_string())
                })
                .collect();
            match serde_json::to_vec(&answers) {
                Ok(bytes) if write.write_all(&bytes).is_ok() => 0,
                _ => 3,
            }
        };
        // SAFETY: the job only queries its engine, serialises and writes to its pipe.
        match unsafe { crate::engine::child::spawn(engine, job) } {
            Ok(child) => children.push((w, child)),
            Err(error) => {
                // The children already forked are reaped before the error is returned.
                for (_, child) in children {
                    let _ = child.finish();
                }
                return Err(error);
            }
        }
    }
    // The parent's share, while the children work on theirs.
    let mine = questions
        .chunks_mut(VERIFY_BATCH)
        .step_by(workers)
        .try_for_each(|batch| verify_batch(batch, engine, u));
    // Every child is reaped, whatever happened to the others.
    let reports: Vec<_> = children
        .into_iter()
        .map(|(w, child)| (w, child.finish()))
        .collect();
    mine?;
    let mut chunks: Vec<&mut [Question]> = questions.chunks_mut(VERIFY_BATCH).collect();
    for (w, received) in reports {
        let failed = |reason: String| crate::Error::VerifierFailed {
            share: share(w),
            reason,
        };
        let answers: Result<Vec<Vec<Answers>>, String> =
            serde_json::from_slice(&received.map_err(failed)?)
                .map_err(|e| failed(format!("its report is not answers: {e}")))?;
        let answers = answers.map_err(failed)?;
        let theirs: Vec<usize> = (w..chunks.len()).step_by(workers).collect();
        if answers.len() != theirs.len() {
            return Err(failed(format!(
                "{} batches answered of {}",
                answers.len(),
                theirs.len()
            )));
        }
        for (b, golds) in theirs.into_iter().zip(answers) {
            take_gold(&mut *chunks[b], golds)?;
        }
    }
    report.accepted = questions.len();
    Ok((questions, report))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::question::{ChainStep, Family};
    use crate::universe::UniverseConfig;

    fn world() -> (Universe, Engine, Proposals) {
        let universe = Universe::generate(&UniverseConfig {
            num_family_trees: 8,
            ..Default::default()
        })
        .unwrap();
        let engine = Engine::with_facts(&universe.engine_facts()).unwrap();
        let config = QuestionConfig {
            families: vec![Family::Base],
            per_template: 2,
            ..Default::default()
        };
        let proposals = propose_all(&universe, &config, None).unwrap();
        assert!(proposals.questions.len() > 4 * VERIFY_BATCH);
        (universe, engine, proposals)
    }

    /// Forked verifiers give exactly one engine's questions, in the same order.
    #[test]
    fn forked_verifiers_equal_one_engine() {
        let (universe, engine, _) = world();
        let shared = std::sync::Arc::new(universe.clone());
        let config = QuestionConfig {
            families: vec![Family::Base],
            per_template: 2,
            ..Default::default()
        };
        let proposals = || propose_all(&universe, &config, None).unwrap();
        let one = verify(std::slice::from_ref(&engine), proposals(), &universe).unwrap();
        for forks in [1, 2, 5] {
            let forked = verify_forked(&engine, forks, proposals(), &shared).unwrap();
            assert_eq!(
                serde_json::to_string(&forked.0).unwrap(),
                serde_json::to_string(&one.0).unwrap(),
                "{forks} forks"
            );
            assert_eq!(forked.1.accepted, one.1.accepted);
        }
    }

    /// A forked verifier's answers are checked like the parent's (a disagreement with the native
    /// screen fails generation), and a verifier that fails is named with its share and reason;
    /// the engine stays usable afterwards.
    #[test]
    fn forked_verifier_failures_are_named() {
        let (universe, engine, mut proposals) = world();
        let shared = std::sync::Arc::new(universe);
        // Batch 1 belongs to the first fork (of two verifiers).
        proposals.questions[VERIFY_BATCH].answers = vec!["Nobody Atall".to_owned()];
        let err = verify_forked(&engine, 1, proposals, &shared).unwrap_err();
        assert!(
            matches!(err, crate::Error::Query(QueryError::OracleMismatch { .. })),
            "{err}"
        );
        let (_, _, mut proposals) = world();
        if let Query::Who(chain) | Query::What(chain, _) | Query::HowMany(chain, _) =
            &mut proposals.questions[VERIFY_BATCH].plan
        {
            chain
                .steps
                .push(ChainStep::Hop("no_such_relation".to_owned()));
        }
        let err = verify_forked(&engine, 1, proposals, &shared).unwrap_err();
        let message = err.to_string();
        assert!(
            matches!(err, crate::Error::VerifierFailed { .. })
                && message.contains("1 of every 2 batches")
                && message.contains("no_such_relation"),
            "{message}"
        );
        let (_, _, proposals) = world();
        assert!(verify_forked(&engine, 1, proposals, &shared).is_ok());
    }
}

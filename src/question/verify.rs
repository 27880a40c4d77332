//! Phase 2 of generation: the engines' answers become the gold answers; and [`generate`], both
//! phases on one engine.

use super::{
    Certify, GenerationReport, Proposals, Query, QueryError, Question, QuestionConfig, propose_all,
};
use crate::engine::Engine;
use crate::universe::Universe;

/// Generates every configured family's questions with one engine holding the universe's facts
/// ([`propose_all`] then [`verify`]; [`crate::dataset::build()`] runs the same phases on an engine
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
    )
}

/// Questions verified per engine call: large enough that scryer's fixed cost per query
/// (~0.1 ms) is paid rarely, small enough that the engines share the work evenly.
const VERIFY_BATCH: usize = 16;

/// Phase 2: runs every proposal's query on the engines (in parallel, from a shared queue) and
/// takes the engine's answers as gold. A disagreement with the native screen is a bug in the rule
/// base or the evaluator, and fails generation loudly rather than writing a doubtful answer.
pub fn verify(
    engines: &[Engine],
    proposals: Proposals,
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
                        let plans: Vec<&Query> = batch.iter().map(|q| &q.plan).collect();
                        let golds = Query::evaluate_batch(&plans, engine)?;
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

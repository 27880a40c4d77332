//! PhantomWiki's `questions.json`, re-answered by the engine.

use super::*;

/// `prolog` of a PhantomWiki question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PwProlog {
    /// Query atoms, outermost first.
    pub query: Vec<String>,
    /// The answer variable.
    pub answer: String,
}

/// One record of PhantomWiki's `questions.json` (fields rulegym does not use are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PwQuestion {
    /// PhantomWiki's id (a random uuid).
    #[serde(default)]
    pub id: String,
    /// The question text.
    pub question: String,
    /// PhantomWiki's answers.
    pub answer: Vec<String>,
    /// The Prolog query.
    pub prolog: PwProlog,
    /// Template index.
    #[serde(default, rename = "type")]
    pub template_index: Option<u64>,
}

/// Parses `questions.json` (a JSON array of question records).
pub fn parse_questions(json: &str, file: &str) -> Result<Vec<PwQuestion>> {
    serde_json::from_str(json).map_err(|source| Error::Json {
        context: format!("parsing {file} (PhantomWiki questions, --question-format json)"),
        source,
    })
}

/// The outcome of one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuestionCheck {
    /// Position in `questions.json`.
    pub index: usize,
    /// PhantomWiki's id.
    pub id: String,
    /// The question text.
    pub question: String,
    /// The query atoms.
    pub query: Vec<String>,
    /// PhantomWiki's answers, sorted and distinct.
    pub expected: Vec<String>,
    /// rulegym's engine answers (absent on error).
    pub got: Option<Vec<String>>,
    /// The native oracle's answers (absent on error).
    pub oracle: Option<Vec<String>>,
    /// What went wrong, for errors.
    pub error: Option<String>,
}

/// The summary `rulegym phantomwiki verify` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Questions read.
    pub questions: usize,
    /// Questions whose engine answers equal PhantomWiki's as sets.
    pub agree: usize,
    /// Questions whose answers differ.
    pub disagree: usize,
    /// Questions that could not be compiled or evaluated.
    pub errors: usize,
    /// Questions where the native oracle differs from the engine (a rulegym bug if non-zero).
    pub oracle_disagree: usize,
    /// Questions whose text rulegym renders differently from the typed query.
    pub text_differs: usize,
    /// The disagreeing questions.
    pub disagreements: Vec<QuestionCheck>,
    /// The questions that failed.
    pub error_details: Vec<QuestionCheck>,
    /// Up to 10 (PhantomWiki text, rulegym text) pairs that differ.
    pub text_examples: Vec<(String, String)>,
}

/// Compiles, evaluates (engine and oracle) and compares every question.
pub fn verify_questions(
    universe: &Universe,
    engine: &Engine,
    questions: &[PwQuestion],
) -> VerifyReport {
    let mut report = VerifyReport {
        questions: questions.len(),
        ..VerifyReport::default()
    };
    for (index, q) in questions.iter().enumerate() {
        let expected: BTreeSet<String> = q.answer.iter().cloned().collect();
        let mut check = QuestionCheck {
            index,
            id: q.id.clone(),
            question: q.question.clone(),
            query: q.prolog.query.clone(),
            expected: expected.iter().cloned().collect(),
            got: None,
            oracle: None,
            error: None,
        };
        let outcome = compile_query(&q.prolog.query, &q.prolog.answer)
            .map_err(Error::from)
            .and_then(|query| {
                let got = query.evaluate(engine)?;
                let oracle = query.evaluate_native(universe).map_err(Error::from)?;
                Ok((query, got, oracle))
            });
        match outcome {
            Err(e) => {
                check.error = Some(e.to_string());
                report.errors += 1;
                report.error_details.push(check);
            }
            Ok((query, got, oracle)) => {
                let text = question_text(&query);
                if text != q.question {
                    report.text_differs += 1;
                    if report.text_examples.len() < 10 {
                        report.text_examples.push((q.question.clone(), text));
                    }
                }
                if oracle != got {
                    report.oracle_disagree += 1;
                }
                let agree = got.iter().cloned().collect::<BTreeSet<_>>() == expected;
                check.got = Some(got);
                check.oracle = Some(oracle);
                if agree {
                    report.agree += 1;
                } else {
                    report.disagree += 1;
                    report.disagreements.push(check);
                }
            }
        }
    }
    report
}

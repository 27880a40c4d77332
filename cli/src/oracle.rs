//! `rulegym oracle`: proof-derived trajectories replayed in the search environment, as Search-R1
//! tag text or as SFT rows in the tool-calling format (`--format sft`).

use rayon::prelude::*;
use rulegym::Result;
use rulegym::dataset::{QuestionSet, load_universe};
use rulegym::retrieval::SearchIndex;
use rulegym::search::oracle::replay;
use rulegym::search::{Retriever, SearchEnvConfig};
use rulegym::toolcall::demo::{DemoOptions, demonstrations};
use rulegym::universe::Universe;
use std::path::PathBuf;
use std::sync::Arc;

/// The dataset and index flags of the commands that play the search environment.
#[derive(clap::Args, Debug)]
pub struct SearchData {
    /// A directory written by `rulegym generate` (universe and questions.jsonl).
    #[arg(long)]
    dataset: PathBuf,
    /// A search index over the dataset's articles [default: the dataset's own `index.idx`,
    /// written by `rulegym generate`; or one built by `rulegym index`].
    #[arg(long)]
    index: Option<PathBuf>,
    #[command(flatten)]
    questions: crate::QuestionFile,
}

impl SearchData {
    /// Loads the universe, its question set (file order) and the index.
    pub fn load(&self) -> Result<(Universe, QuestionSet, Arc<dyn Retriever>)> {
        let (universe, questions, index) = self.load_index()?;
        Ok((universe, questions, index))
    }

    /// [`SearchData::load`] with the index as an index (articles by title, too).
    pub fn load_index(&self) -> Result<(Universe, QuestionSet, Arc<SearchIndex>)> {
        let path = self
            .index
            .clone()
            .unwrap_or_else(|| self.dataset.join(rulegym::dataset::INDEX_FILE));
        if !path.is_file() {
            return Err(rulegym::Error::Dataset {
                file: path.display().to_string(),
                message: "no search index: the oracle replays its trajectories over one (build it \
                          with `rulegym index`, or pass --index)"
                    .into(),
            });
        }
        let universe = load_universe(&self.dataset)?;
        let questions =
            rulegym::dataset::load_question_set(&self.dataset, self.questions.file.as_deref())?;
        Ok((universe, questions, Arc::new(SearchIndex::load(&path)?)))
    }
}

/// Flags of `rulegym oracle`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    data: SearchData,
    /// Output JSONL: one line per question (tags: id, messages, f1, retrieval_misses, failure;
    /// sft: id, question, answers, family, hops, messages, tools, reward).
    #[arg(long)]
    out: PathBuf,
    /// Passages per search.
    #[arg(long, default_value_t = 3)]
    top_k: usize,
    /// tags: Search-R1 tag text, every question; sft: demonstrations for TRL's `SFTTrainer` in
    /// the tool-calling format of `rulegym.trl.SearchEnvironment` (`messages` with `tool_calls`,
    /// `tools`), only those that replay to reward 1.
    #[arg(long, value_enum, default_value_t = Format::Tags)]
    format: Format,
    /// Only questions of this split (train or val; all by default).
    #[arg(long)]
    split: Option<String>,
    /// sft: at most this many demonstrations per question family (in question order).
    #[arg(long)]
    max_per_family: Option<usize>,
    /// sft: seed of the phrasing before each call.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// What `rulegym oracle` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Search-R1 tag text (`<search>`, `<answer>`).
    Tags,
    /// SFT rows in the tool-calling format.
    Sft,
}

/// Runs `rulegym oracle`.
pub fn run(args: Args) -> Result<()> {
    let (universe, set, index) = args.data.load_index()?;
    let mut questions = set.questions;
    if let Some(name) = &args.split {
        let split = rulegym::question::Split::named(name).ok_or_else(|| {
            rulegym::Error::Config(format!("unknown split {name:?} (train, val)"))
        })?;
        questions.retain(|q| q.split == split);
    }
    let config = SearchEnvConfig {
        top_k: args.top_k,
        ..SearchEnvConfig::default()
    };
    if args.format == Format::Sft {
        let mut options = DemoOptions::new(args.seed, args.max_per_family);
        options.env = config;
        let (rows, report) = demonstrations(&universe, &index, &options, &questions)?;
        rulegym::io::write_jsonl(&args.out, &rows)?;
        println!(
            "{} demonstrations of {} questions written to {} ({} left out: replay below reward 1; {} beyond --max-per-family)",
            report.written,
            questions.len(),
            args.out.display(),
            report.failed,
            report.capped
        );
        return Ok(());
    }
    let index: Arc<dyn Retriever> = index;
    let (mut perfect, mut reasons) = (0usize, std::collections::BTreeMap::<String, usize>::new());
    // Questions replay independently: in parallel, collected in question order.
    let trajectories: Vec<_> = questions
        .par_iter()
        .map(|q| replay(&universe, index.clone(), &config, q))
        .collect::<Result<_>>()?;
    for t in &trajectories {
        if t.f1 == 1.0 {
            perfect += 1;
        } else {
            let reason = if t.retrieval_misses.is_empty() {
                "answer"
            } else {
                "retrieval miss"
            };
            *reasons.entry(reason.to_owned()).or_default() += 1;
        }
    }
    rulegym::io::write_jsonl(&args.out, &trajectories)?;
    println!(
        "{perfect} of {} oracle trajectories replay to F1 = 1 ({:.1}%)",
        questions.len(),
        100.0 * perfect as f64 / questions.len().max(1) as f64
    );
    for (reason, n) in reasons {
        println!("  {n} failed: {reason}");
    }
    Ok(())
}

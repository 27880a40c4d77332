//! Stage files and the stage runner. `OUT/<stage>.jsonl` holds the kept items and
//! `OUT/<stage>.rejects.jsonl` the dropped ones, one JSON record per line, each with the
//! fingerprint of what produced it (see [`super::fingerprint`]). When a stage starts, it rewrites
//! its own two files keeping only the records whose id is in its input and whose fingerprint is
//! that input record's under the current settings (and, once, each id; `filter` keeps none), and
//! without a partial last line (a run killed mid-write); it runs the remaining items on
//! `concurrency` threads, appends results in input order as they complete, and finally rewrites
//! both files sorted by input order, so the bytes do not depend on concurrency or on where
//! earlier runs stopped. Reading another stage's file never modifies it.

use super::parse::Reject;
use super::{
    Ctx, ItemError, Outcome, PipelineError, PipelineReport, StageSummary, SynthItem, SynthStage,
    process,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// `OUT/<stage>.jsonl`.
pub(crate) fn out_path(out: &Path, stage: SynthStage) -> PathBuf {
    out.join(format!("{}.jsonl", stage.name()))
}

/// `OUT/<stage>.rejects.jsonl`.
pub(crate) fn rejects_path(out: &Path, stage: SynthStage) -> PathBuf {
    out.join(format!("{}.rejects.jsonl", stage.name()))
}

/// An I/O failure on `path`.
pub(crate) fn io_error(path: &Path, what: &str, e: impl std::fmt::Display) -> PipelineError {
    PipelineError::Io {
        context: format!("{what} {}", path.display()),
        message: e.to_string(),
    }
}

pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), PipelineError> {
    crate::io::write_file_atomic(path, bytes).map_err(|e| io_error(path, "writing", e))
}

/// The complete lines of a stage file with their line numbers ([`crate::io::read_complete_lines`]:
/// a partial last line is left for a rerun to redo).
fn read_lines(path: &Path) -> Result<Vec<(usize, String)>, PipelineError> {
    crate::io::read_complete_lines(path).map_err(|e| io_error(path, "reading", e))
}

fn corrupt(path: &Path, line: usize, message: impl std::fmt::Display) -> PipelineError {
    PipelineError::Corrupt {
        path: path.display().to_string(),
        line,
        message: message.to_string(),
    }
}

/// The `id` and `fingerprint` (empty when absent) of a line.
fn line_key(path: &Path, n: usize, line: &str) -> Result<(String, String), PipelineError> {
    let value: Value = serde_json::from_str(line).map_err(|e| corrupt(path, n, e))?;
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| corrupt(path, n, "no \"id\""))?;
    let fingerprint = value
        .get("fingerprint")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok((id, fingerprint))
}

/// The `id` of each line.
fn line_ids(path: &Path, lines: &[(usize, String)]) -> Result<Vec<String>, PipelineError> {
    lines
        .iter()
        .map(|(n, line)| line_key(path, *n, line).map(|(id, _)| id))
        .collect()
}

/// The records (items or rejects) of a stage output file, in file order.
pub(crate) fn read_records<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, PipelineError> {
    read_lines(path)?
        .iter()
        .map(|(n, line)| serde_json::from_str(line).map_err(|e| corrupt(path, *n, e)))
        .collect()
}

/// Rewrites `path` with its lines sorted by the input position of their ids (lines of unknown
/// ids last, in file order).
fn sort_file(path: &Path, order: &BTreeMap<&str, usize>) -> Result<(), PipelineError> {
    let lines = read_lines(path)?;
    let ids = line_ids(path, &lines)?;
    let mut keyed: Vec<(usize, &String)> = ids
        .iter()
        .zip(&lines)
        .map(|(id, (_, line))| (order.get(id.as_str()).copied().unwrap_or(usize::MAX), line))
        .collect();
    keyed.sort_by_key(|&(k, _)| k);
    let mut bytes = Vec::new();
    for (_, line) in keyed {
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    write_atomic(path, &bytes)
}

fn to_line(value: &impl Serialize) -> Result<String, PipelineError> {
    serde_json::to_string(value).map_err(|e| PipelineError::Io {
        context: "serialising a record".into(),
        message: e.to_string(),
    })
}

/// Runs `work` on every item with `workers` threads and hands each result to `emit` in input
/// order (a reorder buffer on the calling thread). After `emit` fails, no new item is started.
pub(crate) fn for_each_ordered<I: Sync, O: Send>(
    items: &[I],
    workers: usize,
    work: impl Fn(&I) -> O + Sync,
    mut emit: impl FnMut(usize, O) -> Result<(), PipelineError>,
) -> Result<(), PipelineError> {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, O)>();
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            let tx = tx.clone();
            let (next, stop, work) = (&next, &stop, &work);
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= items.len() || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if tx.send((i, work(&items[i]))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut pending = BTreeMap::new();
        let mut want = 0;
        let mut result = Ok(());
        for (i, out) in rx {
            pending.insert(i, out);
            while let Some(out) = pending.remove(&want) {
                if result.is_ok() {
                    result = emit(want, out);
                    if result.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                want += 1;
            }
        }
        result
    })
}

fn append(file: &mut std::fs::File, path: &Path, line: &str) -> Result<(), PipelineError> {
    file.write_all(format!("{line}\n").as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| io_error(path, "appending to", e))
}

fn open_append(path: &Path) -> Result<std::fs::File, PipelineError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| io_error(path, "opening", e))
}

/// The fingerprint each input item's record of `stage` must have, by id.
fn expected_fingerprints(
    config: &super::PipelineConfig,
    stage: SynthStage,
    input: &[SynthItem],
) -> Result<BTreeMap<String, String>, PipelineError> {
    let key = super::stage_key(config, stage);
    input
        .iter()
        .map(|item| Ok((item.id.clone(), super::fingerprint_with(&key, item)?)))
        .collect()
}

/// Rewrites a stage's own file keeping only the records that are current (id in `expected` with
/// that fingerprint, first record of an id; none when `keep_none`), without a partial last
/// line. Adds their ids to `done`; returns (stale records, records of unknown ids).
fn prune(
    path: &Path,
    expected: &BTreeMap<String, String>,
    keep_none: bool,
    done: &mut BTreeSet<String>,
) -> Result<(usize, usize), PipelineError> {
    let raw = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io_error(path, "reading", e)),
    };
    let (mut stale, mut orphaned) = (0, 0);
    let mut kept = Vec::new();
    for (n, line) in read_lines(path)? {
        let (id, fingerprint) = line_key(path, n, &line)?;
        match expected.get(&id) {
            None => orphaned += 1,
            Some(want) if !keep_none && *want == fingerprint && !done.contains(&id) => {
                done.insert(id);
                kept.extend_from_slice(line.as_bytes());
                kept.push(b'\n');
            }
            Some(_) => stale += usize::from(!keep_none),
        }
    }
    if kept != raw {
        write_atomic(path, &kept)?;
    }
    Ok((stale, orphaned))
}

/// Runs `stage` on `input` (skipping items whose current record is already in its files),
/// returns the stage's kept items in input order and its summary.
pub(crate) fn run_stage(
    ctx: &Ctx,
    stage: SynthStage,
    input: Vec<SynthItem>,
    observe: &mut dyn FnMut(super::SynthEvent),
) -> Result<(Vec<SynthItem>, StageSummary), PipelineError> {
    let out = out_path(&ctx.config.out, stage);
    let rej = rejects_path(&ctx.config.out, stage);
    let expected = expected_fingerprints(&ctx.config, stage, &input)?;
    let mut done: BTreeSet<String> = BTreeSet::new();
    let (mut recomputed, mut orphaned) = (0, 0);
    for path in [&out, &rej] {
        let (s, o) = prune(path, &expected, stage == SynthStage::Filter, &mut done)?;
        recomputed += s;
        orphaned += o;
    }
    let todo: Vec<&SynthItem> = input.iter().filter(|i| !done.contains(&i.id)).collect();
    observe(super::SynthEvent::Started {
        stage,
        items: todo.len(),
    });
    let (mut out_file, mut rej_file) = (open_append(&out)?, open_append(&rej)?);
    let mut failures: Vec<String> = Vec::new();
    let work = |item: &&SynthItem| -> Result<Outcome, ItemError> {
        process(ctx, stage, item, &expected[&item.id])
    };
    let result = for_each_ordered(&todo, ctx.config.concurrency, work, |i, outcome| {
        observe(super::SynthEvent::Item);
        match outcome {
            Ok(Ok(next)) => append(&mut out_file, &out, &to_line(&next)?),
            Ok(Err(reject)) => append(&mut rej_file, &rej, &to_line(&reject)?),
            Err(e) => {
                failures.push(format!("{}: {e}", todo[i].id));
                Ok(())
            }
        }
    });
    observe(super::SynthEvent::Finished(stage));
    drop((out_file, rej_file));
    result?;
    let order: BTreeMap<&str, usize> = input
        .iter()
        .enumerate()
        .map(|(i, item)| (item.id.as_str(), i))
        .collect();
    sort_file(&out, &order)?;
    sort_file(&rej, &order)?;
    let kept: Vec<SynthItem> = read_records(&out)?;
    let mut summary = summarize(ctx, stage)?;
    summary.input = input.len();
    summary.processed = todo.len();
    summary.recomputed = recomputed;
    summary.orphaned = orphaned;
    if let Some(first) = failures.first() {
        return Err(PipelineError::ItemsFailed {
            stage: stage.name(),
            count: failures.len(),
            first: first.clone(),
        });
    }
    Ok((kept, summary))
}

/// Checks the files of the stages before `first` (the first stage this run runs) against the
/// current settings: each record of stage k (kept or rejected) must carry the fingerprint of
/// its id's record in stage k-1's file under the current settings; a `draft` record the
/// fingerprint of its own id and persona (draft rejects, which do not hold the persona, are not
/// checked). Files that do not exist are skipped (the first stage reports a missing input).
pub(crate) fn check_upstream(
    config: &super::PipelineConfig,
    first: SynthStage,
) -> Result<(), PipelineError> {
    let upto = SynthStage::ALL
        .iter()
        .position(|&s| s == first)
        .unwrap_or(0);
    for k in 0..upto {
        let stage = SynthStage::ALL[k];
        if stage == SynthStage::Filter {
            continue;
        }
        let out = out_path(&config.out, stage);
        let rej = rejects_path(&config.out, stage);
        let (expected, files) = if k == 0 {
            let personas: Vec<SynthItem> = read_records::<SynthItem>(&out)?
                .into_iter()
                .map(|r| SynthItem {
                    id: r.id,
                    persona: r.persona,
                    ..SynthItem::default()
                })
                .collect();
            (expected_fingerprints(config, stage, &personas)?, vec![out])
        } else {
            let previous = out_path(&config.out, SynthStage::ALL[k - 1]);
            if !previous.exists() {
                continue;
            }
            let input: Vec<SynthItem> = read_records(&previous)?;
            (
                expected_fingerprints(config, stage, &input)?,
                vec![out, rej],
            )
        };
        let mut stale = Vec::new();
        for path in &files {
            for (n, line) in read_lines(path)? {
                let (id, fingerprint) = line_key(path, n, &line)?;
                if expected.get(&id) != Some(&fingerprint) {
                    stale.push(id);
                }
            }
        }
        if let Some(first) = stale.first() {
            return Err(PipelineError::Stale {
                stage: stage.name(),
                count: stale.len(),
                first: first.clone(),
            });
        }
    }
    Ok(())
}

/// Counts of a stage's files (input and processed are left 0).
fn summarize(ctx: &Ctx, stage: SynthStage) -> Result<StageSummary, PipelineError> {
    let out = out_path(&ctx.config.out, stage);
    let rej = rejects_path(&ctx.config.out, stage);
    let kept = read_lines(&out)?.len();
    let rejected: Vec<Reject> = read_records(&rej)?;
    let mut reasons = BTreeMap::new();
    for r in &rejected {
        let code = serde_json::to_value(r.reason).unwrap_or_default();
        *reasons
            .entry(code.as_str().unwrap_or_default().to_owned())
            .or_insert(0) += 1;
    }
    Ok(StageSummary {
        stage: stage.name().into(),
        version: stage.version().into(),
        input: 0,
        kept,
        rejected: rejected.len(),
        processed: 0,
        recomputed: 0,
        orphaned: 0,
        reasons,
    })
}

/// Writes `manifest.json`: the prompts (version and SHA-256), the generation settings, and per
/// stage the kept and rejected counts read from its files (so the manifest of a resumed run
/// equals that of an uninterrupted one).
pub(crate) fn write_manifest(ctx: &Ctx, report: &PipelineReport) -> Result<(), PipelineError> {
    let c = &ctx.config;
    let mut stages = Vec::new();
    for stage in SynthStage::ALL {
        if out_path(&c.out, stage).exists() {
            let s = summarize(ctx, stage)?;
            stages.push(serde_json::json!({
                "stage": s.stage, "version": s.version, "kept": s.kept,
                "rejected": s.rejected, "reasons": s.reasons,
            }));
        }
    }
    let prompts: Vec<Value> = super::PROMPTS
        .iter()
        .map(|p| {
            serde_json::json!({
                "version": p.version,
                "sha256": crate::io::sha256_hex(p.text.as_bytes()),
            })
        })
        .collect();
    let manifest = serde_json::json!({
        "pipeline": super::PIPELINE_VERSION,
        "rulegym_version": env!("CARGO_PKG_VERSION"),
        "model": c.model,
        "sim_model": c.sim_model(),
        "seed": c.seed,
        "rollouts": c.rollouts,
        "extraction": c.extraction,
        "temperature": c.temperature,
        "teacher_temperature": c.teacher_temperature,
        "max_turns": c.max_turns,
        "user": c.user,
        "max_tool_error_fraction": c.max_tool_error_fraction,
        "min_workflow_coverage": c.min_workflow_coverage,
        "min_best_reward": c.min_best_reward,
        "prompts": prompts,
        "stages": stages,
        "tasks": report.tasks,
    });
    let mut bytes = serde_json::to_vec_pretty(&manifest).map_err(|e| PipelineError::Io {
        context: "serialising the manifest".into(),
        message: e.to_string(),
    })?;
    bytes.push(b'\n');
    write_atomic(&c.out.join("manifest.json"), &bytes)
}

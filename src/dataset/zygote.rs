//! The zygote (Linux): a batch of universes built in forked children of one process that
//! started the Prolog engine once.
//!
//! The parent starts one engine (scryer and the rule base, ~70 ms) and, for each universe,
//! forks a child from the engine's thread ([`Engine::fork`], copy-on-write). The child consults
//! only the universe's facts into its copy of the engine, builds the dataset exactly as a
//! single-seed build does, writes its directory atomically, reports one line through a pipe and
//! exits, so scryer's never-freed clauses go with it and the parent's memory stays flat however
//! many universes run. At most `workers` children run at once. A child that fails, panics or is
//! killed is named with its seed and reason; the others go on. A child whose parent dies is
//! killed (`PR_SET_PDEATHSIG`) and leaves at most a hidden staging directory, never a
//! half-written dataset.

use super::batch::{Batch, BatchEvent, EngineSource, Finished};
use super::build::{EngineLoad, Render, assemble};
use crate::engine::{Engine, child};
use crate::universe::Universe;
use crate::{Error, Result};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

/// The most bytes of a child's report kept (an error message longer than this is cut).
const MAX_REPORT: usize = 64 << 10;

/// One running child.
struct Child {
    child: child::Child,
    seed: u64,
    received: Vec<u8>,
    start: Instant,
}

/// Builds and writes every universe of `batch` under `out` in forked children of one zygote
/// engine, at most `workers` at a time, telling `observe` about each as it finishes. Returns
/// every seed's outcome, in finishing order (one engine was started: the zygote's).
pub(super) fn generate(
    batch: &Batch,
    out: &Path,
    overwrite: bool,
    workers: usize,
    observe: &(dyn Fn(BatchEvent<'_>) + Sync),
) -> Result<Vec<(u64, Result<Finished>)>> {
    let zygote = Engine::new()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The children share the cores: each gets its share of threads for its own pool.
    let threads = (cores / workers).max(1);
    let mut seeds = batch.seeds.seeds();
    let mut running: Vec<Child> = Vec::with_capacity(workers);
    let mut results = Vec::with_capacity(batch.seeds.len());
    let mut record = |seed: u64, result: Result<Finished>| {
        match &result {
            Ok(finished) => observe(BatchEvent::Written(finished)),
            Err(error) => observe(BatchEvent::Failed(seed, error)),
        }
        results.push((seed, result));
    };
    loop {
        while running.len() < workers {
            let Some(seed) = seeds.next() else { break };
            match spawn(&zygote, batch, seed, out, overwrite, threads) {
                Ok(child) => running.push(child),
                Err(error) => record(seed, Err(error)),
            }
        }
        if running.is_empty() {
            break;
        }
        let child = next_finished(&mut running)?;
        let seed = child.seed;
        record(seed, finish(child, out));
    }
    Ok(results)
}

/// Forks the child that builds universe `seed`.
fn spawn(
    zygote: &Engine,
    batch: &Batch,
    seed: u64,
    out: &Path,
    overwrite: bool,
    threads: usize,
) -> Result<Child> {
    let config = batch.config_for(seed);
    let dir = Batch::dir(out, seed);
    let job = move |engine: Engine, mut write: std::fs::File| {
        let line = match build_in_child(&config, &engine, &dir, overwrite, threads) {
            Ok((people, questions)) => format!("ok {people} {questions}"),
            Err(error) => format!("error {error}"),
        };
        match write.write_all(line.as_bytes()) {
            Ok(()) => 0,
            Err(_) => 3,
        }
    };
    let start = Instant::now();
    // SAFETY: the child builds its own rayon pool, does not log or print, and reports through
    // the pipe only (`Engine::fork`'s contract).
    let child = unsafe { child::spawn(zygote, job) }?;
    Ok(Child {
        child,
        seed,
        received: Vec::new(),
        start,
    })
}

/// The child's work: one universe on its copy of the zygote's engine, written to `dir`.
fn build_in_child(
    config: &super::build::BuildConfig,
    engine: &Engine,
    dir: &Path,
    overwrite: bool,
    threads: usize,
) -> Result<(usize, usize)> {
    // The parent's rayon threads do not exist in the child: a pool of its own.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Config(format!("starting a thread pool in a forked child: {e}")))?;
    pool.install(|| {
        let staged = super::stage_output(dir, overwrite)?;
        let universe = Universe::generate(&config.universe)?;
        let engine_facts = universe.engine_facts();
        let data = assemble(
            config,
            universe,
            engine_facts,
            EngineLoad::Consult(std::slice::from_ref(engine)),
            Render::Into(&staged),
            &mut |_| {},
        )?
        .finish(staged)?;
        Ok((data.universe.people.len(), data.questions.len()))
    })
}

/// Waits until some child has closed its report pipe (it is exiting) and takes it out of
/// `running`.
fn next_finished(running: &mut Vec<Child>) -> Result<Child> {
    let mut buffer = [0u8; 4096];
    loop {
        let mut polled: Vec<libc::pollfd> = running
            .iter()
            .map(|c| libc::pollfd {
                fd: c.child.report.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `polled` is a valid array of `polled.len()` pollfd structures.
        let ready = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, -1) };
        if ready < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(crate::io::io_error("waiting for forked children")(error));
        }
        for (i, p) in polled.iter().enumerate() {
            if p.revents == 0 {
                continue;
            }
            let child = &mut running[i];
            match child.child.report.read(&mut buffer) {
                Ok(0) => return Ok(running.swap_remove(i)),
                Ok(n) => {
                    let room = MAX_REPORT.saturating_sub(child.received.len());
                    child.received.extend_from_slice(&buffer[..n.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Ok(running.swap_remove(i)),
            }
        }
    }
}

/// Reaps a child whose pipe closed and turns its report and exit status into its outcome.
fn finish(child: Child, out: &Path) -> Result<Finished> {
    let exit = child.child.reap();
    let elapsed = child.start.elapsed();
    let failed = |reason: String| Error::ChildFailed {
        seed: child.seed,
        reason,
    };
    let report = String::from_utf8_lossy(&child.received).into_owned();
    if let Some(reason) = report.strip_prefix("error ") {
        return Err(failed(reason.to_owned()));
    }
    exit.map_err(failed)?;
    let counts: Option<(usize, usize)> = report.strip_prefix("ok ").and_then(|rest| {
        let (people, questions) = rest.split_once(' ')?;
        Some((people.parse().ok()?, questions.parse().ok()?))
    });
    let Some((people, questions)) = counts else {
        return Err(failed(format!("it exited without a report ({report:?})")));
    };
    Ok(Finished {
        seed: child.seed,
        dir: Batch::dir(out, child.seed),
        people,
        questions,
        elapsed,
        engine: EngineSource::Forked,
    })
}

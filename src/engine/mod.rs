//! The embedded Prolog engine: the only module that touches `scryer_prolog`.
//!
//! A scryer [`Machine`](scryer_prolog::Machine) is `!Send`, so each [`Engine`] owns one on a
//! dedicated thread and talks to it over a channel; an `Engine` handle is `Send + Sync` and many
//! engines can run on many threads. Queries are typed [`Term`]s rendered with correct quoting (no
//! string pasting of user data); answers come back as typed [`Value`]s; every engine error,
//! unknown predicate or panic inside scryer becomes an [`EngineError`], and the engine stays usable
//! (after a panic the machine is rebuilt from the sources it had loaded).

#[cfg(target_os = "linux")]
pub(crate) mod child;
mod term;

pub use term::{ReadError, ReadLimits, Term, Value, Var, read_clause, read_term, write_atom};

use scryer_prolog::{LeafAnswer, Machine, MachineBuilder, Term as ScryerTerm};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::thread;

/// The rule base, embedded at compile time: `(module name, source)` in load order.
pub const RULES: &[(&str, &str)] = &[
    ("prelude", include_str!("../../prolog/prelude.pl")),
    ("family", include_str!("../../prolog/family.pl")),
    ("friends", include_str!("../../prolog/friends.pl")),
    ("attributes", include_str!("../../prolog/attributes.pl")),
    ("hops", include_str!("../../prolog/hops.pl")),
    ("queries", include_str!("../../prolog/queries.pl")),
];

/// The predicates of a universe's stored facts (`prolog/prelude.pl`), as (name, arity): what
/// [`Engine::replace_facts`] clears before it loads the next universe.
pub const FACT_PREDICATES: &[(&str, usize)] = &[
    ("person", 8),
    ("with_job", 2),
    ("with_hobby", 2),
    ("with_dob", 2),
];

/// A toplevel without scryer's REPL: the library interface needs none, and skipping the REPL's
/// libraries (format, charsio, files, os, ...) cuts machine start-up from ~170 ms to ~70 ms.
/// Rule files load the libraries they use themselves (`prolog/prelude.pl`).
const TOPLEVEL: &str = ":- module('$toplevel', []).\n";

/// Errors from the engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// A term could not be built or rendered (bad variable name, NUL character, ...).
    #[error("invalid term: {0}")]
    InvalidTerm(String),
    /// The query raised a Prolog exception (unknown predicate, type error, ...).
    #[error("prolog error: {0}")]
    Prolog(String),
    /// The query ran past its inference limit.
    #[error("query exceeded its inference limit of {0}")]
    InferenceLimit(u64),
    /// The query produced more solutions than allowed.
    #[error("query produced more than {0} solutions")]
    TooManySolutions(usize),
    /// scryer panicked; the machine was rebuilt from its loaded sources.
    #[error("the engine panicked ({0}); it was restarted with its loaded sources")]
    Panicked(String),
    /// The engine thread is gone.
    #[error("the engine thread stopped")]
    Stopped,
    /// The process could not be forked ([`Engine::fork`]).
    #[error("could not fork the engine's process: {0}")]
    Fork(String),
}

/// Limits applied to one query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryLimits {
    /// Stop with [`EngineError::InferenceLimit`] after this many inferences (`None`: unlimited).
    pub inferences: Option<u64>,
    /// Stop with [`EngineError::TooManySolutions`] beyond this many solutions.
    pub max_solutions: usize,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            inferences: None,
            max_solutions: 10_000_000,
        }
    }
}

/// All solutions of a query: one row per solution, values in the order of the requested variables.
pub type Solutions = Vec<Vec<Value>>;

type Reply<T> = mpsc::Sender<Result<T, EngineError>>;

enum Request {
    Consult {
        module: String,
        source: String,
        reply: Reply<()>,
    },
    Query {
        goal: String,
        vars: Vec<Var>,
        limits: QueryLimits,
        reply: Reply<Solutions>,
    },
    /// Fork the process from the engine thread (see [`Engine::fork`]).
    #[cfg(target_os = "linux")]
    Fork {
        job: ForkJob,
        reply: Reply<libc::pid_t>,
    },
}

/// What a forked child runs: given its copy of the engine, the child's exit status.
#[cfg(target_os = "linux")]
pub type ForkJob = Box<dyn FnOnce(Engine) -> i32 + Send>;

/// A handle to a Prolog machine running on its own thread.
pub struct Engine {
    requests: Option<mpsc::Sender<Request>>,
    worker: Option<thread::JoinHandle<()>>,
}

impl Engine {
    /// Starts a machine with the embedded rule base loaded. Cost: ~80 ms (scryer compiles its
    /// own core libraries at start-up).
    pub fn new() -> Result<Self, EngineError> {
        let (tx, rx) = mpsc::channel::<Request>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let worker = thread::Builder::new()
            .name("rulegym-prolog".into())
            .stack_size(64 << 20)
            .spawn(move || {
                let (mut worker, status) = {
                    let _inside = inside_scryer();
                    let mut worker = Worker::start();
                    let mut status = Ok(());
                    for (module, source) in RULES {
                        status = status.and_then(|()| worker.consult(module, source));
                    }
                    (worker, status)
                };
                let failed = status.is_err();
                let _ = ready_tx.send(status);
                if !failed {
                    worker.serve(rx);
                }
                let _inside = inside_scryer();
                drop(worker);
            })
            .map_err(|e| EngineError::Panicked(format!("could not spawn engine thread: {e}")))?;
        let engine = Engine {
            requests: Some(tx),
            worker: Some(worker),
        };
        ready_rx.recv().map_err(|_| EngineError::Stopped)??;
        Ok(engine)
    }

    /// Starts a machine with the rule base and then `facts` (Prolog clauses) loaded.
    pub fn with_facts(facts: &str) -> Result<Self, EngineError> {
        let engine = Engine::new()?;
        engine.consult("facts", facts)?;
        Ok(engine)
    }

    /// Consults Prolog source text as module file `module` (reconsulting the same name replaces
    /// the clauses it defined). The text is trusted program code: build it from typed terms.
    pub fn consult(&self, module: &str, source: &str) -> Result<(), EngineError> {
        self.call(|reply| Request::Consult {
            module: module.to_owned(),
            source: source.to_owned(),
            reply,
        })
    }

    /// Replaces the universe facts this engine holds with `facts` (clauses of
    /// [`FACT_PREDICATES`] only), so one warm engine serves universe after universe without
    /// restarting (~70 ms) or reloading the rule base.
    ///
    /// The facts are loaded as dynamic predicates and the previous universe's are retracted
    /// first. A static reconsult cannot do this in scryer 0.10: it keeps a predicate that the
    /// new source does not define (a leak from the last universe) and prints an "overwriting"
    /// warning per predicate to stdout; `abolish/1` refuses static predicates. Dynamic
    /// clauses cost ~60% more to consult than static ones and are never freed (~34 bytes of
    /// engine memory per byte of facts text), so a caller that loads many universes replaces
    /// the engine on a memory budget ([`crate::dataset::batch`] does). An engine whose facts
    /// were consulted statically (by [`Engine::with_facts`]) refuses with a Prolog
    /// permission error.
    pub fn replace_facts(&self, facts: &str) -> Result<(), EngineError> {
        let mut clear = Vec::with_capacity(FACT_PREDICATES.len());
        let mut source = String::with_capacity(facts.len() + 128);
        for &(name, arity) in FACT_PREDICATES {
            let head = Term::compound(name, (0..arity).map(|_| Term::var(&Var::anonymous())));
            clear.push(Term::compound("retractall", [head]));
            source.push_str(&format!(":- dynamic({name}/{arity}).\n"));
        }
        self.query(&Term::and(clear), &[])?;
        source.push_str(facts);
        self.consult("facts", &source)
    }

    /// All solutions of `goal`, each as the values of `vars` in order.
    pub fn query(&self, goal: &Term, vars: &[Var]) -> Result<Solutions, EngineError> {
        self.query_with(goal, vars, QueryLimits::default())
    }

    /// All solutions of `goal` under `limits`.
    pub fn query_with(
        &self,
        goal: &Term,
        vars: &[Var],
        limits: QueryLimits,
    ) -> Result<Solutions, EngineError> {
        let goal = goal.render()?;
        self.call(|reply| Request::Query {
            goal,
            vars: vars.to_vec(),
            limits,
            reply,
        })
    }

    /// Whether `goal` has at least one solution.
    pub fn holds(&self, goal: &Term) -> Result<bool, EngineError> {
        let once = Term::compound("once", [goal.clone()]);
        Ok(!self.query(&once, &[])?.is_empty())
    }

    /// Forks the process from this engine's thread (Linux `fork`, copy-on-write) and returns
    /// the child's pid: the zygote pattern. The child is a copy of the process in which only
    /// this engine's thread runs, holding the machine as loaded so far (scryer's start-up and
    /// the rule base are not paid again, and nothing the child consults outlives it); it runs
    /// `job` on a new thread with a handle to its copy of the engine, then exits with the
    /// status `job` returns (101 if it panics) without running destructors or flushing
    /// buffers it inherited.
    ///
    /// The fork waits until no engine thread of the process is inside scryer (whose shared atom
    /// table would otherwise stay locked in the child); other scryer use in the process, outside
    /// rulegym's engines, is not covered.
    ///
    /// # Safety
    /// The child holds only this engine's thread and the one running `job`: `job` must not
    /// use anything another thread of the parent could have held locked at the fork (a rayon
    /// global pool, a logger, stdout or stderr), so it must build its own thread pools and
    /// report through a file descriptor or a file. Memory allocation is safe (glibc resets its
    /// locks in the child).
    #[cfg(target_os = "linux")]
    pub unsafe fn fork(&self, job: ForkJob) -> Result<libc::pid_t, EngineError> {
        self.call(|reply| Request::Fork { job, reply })
    }

    fn call<T>(&self, request: impl FnOnce(Reply<T>) -> Request) -> Result<T, EngineError> {
        let (reply, response) = mpsc::channel();
        self.requests
            .as_ref()
            .ok_or(EngineError::Stopped)?
            .send(request(reply))
            .map_err(|_| EngineError::Stopped)?;
        response.recv().map_err(|_| EngineError::Stopped)?
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        drop(self.requests.take());
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// scryer keeps process-wide state that every machine shares (its atom table, behind epoch
/// counters and locks). A fork copies that state as it is at that instant, so a thread that was
/// inside scryer at the fork would leave it locked forever in the child (seen: a child spinning
/// in the atom table's `wait_for_epochs`). Every engine thread holds this lock for reading while
/// it is inside scryer (starting, consulting, querying, dropping its machine); [`Engine::fork`]
/// takes it for writing.
static SCRYER: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The read side of [`SCRYER`], held while a thread is inside scryer.
fn inside_scryer() -> std::sync::RwLockReadGuard<'static, ()> {
    SCRYER.read().unwrap_or_else(|e| e.into_inner())
}

/// The engine thread's state: the machine and what was loaded into it (to rebuild after a panic).
struct Worker {
    machine: Machine,
    loaded: Vec<(String, String)>,
}

impl Worker {
    fn start() -> Self {
        Worker {
            machine: MachineBuilder::default().with_toplevel(TOPLEVEL).build(),
            loaded: Vec::new(),
        }
    }

    fn serve(&mut self, mut requests: mpsc::Receiver<Request>) {
        while let Ok(request) = requests.recv() {
            match request {
                Request::Consult {
                    module,
                    source,
                    reply,
                } => {
                    let result = {
                        let _inside = inside_scryer();
                        self.consult(&module, &source)
                    };
                    let _ = reply.send(result);
                }
                Request::Query {
                    goal,
                    vars,
                    limits,
                    reply,
                } => {
                    let result = {
                        let _inside = inside_scryer();
                        self.query(&goal, &vars, limits)
                    };
                    let _ = reply.send(result);
                }
                #[cfg(target_os = "linux")]
                Request::Fork { job, reply } => {
                    // No engine thread of this process is inside scryer while it forks.
                    let everyone_outside = SCRYER.write().unwrap_or_else(|e| e.into_inner());
                    let forked = fork_child(job);
                    drop(everyone_outside);
                    match forked {
                        Forked::Parent(pid) => {
                            let _ = reply.send(pid);
                        }
                        Forked::Child(child_requests) => {
                            // The parent's handles do not exist here: serve the child's own.
                            std::mem::forget(reply);
                            requests = child_requests;
                        }
                    }
                }
            }
        }
    }

    fn consult(&mut self, module: &str, source: &str) -> Result<(), EngineError> {
        let machine = &mut self.machine;
        guard(|| machine.consult_module_string(module, source.to_owned()))
            .inspect_err(|_| self.rebuild())?;
        self.loaded.retain(|(name, _)| name != module);
        self.loaded.push((module.to_owned(), source.to_owned()));
        Ok(())
    }

    fn query(
        &mut self,
        goal: &str,
        vars: &[Var],
        limits: QueryLimits,
    ) -> Result<Solutions, EngineError> {
        // Every query runs inside catch/3: an exception that escapes to scryer's library
        // interface leaves the machine in a state that breaks the next query (scryer 0.10).
        let inner = match limits.inferences {
            Some(n) => format!("call_with_inference_limit(({goal}),{n},{LIMIT_VAR})"),
            None => goal.to_owned(),
        };
        let text = format!("catch(({inner}),{ERROR_VAR},true).");
        let machine = &mut self.machine;
        let outcome = guard(|| collect(machine, text, vars, limits));
        match outcome {
            Ok(result) => result,
            Err(panic) => {
                self.rebuild();
                Err(panic)
            }
        }
    }

    /// Replaces a machine that panicked with a fresh one holding the same sources.
    fn rebuild(&mut self) {
        let loaded = std::mem::take(&mut self.loaded);
        *self = Worker::start();
        for (module, source) in loaded {
            // Sources loaded fine before, so a failure here is a scryer bug; the query that
            // caused the rebuild already reports the panic.
            let _ = self.consult(&module, &source);
        }
    }
}

#[cfg(target_os = "linux")]
enum Forked {
    /// In the parent: the child's pid, or why there is none.
    Parent(Result<libc::pid_t, EngineError>),
    /// In the child: the requests of the child's engine handle.
    Child(mpsc::Receiver<Request>),
}

/// Forks on the engine thread; in the child, starts `job` on a new thread with an engine handle
/// served by this (the child's only) thread, and exits when `job` returns.
#[cfg(target_os = "linux")]
fn fork_child(job: ForkJob) -> Forked {
    // SAFETY: fork has no memory-safety preconditions; the child's restrictions are the
    // caller's contract (`Engine::fork`).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let reason = std::io::Error::last_os_error();
        return Forked::Parent(Err(EngineError::Fork(reason.to_string())));
    }
    if pid > 0 {
        return Forked::Parent(Ok(pid));
    }
    // SAFETY: prctl with PR_SET_PDEATHSIG only sets this process's parent-death signal: a
    // child whose parent is killed stops too instead of running on unsupervised.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    let (tx, rx) = mpsc::channel();
    let engine = Engine {
        requests: Some(tx),
        worker: None,
    };
    let spawned = thread::Builder::new()
        .name("rulegym-fork".into())
        .spawn(move || {
            let status = catch_unwind(AssertUnwindSafe(|| job(engine))).unwrap_or(101);
            // SAFETY: _exit ends the process without running the parent's atexit handlers or
            // flushing its inherited stdio buffers, which belong to the parent.
            unsafe { libc::_exit(status) }
        });
    if spawned.is_err() {
        // SAFETY: as above.
        unsafe { libc::_exit(102) }
    }
    Forked::Child(rx)
}

/// Runs `f`, turning a panic inside scryer into an error.
fn guard<T>(f: impl FnOnce() -> T) -> Result<T, EngineError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        EngineError::Panicked(message)
    })
}

/// Variables the engine adds around a goal; [`Var::new`] refuses the `Rulegym__` prefix.
const ERROR_VAR: &str = "Rulegym__Error";
const LIMIT_VAR: &str = "Rulegym__Limit";

fn collect(
    machine: &mut Machine,
    text: String,
    vars: &[Var],
    limits: QueryLimits,
) -> Result<Solutions, EngineError> {
    let mut solutions = Vec::new();
    for answer in machine.run_query(text) {
        let bindings = match answer {
            Ok(LeafAnswer::False) => break,
            Ok(LeafAnswer::True) => Default::default(),
            Ok(LeafAnswer::LeafAnswer { bindings, .. }) => bindings,
            Ok(LeafAnswer::Exception(term)) | Err(term) => {
                return Err(EngineError::Prolog(describe(&term)));
            }
        };
        if let Some(error) = bindings
            .get(ERROR_VAR)
            .filter(|t| !matches!(t, ScryerTerm::Var(_)))
        {
            return Err(EngineError::Prolog(describe(error)));
        }
        if matches!(bindings.get(LIMIT_VAR), Some(ScryerTerm::Atom(a)) if a == "inference_limit_exceeded")
        {
            return Err(EngineError::InferenceLimit(limits.inferences.unwrap_or(0)));
        }
        if solutions.len() == limits.max_solutions {
            return Err(EngineError::TooManySolutions(limits.max_solutions));
        }
        let row = vars
            .iter()
            .map(|var| match bindings.get(var.name()) {
                Some(term) => to_value(term),
                None => Ok(Value::Unbound(var.name().to_owned())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        solutions.push(row);
    }
    Ok(solutions)
}

fn to_value(term: &ScryerTerm) -> Result<Value, EngineError> {
    Ok(match term {
        ScryerTerm::Atom(a) => Value::Atom(a.clone()),
        ScryerTerm::String(s) => Value::Str(s.clone()),
        ScryerTerm::Integer(n) => Value::Int(
            n.to_string()
                .parse()
                .map_err(|_| EngineError::Prolog(format!("integer {n} does not fit in 64 bits")))?,
        ),
        ScryerTerm::List(items) => {
            Value::List(items.iter().map(to_value).collect::<Result<_, _>>()?)
        }
        ScryerTerm::Compound(f, args) => Value::Compound(
            f.clone(),
            args.iter().map(to_value).collect::<Result<_, _>>()?,
        ),
        ScryerTerm::Var(v) => Value::Unbound(v.clone()),
        other => {
            return Err(EngineError::Prolog(format!(
                "unsupported value in answer: {other:?}"
            )));
        }
    })
}

/// A readable rendering of an exception term.
fn describe(term: &ScryerTerm) -> String {
    match to_value(term) {
        Ok(value) => format!("{value:?}"),
        Err(_) => format!("{term:?}"),
    }
}

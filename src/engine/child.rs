//! A forked child of an engine that reports through a pipe (Linux): the zygote's universes
//! (`dataset::zygote`) and the extra verifiers of a single build (`question::verify_forked`).

use super::Engine;
use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;

/// A running child: its pid and the read end of its report pipe.
pub(crate) struct Child {
    /// The child's process id.
    pub(crate) pid: libc::pid_t,
    /// The read end of the pipe the child reports through; end of file once it exits.
    pub(crate) report: File,
}

/// Forks a child of `engine` ([`Engine::fork`]) that runs `job` with its copy of the engine
/// and the write end of its report pipe, and exits with the status `job` returns.
///
/// # Safety
/// `job` runs in the child under [`Engine::fork`]'s contract: it builds its own thread pools,
/// prints nothing and reports through the pipe (or a file) only.
pub(crate) unsafe fn spawn(
    engine: &Engine,
    job: impl FnOnce(Engine, File) -> i32 + Send + 'static,
) -> crate::Result<Child> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(crate::io::io_error("creating a pipe for a forked child")(
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: both descriptors are new and owned by nothing else.
    let (report, write) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
    // The parent drops the job (closing its copy of the write end) once forked, so the
    // report ends when the child exits.
    let job = Box::new(move |engine: Engine| job(engine, write));
    // SAFETY: the caller upholds `Engine::fork`'s contract for `job`.
    let pid = unsafe { engine.fork(job) }?;
    Ok(Child { pid, report })
}

impl Child {
    /// Waits for the child to exit: `Err` with the reason unless it exited with status 0.
    pub(crate) fn reap(&self) -> Result<(), String> {
        let mut status: libc::c_int = 0;
        // SAFETY: waits for our own child; `status` is a valid out-pointer.
        let reaped = loop {
            let rc = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if rc >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                break rc;
            }
        };
        if reaped < 0 {
            Err(format!(
                "could not be waited for: {}",
                std::io::Error::last_os_error()
            ))
        } else if libc::WIFSIGNALED(status) {
            Err(format!("killed by signal {}", libc::WTERMSIG(status)))
        } else if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) != 0 {
            Err(match libc::WEXITSTATUS(status) {
                101 => "it panicked".to_owned(),
                code => format!("it exited with status {code}"),
            })
        } else {
            Ok(())
        }
    }

    /// Reads the child's whole report, then reaps it: the report, or why the child failed.
    pub(crate) fn finish(mut self) -> Result<Vec<u8>, String> {
        let mut received = Vec::new();
        let read = self.report.read_to_end(&mut received);
        self.reap()?;
        read.map_err(|e| format!("its report could not be read: {e}"))?;
        Ok(received)
    }
}

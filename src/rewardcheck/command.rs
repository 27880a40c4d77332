//! A reward function in any language, as a subprocess speaking JSON lines: one
//! `{"id", "question", "response", "answers"}` per line on its stdin, one `{"id", "reward"}`
//! per line on its stdout (in any order within a batch). One process serves the whole check;
//! a batch is one round trip.

use super::{RewardError, RewardFn, RewardInput};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

/// The longest output line read (longer ones are garbage).
const MAX_LINE: u64 = 1 << 20;
/// Bytes of the command's stderr kept for error messages.
const STDERR_TAIL: usize = 2000;

enum Out {
    Line(String),
    TooLong,
    Eof,
    Failed(std::io::Error),
}

/// A reward command under test (`sh -c CMD`).
pub struct CommandReward {
    command: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Out>,
    stderr: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    timeout: Duration,
    out_line: usize,
    dead: Option<String>,
}

impl CommandReward {
    /// Starts `command` under `sh -c` (`cmd /C` on Windows); each answer must arrive within
    /// `timeout` of the previous one.
    pub fn spawn(command: &str, timeout: Duration) -> Result<Self, RewardError> {
        let mut cmd = if cfg!(windows) {
            let mut c = Command::new("cmd");
            c.arg("/C");
            c
        } else {
            let mut c = Command::new("sh");
            c.arg("-c");
            c
        };
        // Its own process group, so that killing it reaches what the shell started too (a
        // pipeline's stages, a wrapper's child), which would otherwise keep the pipes open.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| RewardError::Spawn {
                command: command.to_owned(),
                source,
            })?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut buf = Vec::new();
                let msg = match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut buf) {
                    Ok(0) => Out::Eof,
                    Ok(_) if !buf.ends_with(b"\n") && buf.len() as u64 >= MAX_LINE => Out::TooLong,
                    Ok(_) => Out::Line(String::from_utf8_lossy(&buf).trim_end().to_owned()),
                    Err(e) => Out::Failed(e),
                };
                let end = !matches!(msg, Out::Line(_));
                if tx.send(msg).is_err() || end {
                    break;
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut err_pipe = child.stderr.take().expect("stderr is piped");
        let tail = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                t.extend_from_slice(&buf[..n]);
                let len = t.len();
                if len > STDERR_TAIL {
                    t.drain(..len - STDERR_TAIL);
                }
            }
        });
        Ok(CommandReward {
            command: command.to_owned(),
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            timeout,
            out_line: 0,
            dead: None,
        })
    }

    /// The command line.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Kills the command and everything in its process group.
    fn kill(&mut self) {
        #[cfg(target_os = "linux")]
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) with a negative pid signals the process group the command leads
            // (spawned with process_group(0)); no memory is touched.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
    }

    fn stderr_tail(&self) -> String {
        let t = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&t).trim().to_owned();
        if text.is_empty() {
            String::new()
        } else {
            format!("; its stderr ends: {text}")
        }
    }

    fn status(&mut self) -> String {
        // Give an exiting process a moment to be reaped.
        for _ in 0..50 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.to_string();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        "it closed its stdout".into()
    }

    fn garbage(&self, message: impl Into<String>, text: &str) -> RewardError {
        RewardError::Garbage {
            line: self.out_line,
            message: message.into(),
            text: text.chars().take(200).collect(),
        }
    }

    /// Parses one answer line: `{"id": ..., "reward": number}`; NaN and infinities (as Python's
    /// json writes them) and `null` are kept as NaN or infinities for the bounded property to
    /// judge.
    fn parse(&self, text: &str) -> Result<(String, f64), RewardError> {
        let value: serde_json::Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) => {
                let patched = text
                    .replace("-Infinity", "\"-inf\"")
                    .replace("Infinity", "\"inf\"")
                    .replace("NaN", "\"NaN\"");
                serde_json::from_str(&patched)
                    .map_err(|e| self.garbage(format!("not JSON ({e})"), text))?
            }
        };
        let obj = value
            .as_object()
            .ok_or_else(|| self.garbage("not a JSON object", text))?;
        let id = match obj.get("id") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => return Err(self.garbage("no string \"id\"", text)),
        };
        let reward = match obj.get("reward") {
            Some(serde_json::Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            Some(serde_json::Value::Bool(b)) => f64::from(u8::from(*b)),
            // No reward (TRL's reward functions return None to skip a sample): not a number in
            // [0, 1], which the bounded property reports.
            Some(serde_json::Value::Null) => f64::NAN,
            Some(serde_json::Value::String(s)) if matches!(s.as_str(), "NaN" | "inf" | "-inf") => {
                s.parse::<f64>().unwrap_or(f64::NAN)
            }
            _ => return Err(self.garbage("no number \"reward\"", text)),
        };
        Ok((id, reward))
    }
}

impl RewardFn for CommandReward {
    fn rewards(
        &mut self,
        inputs: &[RewardInput],
        first_line: usize,
    ) -> Result<Vec<f64>, RewardError> {
        if let Some(why) = &self.dead {
            return Err(RewardError::Failed {
                line: first_line,
                message: format!("the reward command was stopped earlier: {why}"),
            });
        }
        let mut buf = Vec::new();
        for input in inputs {
            serde_json::to_writer(&mut buf, input).map_err(std::io::Error::other)?;
            buf.push(b'\n');
        }
        let pending: BTreeMap<&str, usize> = inputs
            .iter()
            .enumerate()
            .map(|(i, x)| (x.id.as_str(), i))
            .collect();
        let mut got = vec![None; inputs.len()];
        let mut answered = 0;
        let mut stdin = self.stdin.take();
        // The writer runs beside the reader so a command that answers while it reads never
        // blocks on a full pipe.
        let result = std::thread::scope(|scope| {
            let writer = scope.spawn(|| -> std::io::Result<Option<ChildStdin>> {
                if let Some(mut pipe) = stdin.take() {
                    // A command that exits early closes the pipe; the reader reports that.
                    if pipe.write_all(&buf).and_then(|()| pipe.flush()).is_err() {
                        return Ok(None);
                    }
                    return Ok(Some(pipe));
                }
                Ok(None)
            });
            // The time limit runs from the last answer: blank lines do not reset it.
            let mut deadline = std::time::Instant::now() + self.timeout;
            let first_missing =
                |got: &[Option<f64>]| got.iter().position(Option::is_none).unwrap_or(0);
            let outcome = loop {
                if answered == inputs.len() {
                    break Ok(());
                }
                let wait = deadline.saturating_duration_since(std::time::Instant::now());
                match self.lines.recv_timeout(wait) {
                    Ok(Out::Line(text)) => {
                        self.out_line += 1;
                        if text.trim().is_empty() {
                            continue;
                        }
                        deadline = std::time::Instant::now() + self.timeout;
                        let (id, reward) = match self.parse(&text) {
                            Ok(x) => x,
                            Err(e) => break Err(e),
                        };
                        let Some(&i) = pending.get(id.as_str()) else {
                            break Err(self.garbage(
                                format!("id {id:?} is not one of the lines sent"),
                                &text,
                            ));
                        };
                        if got[i].is_some() {
                            break Err(self.garbage(format!("id {id:?} answered twice"), &text));
                        }
                        got[i] = Some(reward);
                        answered += 1;
                    }
                    Ok(Out::TooLong) => {
                        self.out_line += 1;
                        break Err(self.garbage(
                            format!("longer than {MAX_LINE} bytes without a newline"),
                            "",
                        ));
                    }
                    Ok(Out::Failed(e)) => break Err(RewardError::Io(e)),
                    Ok(Out::Eof) | Err(RecvTimeoutError::Disconnected) => {
                        let status = self.status();
                        let missing = first_missing(&got);
                        break Err(RewardError::Died {
                            status,
                            answered,
                            sent: inputs.len(),
                            line: first_line + missing,
                            id: inputs[missing].id.clone(),
                            stderr: self.stderr_tail(),
                        });
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        let missing = first_missing(&got);
                        break Err(RewardError::Timeout {
                            line: first_line + missing,
                            id: inputs[missing].id.clone(),
                            secs: self.timeout.as_secs_f64(),
                        });
                    }
                }
            };
            if let Err(e) = &outcome {
                // Unblocks a writer stuck on a command that stopped reading; the command is not
                // asked again.
                self.kill();
                self.dead = Some(e.to_string());
            }
            let pipe = writer.join().unwrap_or(Ok(None))?;
            outcome.map(|()| pipe)
        });
        self.stdin = result?;
        Ok(got.into_iter().map(|g| g.unwrap_or(f64::NAN)).collect())
    }
}

impl Drop for CommandReward {
    fn drop(&mut self) {
        // Closing stdin ends a well-behaved command; one that does not end is killed.
        drop(self.stdin.take());
        for _ in 0..20 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        let _ = self.child.wait();
    }
}

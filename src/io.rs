//! The crate's file kit: atomic writes of files and directories, SHA-256 hashing, and JSONL
//! (one JSON value per line) reading and writing. Every file rulegym writes or hashes goes
//! through here.
//!
//! JSONL lines are split on `\n`; a line that is empty or all ASCII white space is skipped, so a
//! trailing newline (or none), blank separator lines and `\r\n` endings are all accepted. Line
//! numbers are 1-based positions in the file, blank lines counted, so an error points at the
//! line an editor shows. Written JSONL is compact JSON, one value per line, each line ending in
//! `\n`.

use crate::{Error, Result};
use rayon::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// An [`Error::Io`] constructor for `map_err`, with `context` (what was being done, with the path).
pub fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// Reads a whole file; the error names the path.
pub fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(io_error(format!("reading {}", path.display())))
}

/// The folder holding `path` (`.` for a bare name).
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The file name of `path` as text; an error for paths without one (`/`, `..`).
fn name_of(path: &Path) -> Result<String> {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Error::Config(format!("{} has no file name", path.display())))
}

/// Whether process `pid` is alive. On Linux `/proc` tells; elsewhere every process counts as
/// alive, so nothing another process may still be writing is ever removed.
fn process_alive(pid: u32) -> bool {
    !Path::new("/proc/self").exists() || Path::new(&format!("/proc/{pid}")).exists()
}

/// Cleans what killed writers left next to `target`: `.NAME.tmp-PID` staging files and folders
/// of dead processes are removed; a `.NAME.old-PID` of a dead process is put back as NAME when
/// NAME is missing (a swap killed half-way), removed otherwise. Leftovers of live processes
/// (another writer at work) are never touched.
pub fn clean_leftovers(target: &Path) -> Result<()> {
    let parent = parent_of(target);
    let name = name_of(target)?;
    let Ok(entries) = fs::read_dir(&parent) else {
        return Ok(());
    };
    let mut found: Vec<(bool, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        for (old, infix) in [(false, ".tmp-"), (true, ".old-")] {
            let pid = file
                .strip_prefix('.')
                .and_then(|f| f.strip_prefix(name.as_str()))
                .and_then(|f| f.strip_prefix(infix))
                .and_then(|pid| pid.parse::<u32>().ok());
            if let Some(pid) = pid
                && pid != std::process::id()
                && !process_alive(pid)
            {
                found.push((old, entry.path()));
            }
        }
    }
    found.sort();
    for (old, path) in found {
        if old && fs::symlink_metadata(target).is_err() {
            fs::rename(&path, target).map_err(io_error(format!(
                "restoring {} from {}",
                target.display(),
                path.display()
            )))?;
        } else {
            remove_any(&path)?;
        }
    }
    Ok(())
}

fn remove_any(path: &Path) -> Result<()> {
    let result = match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(_) => return Ok(()),
    };
    result.map_err(io_error(format!("removing {}", path.display())))
}

/// Flushes a folder's entries (renames into it) to disk; a no-op where folders cannot be opened.
fn sync_dir(dir: &Path) {
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Swaps two paths in one atomic step where the system can (Linux `renameat2` with
/// `RENAME_EXCHANGE`); `Ok(false)` where it cannot, so the caller falls back.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes());
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: both arguments are NUL-terminated paths that live across the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP) => Ok(false),
        _ => Err(err),
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_: &Path, _: &Path) -> std::io::Result<bool> {
    Ok(false)
}

/// Creates `path` with `bytes` and flushes it to disk.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file =
        fs::File::create(path).map_err(io_error(format!("creating {}", path.display())))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(io_error(format!("writing {}", path.display())))
}

/// Writes one file atomically (temporary sibling, fsync, rename); creates missing parents. (Unlike
/// [`write_dir_atomic`] it does not list the folder for leftovers: it runs once per mapping entry
/// or stage record, in folders of thousands of files.)
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let parent = parent_of(path);
    fs::create_dir_all(&parent).map_err(io_error(format!("creating {}", parent.display())))?;
    let tmp = parent.join(format!(".{}.tmp-{}", name_of(path)?, std::process::id()));
    let result = (|| {
        write_synced(&tmp, bytes)?;
        fs::rename(&tmp, path).map_err(io_error(format!("renaming into {}", path.display())))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    sync_dir(&parent);
    result
}

/// A caller's check that an existing output may be replaced (an error refuses).
pub type ReplaceCheck = dyn Fn(&Path) -> Result<()>;

/// Writes `files` ((name, bytes), flat) as the directory `dir` atomically: everything goes to a
/// temporary sibling directory that replaces `dir` only when complete. An existing `dir` is
/// replaced only when `replace` is given and accepts it (it errors to refuse; see
/// [`crate::dataset::check_replaceable`]); where the system can, the replacement is one atomic
/// exchange, so a kill at any instant leaves the old or the new directory under `dir` (where it
/// cannot, a swap killed half-way is undone by the next write's [`clean_leftovers`]).
pub fn write_dir_atomic(
    dir: &Path,
    files: &[(String, Vec<u8>)],
    replace: Option<&ReplaceCheck>,
) -> Result<()> {
    let staged = StagedDir::new(dir, replace)?;
    staged.write(files)?;
    staged.commit()
}

/// A directory being written atomically ([`write_dir_atomic`] in steps, so that files known
/// early can be written while the rest is still computed): files go to a temporary sibling
/// directory, which replaces the target on [`StagedDir::commit`] and is removed if the
/// `StagedDir` is dropped uncommitted.
pub struct StagedDir {
    dir: PathBuf,
    parent: PathBuf,
    file_name: String,
    staging: PathBuf,
    exists: bool,
    committed: bool,
}

impl StagedDir {
    /// Checks that `dir` may be written ([`write_dir_atomic`]'s rules for `replace`) and creates
    /// the temporary directory.
    pub fn new(dir: &Path, replace: Option<&ReplaceCheck>) -> Result<Self> {
        let parent = parent_of(dir);
        let file_name = name_of(dir)?;
        fs::create_dir_all(&parent).map_err(io_error(format!("creating {}", parent.display())))?;
        clean_leftovers(dir)?;
        let exists = fs::symlink_metadata(dir).is_ok();
        match (exists, replace) {
            (true, None) => return Err(Error::Exists(dir.to_path_buf())),
            (true, Some(check)) => check(dir)?,
            (false, _) => {}
        }
        let pid = std::process::id();
        let staging = parent.join(format!(".{file_name}.tmp-{pid}"));
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir(&staging).map_err(io_error(format!("creating {}", staging.display())))?;
        Ok(StagedDir {
            dir: dir.to_path_buf(),
            parent,
            file_name,
            staging,
            exists,
            committed: false,
        })
    }

    /// Writes and syncs `files` into the temporary directory, side by side (rayon: each fsync
    /// waits on the disk).
    pub fn write(&self, files: &[(String, Vec<u8>)]) -> Result<()> {
        files
            .par_iter()
            .try_for_each(|(name, bytes)| write_synced(&self.staging.join(name), bytes))
    }

    /// Writes the file `name` as `render` writes it, straight to disk (no copy of it in
    /// memory), and syncs it; returns its SHA-256, as [`sha256_hex`] of the same bytes.
    pub fn stream(
        &self,
        name: &str,
        render: impl FnOnce(&mut dyn Write) -> Result<()>,
    ) -> Result<String> {
        let path = self.staging.join(name);
        let file =
            fs::File::create(&path).map_err(io_error(format!("creating {}", path.display())))?;
        let mut out = Hashing::new(std::io::BufWriter::with_capacity(1 << 20, file));
        render(&mut out)?;
        let (inner, hasher) = out.into_parts();
        let file = inner
            .into_inner()
            .map_err(|e| io_error(format!("writing {}", path.display()))(e.into_error()))?;
        file.sync_all()
            .map_err(io_error(format!("syncing {}", path.display())))?;
        Ok(hex::encode(hasher.finalize()))
    }

    /// Puts the temporary directory in place of the target.
    pub fn commit(mut self) -> Result<()> {
        let (dir, parent, staging) = (&self.dir, &self.parent, &self.staging);
        sync_dir(staging);
        let rename_into = |from: &Path| {
            fs::rename(from, dir).map_err(io_error(format!("renaming into {}", dir.display())))
        };
        let result = if !self.exists {
            rename_into(staging)
        } else {
            match exchange(staging, dir).map_err(io_error(format!("replacing {}", dir.display()))) {
                // `staging` now holds the old directory.
                Ok(true) => remove_any(staging),
                Ok(false) => {
                    let pid = std::process::id();
                    let old = parent.join(format!(".{}.old-{pid}", self.file_name));
                    fs::rename(dir, &old)
                        .map_err(io_error(format!("moving aside {}", dir.display())))
                        .and_then(|()| rename_into(staging))
                        .and_then(|()| remove_any(&old))
                }
                Err(e) => Err(e),
            }
        };
        // Committed or not, nothing is left to clean but what `Drop` removes on failure.
        self.committed = result.is_ok();
        sync_dir(parent);
        result
    }
}

/// A writer or reader that hashes every byte passing through it (SHA-256): the index file's
/// checksum trailer and [`StagedDir::stream`].
pub struct Hashing<T> {
    inner: T,
    sha: Sha256,
}

impl<T> Hashing<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        Hashing {
            inner,
            sha: Sha256::new(),
        }
    }

    /// The inner writer or reader and the hash of everything that passed.
    pub fn into_parts(self) -> (T, Sha256) {
        (self.inner, self.sha)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<R: std::io::Read> std::io::Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha.update(&buf[..n]);
        Ok(n)
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.staging);
        }
    }
}

/// The non-blank lines of `bytes`, each parsed as a `T`, with its 1-based line number.
///
/// Lazy: parsing stops where the caller stops. Callers with their own error type map the
/// `serde_json::Error` themselves (see [`parse_jsonl`] for [`crate::Error`]).
pub fn jsonl_records<T: DeserializeOwned>(
    bytes: &[u8],
) -> impl Iterator<Item = (usize, serde_json::Result<T>)> + '_ {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.trim_ascii().is_empty())
        .map(|(i, line)| (i + 1, serde_json::from_slice(line)))
}

/// Parses JSONL `bytes` into records; a malformed line is an [`Error::Json`] whose context is
/// `"<what> line <n>"` (`what` names the file, e.g. its path).
pub fn parse_jsonl<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<Vec<T>> {
    jsonl_records(bytes)
        .map(|(line, record)| {
            record.map_err(|source| Error::Json {
                context: format!("{what} line {line}"),
                source,
            })
        })
        .collect()
}

/// The complete non-blank lines of a JSONL file that a writer appends to, with their 1-based
/// line numbers: a last line without its newline (a write cut short, or one still being
/// written) is left out, and a file that does not exist has none. The file is not modified.
pub fn read_complete_lines(path: &Path) -> Result<Vec<(usize, String)>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(format!("reading {}", path.display()))(e)),
    };
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => &bytes[..=i],
        None => &[],
    };
    complete
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.trim_ascii().is_empty())
        .map(|(i, line)| {
            String::from_utf8(line.to_vec())
                .map(|l| (i + 1, l))
                .map_err(|e| Error::Io {
                    context: format!("reading {} line {}", path.display(), i + 1),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                })
        })
        .collect()
}

/// JSONL records read one line at a time from a stream (a reward command's stdin), each with
/// its 1-based line number; blank lines are skipped. A malformed line is an [`Error::Json`]
/// whose context is `"line <n>"`; iteration goes on after it.
pub fn jsonl_stream<T: DeserializeOwned>(
    reader: impl std::io::BufRead,
) -> impl Iterator<Item = Result<(usize, T)>> {
    jsonl_lines(reader).map(|(line, record)| record.map(|r| (line, r)))
}

/// [`jsonl_stream`] with each line's number beside its result, so a reader can report a
/// malformed line and go on with the next.
pub fn jsonl_lines<T: DeserializeOwned>(
    reader: impl std::io::BufRead,
) -> impl Iterator<Item = (usize, Result<T>)> {
    reader
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.as_ref().is_ok_and(|l| l.trim().is_empty()))
        .map(|(i, line)| {
            let record = line
                .map_err(io_error(format!("reading line {}", i + 1)))
                .and_then(|line| {
                    serde_json::from_str(&line).map_err(|source| Error::Json {
                        context: format!("line {}", i + 1),
                        source,
                    })
                });
            (i + 1, record)
        })
}

/// Reads and parses the JSONL file at `path` ([`parse_jsonl`], errors naming the path).
pub fn read_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    parse_jsonl(&read(path)?, &path.display().to_string())
}

/// Serialises `items` as JSONL bytes.
pub fn jsonl_bytes<T: Serialize>(items: impl IntoIterator<Item = T>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write_jsonl_to(&mut out, items)?;
    Ok(out)
}

/// Writes `items` to `out` as JSONL (the bytes [`jsonl_bytes`] makes).
pub fn write_jsonl_to<T: Serialize>(
    out: &mut dyn Write,
    items: impl IntoIterator<Item = T>,
) -> Result<()> {
    for item in items {
        serde_json::to_writer(&mut *out, &item).map_err(|source| Error::Json {
            context: "serialising a JSONL record".into(),
            source,
        })?;
        out.write_all(b"\n")
            .map_err(io_error("writing a JSONL record"))?;
    }
    Ok(())
}

/// Writes `items` as a JSONL file, atomically.
pub fn write_jsonl<T: Serialize>(path: &Path, items: impl IntoIterator<Item = T>) -> Result<()> {
    write_file_atomic(path, &jsonl_bytes(items)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_lines_and_line_endings_are_tolerated_and_numbers_are_file_lines() {
        for text in [
            "1\n2\n3",
            "1\n2\n3\n",
            "1\r\n2\r\n3\r\n",
            "\n1\n  \n2\n\t\n3\n\n",
        ] {
            let v: Vec<u32> = parse_jsonl(text.as_bytes(), "t").unwrap();
            assert_eq!(v, [1, 2, 3], "{text:?}");
        }
        let lines: Vec<usize> = jsonl_records::<u32>(b"\n1\n\n2\n")
            .map(|(n, r)| {
                r.unwrap();
                n
            })
            .collect();
        assert_eq!(lines, [2, 4]);
        assert!(parse_jsonl::<u32>(b"", "t").unwrap().is_empty());
    }

    #[test]
    fn a_malformed_line_is_an_error_naming_the_file_and_line() {
        let err = parse_jsonl::<u32>(b"1\n\n{oops\n3\n", "people.jsonl").unwrap_err();
        match &err {
            Error::Json { context, .. } => assert_eq!(context, "people.jsonl line 3"),
            other => panic!("unexpected error {other:?}"),
        }
        let err = read_jsonl::<u32>(Path::new("/nonexistent/x.jsonl")).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
    }

    #[test]
    fn jsonl_round_trips_through_an_atomic_write() {
        let dir = std::env::temp_dir().join(format!("rulegym-io-{}", std::process::id()));
        let path = dir.join("sub/x.jsonl");
        write_jsonl(&path, [1u32, 2, 3]).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"1\n2\n3\n");
        assert_eq!(read_jsonl::<u32>(&path).unwrap(), [1, 2, 3]);
        let err = write_dir_atomic(&dir, &[], None).unwrap_err();
        assert!(matches!(err, Error::Exists(_)), "{err:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A staged directory written in steps (one file streamed, hashed as it is written) appears
    /// whole on commit; one dropped uncommitted leaves neither the target nor its staging directory.
    #[test]
    fn a_staged_directory_appears_whole_or_not_at_all() {
        let root = std::env::temp_dir().join(format!("rulegym-staged-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("data");
        let staged = StagedDir::new(&dir, None).unwrap();
        let hash = staged
            .stream("a", |out: &mut dyn Write| {
                out.write_all(b"ear")
                    .and_then(|()| out.write_all(b"ly"))
                    .map_err(io_error("t"))
            })
            .unwrap();
        assert_eq!(hash, sha256_hex(b"early"));
        staged.write(&[("b".into(), b"late".to_vec())]).unwrap();
        assert!(!dir.exists(), "nothing under the target before the commit");
        staged.commit().unwrap();
        assert_eq!(std::fs::read(dir.join("a")).unwrap(), b"early");
        assert_eq!(std::fs::read(dir.join("b")).unwrap(), b"late");
        let other = root.join("other");
        {
            let staged = StagedDir::new(&other, None).unwrap();
            staged.write(&[("a".into(), b"x".to_vec())]).unwrap();
        }
        let left: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["data"], "an uncommitted directory leaves nothing");
        assert!(matches!(
            StagedDir::new(&dir, None).map(|_| ()),
            Err(Error::Exists(_))
        ));
        std::fs::remove_dir_all(&root).unwrap();
    }
}

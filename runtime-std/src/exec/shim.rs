//! The executor shim: a tiny parent process per executor that outlives the
//! worker and records how the executor ended.
//!
//! An executor a new worker process re-adopts (see the module docs of
//! [`super`]) is not that process's child: it cannot `wait` for it. So every
//! executor runs under a shim — the `regent` binary itself, started as
//! `regent executor-shim --status FILE --stdout FILE [--cgroup DIR]... -- CMD ARGS...` (a
//! hidden subcommand; [`ShimArgs`]) — which the supervisor starts as the
//! leader of the executor's process group:
//!
//! ```text
//! worker (regent worker)                      may be killed and restarted
//! └─ regent executor-shim  (pid = pgid)       the recorded group leader
//!    └─ CMD ARGS...        (same group)       the executor's command
//! ```
//!
//! The shim spawns `CMD` as its child in its own group (same environment,
//! working directory and stderr; stdout to the `--stdout` file), tells the
//! supervisor on its stdout (a pipe) whether the command started
//! ([`HANDSHAKE_STARTED`] or [`HANDSHAKE_CANNOT_START`] and the reason),
//! waits for it, writes the [`ShimStatus`] to the status file atomically
//! (temp file, fsync, rename, fsync of the directory) and exits with the
//! same code (`128 + signal` when a signal ended the command,
//! [`CANNOT_START_EXIT`] when it could not be started).
//!
//! Signals: the shim handles SIGTERM, SIGINT and SIGHUP (and SIGQUIT,
//! SIGUSR1 and SIGUSR2, which a named scale may stop with) with a handler that
//! does nothing (a handled signal is reset to its default in the exec'd
//! command, an ignored one would be inherited). So the SIGTERM the
//! supervisor sends to the whole group for a graceful stop ends (or is
//! handled by) the command, and the shim survives to record how it ended.
//! The shim never forwards a signal: signal the group, as the worker does.
//! SIGKILL of the group kills both; then no status is written (the worker
//! that sent it knows it killed them).

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The hidden subcommand of the `regent` binary that runs the shim.
pub const SUBCOMMAND: &str = "executor-shim";

/// The name of the status file in the executor's directory.
pub const STATUS_FILE: &str = "exit-status";

/// The shim's exit code when the command could not be started (as a shell
/// reports a command it cannot run). Only a hint: the status file tells a
/// command that exited 127 from one that never started.
pub const CANNOT_START_EXIT: i32 = 127;

/// The first word of the shim's handshake line when the command runs
/// (followed by its pid).
pub const HANDSHAKE_STARTED: &str = "started";

/// The first word of the shim's handshake line when the command could not
/// be started (followed by the reason).
pub const HANDSHAKE_CANNOT_START: &str = "cannot-start";

/// The first line of a status file.
const HEADER: &str = "regent-exit-status 1";

/// How an executor's command ended, as the shim records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShimStatus {
    /// It exited with this code.
    Exited {
        /// The exit code.
        code: i32,
    },
    /// A signal ended it.
    Signaled {
        /// The signal number.
        signal: i32,
    },
    /// It could not be started.
    CannotStart {
        /// Why, naming the OS error.
        reason: String,
    },
}

impl ShimStatus {
    /// The shim's own exit code for this status: the command's code,
    /// `128 + signal`, or [`CANNOT_START_EXIT`].
    pub fn exit_code(&self) -> i32 {
        match self {
            ShimStatus::Exited { code } => *code,
            ShimStatus::Signaled { signal } => 128 + signal,
            ShimStatus::CannotStart { .. } => CANNOT_START_EXIT,
        }
    }

    /// The file text:
    ///
    /// ```text
    /// regent-exit-status 1
    /// exited=<code> | signal=<number> | cannot-start=<reason on one line>
    /// end
    /// ```
    pub fn encode(&self) -> String {
        let line = match self {
            ShimStatus::Exited { code } => format!("exited={code}"),
            ShimStatus::Signaled { signal } => format!("signal={signal}"),
            ShimStatus::CannotStart { reason } => {
                format!("cannot-start={}", one_line(reason))
            }
        };
        format!("{HEADER}\n{line}\nend\n")
    }

    /// Parses file text; `None` unless it is a complete status.
    pub fn decode(text: &str) -> Option<ShimStatus> {
        let body = text.strip_prefix(HEADER)?.strip_prefix('\n')?.strip_suffix("\nend\n")?;
        let (key, value) = body.split_once('=')?;
        match key {
            "exited" => Some(ShimStatus::Exited { code: value.parse().ok()? }),
            "signal" => Some(ShimStatus::Signaled { signal: value.parse().ok()? }),
            "cannot-start" if !value.contains('\n') => {
                Some(ShimStatus::CannotStart { reason: value.to_owned() })
            }
            _ => None,
        }
    }
}

/// `text` with line breaks replaced by spaces.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// The status recorded at `path`; `None` when there is none (the shim was
/// killed with SIGKILL, the executor predates the shim, or it still runs) or
/// it is incomplete.
pub fn read_status(path: &Path) -> Option<ShimStatus> {
    ShimStatus::decode(&fs::read_to_string(path).ok()?)
}

/// Writes `status` to `path` atomically and durably: a temporary file
/// beside it, fsync, rename, fsync of the directory.
pub fn write_status(path: &Path, status: &ShimStatus) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = File::create(&tmp)?;
        f.write_all(status.encode().as_bytes())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(if dir.as_os_str().is_empty() { Path::new(".") } else { dir })?.sync_all()?;
    }
    Ok(())
}

/// The arguments of `regent executor-shim`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShimArgs {
    /// Where the status is written.
    pub status: PathBuf,
    /// The file the command's stdout is appended to (the shim's own stdout
    /// is the handshake pipe).
    pub stdout: PathBuf,
    /// The command's stderr file, when the shim writes it (with
    /// `rotation`); else the command inherits the shim's stderr.
    pub stderr: Option<PathBuf>,
    /// Rotate the command's stdout (and `stderr`) by size
    /// (`--log-max-bytes N --log-files K`; [`super::rotate`]): the command
    /// writes into pipes the shim copies into rotating files. `None`: the
    /// command writes the files itself, unbounded.
    pub rotation: Option<super::rotate::Rotation>,
    /// The identity the command runs as (`--user UID:GID:GROUPS`; the
    /// shim stays root and starts it through
    /// [`super::user::EXEC_SUBCOMMAND`]). `None`: the shim's own.
    pub user: Option<super::user::Identity>,
    /// The cgroups the shim joins before it starts the command
    /// (`--cgroup DIR`, one per hierarchy: [`super::cgroup`]), so the
    /// command and all it forks are limited from the start. Empty: none.
    pub cgroups: Vec<PathBuf>,
    /// The program (looked up in `PATH`) and its arguments.
    pub command: Vec<OsString>,
}

impl ShimArgs {
    /// The command line after the program: [`SUBCOMMAND`], the options,
    /// `--` and the command.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = vec![
            SUBCOMMAND.into(),
            "--status".into(),
            self.status.clone().into(),
            "--stdout".into(),
            self.stdout.clone().into(),
        ];
        if let Some(stderr) = &self.stderr {
            v.push("--stderr".into());
            v.push(stderr.clone().into());
        }
        if let Some(r) = self.rotation {
            v.push("--log-max-bytes".into());
            v.push(r.max_bytes.to_string().into());
            v.push("--log-files".into());
            v.push(r.files.to_string().into());
        }
        if let Some(user) = &self.user {
            v.push("--user".into());
            v.push(user.to_string().into());
        }
        for dir in &self.cgroups {
            v.push("--cgroup".into());
            v.push(dir.clone().into());
        }
        v.push("--".into());
        v.extend(self.command.iter().cloned());
        v
    }

    /// Parses what follows [`SUBCOMMAND`] (the `regent` binary parses it
    /// with clap; this is for other binaries that act as the shim, such as
    /// tests). Names the problem on bad input.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<ShimArgs, ShimError> {
        let mut args = args.into_iter();
        let (mut status, mut stdout, mut cgroups) = (None, None, Vec::new());
        let (mut stderr, mut max_bytes, mut files) = (None, None, None);
        let mut user = None;
        loop {
            let Some(arg) = args.next() else {
                return Err(ShimError::NoSeparator);
            };
            match arg.to_str() {
                Some("--") => break,
                Some("--user") => {
                    let value = args.next().ok_or(ShimError::NoValue("--user"))?;
                    let parsed = value.to_str().and_then(|v| v.parse().ok());
                    user = Some(parsed.ok_or(ShimError::BadNumber("--user UID:GID:GROUPS"))?);
                }
                Some("--stderr") => {
                    stderr =
                        Some(PathBuf::from(args.next().ok_or(ShimError::NoValue("--stderr"))?));
                }
                Some(flag @ ("--log-max-bytes" | "--log-files")) => {
                    let name =
                        if flag == "--log-files" { "--log-files" } else { "--log-max-bytes" };
                    let value = args.next().ok_or(ShimError::NoValue(name))?;
                    let n: u64 = value
                        .to_str()
                        .and_then(|v| v.parse().ok())
                        .filter(|n| *n > 0)
                        .ok_or(ShimError::BadNumber(name))?;
                    if name == "--log-files" {
                        files = Some(u32::try_from(n).map_err(|_| ShimError::BadNumber(name))?);
                    } else {
                        max_bytes = Some(n);
                    }
                }
                Some("--cgroup") => {
                    cgroups.push(PathBuf::from(args.next().ok_or(ShimError::NoValue("--cgroup"))?));
                }
                Some(flag @ ("--status" | "--stdout")) => {
                    let flag = if flag == "--status" { "--status" } else { "--stdout" };
                    let value = args.next().ok_or(ShimError::NoValue(flag))?;
                    let slot = if flag == "--status" { &mut status } else { &mut stdout };
                    *slot = Some(PathBuf::from(value));
                }
                _ => return Err(ShimError::Unexpected(arg)),
            }
        }
        let command: Vec<OsString> = args.collect();
        if command.is_empty() {
            return Err(ShimError::NoCommand);
        }
        Ok(ShimArgs {
            status: status.ok_or(ShimError::Missing("--status FILE"))?,
            stdout: stdout.ok_or(ShimError::Missing("--stdout FILE"))?,
            stderr,
            user,
            rotation: match (max_bytes, files) {
                (None, None) => None,
                (Some(max_bytes), Some(files)) => {
                    Some(super::rotate::Rotation { max_bytes, files })
                }
                (None, Some(_)) => return Err(ShimError::Missing("--log-max-bytes N")),
                (Some(_), None) => return Err(ShimError::Missing("--log-files K")),
            },
            cgroups,
            command,
        })
    }
}

/// Why the shim's arguments are refused ([`ShimArgs::parse`]).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShimError {
    /// No `--` before the command.
    #[error("missing `-- CMD ARGS...`")]
    NoSeparator,
    /// A flag without its value.
    #[error("{0} needs a value")]
    NoValue(&'static str),
    /// An argument the shim does not take.
    #[error("unexpected argument {0:?}")]
    Unexpected(OsString),
    /// A count that is not a positive number.
    #[error("{0} needs a positive number")]
    BadNumber(&'static str),
    /// Nothing after `--`.
    #[error("no command after `--`")]
    NoCommand,
    /// A required flag is missing.
    #[error("missing {0}")]
    Missing(&'static str),
}

crate::error::into_report!(ShimError);

/// Runs the shim: starts the command, reports the handshake on stdout,
/// waits, records the status and returns the exit code to exit with.
/// Diagnostics go to stderr (the executor's stderr file).
pub fn run(args: &ShimArgs) -> i32 {
    // Installed before the command exists: a graceful stop of the group
    // never kills the shim before it can record the end.
    if let Err(e) = ctrlc::set_handler(|| {}) {
        eprintln!("regent {SUBCOMMAND}: cannot handle termination signals: {e}");
    }
    // The other signals a stop may start with (`StopSignal`): handled the
    // same way, so the shim outlives them too.
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in
        [signal_hook::consts::SIGQUIT, signal_hook::consts::SIGUSR1, signal_hook::consts::SIGUSR2]
    {
        if let Err(e) = signal_hook::flag::register(sig, seen.clone()) {
            eprintln!("regent {SUBCOMMAND}: cannot handle signal {sig}: {e}");
        }
    }
    let started = join_cgroups(&args.cgroups)
        .and_then(|()| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&args.stdout)
                .map_err(|e| format!("cannot open {}: {e}", args.stdout.display()))
        })
        .and_then(|out| Ok((out, open_rotating(args)?)))
        .and_then(|(out, rotating)| {
            let (program, rest) = args.command.split_first().ok_or("empty command")?;
            let mut cmd = match &args.user {
                None => {
                    let mut cmd = Command::new(program);
                    cmd.args(rest);
                    cmd
                }
                // This binary drops to the user in a process of its own and
                // execs the command there (same pid).
                Some(identity) => {
                    let me = std::env::current_exe()
                        .map_err(|e| format!("cannot find the shim's own binary: {e}"))?;
                    let mut cmd = Command::new(me);
                    cmd.arg(super::user::EXEC_SUBCOMMAND)
                        .arg(identity.to_string())
                        .arg("--")
                        .args(&args.command);
                    cmd
                }
            };
            cmd.stdin(Stdio::inherit());
            match &rotating {
                None => {
                    let child_out = out
                        .try_clone()
                        .map_err(|e| format!("cannot open {}: {e}", args.stdout.display()))?;
                    cmd.stdout(child_out).stderr(Stdio::inherit());
                }
                Some((_, err)) => {
                    cmd.stdout(Stdio::piped());
                    cmd.stderr(if err.is_some() { Stdio::piped() } else { Stdio::inherit() });
                }
            }
            cmd.spawn()
                .map(|child| (child, out, rotating))
                .map_err(|e| format!("cannot start {:?}: {e}", program.to_string_lossy()))
        });
    let (mut child, out, rotating) = match started {
        Ok(started) => started,
        Err(reason) => {
            let status = ShimStatus::CannotStart { reason: one_line(&reason) };
            record(&args.status, &status);
            handshake(&format!("{HANDSHAKE_CANNOT_START} {}", one_line(&reason)));
            return CANNOT_START_EXIT;
        }
    };
    handshake(&format!("{HANDSHAKE_STARTED} {}", child.id()));
    let copiers = rotating.map(|(out_file, err_file)| {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let mut n = 0;
        if let Some(pipe) = child.stdout.take() {
            copy_in_background(pipe, out_file, done_tx.clone());
            n += 1;
        }
        if let (Some(pipe), Some(file)) = (child.stderr.take(), err_file) {
            copy_in_background(pipe, file, done_tx);
            n += 1;
        }
        (done_rx, n)
    });
    // The handshake pipe closes: the supervisor reads to its end.
    if let Err(e) = rustix::stdio::dup2_stdout(&out) {
        eprintln!("regent {SUBCOMMAND}: cannot close the handshake pipe: {e}");
    }
    drop(out);
    let status = match child.wait() {
        Ok(st) => match (st.code(), st.signal()) {
            (Some(code), _) => ShimStatus::Exited { code },
            (None, Some(signal)) => ShimStatus::Signaled { signal },
            (None, None) => ShimStatus::Exited { code: 255 },
        },
        Err(e) => {
            // Cannot happen for our own child; nothing to record.
            eprintln!("regent {SUBCOMMAND}: cannot wait for the command: {e}");
            return 255;
        }
    };
    if let Some((done, n)) = copiers {
        // The command's output is copied to its end; a process it left
        // behind that still holds the pipes is not waited for long (the
        // worker kills the group once the shim ends).
        let deadline = std::time::Instant::now() + COPY_GRACE;
        for _ in 0..n {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if done.recv_timeout(left).is_err() {
                break;
            }
        }
    }
    record(&args.status, &status);
    status.exit_code()
}

/// How long the shim waits, after the command ended, for its output pipes
/// to be copied to their end.
const COPY_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

type Rotating = (super::rotate::RotatingFile, Option<super::rotate::RotatingFile>);

/// The rotating stdout (and stderr) files, when `args` rotate.
fn open_rotating(args: &ShimArgs) -> Result<Option<Rotating>, String> {
    let Some(rotation) = args.rotation else { return Ok(None) };
    let open = |path: &Path| {
        super::rotate::RotatingFile::open(path, rotation)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))
    };
    let out = open(&args.stdout)?;
    let err = args.stderr.as_deref().map(open).transpose()?;
    Ok(Some((out, err)))
}

/// Copies `pipe` into `file` on a thread of its own until the pipe ends,
/// then says so on `done`. A file that cannot be written is reported once
/// and the pipe still drained (the command must never block on it).
fn copy_in_background(
    mut pipe: impl io::Read + Send + 'static,
    mut file: super::rotate::RotatingFile,
    done: std::sync::mpsc::Sender<()>,
) {
    let spawned = std::thread::Builder::new().name("regent-shim-copy".into()).spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut failed = false;
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if let Err(e) = file.write_all(&buf[..n]) {
                        if !failed {
                            eprintln!(
                                "regent {SUBCOMMAND}: cannot write the command's output: {e}"
                            );
                            failed = true;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = done.send(());
    });
    if let Err(e) = spawned {
        eprintln!("regent {SUBCOMMAND}: cannot start a thread to copy the command's output: {e}");
    }
}

/// Moves the shim into each of `cgroups` (its pid written to
/// `cgroup.procs`); the command it starts next inherits them.
fn join_cgroups(cgroups: &[PathBuf]) -> Result<(), String> {
    let pid = std::process::id().to_string();
    for dir in cgroups {
        let procs = dir.join("cgroup.procs");
        super::cgroup::write_file(&procs, &pid)
            .map_err(|e| format!("cannot join cgroup {}: {e}", dir.display()))?;
    }
    Ok(())
}

fn record(path: &Path, status: &ShimStatus) {
    if let Err(e) = write_status(path, status) {
        eprintln!("regent {SUBCOMMAND}: cannot record the exit status in {}: {e}", path.display());
    }
}

/// Writes the handshake line to stdout (a pipe the supervisor reads; a
/// supervisor that went away is no reason to stop).
fn handshake(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

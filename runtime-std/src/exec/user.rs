//! Executors run as another user (`regent worker --executor-user NAME`).
//!
//! A worker running as root resolves the user once at start ([`RunAs::lookup`]:
//! its uid, primary gid and supplementary groups, home directory, through
//! the C library, so NSS users work too) and then, for every executor:
//!
//! * its directory, output files and working directory are owned by the
//!   user (mode 0700: no other executor's user can look in), and
//!   `<work_dir>/executors` is 0711, traversable but not listable;
//! * the shim stays root (it records the exit status and joins the
//!   cgroups), and starts the command through `regent executor-exec`
//!   ([`EXEC_SUBCOMMAND`], [`exec_as`]): a single-threaded process that
//!   sets the supplementary groups, the gid and the uid, checks they hold,
//!   and `exec`s the command, which keeps the pid the shim waits for;
//! * `USER`, `LOGNAME` and `HOME` are the user's.
//!
//! So an executor cannot read the worker's files (its secret, the store,
//! other executors' output), nor signal the worker. A worker that is not
//! root refuses the flag at start with the reason.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The hidden subcommand of the `regent` binary that drops to a user and
/// execs the command (run by the shim).
pub const EXEC_SUBCOMMAND: &str = "executor-exec";

/// A user executors run as, resolved. (Kept in an executor's record as
/// JSON, for its exec checks: [`super::check::ExecContext`].)
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunAs {
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// Its supplementary groups (the primary one included).
    pub groups: Vec<u32>,
    /// Its home directory.
    pub home: PathBuf,
}

/// Why a user cannot be run as.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    /// No such user.
    #[error("user {0:?}: no such user on this machine")]
    Unknown(String),
    /// The lookup failed.
    #[error("user {name:?}: cannot look the user up: {source}")]
    Lookup {
        /// The name.
        name: String,
        /// The C library's error.
        #[source]
        source: std::io::Error,
    },
    /// Only root can start processes as another user.
    #[error("user {0:?}: this worker runs as uid {1}, not root, so it cannot start executors as another user")]
    NotRoot(String, u32),
    /// Root itself: nothing would be isolated.
    #[error(
        "user {0:?} is root (uid 0): executors would not be isolated; name an unprivileged user"
    )]
    IsRoot(String),
}

crate::error::into_report!(UserError);

impl RunAs {
    /// Resolves `name`; refused when this process is not root, when there
    /// is no such user, or when the user is root.
    pub fn lookup(name: &str) -> Result<RunAs, UserError> {
        let me = rustix::process::geteuid();
        if !me.is_root() {
            return Err(UserError::NotRoot(name.to_owned(), me.as_raw()));
        }
        let io = |e: nix::errno::Errno| std::io::Error::from_raw_os_error(e as i32);
        let user = nix::unistd::User::from_name(name)
            .map_err(|e| UserError::Lookup { name: name.to_owned(), source: io(e) })?
            .ok_or_else(|| UserError::Unknown(name.to_owned()))?;
        if user.uid.is_root() {
            return Err(UserError::IsRoot(name.to_owned()));
        }
        let cname =
            std::ffi::CString::new(name).map_err(|_| UserError::Unknown(name.to_owned()))?;
        let mut groups: Vec<u32> = nix::unistd::getgrouplist(&cname, user.gid)
            .map_err(|e| UserError::Lookup { name: name.to_owned(), source: io(e) })?
            .into_iter()
            .map(|g| g.as_raw())
            .collect();
        groups.sort_unstable();
        groups.dedup();
        Ok(RunAs {
            name: name.to_owned(),
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            groups,
            home: user.dir,
        })
    }

    /// Gives `path` and everything under it to the user (a symbolic link
    /// itself, never what it points to).
    pub fn own_tree(&self, path: &Path) -> std::io::Result<()> {
        let (uid, gid) = ids(self.uid, self.gid);
        rustix::fs::chownat(
            rustix::fs::CWD,
            path,
            Some(uid),
            Some(gid),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )?;
        let meta = std::fs::symlink_metadata(path)?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(path)? {
                self.own_tree(&entry?.path())?;
            }
        }
        Ok(())
    }
}

fn ids(uid: u32, gid: u32) -> (rustix::fs::Uid, rustix::fs::Gid) {
    (rustix::fs::Uid::from_raw(uid), rustix::fs::Gid::from_raw(gid))
}

/// The numeric identity the shim hands to `executor-exec`:
/// `--uid U --gid G --groups G1,G2`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The uid.
    pub uid: u32,
    /// The primary gid.
    pub gid: u32,
    /// The supplementary groups.
    pub groups: Vec<u32>,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let groups: Vec<String> = self.groups.iter().map(u32::to_string).collect();
        write!(f, "{}:{}:{}", self.uid, self.gid, groups.join(","))
    }
}

impl std::str::FromStr for Identity {
    type Err = String;
    /// `UID:GID:G1,G2` (the groups may be empty).
    fn from_str(s: &str) -> Result<Identity, String> {
        let bad = || format!("{s:?} is not UID:GID:GROUPS");
        let mut parts = s.splitn(3, ':');
        let uid = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let gid = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let groups = match parts.next().ok_or_else(bad)? {
            "" => Vec::new(),
            list => {
                list.split(',').map(|g| g.parse().map_err(|_| bad())).collect::<Result<_, _>>()?
            }
        };
        Ok(Identity { uid, gid, groups })
    }
}

impl From<&RunAs> for Identity {
    fn from(r: &RunAs) -> Identity {
        Identity { uid: r.uid, gid: r.gid, groups: r.groups.clone() }
    }
}

/// `regent executor-exec IDENTITY -- CMD ARGS...`: becomes `identity`
/// (groups, then gid, then uid: the order that leaves no way back), checks
/// it, and execs the command. Returns only on failure, with the exit code
/// to exit with, having said why on stderr (the executor's).
pub fn exec_as(identity: &Identity, command: &[OsString]) -> i32 {
    use std::os::unix::process::CommandExt as _;
    let Some((program, args)) = command.split_first() else {
        eprintln!("regent {EXEC_SUBCOMMAND}: no command");
        return 127;
    };
    let groups: Vec<rustix::fs::Gid> =
        identity.groups.iter().map(|g| rustix::fs::Gid::from_raw(*g)).collect();
    let (uid, gid) = ids(identity.uid, identity.gid);
    // This process has one thread: the thread's credentials are the
    // process's, and the command exec'd keeps them.
    let dropped = rustix::thread::set_thread_groups(&groups)
        .and_then(|()| rustix::thread::set_thread_res_gid(gid, gid, gid))
        .and_then(|()| rustix::thread::set_thread_res_uid(uid, uid, uid));
    if let Err(e) = dropped {
        eprintln!(
            "regent {EXEC_SUBCOMMAND}: cannot become uid {} gid {}: {e}",
            identity.uid, identity.gid
        );
        return 126;
    }
    if rustix::process::geteuid().as_raw() != identity.uid
        || rustix::process::getuid().as_raw() != identity.uid
    {
        eprintln!(
            "regent {EXEC_SUBCOMMAND}: still running as uid {}",
            rustix::process::geteuid().as_raw()
        );
        return 126;
    }
    let e = std::process::Command::new(program).args(args).exec();
    eprintln!("regent {EXEC_SUBCOMMAND}: cannot start {:?}: {e}", program.to_string_lossy());
    127
}

/// Why the arguments of [`EXEC_SUBCOMMAND`] are refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ExecArgsError(pub String);

/// Parses what follows [`EXEC_SUBCOMMAND`]: `IDENTITY -- CMD ARGS...`.
pub fn parse_exec_args(
    args: impl IntoIterator<Item = OsString>,
) -> Result<(Identity, Vec<OsString>), ExecArgsError> {
    let mut args = args.into_iter();
    let identity = args
        .next()
        .and_then(|a| a.into_string().ok())
        .ok_or_else(|| ExecArgsError("missing UID:GID:GROUPS".into()))?
        .parse()
        .map_err(ExecArgsError)?;
    if args.next().as_deref() != Some(std::ffi::OsStr::new("--")) {
        return Err(ExecArgsError("missing `--` before the command".into()));
    }
    let command: Vec<OsString> = args.collect();
    if command.is_empty() {
        return Err(ExecArgsError("no command after `--`".into()));
    }
    Ok((identity, command))
}

/// Run as [`EXEC_SUBCOMMAND`] (the shim starts this binary so): drop to the
/// identity and exec the command, never returning. Call first thing in
/// `main`, before any thread starts.
pub fn exec_if_asked() {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(EXEC_SUBCOMMAND)) {
        return;
    }
    match parse_exec_args(args) {
        Ok((identity, command)) => std::process::exit(exec_as(&identity, &command)),
        Err(e) => {
            eprintln!("regent {EXEC_SUBCOMMAND}: {e}");
            std::process::exit(2)
        }
    }
}

//! The durable id series of a host's processes: the worker's id file,
//! its incarnations and a submitter's instances ([`next_ordered_id`]:
//! ordered even when the wall clock steps back).

use super::procfs::machine_hostname;
use super::HostError;
use crate::net::{random_u64, time_ordered_id};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The file in the work directory that keeps a generated worker id.
pub const ID_FILE: &str = "worker-id";

/// The id kept in `<work_dir>/worker-id`, or a new one (`worker-<host>-<hex>`)
/// written there durably (temp file, fsync, rename, directory fsync).
pub fn load_or_create_id(work_dir: &Path) -> Result<String, HostError> {
    let path = work_dir.join(ID_FILE);
    match fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => return Ok(s.trim().to_owned()),
        Ok(_) => {
            tracing::warn!(path = %path.display(), "empty worker id file; generating a new id")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(HostError::ReadWorkerId { path, source }),
    }
    let id = generate_id();
    write_durably(&path, &id)
        .map_err(|source| HostError::StoreWorkerId { path: path.clone(), source })?;
    tracing::info!(worker = %id, path = %path.display(), "generated the worker id");
    Ok(id)
}

/// The file in the work directory that keeps the worker's last
/// incarnation, so the next process of the worker is newer even when the
/// host's clock stepped back (docs/design.md#identity-and-time-do-not-trust-the-wall-clock).
pub const INCARNATION_FILE: &str = "incarnation";

/// The next id of a series kept in the file `path` (created with the
/// series): `max(time-ordered id, last + 1)` ([`time_ordered_id`]), stored
/// durably (temp file, fsync, rename, directory fsync) before it is
/// returned. Ids so drawn grow with the wall clock while it moves forward,
/// and stay unique and ordered when it steps back (NTP after a reboot, a
/// restored VM): a step back only makes the next id its predecessor + 1.
/// The caller keeps other processes of the series out meanwhile (the
/// worker: the work directory's lock). Fails naming the file when it
/// cannot be read or written, or does not hold an id (it is never
/// overwritten then: removing it is the operator's call).
pub fn next_ordered_id(path: &Path) -> Result<u64, HostError> {
    let last = match fs::read_to_string(path) {
        Ok(text) => Some(text.trim().parse::<u64>().map_err(|_| HostError::CorruptId {
            path: path.to_owned(),
            text: text.chars().take(40).collect(),
        })?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(HostError::ReadLastId { path: path.to_owned(), source }),
    };
    let id = ordered_after(time_ordered_id(), last)
        .ok_or_else(|| HostError::IdsExhausted { path: path.to_owned() })?;
    write_durably(path, &id.to_string())
        .map_err(|source| HostError::StoreLastId { path: path.to_owned(), source })?;
    Ok(id)
}

/// The file in a submitter's state directory that keeps the last instance
/// id drawn there.
pub const INSTANCE_FILE: &str = "submit-instance";

/// Where `regent submit` keeps its last instance id unless told
/// (`--state-dir`): `$XDG_STATE_HOME/regent`, else
/// `$HOME/.local/state/regent`; `None` when neither variable holds an
/// absolute path.
pub fn default_state_dir() -> Option<PathBuf> {
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|h| h.join(".local").join("state")))
        .map(|d| d.join("regent"))
}

/// A submitter's instance id. With a state directory (created if missing):
/// the next of the series in `<dir>/submit-instance` ([`next_ordered_id`]:
/// newer than every instance drawn there before, even when the wall clock
/// stepped back), drawn under an exclusive `flock` of
/// `<dir>/submit-instance.lock`, as a user's submitters may start side by
/// side. Without one: the clock's id alone ([`time_ordered_id`]), ordered
/// only while the wall clock does not step back. Fails naming the
/// directory or file that cannot be used.
pub fn next_instance_id(state_dir: Option<&Path>) -> Result<u64, HostError> {
    let Some(dir) = state_dir else {
        return Ok(time_ordered_id());
    };
    fs::create_dir_all(dir)
        .map_err(|source| HostError::StateDir { dir: dir.to_owned(), source })?;
    let lock_path = dir.join(format!("{INSTANCE_FILE}.lock"));
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| HostError::OpenLock { path: lock_path.clone(), source })?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| HostError::Lock { path: lock_path, source: e.into() })?;
    // The lock ends with `lock`, after the id is durable.
    next_ordered_id(&dir.join(INSTANCE_FILE))
}

/// `max(clock, last + 1)`: `None` when `last` is the largest id.
fn ordered_after(clock: u64, last: Option<u64>) -> Option<u64> {
    match last {
        None => Some(clock),
        Some(last) => Some(clock.max(last.checked_add(1)?)),
    }
}

/// Replaces `path`'s contents with `line` durably: a temp file beside it,
/// fsync, rename, fsync of the directory.
fn write_durably(path: &Path, line: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = fs::File::create(&tmp)?;
    writeln!(f, "{line}")?;
    f.sync_all()?;
    fs::rename(&tmp, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::File::open(dir)?.sync_all()
}

/// `worker-<hostname>-<random hex>`: readable, and unique even for two
/// workers on one host.
fn generate_id() -> String {
    let host = machine_hostname();
    let suffix = format!("{:08x}", random_u64() as u32);
    if host.is_empty() {
        format!("worker-{suffix}")
    } else {
        format!("worker-{host}-{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::wall_clock_ms;

    /// The id a process started with its clock `ms` milliseconds ahead
    /// would have drawn (as a predecessor did before the clock stepped
    /// back by that much).
    fn drawn_ahead(ms: u64) -> u64 {
        time_ordered_id() + (ms << 16)
    }

    #[test]
    fn an_id_drawn_after_the_clock_stepped_back_an_hour_is_newer() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join(INCARNATION_FILE);
        let before = drawn_ahead(3_600_000);
        fs::write(&path, format!("{before}\n")).expect("write the predecessor's id");
        let id = next_ordered_id(&path).expect("an id");
        assert_eq!(id, before + 1, "the predecessor's id + 1, not the clock's smaller id");
        assert_eq!(fs::read_to_string(&path).expect("the file"), format!("{id}\n"));
    }

    #[test]
    fn ids_drawn_in_a_row_grow_and_the_last_is_kept() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join(INCARNATION_FILE);
        let ids: Vec<u64> = (0..5).map(|_| next_ordered_id(&path).expect("an id")).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids {ids:?}");
        // The clock term leads while the clock moves forward.
        assert!(ids[0] >> 16 >= wall_clock_ms() - 60_000, "ids {ids:?}");
        assert_eq!(fs::read_to_string(&path).expect("the file").trim(), ids[4].to_string());
        assert!(!dir.path().join("incarnation.tmp").exists(), "no temp file left");
    }

    #[test]
    fn a_corrupt_id_file_is_an_error_naming_it_and_is_left_alone() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join(INCARNATION_FILE);
        for junk in ["", "not a number\n", "-3\n", "18446744073709551616\n"] {
            fs::write(&path, junk).expect("write junk");
            let err = next_ordered_id(&path).expect_err("a corrupt file").to_string();
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(err.contains("is corrupt"), "{err}");
            assert_eq!(fs::read_to_string(&path).expect("the file"), junk, "left as it was");
        }
    }

    #[test]
    fn an_unreadable_id_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("a temp dir");
        // A directory where the file should be: cannot be read as a file.
        let path = dir.path().join(INCARNATION_FILE);
        fs::create_dir(&path).expect("a directory");
        let err = next_ordered_id(&path).expect_err("unreadable").to_string();
        assert!(err.contains("cannot read") && err.contains(&path.display().to_string()), "{err}");
    }

    #[test]
    fn the_largest_id_has_no_successor() {
        assert_eq!(ordered_after(5, None), Some(5));
        assert_eq!(ordered_after(5, Some(9)), Some(10));
        assert_eq!(ordered_after(50, Some(9)), Some(50));
        assert_eq!(ordered_after(5, Some(u64::MAX)), None);
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join(INCARNATION_FILE);
        fs::write(&path, u64::MAX.to_string()).expect("write");
        let err = next_ordered_id(&path).expect_err("no successor").to_string();
        assert!(err.contains("largest id"), "{err}");
    }

    #[test]
    fn submitters_side_by_side_draw_distinct_instances_from_one_state_dir() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let state = dir.path().join("state").join("regent");
        // The series starts an hour "ahead": every id below is last + 1.
        let before = drawn_ahead(3_600_000);
        fs::create_dir_all(&state).expect("the state dir");
        fs::write(state.join(INSTANCE_FILE), format!("{before}\n")).expect("write");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let state = state.clone();
                std::thread::spawn(move || {
                    (0..10)
                        .map(|_| next_instance_id(Some(&state)).expect("an id"))
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut ids: Vec<u64> =
            threads.into_iter().flat_map(|t| t.join().expect("no panic")).collect();
        ids.sort_unstable();
        let expected: Vec<u64> = (1..=80).map(|n| before + n).collect();
        assert_eq!(ids, expected, "80 distinct ids, each newer than the series' last");
    }

    #[test]
    fn a_state_dir_that_cannot_be_created_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let file = dir.path().join("a-file");
        fs::write(&file, "").expect("write");
        let state = file.join("regent");
        let err = next_instance_id(Some(&state)).expect_err("under a file").to_string();
        assert!(err.contains(&state.display().to_string()), "{err}");
        // Without a state directory, the clock's id.
        let id = next_instance_id(None).expect("an id");
        assert!(id >> 16 >= wall_clock_ms() - 60_000);
    }
}

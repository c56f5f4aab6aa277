//! Running the `regent` CLI from an end-to-end test: one way to run a
//! command and read what it printed, shared by every suite that drives a
//! cluster through the CLI.
use super::cluster::Cluster;
use std::time::Duration;

/// How long one `regent` command may take (generous; never a timing
/// assertion: a command that takes this long is killed and the test fails).
pub const CLI_BOUND: Duration = Duration::from_secs(60);

/// Runs `regent ARGS` in `c`: its exit code, stdout and stderr. Panics if
/// it was killed (by a signal, or past [`CLI_BOUND`]).
pub fn run(c: &Cluster, args: &[&str]) -> (Option<i32>, String, String) {
    let out = c.run(args, CLI_BOUND);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.code().is_some(), "regent {args:?} was killed: {stdout}\n{stderr}");
    (out.status.code(), stdout, stderr)
}

/// Runs `regent ARGS`, which must exit 0; its stdout.
pub fn ok(c: &Cluster, args: &[&str]) -> String {
    let (code, out, err) = run(c, args);
    assert_eq!(code, Some(0), "regent {args:?}: {out}\n{err}");
    out
}

/// Runs `regent ARGS`, which must be refused: exit 1 (a refusal by the
/// cluster, or an error the CLI met) or 2 (a usage error: a flag's value
/// it cannot read); its stderr, which names the problem.
pub fn refused(c: &Cluster, args: &[&str]) -> String {
    let (code, out, err) = run(c, args);
    assert!(
        matches!(code, Some(1 | 2)),
        "regent {args:?} was not refused ({code:?}): {out}\n{err}"
    );
    err
}

/// Writes job file `NAME.toml` in `c`'s directory and returns its path:
/// `top` (lines for the job, e.g. `tenant = "a"`), then one group `work`
/// of `count` one-core slots running `sleep 1000`, with `group` (lines
/// for the group, e.g. `priority = 80`) appended to it.
pub fn sleep_job(c: &Cluster, name: &str, top: &str, count: u32, group: &str) -> String {
    let path = c.path(&format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\n{top}\n\n[[group]]\nname = \"work\"\ncount = {count}\n\
             command = [\"sleep\", \"1000\"]\ncores = 1\n{group}\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

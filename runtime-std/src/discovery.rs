//! Named-resource discovery (`regent worker --resource-discovery
//! gpu=SCRIPT`): the worker runs the script once at start and reads the
//! addresses it prints, in Spark's format, so Spark users' scripts work:
//!
//! ```json
//! {"name": "gpu", "addresses": ["0", "1", "2", "3"]}
//! ```
//!
//! The script is run directly (no shell), with no arguments and the
//! worker's environment, and must exit 0 within [`DISCOVERY_TIMEOUT`]
//! (else it is killed). The name it prints must be the one asked for; the
//! addresses are checked as `--resource` ones are
//! ([`regent_core::resources::offers_problem`]).

use regent_core::resources::Resource;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a discovery script may run.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(60);

/// The most bytes of a script's output read.
pub const MAX_OUTPUT_BYTES: u64 = 1 << 20;

/// Why a discovery script gave no addresses.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The script could not be started.
    #[error("--resource-discovery {name}: cannot run {script}: {source}")]
    Start {
        /// The resource.
        name: String,
        /// The script.
        script: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It ran past [`DISCOVERY_TIMEOUT`] and was killed.
    #[error("--resource-discovery {name}: {script} ran for more than {timeout:?} and was killed")]
    Timeout {
        /// The resource.
        name: String,
        /// The script.
        script: PathBuf,
        /// The limit.
        timeout: Duration,
    },
    /// It exited non-zero (or by a signal).
    #[error("--resource-discovery {name}: {script} failed ({status}): {stderr}")]
    Failed {
        /// The resource.
        name: String,
        /// The script.
        script: PathBuf,
        /// How it ended.
        status: std::process::ExitStatus,
        /// The end of what it wrote to stderr.
        stderr: String,
    },
    /// Its output is not `{"name": ..., "addresses": [...]}`.
    #[error("--resource-discovery {name}: {script} printed no {{\"name\": \"{name}\", \"addresses\": [...]}}: {reason}")]
    Output {
        /// The resource.
        name: String,
        /// The script.
        script: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Runs `script` and returns the addresses of resource `name` it prints.
pub fn discover(name: &str, script: &Path) -> Result<Resource, DiscoveryError> {
    discover_within(name, script, DISCOVERY_TIMEOUT)
}

/// [`discover`] with another time limit.
pub fn discover_within(
    name: &str,
    script: &Path,
    timeout: Duration,
) -> Result<Resource, DiscoveryError> {
    let mut child = Command::new(script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| DiscoveryError::Start {
            name: name.into(),
            script: script.into(),
            source,
        })?;
    // Read both pipes on threads so a chatty script never blocks on a full
    // pipe while we wait.
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut out).take(MAX_OUTPUT_BYTES).read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut err).take(MAX_OUTPUT_BYTES).read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(DiscoveryError::Timeout {
                    name: name.into(),
                    script: script.into(),
                    timeout,
                });
            }
        }
    };
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    if !status.success() {
        let text = String::from_utf8_lossy(&stderr);
        let tail: String =
            text.trim().chars().rev().take(500).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(DiscoveryError::Failed {
            name: name.into(),
            script: script.into(),
            status,
            stderr: tail,
        });
    }
    let output = |reason: String| DiscoveryError::Output {
        name: name.into(),
        script: script.into(),
        reason,
    };
    let printed: serde_json::Value =
        serde_json::from_slice(&stdout).map_err(|e| output(e.to_string()))?;
    let printed_name = printed.get("name").and_then(|n| n.as_str());
    if printed_name != Some(name) {
        return Err(output(format!("it names {printed_name:?}")));
    }
    let addresses = printed
        .get("addresses")
        .and_then(|a| a.as_array())
        .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect::<Option<Vec<_>>>())
        .ok_or_else(|| output("\"addresses\" is not a list of strings".into()))?;
    let offer = Resource { name: name.to_string(), addresses };
    if let Some(problem) = regent_core::resources::offers_problem(std::slice::from_ref(&offer)) {
        return Err(output(problem.to_string()));
    }
    Ok(offer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("discover.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn a_spark_discovery_script_is_read_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let s = script(dir.path(), r#"echo '{"name": "gpu", "addresses": ["0", "1", "2", "3"]}'"#);
        let offer = discover("gpu", &s).unwrap();
        assert_eq!(offer.addresses, vec!["0", "1", "2", "3"]);

        let e = discover("fpga", &s).unwrap_err().to_string();
        assert!(e.contains("it names Some(\"gpu\")"), "{e}");
        let s = script(dir.path(), "echo broken >&2; exit 3");
        let e = discover("gpu", &s).unwrap_err().to_string();
        assert!(e.contains("failed (exit status: 3): broken"), "{e}");
        let s = script(dir.path(), "echo not json");
        let e = discover("gpu", &s).unwrap_err().to_string();
        assert!(e.contains("printed no {\"name\": \"gpu\""), "{e}");
        let s = script(dir.path(), r#"echo '{"name": "gpu", "addresses": ["0", "0"]}'"#);
        let e = discover("gpu", &s).unwrap_err().to_string();
        assert!(e.contains("offers address \"0\" twice"), "{e}");
        let s = script(dir.path(), "sleep 30");
        let e = discover_within("gpu", &s, Duration::from_millis(200)).unwrap_err().to_string();
        assert!(e.contains("was killed"), "{e}");
        let e = discover("gpu", &dir.path().join("missing")).unwrap_err().to_string();
        assert!(e.contains("cannot run"), "{e}");
    }
}

//! `regent master|worker --config FILE`: a TOML file of the command's
//! settings, under the long flags' names.
//!
//! Precedence, for every setting: a flag on the command line, then its
//! `REGENT_*` environment variable (clap's `env`), then the file, then the
//! default. A file value is applied only where clap reports the setting
//! came from its default or is absent ([`ArgMatches::value_source`]): it is
//! turned back into the flag it stands for and the command line parsed
//! again, so a file value meets the same parser, and the same checks, as a
//! flag.
//!
//! Keys are the long flags' names, kebab-case (`zk-root`, `worker-timeout`,
//! `secret-file`), the global flags included (`cluster`, `secret-file`,
//! `insecure`, `runtime`); `config` itself is not a key. A flag is `true`
//! or `false`; a repeatable or comma-separated flag takes a list or one
//! string; numbers may be written bare. An unknown key, a value of the
//! wrong type or one the flag's parser refuses is an error naming the
//! file, the line and column, and the key.

use crate::args::Cli;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, CommandFactory, FromArgMatches};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use toml::Spanned;

/// The commands that take `--config`.
const WITH_CONFIG: [&str; 2] = ["master", "worker"];

/// Why the command line could not be read.
#[derive(Debug)]
pub enum ParseError {
    /// clap's own error (or `--help`, `--version`): clap prints it.
    Clap(clap::Error),
    /// The configuration file: unreadable, not TOML, an unknown key, a
    /// wrong value. The message names the file, line and key.
    File(String),
}

impl From<clap::Error> for ParseError {
    fn from(e: clap::Error) -> Self {
        ParseError::Clap(e)
    }
}

/// Parses `argv` (the program name first) into [`Cli`], with the values of
/// a `--config` file for what neither a flag nor the environment set.
pub fn parse(argv: Vec<OsString>) -> Result<Cli, ParseError> {
    let extra = file_args(&argv)?;
    let mut all = argv;
    all.extend(extra);
    let matches = Cli::command().try_get_matches_from(all)?;
    Ok(Cli::from_arg_matches(&matches)?)
}

/// The flags the configuration file adds (none without `--config`).
fn file_args(argv: &[OsString]) -> Result<Vec<OsString>, ParseError> {
    // A first, lenient pass: a required flag may come from the file, and
    // any real error is reported by the strict pass that follows.
    let Ok(first) = Cli::command().ignore_errors(true).try_get_matches_from(argv) else {
        return Ok(Vec::new());
    };
    let Some((name, sub)) = first.subcommand() else { return Ok(Vec::new()) };
    if !WITH_CONFIG.contains(&name) {
        return Ok(Vec::new());
    }
    let Some(path) = sub.get_one::<std::path::PathBuf>("config") else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| ParseError::File(format!("cannot read {}: {e}", path.display())))?;
    let root = Cli::command();
    let command = root.find_subcommand(name).expect("a subcommand clap just matched");
    let args: Vec<&Arg> =
        command.get_arguments().chain(root.get_arguments().filter(|a| a.is_global_set())).collect();
    file_values(path, &text, &args, &[&first, sub]).map_err(ParseError::File)
}

/// The flags standing for `text`'s settings that `matches` (the top
/// level's, then the subcommand's) did not set from the command line or
/// the environment.
fn file_values(
    path: &Path,
    text: &str,
    args: &[&Arg],
    matches: &[&ArgMatches],
) -> Result<Vec<OsString>, String> {
    let file = path.display();
    let table: BTreeMap<Spanned<String>, Spanned<toml::Value>> =
        toml::from_str(text).map_err(|e| match e.span() {
            Some(span) => format!("{file}:{}: {}", position(text, span.start), e.message()),
            None => format!("{file}: {e}"),
        })?;
    // In the file's order: the first mistake is the one reported.
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(key, _)| key.span().start);
    let mut out = Vec::new();
    for (key, value) in entries {
        let at = |span: std::ops::Range<usize>| format!("{file}:{}", position(text, span.start));
        let name = key.get_ref().as_str();
        let arg = args
            .iter()
            .find(|a| a.get_long() == Some(name) && a.get_id() != "config")
            .ok_or_else(|| unknown_key(&at(key.span()), name, args))?;
        // A subcommand's own flag is not an id of the top level's matches
        // (asking is a panic in debug builds); a global one is in both.
        let asked = if arg.is_global_set() { matches } else { &matches[matches.len() - 1..] };
        let given = asked.iter().any(|m| {
            matches!(
                m.value_source(arg.get_id().as_str()),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        });
        let flags = flags_for(arg, name, value.get_ref())
            .map_err(|e| format!("{}: key \"{name}\": {e}", at(value.span())))?;
        if !given {
            out.extend(flags);
        }
    }
    Ok(out)
}

/// `key`, unknown: with the flag it most likely meant.
fn unknown_key(at: &str, key: &str, args: &[&Arg]) -> String {
    let kebab = key.replace('_', "-");
    let hint = if kebab != key && args.iter().any(|a| a.get_long() == Some(kebab.as_str())) {
        format!(" (keys are the flags' names: \"{kebab}\")")
    } else {
        String::new()
    };
    format!("{at}: unknown key \"{key}\"{hint}")
}

/// The command-line words for `value` under `arg`, checked by the flag's
/// own parser.
fn flags_for(arg: &Arg, name: &str, value: &toml::Value) -> Result<Vec<OsString>, String> {
    let flag = OsString::from(format!("--{name}"));
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return match value {
            toml::Value::Boolean(true) => Ok(vec![flag]),
            toml::Value::Boolean(false) => Ok(Vec::new()),
            other => Err(format!("expected true or false, found {}", other.type_str())),
        };
    }
    let repeatable = matches!(arg.get_action(), ArgAction::Append);
    let items: Vec<&toml::Value> = match value {
        toml::Value::Array(items) if repeatable => items.iter().collect(),
        toml::Value::Array(_) => return Err("expected one value, found a list".into()),
        one => vec![one],
    };
    let mut out = Vec::new();
    for item in items {
        let word = match item {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => {
                return Err(format!(
                    "expected a string or a number{}, found {}",
                    if repeatable { " (or a list of them)" } else { "" },
                    other.type_str()
                ))
            }
        };
        check_value(arg, &word)?;
        out.push(flag.clone());
        out.push(OsString::from(word));
    }
    Ok(out)
}

/// Runs `word` through `arg`'s value parser alone.
fn check_value(arg: &Arg, word: &str) -> Result<(), String> {
    let alone = arg.clone().required(false).env(None::<&str>);
    let long = arg.get_long().unwrap_or_default().to_owned();
    clap::Command::new("regent")
        .no_binary_name(true)
        .arg(alone)
        .try_get_matches_from([format!("--{long}"), word.to_owned()])
        .map(|_| ())
        .map_err(|e| {
            let names: Vec<String> =
                arg.get_possible_values().iter().map(|v| v.get_name().to_owned()).collect();
            if !names.is_empty() {
                return format!("invalid value \"{word}\": expected one of {}", names.join(", "));
            }
            let why = std::error::Error::source(&e)
                .map(|s| s.to_string())
                .or_else(|| {
                    e.to_string().lines().next().map(|l| l.trim_start_matches("error: ").to_owned())
                })
                .unwrap_or_default();
            format!("invalid value \"{word}\": {why}")
        })
}

/// `line:column` (both from 1) of byte `offset` in `text`.
pub fn position(text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("{line}:{column}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;
    use std::io::Write;

    /// Serialises the tests that set REGENT_* variables (the process's
    /// environment is shared by the test threads).
    static ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    /// Sets variables for as long as it lives.
    struct Vars<'a>(&'a [(&'a str, &'a str)]);

    impl Drop for Vars<'_> {
        fn drop(&mut self) {
            for (k, _) in self.0 {
                std::env::remove_var(k);
            }
        }
    }

    fn parse_with(args: &[&str], env: &[(&str, &str)]) -> Result<Cli, ParseError> {
        let _guard = ENV.lock().unwrap_or_else(|p| p.into_inner());
        let _vars = Vars(env);
        for (k, v) in env {
            std::env::set_var(k, v);
        }
        let argv = std::iter::once("regent").chain(args.iter().copied()).map(OsString::from);
        parse(argv.collect())
    }

    fn master(args: &[&str], env: &[(&str, &str)]) -> crate::args::MasterArgs {
        match parse_with(args, env) {
            Ok(Cli { command: Command::Master(m), .. }) => m,
            Ok(other) => panic!("not a master: {other:?}"),
            Err(e) => panic!("{e:?}"),
        }
    }

    fn file_error(args: &[&str]) -> String {
        match parse_with(args, &[]) {
            Err(ParseError::File(e)) => e,
            other => panic!("expected a file error, got {other:?}"),
        }
    }

    const MASTER: &str = "\
# a master
id = \"m-file\"
listen = \"127.0.0.1:7001\"
recovery = \"zookeeper\"
zk = [\"127.0.0.1:2181\", \"127.0.0.1:2182\"]
zk-root = \"/from-file\"
worker-timeout = 15000
cluster = \"prod\"
insecure = true
";

    #[test]
    fn the_file_fills_what_no_flag_or_variable_gives() {
        let f = file(MASTER);
        let path = f.path().to_str().unwrap();
        let cli = parse_with(&["master", "--config", path], &[]).unwrap();
        assert_eq!(cli.common.cluster, "prod");
        assert!(cli.common.insecure);
        let Command::Master(m) = cli.command else { panic!("not a master") };
        assert_eq!(m.id, "m-file");
        assert_eq!(m.listen, "127.0.0.1:7001".parse().unwrap());
        assert_eq!(m.zk, ["127.0.0.1:2181", "127.0.0.1:2182"]);
        assert_eq!(m.zk_root, "/from-file");
        assert_eq!(m.worker_timeout, 15_000);
        // Not in the file: the default.
        assert_eq!(m.heartbeat_interval, 1000);
    }

    #[test]
    fn a_flag_beats_the_environment_which_beats_the_file() {
        let f = file(MASTER);
        let path = f.path().to_str().unwrap();
        let env = [("REGENT_ZK_ROOT", "/from-env"), ("REGENT_WORKER_TIMEOUT", "20000")];
        let m = master(&["master", "--config", path, "--worker-timeout", "30000"], &env);
        assert_eq!(m.worker_timeout, 30_000, "flag over environment over file");
        assert_eq!(m.zk_root, "/from-env", "environment over file");
        assert_eq!(m.id, "m-file", "file over default");
        // A flag the file also gives, without the environment.
        let m = master(&["master", "--config", path, "--id", "m-flag"], &[]);
        assert_eq!(m.id, "m-flag");
        // A list from the environment replaces the file's list.
        let m = master(&["master", "--config", path], &[("REGENT_ZK", "10.0.0.1:2181")]);
        assert_eq!(m.zk, ["10.0.0.1:2181"]);
    }

    #[test]
    fn a_default_is_not_mistaken_for_a_given_value() {
        // `zk-root` has a default: the file's value still applies.
        let f = file("id = \"m\"\nlisten = \"127.0.0.1:7001\"\nzk-root = \"/f\"\n");
        let m = master(&["master", "--config", f.path().to_str().unwrap()], &[]);
        assert_eq!(m.zk_root, "/f");
    }

    #[test]
    fn the_config_file_may_come_from_the_environment() {
        let f = file(MASTER);
        let m = master(&["master"], &[("REGENT_CONFIG", f.path().to_str().unwrap())]);
        assert_eq!(m.id, "m-file");
    }

    #[test]
    fn a_worker_reads_its_file() {
        let f = file(
            "masters = \"127.0.0.1:7001,127.0.0.1:7002\"\ncores = 8\nmemory = 4096\nwork-dir = \
             \"/var/lib/regent\"\nkill-left-behind = false\n",
        );
        let cli = parse_with(&["worker", "--config", f.path().to_str().unwrap()], &[]).unwrap();
        let Command::Worker(w) = cli.command else { panic!("not a worker") };
        assert_eq!(w.masters, ["127.0.0.1:7001", "127.0.0.1:7002"]);
        assert_eq!((w.cores, w.memory), (8, 4096));
        assert_eq!(w.work_dir, Path::new("/var/lib/regent"));
        assert!(!w.kill_left_behind);
    }

    #[test]
    fn an_unknown_key_names_the_file_line_and_key() {
        let f = file("id = \"m\"\nlisten = \"127.0.0.1:7001\"\n\n# typo\nlisen = \"x\"\n");
        let path = f.path().to_str().unwrap();
        let e = file_error(&["master", "--config", path]);
        assert_eq!(e, format!("{path}:5:1: unknown key \"lisen\""));
        // snake_case is not the key, and the message says which is.
        let f = file("id = \"m\"\nlisten = \"127.0.0.1:7001\"\nzk_root = \"/r\"\n");
        let path = f.path().to_str().unwrap();
        let e = file_error(&["master", "--config", path]);
        assert_eq!(
            e,
            format!("{path}:3:1: unknown key \"zk_root\" (keys are the flags' names: \"zk-root\")")
        );
        // A key of another command is unknown here.
        let f = file("cores = 4\n");
        let path = f.path().to_str().unwrap();
        let e = file_error(&["master", "--config", path]);
        assert_eq!(e, format!("{path}:1:1: unknown key \"cores\""));
        // And `config` itself.
        let f = file("config = \"other.toml\"\n");
        let path = f.path().to_str().unwrap();
        assert!(file_error(&["master", "--config", path]).contains("unknown key \"config\""));
    }

    #[test]
    fn a_wrong_value_names_the_file_line_and_key() {
        let cases = [
            ("worker-timeout = \"soon\"\n", "1:18: key \"worker-timeout\": invalid value \"soon\""),
            (
                "insecure = \"yes\"\n",
                "1:12: key \"insecure\": expected true or false, found string",
            ),
            ("listen = [\"a\"]\n", "1:10: key \"listen\": expected one value, found a list"),
            ("listen = 7001\n", "1:10: key \"listen\": invalid value \"7001\""),
            (
                "recovery = \"zk\"\n",
                "1:12: key \"recovery\": invalid value \"zk\": expected one of none, filesystem, \
                 zookeeper",
            ),
            ("zk = [1.5, {a = 1}]\n", "1:6: key \"zk\": expected a string or a number"),
            ("max-frameworks = 0\n", "1:18: key \"max-frameworks\": invalid value \"0\""),
        ];
        for (text, want) in cases {
            let f = file(text);
            let path = f.path().to_str().unwrap();
            let e =
                file_error(&["master", "--id", "m", "--listen", "127.0.0.1:1", "--config", path]);
            assert!(e.starts_with(&format!("{path}:{want}")), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_file_that_is_not_toml_names_its_line() {
        let f = file("id = \"m\"\nlisten = \n");
        let path = f.path().to_str().unwrap();
        let e = file_error(&["master", "--config", path]);
        assert!(e.starts_with(&format!("{path}:2:")), "{e}");
        let e = file_error(&["master", "--config", "/nonexistent/regent.toml"]);
        assert!(e.starts_with("cannot read /nonexistent/regent.toml: "), "{e}");
    }

    #[test]
    fn without_a_file_a_missing_flag_is_clap_s_error() {
        match parse_with(&["master", "--listen", "127.0.0.1:1"], &[]) {
            Err(ParseError::Clap(e)) => assert!(e.to_string().contains("--id"), "{e}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_master_and_worker_flag_has_its_variable() {
        let root = Cli::command();
        for name in WITH_CONFIG {
            let command = root.find_subcommand(name).unwrap();
            for arg in command.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if ["help", "version"].contains(&long) {
                    continue;
                }
                let want = format!("REGENT_{}", long.to_uppercase().replace('-', "_"));
                assert_eq!(
                    arg.get_env().and_then(|e| e.to_str()),
                    Some(want.as_str()),
                    "regent {name} --{long}"
                );
            }
        }
    }
}

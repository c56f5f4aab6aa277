//! What `/proc` (and `/etc/hostname`) tells of a process and of this
//! machine.

use std::fs;

/// A limit of this process read from `/proc/self/limits` (`Max open files`,
/// `Max processes`), soft value; `None` when unreadable or unlimited.
pub fn proc_limit(name: &str) -> Option<usize> {
    let limits = fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// A process's CPU time so far, user + system, in clock ticks (1/100 s on
/// Linux), from `/proc/PID/stat`.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// A process's resident set (`VmRSS`), in kB, from `/proc/PID/status`.
pub fn rss_kb(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()
}

/// This machine's host name (`/proc/sys/kernel/hostname`, else
/// `/etc/hostname`), only the characters a host name may hold; empty when
/// neither is readable.
pub(crate) fn machine_hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| fs::read_to_string("/etc/hostname"))
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
        .collect()
}

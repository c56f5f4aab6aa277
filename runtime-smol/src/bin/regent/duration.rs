//! Durations as people write them on the command line (a leaf: the
//! argument types and the commands both use it).

/// A duration as people write it (`500ms`, `10s`, `1m 30s`, `2h`), in ms.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is no duration ({e}; write e.g. 500ms, 10s, 5m)"))?;
    u64::try_from(d.as_millis()).map_err(|_| format!("{s:?} is too long"))
}

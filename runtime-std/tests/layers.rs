//! The crate's two layers stay apart: the shared host layer (everything in
//! `src/` outside `src/pumps/`) is what both runtimes build on, so it must
//! not reach into the blocking runtime (`pumps`). A `use` of
//! `crate::pumps` (or a path through it) in a host-layer file fails here,
//! naming the file and the line.

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_host_layer_does_not_import_the_blocking_pumps() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let pumps = src.join("pumps");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 10, "found the crate's sources: {files:?}");
    let mut offending = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with(&pumps)) {
        let text = fs::read_to_string(file).expect("a readable source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("crate::pumps") || code.contains("super::pumps") {
                offending.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(offending.is_empty(), "the host layer imports the pumps:\n{}", offending.join("\n"));
}

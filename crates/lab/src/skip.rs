//! Skipped tests made visible. cargo captures a passing test's output, so a `SKIP:` line
//! printed by a test that then returns is never seen; every skip also goes to the file
//! named by `SERVELAB_SKIP_LOG` (scripts/test sets it and prints the file at the end).

use std::io::Write as _;

/// The variable naming the file that skips are appended to.
pub const LOG_VAR: &str = "SERVELAB_SKIP_LOG";

/// Reports that the calling test is skipped and why: `SKIP: why` on stderr and, when
/// `SERVELAB_SKIP_LOG` is set, one line `test-name: why` appended to that file. The
/// caller returns afterwards; whether a skip is allowed at all (not under CI) is the
/// caller's decision.
pub fn skip(why: &str) {
    eprintln!("SKIP: {why}");
    if let Some(path) = std::env::var_os(LOG_VAR) {
        record(std::path::Path::new(&path), why);
    }
}

/// Appends `test-name: why` to `path`.
fn record(path: &std::path::Path, why: &str) {
    // libtest names each test's thread after the test.
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed thread)")
        .to_string();
    let line = format!("{test}: {}\n", why.replace('\n', " "));
    // One write of one short line to an O_APPEND file: lines of parallel tests and
    // test binaries do not interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!("cannot record the skip in {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_skip_is_one_line_naming_the_test() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips.txt");
        super::record(&log, "nothing to see\nhere");
        super::record(&log, "again");
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            text,
            "skip::tests::a_skip_is_one_line_naming_the_test: nothing to see here\n\
             skip::tests::a_skip_is_one_line_naming_the_test: again\n"
        );
    }
}

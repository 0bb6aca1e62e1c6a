//! The READMEs, run as written (issue 25): every fenced shell block of README.md,
//! docker/README.md, lxc/README.md and crates/*/README.md, in order, from the checkout,
//! with a scratch directory as `$HOME` (the blocks keep their files under `~`). The first
//! block that fails fails the test, and so does a block that leaves a process of its own
//! running, a container it named, or a file in the checkout.
//!
//! A block whose first lines are a `# not run by tests/docs.rs: REASON` comment is left
//! out; the reason is printed and goes to the skip log, so the exception stays visible.
//! The blocks of one README share one shell state: what a block exports (`PATH`, `DATA_DIR`)
//! the next one sees.
//!
//! What differs from a user's shell, and why (each is printed when it applies):
//! - release builds become the test's own profile (`cargo build --release` -> `cargo
//!   build`, `/release` -> `/debug` in paths), with `CARGO_TARGET_DIR` the tests' target
//!   directory: CI builds that profile anyway, a second (release) build of the workspace
//!   would cost CI minutes;
//! - long load runs are shortened (`-z 10s`/`-z 30s` -> `-z 2s`, `-n 30000` -> `-n 3000`):
//!   the flags are the README's own knobs, the figures are not what is tested here;
//! - `docker/build.sh` builds into `<target>/static`, where tests/deploy.rs builds the
//!   same binaries once per run (`STATIC_TARGET_DIR`).
//!
//! Each block is bounded (`DOCS_BLOCK_SECONDS`, default 300 s: a block that builds may compile); the wall time of every
//! block and of each README is printed.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use crate::support::docker::engine_answers;

/// The comment that keeps a block out of this test, with its reason after the colon.
const NOT_RUN: &str = "# not run by tests/docs.rs:";

/// One fenced shell block.
#[derive(Debug, Clone)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    text: String,
}

impl Block {
    /// The reason given by a leading `# not run by tests/docs.rs:` comment: the marker's
    /// line and the comment lines right after it, up to a blank line or a command.
    fn not_run(&self) -> Option<String> {
        let mut lines = self.text.lines().skip_while(|l| l.trim().is_empty());
        let first = lines.next()?.trim();
        let mut reason = first.strip_prefix(NOT_RUN)?.trim().to_string();
        for l in lines {
            let Some(more) = l.trim().strip_prefix('#') else {
                break;
            };
            if more.trim().is_empty() {
                break;
            }
            reason.push(' ');
            reason.push_str(more.trim());
        }
        Some(reason)
    }
}

/// The fenced blocks tagged `sh`, `bash` or `shell`, in order.
fn shell_blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        let t = line.trim_start();
        match &mut open {
            None => {
                if let Some(info) = t.strip_prefix("```") {
                    // Blocks in other languages (and plain fences) are read past, not run.
                    let lang = info.split_whitespace().next().unwrap_or("");
                    let run = matches!(lang, "sh" | "bash" | "shell");
                    open = Some(Block {
                        line: if run { i + 1 } else { 0 },
                        text: String::new(),
                    });
                }
            }
            Some(b) => {
                if t.starts_with("```") {
                    let b = open.take().unwrap();
                    if b.line > 0 {
                        out.push(b);
                    }
                } else {
                    b.text.push_str(line);
                    b.text.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "an unclosed code fence");
    out
}

/// The READMEs, in the order a newcomer reads them.
fn readmes(repo: &Path) -> Vec<PathBuf> {
    let mut crates: Vec<PathBuf> = std::fs::read_dir(repo.join("crates"))
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path().join("README.md")))
        .filter(|p| p.is_file())
        .collect();
    crates.sort();
    let mut all = vec![
        repo.join("README.md"),
        repo.join("docker/README.md"),
        repo.join("lxc/README.md"),
    ];
    all.extend(crates);
    all
}

/// What this test changes in a block before running it, with the reason printed.
const SUBSTITUTIONS: &[(&str, &str)] = &[
    ("cargo build --release", "cargo build"),
    ("cargo run --release", "cargo run"),
    ("target}/release", "target}/debug"),
    ("target/release/", "target/debug/"),
    ("-z 10s", "-z 2s"),
    ("-z 30s", "-z 2s"),
    ("-n 30000", "-n 3000"),
];

fn substitute(text: &str) -> (String, Vec<String>) {
    let mut out = text.to_string();
    let mut applied = Vec::new();
    for (from, to) in SUBSTITUTIONS {
        if out.contains(from) {
            out = out.replace(from, to);
            applied.push(format!("{from:?} -> {to:?}"));
        }
    }
    (out, applied)
}

/// The tests' target directory: <target>/<profile>/deps/tests-HASH.
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .unwrap()
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf()
}

/// Processes (pid, command line) whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid) && fields[0] != "Z" {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            out.push((pid, cmd.trim().to_string()));
        }
    }
    out
}

/// Names of the containers that exist now (running or not).
fn containers() -> BTreeSet<String> {
    let out = Command::new("docker")
        .args(["ps", "-a", "--format", "{{.Names}}"])
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect(),
        _ => BTreeSet::new(),
    }
}

/// The checkout's status (`git status --porcelain`), to catch a block writing into it.
fn checkout_status(repo: &Path) -> Option<String> {
    let out = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .current_dir(repo)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs one block in bash from `repo`, with the state the previous blocks exported;
/// returns the output or why it failed.
fn run_block(repo: &Path, home: &Path, state: &Path, text: &str, limit: Duration) -> String {
    let script = format!(
        "set -eo pipefail\ncd \"$DOCS_REPO\"\n[ ! -s \"$DOCS_STATE\" ] || . \"$DOCS_STATE\"\n\
         {text}\nexport -p >\"$DOCS_STATE\"\n"
    );
    let target = target_dir();
    let out_path = home.join(".block-output");
    let out_file = std::fs::File::create(&out_path).unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(&script)
        .current_dir(repo)
        .env("HOME", home)
        .env("DOCS_REPO", repo)
        .env("DOCS_STATE", state)
        .env("CARGO_TARGET_DIR", &target)
        .env("STATIC_TARGET_DIR", target.join("static"))
        // The tests' own variables stay out of the user's shell.
        .env_remove("SERVELAB_SKIP_LOG")
        .stdin(Stdio::null())
        .stdout(out_file.try_clone().unwrap())
        .stderr(out_file)
        // Its own process group: what the block leaves running is found by group.
        .process_group(0);
    // cargo and rustup live under the real home, not the scratch one.
    for (var, dir) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
        if std::env::var_os(var).is_none()
            && let Some(h) = std::env::var_os("HOME")
        {
            cmd.env(var, Path::new(&h).join(dir));
        }
    }
    let mut child = cmd.spawn().unwrap();
    let pgid = child.id();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > limit {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let leftover = group_members(pgid);
    // SAFETY: killpg on the group this test created; no memory is involved.
    unsafe { libc::killpg(pgid as i32, libc::SIGKILL) };
    let _ = child.wait();
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    let tail: String = {
        let lines: Vec<&str> = output.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };
    match status {
        None => panic!("did not finish within {limit:?}:\n{tail}"),
        Some(s) if !s.success() => panic!("failed ({s}):\n{tail}"),
        Some(_) => {}
    }
    assert!(
        leftover.is_empty(),
        "left processes running (every block that starts something stops it): \
         {leftover:?}\n{tail}"
    );
    output
}

#[test]
fn every_readme_shell_block_runs_as_written() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let limit = Duration::from_secs(
        std::env::var("DOCS_BLOCK_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(300),
    );
    // DOCS_ONLY=README.md,crates/httpd/README.md runs only these READMEs.
    let only: Option<Vec<String>> = std::env::var("DOCS_ONLY")
        .ok()
        .map(|v| v.split(',').map(|p| p.trim().to_string()).collect());
    let root = lab::is_root();
    let docker = engine_answers();
    let checkout_before = checkout_status(repo);
    let total = Instant::now();
    let mut ran = 0;
    for readme in readmes(repo) {
        let name = readme.strip_prefix(repo).unwrap().display().to_string();
        if only.as_ref().is_some_and(|o| !o.contains(&name)) {
            continue;
        }
        let markdown = std::fs::read_to_string(&readme).unwrap();
        let home = tempfile::tempdir().unwrap();
        let state = home.path().join(".block-state");
        let started = Instant::now();
        for block in shell_blocks(&markdown) {
            let at = format!("{name}:{}", block.line);
            if let Some(reason) = block.not_run() {
                lab::skip::skip(&format!("{at}: block not run: {reason}"));
                continue;
            }
            // What the block needs, said up front: skipped outside CI, a failure in it.
            if block.text.contains("as root") && !root {
                common::skip(&format!("{at}: the block runs as root"));
                break;
            }
            if block.text.contains("docker ") && !docker {
                common::skip(&format!("{at}: the block needs a Docker engine"));
                break;
            }
            let (text, applied) = substitute(&block.text);
            if !applied.is_empty() {
                eprintln!("{at}: substituted {}", applied.join(", "));
            }
            let containers_before = if docker {
                containers()
            } else {
                BTreeSet::new()
            };
            let t = Instant::now();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_block(repo, home.path(), &state, &text, limit)
            }));
            let took = t.elapsed();
            if let Err(e) = result {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!("{at}: the block\n{}\n{why}", block.text);
            }
            eprintln!("{at}: ok in {took:.1?}");
            ran += 1;
            if docker {
                // Containers the block created by name (or through compose.yml's
                // project) and left behind.
                let left: Vec<String> = containers()
                    .difference(&containers_before)
                    .filter(|c| block.text.contains(c.as_str()) || c.starts_with("docker"))
                    .cloned()
                    .collect();
                assert!(
                    left.is_empty(),
                    "{at}: left containers behind: {left:?}\n{}",
                    block.text
                );
            }
        }
        eprintln!("{name}: {:.1?}", started.elapsed());
    }
    assert_eq!(
        checkout_status(repo),
        checkout_before,
        "a README block wrote into the checkout"
    );
    eprintln!("README blocks: {ran} run in {:.1?}", total.elapsed());
    assert!(ran > 0 || only.is_some(), "no README block ran");
}

#[test]
fn blocks_and_markers_are_parsed_as_written() {
    let md = "text\n```sh\necho one\n```\n```rust\nfn x() {}\n```\n```\nplain\n```\n\
              ```sh\n# not run by tests/docs.rs: needs a\n# Kubernetes cluster\n\n# other\nkubectl apply\n```\n";
    let blocks = shell_blocks(md);
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert_eq!((blocks[0].line, blocks[0].text.as_str()), (2, "echo one\n"));
    assert_eq!(blocks[0].not_run(), None);
    assert_eq!(
        blocks[1].not_run().as_deref(),
        Some("needs a Kubernetes cluster")
    );
    let (text, applied) = substitute("cargo build --release -p x && ls target/release/x");
    assert_eq!(text, "cargo build -p x && ls target/debug/x");
    assert_eq!(applied.len(), 2);
}

/// Issue 35 §2: the examples in scripts/test's header, run as written against a `cargo`
/// that only records its arguments. Arguments after `--` reach the test harnesses only:
/// no invocation that can run the criterion benches (which refuse libtest's options, and
/// made `scripts/test -- --test-threads=2` exit 101) carries them; arguments before it
/// reach every invocation.
#[test]
fn scripts_test_gives_harness_arguments_to_the_harnesses_only() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(repo.join("scripts/test")).unwrap();
    let examples: Vec<&str> = script
        .lines()
        .filter_map(|l| l.strip_prefix("#   "))
        .filter_map(|l| l.split(" # ").next())
        .map(str::trim)
        .filter(|l| l.contains("scripts/test"))
        .collect();
    assert!(
        examples.iter().any(|e| e.contains(" -- ")),
        "the header shows harness arguments: {examples:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls");
    let fake = dir.path().join("cargo");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\necho \"$*\" >> '{}'\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap()
    );
    for example in examples {
        let _ = std::fs::remove_file(&log);
        let words: Vec<&str> = example.split_whitespace().collect();
        // Leading NAME=VALUE words are the environment, as in a shell.
        let n_env = words.iter().take_while(|w| w.contains('=')).count();
        let (env, rest) = words.split_at(n_env);
        let mut cmd = Command::new("bash");
        cmd.arg(repo.join(rest[0])).args(&rest[1..]);
        for kv in env {
            let (k, v) = kv.split_once('=').unwrap();
            cmd.env(k, v);
        }
        // Never install packages here, whoever runs the tests.
        let out = cmd
            .env("INSTALL", "0")
            .env("PATH", &path)
            .env("SERVELAB_SKIP_LOG", dir.path().join("skips"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{example}: {out:?}");
        let calls = std::fs::read_to_string(&log).unwrap();
        let harness: Vec<&str> = match example.split_once(" -- ") {
            Some((_, h)) => h.split_whitespace().collect(),
            None => Vec::new(),
        };
        let before: Vec<&str> = rest[1..]
            .iter()
            .take_while(|w| **w != "--")
            .copied()
            .collect();
        for call in calls.lines() {
            assert!(call.starts_with("test --workspace"), "{example}: {call}");
            for w in &before {
                assert!(
                    call.split_whitespace().any(|c| c == *w),
                    "{example}: {call}"
                );
            }
            let selects = ["--lib", "--bins", "--test", "--doc"];
            let runs_benches = call.contains("--benches")
                || !call.split_whitespace().any(|c| selects.contains(&c));
            if runs_benches && !harness.is_empty() {
                assert!(
                    !harness.iter().any(|h| call.contains(h)),
                    "{example}: the benches get {harness:?}: {call}"
                );
            }
        }
        if !harness.is_empty() {
            let libtest = calls.lines().filter(|c| c.contains("--lib"));
            assert!(
                libtest.clone().count() == 1
                    && libtest
                        .clone()
                        .all(|c| harness.iter().all(|h| c.contains(h))),
                "{example}: the unit and integration tests do not get {harness:?}:\n{calls}"
            );
            assert!(
                calls.lines().any(|c| c.contains("--benches")),
                "{example}: the benches no longer run:\n{calls}"
            );
        }
    }
}

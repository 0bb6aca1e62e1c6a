//! The Linux kernel NFS client as the judge: one battery of ordinary file work and of
//! permissions and ownership (busybox tools in a qemu VM running Debian's kernel, as
//! root and as two users) against NFS-Ganesha, the control, and rustnfs, side by side;
//! rustnfs must pass every item Ganesha passes. The control must itself pass every item
//! but those named in [`KNOWN_BOTH_FAILURES`], both VMs must finish the battery before
//! their timeout, and every item must have run on both servers: otherwise nothing was
//! judged and the test fails.
//!
//! Both VMs boot at once (one per server, each mounting over qemu's user network), so the
//! test costs one VM's time. The table is always written to stderr.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::Nfsd;
use crate::support::ganesha;
use crate::support::kvm::{self, Battery, MountTarget, Vm};

/// Entries of the big-directory item (about 20 ms each under TCG on this machine).
const DIR_ENTRIES: usize = 2000;
/// Bound on one VM run: boot, mount, battery, power-off (about 90 s on a loaded 2-core
/// machine, TCG).
const VM_TIMEOUT: Duration = Duration::from_secs(300);

/// Items rustnfs is known to fail, with the cause: reported, not asserted. An item listed
/// here that passes fails the test, so the list only shrinks. Empty: rustnfs must pass
/// every item Ganesha passes. (Emptied when the in-process dispatcher fixed SETATTR of
/// times and size, CREATE EXCLUSIVE and LINK, issue 10 §2.)
const KNOWN_RUSTNFS_FAILURES: &[(&str, &str)] = &[];

/// Items the control (Ganesha) fails too, with the cause: they judge nothing, so they are
/// named here rather than counted as passes. An item listed here that passes on Ganesha
/// fails the test, and one not listed that fails on Ganesha fails it too (the control
/// is broken, or the item is). Empty today: the battery avoids the known NFSv3 limits
/// (times beyond 2106 do not fit NFSv3's 32-bit seconds; a client's silly-rename of an
/// open unlinked file leaves a `.nfsXXXX` entry until the last close).
const KNOWN_BOTH_FAILURES: &[(&str, &str)] = &[];

#[test]
fn kernel_client_battery_rustnfs_vs_ganesha() {
    let Some(vm) = Vm::require() else {
        return;
    };
    let g_dir = tempfile::tempdir().unwrap();
    let Some(g_server) = ganesha::start(g_dir.path()) else {
        return;
    };
    let r_dir = tempfile::tempdir().unwrap();
    // The VM's users must reach the battery's directories (tempdir makes them 0700).
    for d in [g_dir.path(), r_dir.path()] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let nfsd = Nfsd::exporting(r_dir.path()).unwrap();
    let g_target = MountTarget {
        nfs_port: ganesha::nfs_port(&g_server),
        mount_port: ganesha::mount_port(&g_server),
        path: g_dir.path().display().to_string(),
    };
    let r_target = MountTarget {
        nfs_port: nfsd.port(),
        mount_port: nfsd.port(),
        path: "/".into(),
    };
    let (g_run, r_run) = std::thread::scope(|s| {
        let g = s.spawn(|| vm.run_battery(&g_target, DIR_ENTRIES, VM_TIMEOUT));
        let r = s.spawn(|| vm.run_battery(&r_target, DIR_ENTRIES, VM_TIMEOUT));
        (g.join().unwrap(), r.join().unwrap())
    });
    drop(g_server);
    drop(nfsd);
    let mut g = kvm::parse(&g_run);
    let mut r = kvm::parse(&r_run);
    host_checks(&mut g, &g_dir.path().join("kb"));
    host_checks(&mut r, &r_dir.path().join("kb"));

    let mut report = String::new();
    report.push_str(&format!(
        "kernel NFS client battery (Linux {}, qemu {}): rustnfs {:.0?}, Ganesha {:.0?}\n",
        vm.kernel.version,
        std::env::var("SERVELAB_QEMU_ACCEL").unwrap_or_else(|_| "tcg".into()),
        r_run.elapsed,
        g_run.elapsed
    ));
    report.push_str(&table(&r, &g));
    for (who, b, run) in [("rustnfs", &r, &r_run), ("Ganesha", &g, &g_run)] {
        for e in &b.errors {
            report.push_str(&format!("{who} VM: {e}\n"));
        }
        if b.mounted.is_err() || run.timed_out {
            let tail: Vec<&str> = run.console.lines().rev().take(30).collect();
            report.push_str(&format!(
                "{who} console tail:\n{}\nqemu stderr: {}\n",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
                run.stderr.trim()
            ));
        }
    }
    let _ = std::io::stderr().write_all(report.as_bytes());

    if let Err(e) = &g.mounted {
        panic!("the control (Ganesha) did not mount, so nothing can be judged: {e}");
    }
    if let Err(e) = &r.mounted {
        panic!("rustnfs: {e}");
    }
    let known: BTreeMap<&str, &str> = KNOWN_RUSTNFS_FAILURES.iter().copied().collect();
    let both: BTreeMap<&str, &str> = KNOWN_BOTH_FAILURES.iter().copied().collect();
    let mut problems = Vec::new();
    for (who, b, run) in [("rustnfs", &r, &r_run), ("Ganesha", &g, &g_run)] {
        if !b.done {
            problems.push(format!(
                "{who}: the VM did not finish the battery (timed out: {}, after {:.0?})",
                run.timed_out, run.elapsed
            ));
        }
        if !b.missing.is_empty() {
            problems.push(format!("{who}: items never ran: {}", b.missing.join(", ")));
        }
    }
    for (name, go) in &g.items {
        match (go.pass, both.get(name.as_str())) {
            (false, None) => problems.push(format!(
                "{name}: fails on the control (Ganesha), so it judges nothing: {}",
                go.detail
            )),
            (true, Some(_)) => problems.push(format!(
                "{name}: listed in KNOWN_BOTH_FAILURES but passes on Ganesha: remove it"
            )),
            _ => {}
        }
    }
    for (name, go) in &g.items {
        let ro = &r.items[name];
        match (go.pass, ro.pass, known.get(name.as_str())) {
            (true, false, None) => problems.push(format!(
                "{name}: passes on Ganesha, fails on rustnfs: {}",
                ro.detail
            )),
            (_, true, Some(_)) => problems.push(format!(
                "{name}: listed in KNOWN_RUSTNFS_FAILURES but passes now: remove it from the list"
            )),
            _ => {}
        }
    }
    assert!(
        problems.is_empty(),
        "kernel client battery:\n{}",
        problems.join("\n")
    );
}

/// Checks made on the host after the VM ran: what landed on the export.
fn host_checks(b: &mut Battery, work: &Path) {
    if let Some(o) = b.items.get_mut("write_8m").filter(|o| o.pass) {
        let vm_md5 = o
            .detail
            .split_whitespace()
            .find_map(|w| w.strip_prefix("md5="))
            .unwrap_or("")
            .to_string();
        let file = work.join("write_8m/big");
        let host = md5(&file);
        if host.as_deref() != Some(vm_md5.as_str()) {
            o.pass = false;
            o.detail =
                format!("the file on the export differs: host md5 {host:?}, VM wrote md5 {vm_md5}");
        } else {
            o.detail.push_str(" = host md5 of the export's file");
        }
    }
    if let Some(o) = b.items.get_mut("names").filter(|o| o.pass) {
        let dir = work.join("names");
        let long = "n".repeat(255);
        for (name, want) in [
            ("héllo wörld 日本語.txt", "U\n"),
            ("a b  c ", "S\n"),
            (long.as_str(), "L\n"),
        ] {
            let got = std::fs::read_to_string(dir.join(name)).ok();
            if got.as_deref() != Some(want) {
                o.pass = false;
                o.detail = format!(
                    "on the export, {:?} holds {got:?}, want {want:?}",
                    if name.len() > 40 { "<255 × n>" } else { name }
                );
                break;
            }
        }
    }
}

/// md5 of a host file (md5sum is in coreutils, always present).
fn md5(path: &Path) -> Option<String> {
    let out = Command::new("md5sum").arg(path).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .map(str::to_string)
}

/// The side-by-side table: item, rustnfs, Ganesha, and the detail of any failure.
fn table(r: &Battery, g: &Battery) -> String {
    let verdict = |p: bool| if p { "PASS" } else { "FAIL" };
    let known: BTreeMap<&str, &str> = KNOWN_RUSTNFS_FAILURES.iter().copied().collect();
    let mut out = String::from("| item | rustnfs | Ganesha | note |\n| --- | --- | --- | --- |\n");
    for name in kvm::items() {
        let (ro, go) = (&r.items[&name], &g.items[&name]);
        let mut note = Vec::new();
        if !ro.pass {
            match known.get(name.as_str()) {
                Some(why) => note.push(format!("rustnfs (known: {why}): {}", ro.detail)),
                None => note.push(format!("rustnfs: {}", ro.detail)),
            }
        }
        if !go.pass {
            match KNOWN_BOTH_FAILURES.iter().find(|(n, _)| *n == name) {
                Some((_, why)) => note.push(format!("Ganesha (known: {why}): {}", go.detail)),
                None => note.push(format!("Ganesha: {}", go.detail)),
            }
        }
        out.push_str(&format!(
            "| {name} | {} | {} | {} |\n",
            verdict(ro.pass),
            verdict(go.pass),
            note.join("; ")
        ));
    }
    let count = |b: &Battery| b.items.values().filter(|o| o.pass).count();
    out.push_str(&format!(
        "| passed | {}/{n} | {}/{n} | |\n",
        count(r),
        count(g),
        n = r.items.len()
    ));
    out
}

#[test]
fn console_cleaning_strips_cr_and_escapes() {
    let raw = b"\x1bc\x1b[?7l\x1b[2JVMMOUNT OK\r\nBATTERY create PASS ok (1s)\r\n\x1b[0m";
    assert_eq!(
        kvm::clean_console(raw),
        "VMMOUNT OK\nBATTERY create PASS ok (1s)\n"
    );
    let run = kvm::VmRun {
        console: kvm::clean_console(raw),
        stderr: String::new(),
        elapsed: Duration::from_secs(1),
        timed_out: false,
    };
    let b = kvm::parse(&run);
    assert!(b.mounted.is_ok());
    assert!(b.items["create"].pass);
    // Items the VM never reported are failures, with the reason.
    assert!(!b.items["write_8m"].pass);
    assert_eq!(b.items["write_8m"].detail, "not run: VM output ended early");
    assert!(!b.done, "no VMDONE");
    assert!(b.missing.contains(&"write_8m".to_string()) && !b.missing.contains(&"create".into()));
    assert_eq!(b.items.len(), kvm::items().len());

    // The guest's first line can share a console line with the firmware's last words
    // (seen in a CI rehearsal: "Booting from ROM...VMMOUNT OK").
    let run = kvm::VmRun {
        console: "Booting from ROM...VMMOUNT OK\nBATTERY create PASS ok (1s)\n".into(),
        ..run
    };
    assert!(kvm::parse(&run).mounted.is_ok());
}

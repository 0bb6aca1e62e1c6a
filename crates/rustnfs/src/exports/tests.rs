//! Several exports served at once: who reaches which, with which options, over NFSv3
//! (MOUNT, handles) and NFSv4 (the pseudo-filesystem), and a reload that keeps what
//! did not change.

use std::net::SocketAddr;
use std::path::Path;

use nfs3_types::mount::mountstat3;
use nfs3_types::nfs3::{createhow3, nfsstat3};

use super::*;
use crate::fs::Fh;

/// A MOUNT result comparable in assertions.
fn mnt(r: Result<Fh, mountstat3>) -> Result<Fh, u32> {
    r.map_err(|s| s as u32)
}

/// Calls from `peer` (NFSv4 when `v4`) while the returned scope lives.
fn from(peer: &str, v4: bool) -> CallScope {
    CallScope::enter(CallFrom {
        peer: Some(peer.parse::<SocketAddr>().unwrap()),
        v4,
    })
}

/// Three exported directories `a`, `b`, `c` (each with a file `f` and a directory
/// `sub`) under a temporary directory, and an exports file for them.
struct Fixture {
    tmp: tempfile::TempDir,
    file: PathBuf,
}

impl Fixture {
    fn new(lines: &str) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["a", "b", "c"] {
            std::fs::create_dir_all(tmp.path().join(d).join("sub")).unwrap();
            std::fs::write(tmp.path().join(d).join("f"), d.as_bytes()).unwrap();
        }
        let file = tmp.path().join("exports");
        let f = Fixture { tmp, file };
        f.write(lines);
        f
    }

    /// Writes the exports file; `{a}` stands for the path of `a`, and so on.
    fn write(&self, lines: &str) {
        let mut text = lines.to_string();
        for d in ["a", "b", "c"] {
            text = text.replace(&format!("{{{d}}}"), &self.path(d));
        }
        std::fs::write(&self.file, text).unwrap();
    }

    fn path(&self, d: &str) -> String {
        self.tmp.path().join(d).to_str().unwrap().to_string()
    }

    fn open(&self) -> Result<Exports, ExportsError> {
        let mut c = Config::new("/");
        c.exports_file = Some(self.file.clone());
        Exports::open(&c, Registry::new("t"))
    }
}

const THREE: &str = "\
{a} 10.0.0.0/8(rw) 10.1.2.3(ro)
{b} *(ro,all_squash,anonuid=1000,anongid=1000)
{c} 192.168.0.0/16(rw,secure)
";

#[test]
fn each_client_reaches_its_exports_with_its_options() {
    let fx = Fixture::new(THREE);
    let ex = fx.open().unwrap();
    let (a, b, c) = (fx.path("a"), fx.path("b"), fx.path("c"));
    // EXPORT lists every export and its clients as written.
    assert_eq!(
        ex.list(),
        vec![
            (a.clone(), vec!["10.0.0.0/8".into(), "10.1.2.3".into()]),
            (b.clone(), vec!["*".into()]),
            (c.clone(), vec!["192.168.0.0/16".into()]),
        ]
    );
    let (root_a, root_c) = {
        let _s = from("10.0.0.5:900", false);
        let root_a = ex.mount(a.as_bytes()).unwrap();
        assert!(
            ex.mount(format!("{a}/sub").as_bytes()).is_ok(),
            "a directory beneath"
        );
        assert!(ex.mount(format!("{a}/").as_bytes()).is_ok());
        assert_eq!(
            mnt(ex.mount(c.as_bytes())),
            Err(mountstat3::MNT3ERR_ACCES as _)
        );
        assert_eq!(
            mnt(ex.mount(b"/elsewhere")),
            Err(mountstat3::MNT3ERR_NOENT as _)
        );
        assert_eq!(
            mnt(ex.mount(format!("{a}/f").as_bytes())),
            Err(mountstat3::MNT3ERR_NOTDIR as _)
        );
        // rw for the network: a change goes through.
        let how = createhow3::UNCHECKED(Default::default());
        assert!(ex.create(&root_a, b"new", &how).0.is_ok());
        assert!(!ex.read_only_at(&root_a));
        let _c = from("192.168.1.1:900", false);
        (root_a, ex.mount(c.as_bytes()).unwrap())
    };
    let wire_a = root_a.to_wire();
    let wire_c = root_c.to_wire();
    {
        // The single host beats the network: read-only.
        let _s = from("10.1.2.3:900", false);
        assert_eq!(ex.decode(&wire_a), Ok(root_a));
        assert!(ex.read_only_at(&root_a));
        let how = createhow3::UNCHECKED(Default::default());
        assert_eq!(
            ex.create(&root_a, b"no", &how).0.map(drop),
            Err(nfsstat3::NFS3ERR_ROFS)
        );
        // A generation no export can have (even) is BADHANDLE.
        let mut even = wire_a;
        even[0] &= !1;
        assert_eq!(ex.decode(&even), Err(nfsstat3::NFS3ERR_BADHANDLE));
        // c is not exported to it: its handle is STALE, as from kernel nfsd.
        assert_eq!(ex.decode(&wire_c), Err(nfsstat3::NFS3ERR_STALE));
        assert_eq!(ex.attr(&root_c).map(drop), Err(nfsstat3::NFS3ERR_STALE));
    }
    {
        // `secure`: only from a port below 1024.
        let _s = from("192.168.1.1:40000", false);
        assert_eq!(ex.decode(&wire_c), Err(nfsstat3::NFS3ERR_PERM));
        assert_eq!(
            mnt(ex.mount(c.as_bytes())),
            Err(mountstat3::MNT3ERR_ACCES as _)
        );
        let _s = from("192.168.1.1:1023", false);
        assert!(ex.attr(&root_c).is_ok());
    }
    {
        // Two exports in one RENAME or LINK: XDEV.
        let _s = from("10.0.0.5:900", false);
        let root_b = ex.mount(b.as_bytes()).unwrap();
        assert_eq!(
            ex.rename(&root_a, b"f", &root_b, b"g").0,
            Err(nfsstat3::NFS3ERR_XDEV)
        );
        assert_eq!(
            ex.link(&root_a, &root_b, b"g").0,
            Err(nfsstat3::NFS3ERR_XDEV)
        );
        assert!(Path::new(&a).join("f").exists());
    }
    // Connections: from a client of some export, or loopback (health checks).
    for (ip, ok) in [
        ("10.9.9.9", true),
        ("192.168.3.3", true),
        ("8.8.8.8", true),
        ("127.0.0.1", true),
    ] {
        assert_eq!(ex.admits(ip.parse().unwrap()), ok, "{ip}");
    }
    let only_nets = Fixture::new("{a} 10.0.0.0/8(rw)\n");
    let ex2 = only_nets.open().unwrap();
    assert!(!ex2.admits("8.8.8.8".parse().unwrap()));
    assert!(ex2.admits("10.2.3.4".parse().unwrap()));
    assert!(ex2.admits("::1".parse().unwrap()));
}

/// Issue 35 §3: all_squash with anonuid/anongid, per export: a file made through `b`
/// belongs to the anonymous identity, whoever made it.
#[test]
fn all_squash_acts_as_the_anonymous_identity() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if crate::identity::capability().is_err() {
        eprintln!("SKIP: cannot act as callers here (not root)");
        return;
    }
    let fx =
        Fixture::new("{a} *(rw,no_root_squash)\n{b} *(rw,all_squash,anonuid=1000,anongid=1001)\n");
    for d in ["a", "b"] {
        std::fs::set_permissions(fx.path(d), std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let ex = fx.open().unwrap();
    let _s = from("10.0.0.5:900", false);
    let _who = crate::identity::Scope::enter(crate::identity::Caller {
        uid: 2000,
        gid: 2000,
        gids: vec![],
    });
    let how = createhow3::UNCHECKED(Default::default());
    for (d, owner) in [("a", (2000, 2000)), ("b", (1000, 1001))] {
        let root = ex.mount(fx.path(d).as_bytes()).unwrap();
        ex.create(&root, b"made", &how).0.unwrap();
        let md = std::fs::metadata(Path::new(&fx.path(d)).join("made")).unwrap();
        assert_eq!((md.uid(), md.gid()), owner, "{d}");
    }
    // ACCESS answers for the squashed identity too: root's 0600 file reads for root
    // through a (no_root_squash), not through b (root acts as 1000 there).
    let root = crate::identity::Caller {
        uid: 0,
        gid: 0,
        gids: vec![],
    };
    for (d, readable) in [("a", true), ("b", false)] {
        let secret = Path::new(&fx.path(d)).join("secret");
        std::fs::write(&secret, b"s").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let top = ex.mount(fx.path(d).as_bytes()).unwrap();
        let (fh, attr) = ex.lookup(&top, b"secret").0.unwrap();
        let read = ex.allowed(&fh, &attr, &root) & nfs3_types::nfs3::ACCESS3_READ != 0;
        assert_eq!(read, readable, "{d}");
    }
}

#[test]
fn nfsv4_sees_one_tree_of_its_exports() {
    let fx = Fixture::new(THREE);
    let ex = fx.open().unwrap();
    let _s = from("10.0.0.5:900", true);
    // Walk from the pseudo root to the directory holding a, b, c.
    let mut fh = ex.root_fh();
    let parts: Vec<String> = fx
        .tmp
        .path()
        .components()
        .skip(1)
        .map(|c| c.as_os_str().to_str().unwrap().to_string())
        .collect();
    for p in &parts {
        let (next, attr) = ex.lookup(&fh, p.as_bytes()).0.unwrap();
        assert_eq!(
            (attr.mode, attr.fsid),
            (0o555, pseudo::FSID),
            "{p} is a pseudo directory"
        );
        assert_eq!(ex.lookup(&next, b"..").0.unwrap().0, fh, "{p}/..");
        fh = next;
    }
    let holder = fh;
    // What this client may see: a and b, not c.
    let mut it = ex.dir_iter(&holder, 0, true).unwrap();
    let mut names = Vec::new();
    while let Some(e) = it.next_entry() {
        names.push(String::from_utf8(e.unwrap().name).unwrap());
    }
    assert_eq!(names, ["a", "b"]);
    assert_eq!(
        ex.lookup(&holder, b"c").0.map(drop),
        Err(nfsstat3::NFS3ERR_NOENT)
    );
    // Into an export: its own fsid, its files; `..` of its root is the pseudo parent.
    let (a, attr) = ex.lookup(&holder, b"a").0.unwrap();
    assert_ne!(attr.fsid, pseudo::FSID);
    assert!(ex.lookup(&a, b"f").0.is_ok());
    assert_eq!(ex.lookup(&a, b"..").0.unwrap().0, holder);
    // The pseudo-filesystem is read-only, and NFSv3 never sees it.
    let how = createhow3::UNCHECKED(Default::default());
    assert_eq!(
        ex.create(&holder, b"x", &how).0.map(drop),
        Err(nfsstat3::NFS3ERR_ROFS)
    );
    let wire = holder.to_wire();
    assert!(ex.decode(&wire).is_ok());
    let _v3 = from("10.0.0.5:900", false);
    assert_eq!(ex.decode(&wire), Err(nfsstat3::NFS3ERR_STALE));
    // Another client sees c and not a.
    let _other = from("192.168.1.1:900", true);
    assert_eq!(
        ex.lookup(&holder, b"a").0.map(drop),
        Err(nfsstat3::NFS3ERR_NOENT)
    );
    assert!(ex.lookup(&holder, b"c").0.is_ok());
}

#[test]
fn fsid_0_makes_an_export_the_nfsv4_root_and_nested_exports_are_crossed_into() {
    let fx = Fixture::new("{a} *(rw,fsid=0)\n{a}/sub 10.0.0.0/8(ro,fsid=9)\n{b} *\n");
    let ex = fx.open().unwrap();
    {
        let _s = from("10.0.0.5:900", true);
        let root = ex.root_fh();
        let root_attr = ex.attr(&root).unwrap();
        assert_eq!(root_attr.fsid, 0, "fsid=0 reports 0, as knfsd");
        assert!(
            ex.lookup(&root, b"f").0.is_ok(),
            "a's own files at the root"
        );
        let (sub, attr) = ex.lookup(&root, b"sub").0.unwrap();
        assert_eq!(attr.fsid, 9, "crossed into the nested export");
        assert!(ex.read_only_at(&sub), "with its own options");
        assert_eq!(ex.lookup(&sub, b"..").0.unwrap().0, root);
        let mut it = ex.dir_iter(&root, 0, true).unwrap();
        let mut fsids = std::collections::HashMap::new();
        while let Some(e) = it.next_entry() {
            let e = e.unwrap();
            fsids.insert(e.name.clone(), e.plus.unwrap().0.fsid);
        }
        assert_eq!(fsids[&b"sub".to_vec()], 9, "READDIR shows the nested root");
    }
    // A client the nested export is not exported to stays in a's directory.
    let _s = from("192.168.1.1:900", true);
    let (sub, attr) = ex.lookup(&ex.root_fh(), b"sub").0.unwrap();
    assert_eq!(attr.fsid, 0);
    assert!(!ex.read_only_at(&sub));
}

#[test]
fn a_reload_keeps_what_did_not_change_and_refuses_a_bad_file_whole() {
    let fx = Fixture::new(THREE);
    let ex = fx.open().unwrap();
    let _s = from("10.0.0.5:900", false);
    let root_a = ex.mount(fx.path("a").as_bytes()).unwrap();
    let root_b = ex.mount(fx.path("b").as_bytes()).unwrap();
    let (file_a, _) = ex.lookup(&root_a, b"f").0.unwrap();
    let before = ex.table();
    // Remove b; make c read-only.
    fx.write("{a} 10.0.0.0/8(rw) 10.1.2.3(ro)\n{c} 192.168.0.0/16(ro,secure)\n");
    // Another server reading the same file (a restart) gives the same handles.
    let restarted = fx.open().unwrap();
    assert_eq!(restarted.mount(fx.path("a").as_bytes()).ok(), Some(root_a));
    assert!(
        restarted.attr(&file_a).is_ok(),
        "a handle from before the restart"
    );
    let r = ex.reload().unwrap();
    assert_eq!(
        r,
        Reloaded {
            added: vec![],
            removed: vec![fx.path("b")],
            changed: vec![fx.path("c")],
            unchanged: vec![fx.path("a")],
        }
    );
    let after = ex.table();
    assert!(
        after.exports[0].fs.same_export(&before.exports[0].fs),
        "a's jail is kept"
    );
    assert!(ex.attr(&file_a).is_ok(), "a's handles go on working");
    let mut out = Vec::new();
    assert_eq!(ex.read_into(&file_a, 0, 10, &mut out).unwrap().1, 1);
    assert_eq!(
        ex.attr(&root_b).map(drop),
        Err(nfsstat3::NFS3ERR_STALE),
        "b is gone"
    );
    // A file that does not parse (or cannot be served) changes nothing.
    for (bad, want) in [
        ("{a} *(rw,async)\n", ":1: option 'async' is not supported"),
        ("{a} *(rw)\n{b}/missing *\n", ":2: "),
    ] {
        fx.write(bad);
        let e = ex.reload().unwrap_err().to_string();
        assert!(e.starts_with(fx.file.to_str().unwrap()), "{e}");
        assert!(e.contains(want), "{e}");
        assert_eq!(ex.list().len(), 2, "the previous exports stay");
        assert!(ex.attr(&file_a).is_ok());
    }
    // Empty, and the same directory twice.
    fx.write("# nothing\n");
    assert!(ex.reload().unwrap_err().to_string().contains("no exports"));
    fx.write(&format!("{{a}} *\n{}/../a *\n", fx.path("b")));
    let e = ex.reload().unwrap_err().to_string();
    assert!(
        e.contains(":2: ") && e.contains("is the same directory as"),
        "{e}"
    );
}

#[test]
fn the_one_export_shorthand_is_served_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("sub")).unwrap();
    let mut c = Config::new(tmp.path());
    c.allow = crate::cli::parse_allow("10.0.0.0/8").unwrap();
    let ex = Exports::open(&c, Registry::new("t")).unwrap();
    assert_eq!(
        ex.list(),
        vec![("/".to_string(), vec!["10.0.0.0/8".to_string()])]
    );
    assert!(
        !ex.admits("127.0.0.1".parse().unwrap()),
        "--allow is the whole list"
    );
    let _s = from("10.0.0.5:40000", false);
    let root = ex.mount(b"/").unwrap();
    assert_eq!(mnt(ex.mount(b"")), Ok(root));
    assert_eq!(
        mnt(ex.mount(tmp.path().to_str().unwrap().as_bytes())),
        Ok(root)
    );
    assert!(ex.mount(b"/sub").is_ok());
    let _v4 = from("10.0.0.5:40000", true);
    assert_eq!(ex.root_fh(), root, "the export is the NFSv4 root");
    let attr: Fh = root;
    assert!(ex.attr(&attr).is_ok());
}

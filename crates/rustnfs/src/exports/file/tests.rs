//! The exports(5) reader: what it accepts, how it resolves options, and every refusal.

use std::net::IpAddr;

use super::*;

fn hosts(name: &str) -> std::io::Result<Vec<IpAddr>> {
    match name {
        "nas.lan" => Ok(vec!["192.168.1.10".parse().unwrap()]),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "Name or service not known",
        )),
    }
}

fn read(text: &str) -> Result<Vec<ExportLine>, LineError> {
    parse(text, &hosts)
}

fn one(text: &str) -> ExportLine {
    let mut v = read(text).unwrap();
    assert_eq!(v.len(), 1, "{text}");
    v.remove(0)
}

#[test]
fn a_kernel_users_file_reads_as_knfsd_reads_it() {
    let text = r#"
# the NAS
/srv/media    192.168.1.0/24(ro,all_squash,anonuid=1000,anongid=100) nas.lan(rw,no_root_squash)
/srv/backup   -rw,sync,no_subtree_check 10.0.0.0/255.0.0.0 \
              10.1.2.3(ro)   # one host read-only
"/srv/with space" *(rw,fsid=7)
/srv/odd\040name/  *(insecure,secure,nordirplus,sec=sys,fsid=0123456789abcdef-0123456789ABCDEF,mp)
/srv/root     fe80::1(rw,fsid=root,root_squash,anonuid=7,anongid=8)
"#;
    let v = read(text).unwrap();
    assert_eq!(v.len(), 5);
    let media = &v[0];
    assert_eq!((media.line, media.path.as_str()), (3, "/srv/media"));
    assert_eq!(media.clients[0].text, "192.168.1.0/24");
    assert_eq!(
        media.clients[0].options,
        Options {
            read_only: true,
            squash: Squash::All(1000, 100),
            secure: false,
            readdirplus: true,
        }
    );
    assert_eq!(media.clients[1].text, "nas.lan");
    assert_eq!(
        media.clients[1].pattern,
        Pattern::Host(vec!["192.168.1.10".parse().unwrap()])
    );
    assert!(!media.clients[1].options.read_only);
    assert_eq!(media.clients[1].options.squash, Squash::None);
    // Defaults after the path apply to the clients after them; a client's own win.
    let backup = &v[1];
    assert_eq!(backup.line, 4);
    assert!(!backup.clients[0].options.read_only);
    assert_eq!(backup.clients[0].options.squash, Squash::Root);
    assert_eq!(
        backup.clients[0].pattern,
        Pattern::Net("10.0.0.0/8".parse().unwrap())
    );
    assert!(backup.clients[1].options.read_only);
    assert_eq!(v[2].path, "/srv/with space");
    assert_eq!(v[2].fsid, Some(Fsid::Num(7)));
    // Quoted and escaped paths; the trailing slash goes; later options win.
    let odd = &v[3];
    assert_eq!(odd.path, "/srv/odd name");
    assert!(odd.clients[0].options.secure && !odd.clients[0].options.readdirplus);
    assert_eq!(
        odd.fsid,
        Some(Fsid::Uuid(0x0123456789abcdef0123456789abcdef))
    );
    assert_eq!(odd.mountpoint, Some(Mountpoint::Itself));
    assert_eq!(v[4].fsid, Some(Fsid::Root));
    assert_eq!(v[4].clients[0].options.squash, Squash::RootTo(7, 8));
}

#[test]
fn defaults_are_knfsds_but_insecure() {
    let e = one("/x *");
    assert_eq!(e.clients[0].pattern, Pattern::Anyone);
    assert_eq!(
        e.clients[0].options,
        Options {
            read_only: true,
            squash: Squash::Root,
            secure: false,
            readdirplus: true,
        }
    );
    assert_eq!(
        one("/x *(all_squash)").clients[0].options.squash,
        Squash::All(65534, 65534)
    );
    assert_eq!(
        one("/x *(no_root_squash,all_squash)").clients[0]
            .options
            .squash,
        Squash::All(65534, 65534),
        "all_squash wins"
    );
    assert_eq!(
        one("/x -all_squash *(no_all_squash)").clients[0]
            .options
            .squash,
        Squash::Root
    );
    let m = one("/x *(mp=/mnt/disk) 10.0.0.1(mountpoint=/mnt/disk)");
    assert_eq!(m.mountpoint, Some(Mountpoint::At("/mnt/disk".into())));
    // Accepted as what rustnfs always does.
    for opt in [
        "sync",
        "no_subtree_check",
        "wdelay",
        "no_wdelay",
        "hide",
        "nocrossmnt",
        "no_acl",
        "insecure_locks",
        "no_auth_nlm",
        "secure_locks",
        "auth_nlm",
        "no_pnfs",
        "xprtsec=none",
        "sec=sys:sys",
    ] {
        assert!(read(&format!("/x *({opt})")).is_ok(), "{opt}");
    }
    assert_eq!(normalize("//srv//a/"), "/srv/a");
    assert_eq!(normalize("/"), "/");
}

/// Every refusal, with its line and the words that say what to change.
#[test]
fn every_refusal_names_the_line_and_what_to_change() {
    let cases: &[(&str, usize, &str)] = &[
        ("/x \"*(rw)", 1, "line 1: a quote (\") is not closed"),
        ("\n\nsrv/x *", 3, "line 3: 'srv/x' is not an absolute path"),
        ("/x", 1, "line 1: /x names no client; write '/x *(ro)'"),
        (
            "/x nas.lan (rw)",
            1,
            "line 1: '(rw)' has no client before it: a space between a client and its options gives those options to every host; write 'host(rw)' or '*(rw)'",
        ),
        ("/x *(rw,,ro)", 1, "line 1: an empty option in 'rw,,ro'"),
        ("/x *(rw", 1, "'*(rw': a client's options end with ')'"),
        (
            "/x *(fast)",
            1,
            "line 1: unknown option 'fast' (see the exports section of the rustnfs README",
        ),
        ("/x *(anonuid=me)", 1, "'anonuid=me': a uid is a number"),
        ("/x *(anongid=)", 1, "'anongid=': a gid is a number"),
        ("/x *(fsid)", 1, "'fsid': this option needs a value"),
        (
            "/x *(fsid=-1)",
            1,
            "'fsid=-1': fsid is a number, root, or a UUID",
        ),
        (
            "/x *(mp=disk)",
            1,
            "'mp=disk': the mount point is an absolute path",
        ),
        (
            "/x *(no_root_squash,anonuid=1000)",
            1,
            "anonuid/anongid set the identity squashed callers act as, and with no_root_squash nobody is squashed",
        ),
        (
            "/x 10.0.0.1(fsid=1) 10.0.0.2(fsid=2)",
            1,
            "fsid= differs between the clients of one export",
        ),
        (
            "/x 10.0.0.1(mp) 10.0.0.2(mp=/y)",
            1,
            "mountpoint differs between the clients of one export",
        ),
        (
            "/x *\n/y *\n/x/ 10.0.0.0/8",
            3,
            "line 3: /x is already exported on line 1; put all its clients on one line",
        ),
        (
            "/x *(fsid=0)\n/y *(fsid=root)",
            2,
            "line 2: fsid=0 is already used on line 1",
        ),
        ("/x * *(rw)", 1, "client '*' is listed twice on this line"),
        ("/x *.lan(rw)", 1, "client '*.lan': wildcard host names"),
        (
            "/x @group",
            1,
            "client '@group': NIS netgroups are not supported",
        ),
        (
            "/x\\\n  nowhere.invalid",
            2,
            "line 2: client 'nowhere.invalid' does not resolve",
        ),
        (
            "/x *(sec=krb5p)",
            1,
            "'sec=krb5p' is not supported: RPCSEC_GSS",
        ),
        (
            "/x *(sec=sys:krb5)",
            1,
            "'sec=sys:krb5' is not supported: RPCSEC_GSS",
        ),
        (
            "/x *(sec=none)",
            1,
            "AUTH_NONE is served as nobody only with --allow-auth-none",
        ),
        (
            "/x *(sec=unix)",
            1,
            "'sec=unix' is not supported: unknown flavour",
        ),
        ("/x *(xprtsec=mtls)", 1, "RPC-with-TLS is not served"),
    ];
    for (text, line, want) in cases {
        let e = read(text).unwrap_err();
        assert_eq!(e.line, *line, "{text}: {e}");
        assert!(e.to_string().contains(want), "{text}: {e}");
    }
    // Every option the table refuses is refused by name, with its reason.
    for (name, s) in OPTIONS {
        let Support::Refused(why) = s else { continue };
        let opt = match name.strip_suffix('=') {
            Some(n) => format!("{n}=x"),
            None => name.to_string(),
        };
        let e = read(&format!("/x *(rw,{opt})")).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("line 1: option '{opt}' is not supported: {why}"),
            "{opt}"
        );
    }
}

#[test]
fn every_option_is_known_once() {
    let mut names: Vec<&str> = OPTIONS.iter().map(|(n, _)| *n).collect();
    names.sort();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "an option listed twice");
    assert_eq!(support("rw"), Some(Support::Honoured));
    assert_eq!(support("anonuid=5"), Some(Support::Honoured));
    assert_eq!(support("anonuid"), None);
    assert!(matches!(support("async"), Some(Support::Refused(_))));
}

/// The README's example file (its ```exports block) loads as written, and the README's
/// table names every option this parser knows.
#[test]
fn the_readme_example_parses_and_its_table_lists_every_option() {
    let readme = include_str!("../../../README.md");
    let block = readme
        .split("```exports\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README has an ```exports block");
    let lines = read(block).unwrap_or_else(|e| panic!("the README's example: {e}"));
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0].fsid, Some(Fsid::Root));
    assert_eq!(lines[2].clients.len(), 2, "a continued line");
    assert_eq!(lines[2].clients[0].options.squash, Squash::All(1000, 1000));
    let table = readme
        .split("| option | what rustnfs does |")
        .nth(1)
        .expect("the README's options table");
    for (name, _) in OPTIONS {
        assert!(
            table.contains(&format!("`{name}")),
            "{name} is not in the README's table"
        );
    }
}

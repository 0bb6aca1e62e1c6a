//! The exports(5) file format: lines of `path [-defaults] client(options) ...`, read
//! into [`ExportLine`]s, or refused with the line and what is wrong.
//!
//! The syntax is nfs-utils': `#` starts a comment, a backslash at the end of a line
//! continues it, a path with spaces is quoted with `"..."` or written with `\040`
//! (a backslash and three octal digits), `-options` after the path are the defaults of
//! the clients after it on that line, and options come in parentheses right after their
//! client (no space). Defaults are knfsd's: `ro`, `root_squash`, `no_all_squash`,
//! anonymous 65534:65534, `sync`, `no_subtree_check` — except `insecure`, see
//! [`OPTIONS`]. Every option is either honoured, accepted because rustnfs always
//! behaves that way, or refused by name with the reason; none is ignored.

use std::fmt;

use super::clients::{self, Pattern, Resolver};
pub use super::problem::Problem;
use crate::identity::{NOBODY, Squash};

/// What rustnfs does with one exports(5) option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Honoured, per client (as exports(5) describes it).
    Honoured,
    /// Accepted: what rustnfs always does (the reason says why it changes nothing).
    Always(&'static str),
    /// Refused: the file is not loaded; the reason says why and what to write instead.
    Refused(&'static str),
}

/// Every option rustnfs knows, by name (a `name=` entry takes a value). The README's
/// table is checked against this list.
pub const OPTIONS: &[(&str, Support)] = &[
    ("rw", Support::Honoured),
    ("ro", Support::Honoured),
    ("root_squash", Support::Honoured),
    ("no_root_squash", Support::Honoured),
    ("all_squash", Support::Honoured),
    ("no_all_squash", Support::Honoured),
    ("anonuid=", Support::Honoured),
    ("anongid=", Support::Honoured),
    ("sec=", Support::Honoured),
    ("fsid=", Support::Honoured),
    ("secure", Support::Honoured),
    ("insecure", Support::Honoured),
    ("nordirplus", Support::Honoured),
    ("mountpoint", Support::Honoured),
    ("mp", Support::Honoured),
    ("mountpoint=", Support::Honoured),
    ("mp=", Support::Honoured),
    (
        "sync",
        Support::Always(
            "every change is as stable as the call asks before it is answered (UNSTABLE writes until COMMIT, as RFC 1813 allows)",
        ),
    ),
    (
        "no_subtree_check",
        Support::Always(
            "handles are found only beneath the export, and a handle obtained legitimately is not re-checked along its path",
        ),
    ),
    (
        "wdelay",
        Support::Always(
            "each WRITE is done when it arrives; nothing is held back to gather writes",
        ),
    ),
    (
        "no_wdelay",
        Support::Always(
            "each WRITE is done when it arrives; nothing is held back to gather writes",
        ),
    ),
    (
        "hide",
        Support::Always("a file system mounted inside an export is never shown through it"),
    ),
    (
        "nocrossmnt",
        Support::Always("a file system mounted inside an export is never shown through it"),
    ),
    (
        "no_acl",
        Support::Always("no ACLs are served (NFSACL, or NFSv4 ACL attributes)"),
    ),
    (
        "insecure_locks",
        Support::Always(
            "no NLM is served (NFSv3 clients mount with nolock; NFSv4 locks are checked)",
        ),
    ),
    (
        "no_auth_nlm",
        Support::Always(
            "no NLM is served (NFSv3 clients mount with nolock; NFSv4 locks are checked)",
        ),
    ),
    (
        "secure_locks",
        Support::Always(
            "no NLM is served (NFSv3 clients mount with nolock; NFSv4 locks are checked)",
        ),
    ),
    (
        "auth_nlm",
        Support::Always(
            "no NLM is served (NFSv3 clients mount with nolock; NFSv4 locks are checked)",
        ),
    ),
    ("no_pnfs", Support::Always("no pNFS layouts are given")),
    (
        "async",
        Support::Refused(
            "rustnfs never answers a change as stable before it is (UNSTABLE writes already wait in the page cache until COMMIT); remove it",
        ),
    ),
    (
        "subtree_check",
        Support::Refused(
            "handles are always confined to the export's tree, but directory permissions along a handle's path are not re-checked; remove it (no_subtree_check is what is served)",
        ),
    ),
    (
        "nohide",
        Support::Refused(
            "rustnfs does not cross into file systems mounted inside an export; export the mounted directory itself (NFSv4 clients cross into nested exports anyway)",
        ),
    ),
    (
        "crossmnt",
        Support::Refused(
            "rustnfs does not cross into file systems mounted inside an export; export each mounted directory on a line of its own",
        ),
    ),
    ("refer=", Support::Refused("NFSv4 referrals are not served")),
    (
        "replicas=",
        Support::Refused("NFSv4 fs_locations are not served"),
    ),
    ("pnfs", Support::Refused("pNFS is not served; remove it")),
    (
        "security_label",
        Support::Refused("NFSv4.2 security labels are not served; remove it"),
    ),
    (
        "sign_fh",
        Support::Refused("handles are not signed; remove it"),
    ),
    (
        "xprtsec=",
        Support::Refused("RPC-with-TLS is not served (only xprtsec=none is accepted)"),
    ),
    (
        "reexport=",
        Support::Refused("re-exporting NFS mounts is not supported; give fsid= yourself"),
    ),
];

/// Which option of [`OPTIONS`] `opt` (as written, perhaps with `=value`) is.
pub fn support(opt: &str) -> Option<Support> {
    let (name, has_value) = match opt.split_once('=') {
        Some((n, _)) => (n, true),
        None => (opt, false),
    };
    OPTIONS.iter().find_map(|(known, s)| {
        let (k, takes) = match known.strip_suffix('=') {
            Some(k) => (k, true),
            None => (*known, false),
        };
        (k == name && takes == has_value).then_some(*s)
    })
}

/// How NFSv4 and the attributes identify an export (`fsid=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsid {
    /// `fsid=0` or `fsid=root`: the root of the NFSv4 tree.
    Root,
    /// A number.
    Num(u32),
    /// A UUID (32 hex digits).
    Uuid(u128),
}

impl Fsid {
    /// The value the attributes report.
    pub fn value(self) -> u64 {
        match self {
            Fsid::Root => 0,
            Fsid::Num(n) => u64::from(n),
            Fsid::Uuid(u) => (u as u64) ^ ((u >> 64) as u64),
        }
    }
}

/// `mountpoint` / `mp`: export only when a file system is mounted there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mountpoint {
    /// The exported directory itself must be a mount point.
    Itself,
    /// This path must be one.
    At(String),
}

/// The per-client options of one export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub read_only: bool,
    pub squash: Squash,
    /// `secure`: calls must come from a port below 1024.
    pub secure: bool,
    /// `nordirplus` clears it: READDIRPLUS is NOTSUPP (NFSv3 clients use READDIR).
    pub readdirplus: bool,
}

/// As exports(5) writes them (what the server says it serves, at start and reload).
impl fmt::Display for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.read_only { "ro" } else { "rw" })?;
        match self.squash {
            Squash::None => f.write_str(",no_root_squash")?,
            Squash::Root => f.write_str(",root_squash")?,
            Squash::RootTo(u, g) => write!(f, ",root_squash,anonuid={u},anongid={g}")?,
            Squash::All(u, g) => write!(f, ",all_squash,anonuid={u},anongid={g}")?,
        }
        f.write_str(if self.secure { ",secure" } else { ",insecure" })?;
        if !self.readdirplus {
            f.write_str(",nordirplus")?;
        }
        Ok(())
    }
}

/// One client entry of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// As written (what `showmount -e` lists).
    pub text: String,
    pub pattern: Pattern,
    pub options: Options,
}

/// One export as a line of the file gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportLine {
    /// The line it starts on (1-based).
    pub line: usize,
    /// The exported directory, `/`-separated without a trailing `/` (what clients mount).
    pub path: String,
    /// In line order.
    pub clients: Vec<Client>,
    pub fsid: Option<Fsid>,
    pub mountpoint: Option<Mountpoint>,
}

/// A problem and the line it is on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct LineError {
    pub line: usize,
    pub problem: Problem,
}

/// One token and the line it starts on.
struct Token {
    text: String,
    line: usize,
}

/// Splits the file into entries (one per logical line) of tokens: comments dropped,
/// continuations joined, quotes and `\ooo` escapes resolved.
fn entries(text: &str) -> Result<Vec<Vec<Token>>, LineError> {
    let mut out = Vec::new();
    let mut entry: Vec<Token> = Vec::new();
    let mut tok: Option<Token> = None;
    let mut quoted = false;
    let mut line = 1;
    let mut chars = text.chars().peekable();
    let end_token = |tok: &mut Option<Token>, entry: &mut Vec<Token>| {
        if let Some(t) = tok.take() {
            entry.push(t);
        }
    };
    while let Some(c) = chars.next() {
        let push = |tok: &mut Option<Token>, c: char| {
            tok.get_or_insert_with(|| Token {
                text: String::new(),
                line,
            })
            .text
            .push(c)
        };
        match c {
            '\n' => {
                if quoted {
                    return Err(LineError {
                        line,
                        problem: Problem::UnterminatedQuote,
                    });
                }
                end_token(&mut tok, &mut entry);
                if !entry.is_empty() {
                    out.push(std::mem::take(&mut entry));
                }
                line += 1;
            }
            '\\' if chars.peek() == Some(&'\n') => {
                chars.next();
                end_token(&mut tok, &mut entry);
                line += 1;
            }
            '\\' => {
                let digits: String = chars.clone().take(3).collect();
                match u8::from_str_radix(&digits, 8) {
                    Ok(b)
                        if digits.len() == 3
                            && digits.bytes().all(|d| (b'0'..=b'7').contains(&d)) =>
                    {
                        chars.nth(2);
                        push(&mut tok, char::from(b));
                    }
                    _ => {
                        if let Some(next) = chars.next() {
                            push(&mut tok, next);
                        }
                    }
                }
            }
            '"' => {
                quoted = !quoted;
                // An empty quoted token is still a token.
                push(&mut tok, 'x');
                if let Some(t) = tok.as_mut() {
                    t.text.pop();
                }
            }
            '#' if !quoted => {
                while chars.peek().is_some_and(|&n| n != '\n') {
                    chars.next();
                }
            }
            ' ' | '\t' | '\r' if !quoted => end_token(&mut tok, &mut entry),
            _ => push(&mut tok, c),
        }
    }
    if quoted {
        return Err(LineError {
            line,
            problem: Problem::UnterminatedQuote,
        });
    }
    end_token(&mut tok, &mut entry);
    if !entry.is_empty() {
        out.push(entry);
    }
    Ok(out)
}

/// Options as they accumulate over a line's defaults and a client's own list.
#[derive(Debug, Clone, Default)]
struct Builder {
    read_write: Option<bool>,
    no_root_squash: bool,
    all_squash: bool,
    anonuid: Option<u32>,
    anongid: Option<u32>,
    secure: bool,
    no_rdirplus: bool,
    fsid: Option<Fsid>,
    mountpoint: Option<Mountpoint>,
}

impl Builder {
    fn apply_all(&mut self, list: &str) -> Result<(), Problem> {
        for opt in list.split(',') {
            let opt = opt.trim();
            if opt.is_empty() {
                return Err(Problem::EmptyOption(list.to_string()));
            }
            self.apply(opt)?;
        }
        Ok(())
    }

    fn apply(&mut self, opt: &str) -> Result<(), Problem> {
        let value = |want: &'static str| -> Result<&str, Problem> {
            opt.split_once('=')
                .map(|(_, v)| v)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| Problem::BadValue {
                    option: opt.to_string(),
                    want,
                })
        };
        let id = |want| -> Result<u32, Problem> {
            value(want)?.parse().map_err(|_| Problem::BadValue {
                option: opt.to_string(),
                want,
            })
        };
        match support(opt) {
            None if support(&format!("{opt}=")).is_some() => {
                return Err(Problem::BadValue {
                    option: opt.to_string(),
                    want: "this option needs a value (name=value)",
                });
            }
            None => return Err(Problem::UnknownOption(opt.to_string())),
            Some(Support::Always(_)) => return Ok(()),
            Some(Support::Refused(why)) => {
                if opt == "xprtsec=none" {
                    return Ok(());
                }
                return Err(Problem::Refused {
                    option: opt.to_string(),
                    why,
                });
            }
            Some(Support::Honoured) => {}
        }
        let name = opt.split_once('=').map_or(opt, |(n, _)| n);
        match name {
            "rw" => self.read_write = Some(true),
            "ro" => self.read_write = Some(false),
            "root_squash" => self.no_root_squash = false,
            "no_root_squash" => self.no_root_squash = true,
            "all_squash" => self.all_squash = true,
            "no_all_squash" => self.all_squash = false,
            "anonuid" => self.anonuid = Some(id("a uid is a number (e.g. anonuid=1000)")?),
            "anongid" => self.anongid = Some(id("a gid is a number (e.g. anongid=1000)")?),
            "secure" => self.secure = true,
            "insecure" => self.secure = false,
            "nordirplus" => self.no_rdirplus = true,
            "sec" => sec(opt, value("a list of flavours (sec=sys)")?)?,
            "fsid" => self.fsid = Some(fsid(opt, value("fsid=NUMBER, fsid=root or fsid=UUID")?)?),
            "mountpoint" | "mp" => {
                self.mountpoint = Some(match opt.split_once('=') {
                    Some((_, p)) if p.starts_with('/') => Mountpoint::At(normalize(p)),
                    Some(_) => {
                        return Err(Problem::BadValue {
                            option: opt.to_string(),
                            want: "the mount point is an absolute path",
                        });
                    }
                    None => Mountpoint::Itself,
                })
            }
            _ => return Err(Problem::UnknownOption(opt.to_string())),
        }
        Ok(())
    }

    fn options(&self) -> Result<Options, Problem> {
        let anon = (
            self.anonuid.unwrap_or(NOBODY),
            self.anongid.unwrap_or(NOBODY),
        );
        let squash = if self.all_squash {
            Squash::All(anon.0, anon.1)
        } else if self.no_root_squash {
            if self.anonuid.is_some() || self.anongid.is_some() {
                return Err(Problem::AnonWithoutSquash);
            }
            Squash::None
        } else if anon == (NOBODY, NOBODY) {
            Squash::Root
        } else {
            Squash::RootTo(anon.0, anon.1)
        };
        Ok(Options {
            read_only: !self.read_write.unwrap_or(false),
            squash,
            secure: self.secure,
            readdirplus: !self.no_rdirplus,
        })
    }
}

/// `sec=`: a colon-separated list of flavours; only `sys` is served.
fn sec(opt: &str, list: &str) -> Result<(), Problem> {
    for flavour in list.split(':') {
        let why = match flavour {
            "sys" => continue,
            "krb5" | "krb5i" | "krb5p" => {
                "RPCSEC_GSS (Kerberos) is not supported: only AUTH_SYS (sec=sys) is served"
            }
            "none" => {
                "AUTH_NONE is served as nobody only with --allow-auth-none, for every export; write sec=sys"
            }
            _ => "unknown flavour: only sys is served",
        };
        return Err(Problem::Refused {
            option: opt.to_string(),
            why,
        });
    }
    Ok(())
}

/// `fsid=`: `root`/`0`, a number, or a UUID (32 hex digits, any punctuation).
fn fsid(opt: &str, v: &str) -> Result<Fsid, Problem> {
    if v == "root" || v == "0" {
        return Ok(Fsid::Root);
    }
    if let Ok(n) = v.parse::<u32>() {
        return Ok(Fsid::Num(n));
    }
    let hex: String = v.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    let only_punct = v
        .chars()
        .all(|c| c.is_ascii_hexdigit() || matches!(c, '-' | ':' | '.'));
    match u128::from_str_radix(&hex, 16) {
        Ok(u) if hex.len() == 32 && only_punct => Ok(Fsid::Uuid(u)),
        _ => Err(Problem::BadValue {
            option: opt.to_string(),
            want: "fsid is a number, root, or a UUID of 32 hex digits",
        }),
    }
}

/// A path with `//` collapsed and no trailing `/` (but `/` itself).
pub fn normalize(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    format!("/{}", parts.join("/"))
}

/// Reads an exports(5) text; host names are resolved with `resolve`.
pub fn parse(text: &str, resolve: Resolver<'_>) -> Result<Vec<ExportLine>, LineError> {
    let mut lines: Vec<ExportLine> = Vec::new();
    for entry in entries(text)? {
        let at = |t: &Token, problem| LineError {
            line: t.line,
            problem,
        };
        let first = &entry[0];
        if !first.text.starts_with('/') {
            return Err(at(first, Problem::RelativePath(first.text.clone())));
        }
        let path = normalize(&first.text);
        if let Some(prev) = lines.iter().find(|l| l.path == path) {
            return Err(at(
                first,
                Problem::PathTwice {
                    path,
                    first: prev.line,
                },
            ));
        }
        let export = line(&path, first.line, &entry[1..], resolve)?;
        if let Some(f) = export.fsid
            && let Some(prev) = lines.iter().find(|l| l.fsid == Some(f))
        {
            let shown = match f {
                Fsid::Root => "0".to_string(),
                Fsid::Num(n) => n.to_string(),
                Fsid::Uuid(u) => format!("{u:032x}"),
            };
            return Err(at(
                first,
                Problem::FsidTwice {
                    fsid: shown,
                    first: prev.line,
                },
            ));
        }
        lines.push(export);
    }
    Ok(lines)
}

/// The clients and options after a line's path.
fn line(
    path: &str,
    first_line: usize,
    tokens: &[Token],
    resolve: Resolver<'_>,
) -> Result<ExportLine, LineError> {
    let mut defaults = Builder::default();
    let mut export = ExportLine {
        line: first_line,
        path: path.to_string(),
        clients: Vec::new(),
        fsid: None,
        mountpoint: None,
    };
    for t in tokens {
        let at = |problem| LineError {
            line: t.line,
            problem,
        };
        if let Some(list) = t.text.strip_prefix('-') {
            defaults.apply_all(list).map_err(at)?;
            continue;
        }
        if t.text.starts_with('(') {
            return Err(at(Problem::OptionsWithoutClient(t.text.clone())));
        }
        let (who, list) = match t.text.split_once('(') {
            Some((who, rest)) => match rest.strip_suffix(')') {
                Some(list) => (who, Some(list)),
                None => {
                    return Err(at(Problem::BadValue {
                        option: t.text.clone(),
                        want: "a client's options end with ')' (no spaces inside)",
                    }));
                }
            },
            None => (t.text.as_str(), None),
        };
        let mut b = defaults.clone();
        if let Some(list) = list {
            b.apply_all(list).map_err(at)?;
        }
        let options = b.options().map_err(at)?;
        if let (Some(mine), Some(theirs)) = (b.fsid, export.fsid)
            && mine != theirs
        {
            return Err(at(Problem::Conflict("fsid=")));
        }
        export.fsid = export.fsid.or(b.fsid);
        match (&export.mountpoint, &b.mountpoint) {
            (Some(a), Some(m)) if a != m => return Err(at(Problem::Conflict("mountpoint"))),
            (None, Some(m)) => export.mountpoint = Some(m.clone()),
            _ => {}
        }
        let pattern = clients::parse(who, resolve).map_err(at)?;
        if export.clients.iter().any(|c| c.text == who) {
            return Err(at(Problem::ClientTwice(who.to_string())));
        }
        export.clients.push(Client {
            text: who.to_string(),
            pattern,
            options,
        });
    }
    if export.clients.is_empty() {
        return Err(LineError {
            line: first_line,
            problem: Problem::NoClients(path.to_string()),
        });
    }
    Ok(export)
}

#[cfg(test)]
mod tests;

//! What can be wrong with one line of an exports(5) file, worded for the person who
//! edits it (the line number is added by `file::LineError`).

use std::fmt;

/// What is wrong with a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    UnterminatedQuote,
    RelativePath(String),
    NoClients(String),
    OptionsWithoutClient(String),
    EmptyOption(String),
    UnknownOption(String),
    Refused {
        option: String,
        why: &'static str,
    },
    BadValue {
        option: String,
        want: &'static str,
    },
    BadClient {
        client: String,
        why: &'static str,
    },
    Unresolved {
        host: String,
        why: String,
    },
    ClientTwice(String),
    /// anonuid/anongid where nobody is squashed.
    AnonWithoutSquash,
    /// An export-wide option (fsid=, mountpoint) given two ways on one line.
    Conflict(&'static str),
    PathTwice {
        path: String,
        first: usize,
    },
    FsidTwice {
        fsid: String,
        first: usize,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::UnterminatedQuote => write!(f, "a quote (\") is not closed"),
            Problem::RelativePath(p) => {
                write!(
                    f,
                    "'{p}' is not an absolute path (an export line starts with one)"
                )
            }
            Problem::NoClients(p) => write!(
                f,
                "{p} names no client; write '{p} *(ro)' to export it to everyone, or list the clients"
            ),
            Problem::OptionsWithoutClient(o) => write!(
                f,
                "'{o}' has no client before it: a space between a client and its options gives those options to every host; write 'host{o}' or '*{o}'"
            ),
            Problem::EmptyOption(c) => write!(f, "an empty option in '{c}'"),
            Problem::UnknownOption(o) => write!(
                f,
                "unknown option '{o}' (see the exports section of the rustnfs README for the options served)"
            ),
            Problem::Refused { option, why } => {
                write!(f, "option '{option}' is not supported: {why}")
            }
            Problem::BadValue { option, want } => write!(f, "'{option}': {want}"),
            Problem::BadClient { client, why } => write!(f, "client '{client}': {why}"),
            Problem::Unresolved { host, why } => write!(
                f,
                "client '{host}' does not resolve ({why}); give its address, or make the name resolvable"
            ),
            Problem::ClientTwice(c) => write!(f, "client '{c}' is listed twice on this line"),
            Problem::AnonWithoutSquash => write!(
                f,
                "anonuid/anongid set the identity squashed callers act as, and with no_root_squash nobody is squashed; remove them, or add root_squash or all_squash"
            ),
            Problem::Conflict(what) => write!(
                f,
                "{what} differs between the clients of one export; give it once"
            ),
            Problem::PathTwice { path, first } => write!(
                f,
                "{path} is already exported on line {first}; put all its clients on one line"
            ),
            Problem::FsidTwice { fsid, first } => {
                write!(
                    f,
                    "fsid={fsid} is already used on line {first}; each export needs its own"
                )
            }
        }
    }
}

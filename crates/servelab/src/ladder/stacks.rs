//! The host rungs as serving stacks: for B, httpd inside the layer serving the dataset
//! (the HTTP hop crosses it); for A's NFS hop, rustnfs inside the layer and httpd on the
//! host reading it (the NFS hop crosses it). The same programs on every rung: the static
//! builds the containers run when they exist, else servelab's own subcommands.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use lab::process::Supervised;

use super::layers::{Layer, LayerError, Net};
use crate::experiment::nfs::{NfsExport, rustnfs_args};
use crate::experiment::probe::Part;
use crate::experiment::stack::Stack;

/// The two sides of the ladder.
pub const B_SIDE: &str = "B";
pub const A_SIDE: &str = "A NFS hop";

/// A program of the ladder: a static binary, or servelab with a subcommand.
#[derive(Debug, Clone)]
pub struct Program {
    pub exe: PathBuf,
    pub subcommand: Option<&'static str>,
}

impl Program {
    /// The static build of `name` when there is one, else `servelab <name>`.
    pub fn find(name: &'static str) -> std::io::Result<Program> {
        match crate::containers::host::static_bin(name) {
            Ok(exe) => Ok(Program {
                exe,
                subcommand: None,
            }),
            Err(_) => Ok(Program {
                exe: std::env::current_exe()?,
                subcommand: Some(name),
            }),
        }
    }

    pub fn describe(&self) -> String {
        match self.subcommand {
            Some(sub) => format!("{} {sub}", self.exe.display()),
            None => self.exe.display().to_string(),
        }
    }
}

/// Why a rung could not start.
#[derive(Debug, thiserror::Error)]
pub enum RungError {
    #[error("cannot build the {layer} layer")]
    Layer {
        layer: &'static str,
        #[source]
        source: LayerError,
    },
    #[error("cannot start {what} for the {layer} rung")]
    Start {
        what: &'static str,
        layer: &'static str,
        #[source]
        source: lab::LabError,
    },
    #[error("no free port on loopback")]
    Port(#[source] lab::LabError),
}

/// Starts `p` listening on `addr` with `args`, inside `net` when `inside`.
fn spawn(
    p: &Program,
    args: &[String],
    addr: SocketAddr,
    net: Option<&Net>,
    log: &Path,
) -> lab::Result<Supervised> {
    let mut cmd = Command::new(&p.exe);
    cmd.args(p.subcommand)
        .arg("--listen")
        .arg(addr.to_string())
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(
            std::fs::File::create(log)
                .map(Stdio::from)
                .unwrap_or(Stdio::null()),
        );
    if let Some(net) = net {
        net.enter(&mut cmd);
    }
    let mut child = Supervised::spawn(p.subcommand.unwrap_or("server"), &mut cmd, Some(log))?
        .with_grace(Duration::from_secs(2));
    child.wait_ready(&[addr], Duration::from_secs(20))?;
    Ok(child)
}

/// Where a server of `net` listens: a free loopback port, or a fixed one inside the
/// namespace (nothing else listens there).
fn listen_addr(net: &Net, port: u16) -> Result<SocketAddr, RungError> {
    if net.inside_ip == Ipv4Addr::LOCALHOST {
        return Ok(SocketAddr::from((
            net.inside_ip,
            lab::free_port().map_err(RungError::Port)?,
        )));
    }
    Ok(SocketAddr::from((net.inside_ip, port)))
}

/// What a rung needs: the programs, the dataset, where logs go.
pub struct Env<'a> {
    pub httpd: &'a Program,
    pub rustnfs: &'a Program,
    pub data: &'a Path,
    pub log_dir: &'a Path,
}

/// B across `layer`: httpd inside it serving the dataset.
pub fn start_b(layer: Layer, env: &Env<'_>) -> Result<Stack, RungError> {
    let l = layer.name();
    let mut net = Net::create(layer).map_err(|source| RungError::Layer { layer: l, source })?;
    let inside = listen_addr(&net, 8080)?;
    let args = vec!["--root".to_string(), env.data.display().to_string()];
    let log = env.log_dir.join(format!("ladder-b-{l}.log"));
    let httpd =
        spawn(env.httpd, &args, inside, Some(&net), &log).map_err(|source| RungError::Start {
            what: "httpd",
            layer: l,
            source,
        })?;
    let addr = net
        .publish(inside.port())
        .map_err(|source| RungError::Layer { layer: l, source })?;
    let mut stack = Stack::new(
        format!("{B_SIDE} {l}"),
        addr,
        vec![Part::process("httpd", httpd.pid())],
    );
    stack.description = format!("httpd --root in {}", layer.what());
    stack.hold(httpd);
    stack.hold(net);
    Ok(stack)
}

/// A's NFS hop across `layer`: rustnfs inside it, httpd on the host reading it.
pub fn start_a(layer: Layer, env: &Env<'_>) -> Result<Stack, RungError> {
    let l = layer.name();
    let mut net = Net::create(layer).map_err(|source| RungError::Layer { layer: l, source })?;
    let inside = listen_addr(&net, 2049)?;
    let log = env.log_dir.join(format!("ladder-a-rustnfs-{l}.log"));
    let rustnfs = spawn(
        env.rustnfs,
        &rustnfs_args(env.data),
        inside,
        Some(&net),
        &log,
    )
    .map_err(|source| RungError::Start {
        what: "rustnfs",
        layer: l,
        source,
    })?;
    let nfs = net
        .publish(inside.port())
        .map_err(|source| RungError::Layer { layer: l, source })?;
    let front = SocketAddr::from((
        Ipv4Addr::LOCALHOST,
        lab::free_port().map_err(RungError::Port)?,
    ));
    let args = vec!["--nfs".to_string(), NfsExport::rustnfs(nfs).httpd_url()];
    let log = env.log_dir.join(format!("ladder-a-httpd-{l}.log"));
    let httpd = spawn(env.httpd, &args, front, None, &log).map_err(|source| RungError::Start {
        what: "httpd",
        layer: l,
        source,
    })?;
    let mut stack = Stack::new(
        format!("{A_SIDE} {l}"),
        front,
        vec![
            Part::process("httpd", httpd.pid()),
            Part::process("rustnfs", rustnfs.pid()),
        ],
    );
    stack.description = format!("httpd on the host --nfs → rustnfs in {}", layer.what());
    stack.hold(httpd);
    stack.hold(rustnfs);
    stack.hold(net);
    Ok(stack)
}

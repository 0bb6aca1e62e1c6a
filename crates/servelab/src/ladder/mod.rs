//! Where a container's cost comes from (issue 33 §2): the same serving stack with one
//! network layer added at a time — host loopback → a namespace over a veth pair → its
//! host end in a bridge → bridge plus a published port (DNAT) → the real LXD instance /
//! Docker container — for B (the HTTP hop crosses the layer) and for A's NFS hop. Each
//! rung's CPU per request by process and by the whole machine minus the client (the
//! kernel's softirq is in no process's counters), its median latency at equal load, each
//! layer's added cost with its interval, and each container's extra cost split into the
//! layers and the rest.
//!
//! `compare --ladder` runs the host rungs; with `--containers lxd,docker` the container
//! rungs join the same rotation (`containers`' ladder phase). Either way the ladder
//! writes `ladder.md` and `ladder.json`.
//!
//! # Layout
//! - [`layers`]: the veth / bridge / DNAT layers (named `slL…`, removed on drop).
//! - [`stacks`]: a rung as a serving stack (B inside the layer, or rustnfs inside it).
//! - [`kernel`]: whole-machine and softirq CPU from `/proc/stat`.
//! - [`run`]: the rounds; [`model`]: the results, each layer's step, the attribution.
//! - [`sentences`], [`markdown`]: the answer and `ladder.md`.

pub mod kernel;
pub mod layers;
pub mod markdown;
pub mod model;
pub mod run;
pub mod sentences;
pub mod stacks;

use std::path::Path;

use anyhow::Context as _;

use layers::Layer;
use model::Ladder;
use run::{RungStack, Settings};
use stacks::{A_SIDE, B_SIDE, Env, Program};

use crate::containers::{ContainerArgs, Workloads};
use crate::experiment::probe::CpuSplit;
use crate::experiment::progress::Progress;
use crate::experiment::stack::Stack;

/// The host rungs that started (B's, then A's) and why the others did not; each
/// serving process pinned to the servers' CPUs when `cpus` splits them.
fn start_host_rungs(
    data: &Path,
    log_dir: &Path,
    cpus: Option<&CpuSplit>,
    missing: &mut Vec<String>,
    programs: &mut String,
) -> Vec<(&'static str, Layer, Stack)> {
    layers::sweep_stale();
    let namespaces = layers::available();
    let (httpd, rustnfs) = match (Program::find("httpd"), Program::find("rustnfs")) {
        (Ok(h), Ok(r)) => (h, r),
        (Err(e), _) | (_, Err(e)) => {
            missing.push(format!(
                "every host rung: cannot find servelab itself ({e})"
            ));
            return Vec::new();
        }
    };
    *programs = format!(
        "httpd: {}; rustnfs: {}",
        httpd.describe(),
        rustnfs.describe()
    );
    let env = Env {
        httpd: &httpd,
        rustnfs: &rustnfs,
        data,
        log_dir,
    };
    let mut out = Vec::new();
    for (side, start) in [
        (B_SIDE, stacks::start_b as fn(Layer, &Env<'_>) -> _),
        (A_SIDE, stacks::start_a),
    ] {
        for layer in Layer::HOST {
            if let (Err(why), false) = (&namespaces, layer == Layer::Loopback) {
                missing.push(format!("{side} {}: {why}", layer.name()));
                continue;
            }
            match start(layer, &env) {
                Ok(s) => {
                    for pid in s.parts.iter().filter_map(|p| p.pid()) {
                        if let Some(split) = cpus
                            && let Err(e) = lab::affinity::pin_tree(pid, &split.server)
                        {
                            missing.push(format!("{side} {}: not pinned ({e})", layer.name()));
                        }
                    }
                    out.push((side, layer, s))
                }
                Err(e) => missing.push(format!("{side} {}: {}", layer.name(), service::Chain(&e))),
            }
        }
    }
    out
}

/// Runs the ladder: the host rungs, plus `containers` (rungs started elsewhere) in the
/// same rotation; writes `ladder.md` and `ladder.json` into `out_dir`.
pub fn run_ladder(
    settings: &Settings,
    data: &Path,
    log_dir: &Path,
    containers: Vec<RungStack<'_>>,
    progress: &mut Progress,
    out_dir: &Path,
) -> anyhow::Result<Ladder> {
    let (mut missing, mut programs) = (Vec::new(), String::new());
    let cpus = settings.cpus.as_ref();
    let host = start_host_rungs(data, log_dir, cpus, &mut missing, &mut programs);
    let mut rungs: Vec<RungStack<'_>> = Vec::new();
    for side in [B_SIDE, A_SIDE] {
        rungs.extend(
            host.iter()
                .filter(|(s, _, _)| *s == side)
                .map(|(s, layer, stack)| RungStack {
                    side: s,
                    layer: layer.name().to_string(),
                    description: stack.description.clone(),
                    stack,
                }),
        );
        rungs.extend(
            containers
                .iter()
                .filter(|c| c.side == side)
                .map(|c| RungStack {
                    side: c.side,
                    layer: c.layer.clone(),
                    description: c.description.clone(),
                    stack: c.stack,
                }),
        );
    }
    run::plan(progress, rungs.len(), settings);
    let mut ladder = run::measure(&rungs, settings, progress)?;
    ladder.missing = missing;
    ladder.programs = programs;
    drop(rungs);
    drop(host);
    write(&ladder, out_dir)?;
    Ok(ladder)
}

/// The settings of a ladder from compare's options.
pub fn settings(args: &ContainerArgs, w: &Workloads, path: String) -> Settings {
    Settings {
        rounds: args.ladder_rounds,
        requests: w.large_requests,
        concurrency: w.large_concurrency,
        seconds: args.ladder_seconds,
        keep_busy: w.keep_busy,
        cpus: w.cpus.clone(),
        path,
    }
}

/// `compare --ladder` without containers: the host rungs on a dataset of their own.
pub fn standalone(args: &ContainerArgs, w: &Workloads, out_dir: &Path) -> anyhow::Result<Ladder> {
    let data = crate::experiment::workspace::Dataset::prepare(
        w.dataset.as_deref(),
        w.spec,
        "servelab-ladder-",
    )?;
    let log_dir = out_dir.join("logs");
    std::fs::create_dir_all(&log_dir)
        .with_context(|| format!("cannot create {}", log_dir.display()))?;
    let s = settings(args, w, format!("/{}", data.info.large_file));
    let mut progress = Progress::new("servelab compare --ladder");
    let ladder = run_ladder(
        &s,
        &data.info.root,
        &log_dir,
        Vec::new(),
        &mut progress,
        out_dir,
    )?;
    progress.finish();
    Ok(ladder)
}

/// `ladder.json` and `ladder.md`.
pub fn write(ladder: &Ladder, dir: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(ladder)?;
    std::fs::write(dir.join("ladder.json"), json).context("cannot write ladder.json")?;
    std::fs::write(dir.join("ladder.md"), markdown::render(ladder))
        .context("cannot write ladder.md")?;
    Ok(())
}

//! `ladder.md`: the answer in sentences, every rung's figures, every layer's added cost
//! with its interval, what did not run — each a small section over the [`Ladder`].

use super::model::{Ladder, Rung, Step};
use crate::doc::{Block, Doc, Section};
use crate::stats::Comparison;
use crate::table::{Align, Table};

/// ladder.md, top to bottom.
pub const SECTIONS: &[Section<Ladder>] = &[answer, rungs, steps, missing];

pub fn render(l: &Ladder) -> String {
    Doc::of(l, SECTIONS).to_markdown()
}

fn median(v: &[f64], decimals: usize) -> String {
    crate::stats::median_of(v).map_or("—".into(), |m| format!("{m:.decimals$}"))
}

fn difference(c: &Option<Comparison>) -> String {
    c.map_or("—".into(), |c| {
        format!("{:+.3} ({:+.3} to {:+.3})", c.estimate, c.ci.low, c.ci.high)
    })
}

fn answer(l: &Ladder) -> Vec<Block> {
    vec![
        Block::Heading(
            1,
            "servelab compare --ladder: where the cost comes from".into(),
        ),
        Block::text(format!(
            "The same serving stack with one network layer added at a time, for B (httpd \
             inside the layer, the HTTP hop crosses it) and for A's NFS hop (httpd on the host, \
             rustnfs inside the layer). Each rung: {} closed-loop runs of {} requests of the \
             large file at concurrency {} (CPU per request), then {} open-loop runs of {:.1} s \
             at {:.1} req/s, the same for every rung (median latency at equal load); rungs in \
             rotating order. The ladder took {:.0} s. Programs: {}.",
            l.rounds,
            l.requests,
            l.concurrency,
            l.rounds,
            l.seconds_each,
            l.offered_per_sec,
            l.elapsed_s,
            l.programs
        )),
        Block::h2("The answer"),
        Block::List(super::sentences::sentences(l)),
    ]
}

fn rung_row(r: &Rung) -> [String; 10] {
    let x = &r.runs;
    [
        r.side.clone(),
        r.layer.clone(),
        median(&x.process_ms, 3),
        median(&x.machine_ms, 3),
        median(&x.softirq_ms, 3),
        median(&x.other_ms, 3),
        median(&x.capacity_per_sec, 1),
        median(&x.p50_ms, 2),
        format!(
            "{} closed, {} equal-load ({} busy, {} failed)",
            x.process_ms.len(),
            x.p50_ms.len(),
            x.busy_runs,
            x.failed
        ),
        r.description.clone(),
    ]
}

fn rungs(l: &Ladder) -> Vec<Block> {
    let mut t = Table::new([
        "Side",
        "Layer",
        "CPU ms/request, serving processes",
        "CPU ms/request, whole machine − client − other processes",
        "Softirq on every CPU ms/request (also in whichever task it interrupted)",
        "Other processes ms/request (taken out)",
        "Capacity req/s",
        "p50 ms at equal load",
        "Runs",
        "What runs",
    ])
    .left(2)
    .align(9, Align::Left);
    for r in &l.rungs {
        t.row(rung_row(r));
    }
    vec![
        Block::h2("Every rung"),
        Block::text(
            "Serving processes: utime + stime of each serving process tree (`/proc/PID/stat`) or \
             container cgroup (`cpu.stat`) per request. Whole machine: every CPU's busy time in \
             `/proc/stat` (user, nice, system, irq, softirq, steal) minus servelab's own (the load \
             generator, the samplers) and minus every other user-space process's (own and reaped \
             children's — the neighbours on a shared machine), per request: the serving processes \
             plus the kernel's work that no serving process is charged for (softirq, ksoftirqd, \
             kworkers). Softirq is the `/proc/stat` column: a tick spent in softirq is also \
             charged to the task it interrupted, so it overlaps the other columns. Medians over \
             the runs.",
        ),
        Block::text(if l.keep_busy {
            "Latency at equal load: from every run, those taken on a busy machine included \
             (`--keep-busy`): neighbours distort it."
        } else {
            "Latency at equal load: only from runs on a quiet machine (other work under 20 % of \
             the CPU time); `--keep-busy` keeps the others."
        }),
        Block::Table(t),
    ]
}

fn step_row(s: &Step) -> [String; 6] {
    [
        s.side.clone(),
        format!("{} → {}", s.from, s.to),
        difference(&s.process_ms),
        difference(&s.machine_ms),
        s.only_machine_ms.map_or("—".into(), |o| format!("{o:+.3}")),
        difference(&s.p50_ms),
    ]
}

fn steps(l: &Ladder) -> Vec<Block> {
    let mut t = Table::new([
        "Side",
        "Layer added",
        "Δ CPU ms/request, processes (interval)",
        "Δ CPU ms/request, whole machine (interval)",
        "Seen only by the whole machine, ms",
        "Δ p50 ms at equal load (interval)",
    ])
    .left(2);
    for s in &l.steps {
        t.row(step_row(s));
    }
    vec![
        Block::h2("What each layer adds"),
        Block::text(
            "Each host rung against the one below it on its side; a container against loopback. \
             Differences of medians with their bootstrap intervals (two runs a side or more).",
        ),
        Block::Table(t),
    ]
}

fn missing(l: &Ladder) -> Vec<Block> {
    if l.missing.is_empty() {
        return Vec::new();
    }
    vec![
        Block::h2("Rungs that did not run"),
        Block::List(l.missing.clone()),
    ]
}

//! The TCP ceiling: one stream of our load generator into an in-process sink on
//! loopback and, with `--link`, through the link's unshaped control (a sink inside the
//! namespace across the veth pair, or the unshaped relay) and the shaped link, on the
//! path scenario A's shaped row takes — what the bytes of scenario A could at best move
//! at.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;

use super::RunContext;
use crate::compare::rows;
use crate::experiment::interrupt::Interrupted;
use crate::experiment::link::{self, Link, LinkPath, LinkSpec};
use crate::experiment::load::{Load, interleaved};
use crate::experiment::netns;

/// One path the stream runs over.
struct TcpPath {
    /// The report's name for it.
    label: String,
    addr: SocketAddr,
    /// The link, kept alive while measured; `None` on plain loopback.
    link: Option<Link>,
    /// Stops a sink of this path's own (the `veth` control's, in its namespace).
    _stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl RunContext<'_> {
    /// Raw TCP throughput on loopback and, with `--link`, through the control relay and
    /// the shaped link.
    pub(super) fn measure_tcp(&mut self) -> Result<(), Interrupted> {
        let planned = self.opts.repeat * (1 + self.opts.link.map_or(0, |_| 2));
        let expected = Duration::from_secs_f64(self.opts.tcp_seconds);
        let (sink, stop) = match self.rt.block_on(start_tcp_sink()) {
            Ok(s) => s,
            Err(e) => {
                self.progress.unplan(planned, expected);
                self.fail("tcp ceiling", "tcp", e);
                return Ok(());
            }
        };
        let mut paths = vec![TcpPath {
            label: "loopback".into(),
            addr: sink,
            link: None,
            _stop: None,
        }];
        if let Some(spec) = self.opts.link {
            let control = if link::control_path(spec) == LinkPath::Veth {
                self.sink_inside(LinkSpec::unshaped())
            } else {
                Link::start(sink, LinkSpec::unshaped())
                    .map(|l| (l, None))
                    .map_err(Into::into)
            };
            // The path scenario A's shaped row takes (no relay without a delay).
            let shaped = if link::shaped_path(spec) == LinkPath::NetnsTbfDirect {
                self.sink_inside(spec)
            } else {
                Link::start(sink, spec)
                    .map(|l| (l, None))
                    .map_err(Into::into)
            };
            for (s, started) in [(LinkSpec::unshaped(), control), (spec, shaped)] {
                match started {
                    Ok((l, stop)) => paths.push(TcpPath {
                        label: format!("loopback via link ({s}; {})", l.path_note()),
                        addr: l.addr,
                        link: Some(l),
                        _stop: stop,
                    }),
                    Err(e) => {
                        self.progress.unplan(self.opts.repeat, expected);
                        self.fail(&format!("link {s}"), "tcp", e)
                    }
                }
            }
        }
        let mut bits: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
        let numbered: Vec<(usize, &TcpPath)> = paths.iter().enumerate().collect();
        for (rep, &(i, path)) in interleaved(self.opts.repeat, &numbered) {
            let what = format!("run {}/{} tcp {}", rep + 1, self.opts.repeat, path.label);
            self.progress.step(expected, what)?;
            let url = format!("tcp://{}", path.addr);
            match Load::for_seconds(url, self.opts.tcp_seconds, 1).run() {
                Ok(r) => bits[i].push(r.bytes_per_sec() * 8.0),
                Err(e) => self.fail(&path.label, "tcp", e),
            }
        }
        for (path, bits) in paths.iter().zip(bits) {
            if !bits.is_empty() {
                let expected = path
                    .link
                    .as_ref()
                    .and_then(|l| l.spec.rate_bits_per_sec)
                    .map(|r| r as f64);
                self.report
                    .tcp
                    .push(rows::tcp_row(&path.label, bits, expected));
            }
        }
        let _ = stop.send(());
        Ok(())
    }
}

impl RunContext<'_> {
    /// A sink listening inside a namespace across a veth pair limited to `spec`'s rate
    /// (none: the `veth` control's path); `spec` has no delay.
    fn sink_inside(
        &self,
        spec: LinkSpec,
    ) -> anyhow::Result<(Link, Option<tokio::sync::oneshot::Sender<()>>)> {
        let wire = netns::Wire::create(spec.rate_bits_per_sec)?;
        let listener = wire.listen()?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        self.rt.block_on(async {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            tokio::spawn(loadgen::tcp::serve(listener, 128 * 1024, async move {
                let _ = rx.await;
            }));
            anyhow::Ok(())
        })?;
        Ok((Link::inside(wire, addr, spec), Some(tx)))
    }
}

async fn start_tcp_sink() -> anyhow::Result<(SocketAddr, tokio::sync::oneshot::Sender<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot bind the TCP sink")?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(loadgen::tcp::serve(listener, 128 * 1024, async move {
        let _ = rx.await;
    }));
    Ok((addr, tx))
}

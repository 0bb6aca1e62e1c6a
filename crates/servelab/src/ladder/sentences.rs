//! The ladder's answer in sentences: for each container, how its extra CPU per request
//! over the host splits into the layers ("of LXD's 1.69 × over the host, the veth pair
//! accounts for …, the bridge …, the rest …"), and for each host layer what it adds and
//! how much of that only the whole-machine figure sees.

use super::model::{Attribution, Ladder, Step};

/// What a layer is called in a sentence.
fn layer_words(layer: &str) -> &str {
    match layer {
        "veth" => "the veth pair",
        "bridge" => "the bridge",
        "bridge+NAT" => "a published port (DNAT)",
        other => other,
    }
}

/// `+0.12 ms (18 %)`: a part of `whole`.
fn share(ms: f64, whole: f64) -> String {
    if whole.abs() > 1e-9 {
        format!("{ms:+.3} ms ({:.0} %)", ms / whole * 100.0)
    } else {
        format!("{ms:+.3} ms")
    }
}

fn attribution_sentence(a: &Attribution) -> String {
    let parts: Vec<String> = a
        .layers
        .iter()
        .map(|(layer, ms)| {
            format!(
                "{} accounts for {}",
                layer_words(layer),
                share(*ms, a.extra_ms)
            )
        })
        .collect();
    let nat = a
        .nat_ms
        .map(|ms| format!("; a published port (DNAT), which this run's containers do not use, would add {ms:+.3} ms more"))
        .unwrap_or_default();
    format!(
        "{}: of {}'s {:.2} × the host's CPU per request ({:+.3} ms, whole machine minus the client and other processes), {}, the rest — cgroups and the container's own stack, not measured layer by layer — {}{nat}.",
        a.side,
        a.container,
        a.times_host,
        a.extra_ms,
        parts.join(", "),
        share(a.rest_ms, a.extra_ms)
    )
}

fn step_sentence(s: &Step) -> Option<String> {
    let p50 = s
        .p50_ms
        .map(|p| format!("; median latency at equal load {:+.2} ms", p.estimate))
        .unwrap_or_default();
    let layer = layer_words(&s.to);
    let Some(m) = s.machine_ms else {
        let p = s.process_ms?;
        return Some(format!(
            "{}: {layer} over {} adds {:+.3} ms of CPU per request in the serving processes' own \
             counters (interval {:+.3} to {:+.3}); the whole-machine figure is withheld (too few \
             runs on a quiet machine){p50}.",
            s.side, s.from, p.estimate, p.ci.low, p.ci.high
        ));
    };
    let process = s
        .process_ms
        .map(|p| {
            format!(
                "{:+.3} ms in the serving processes' own counters",
                p.estimate
            )
        })
        .unwrap_or_else(|| "no per-process figure".into());
    let only = s
        .only_machine_ms
        .map(|o| {
            format!(", so {o:+.3} ms is seen only by the whole-machine figure (softirq, ksoftirqd)")
        })
        .unwrap_or_default();
    Some(format!(
        "{}: {layer} over {} adds {:+.3} ms of CPU per request on the whole machine (interval {:+.3} to {:+.3}) against {process}{only}{p50}.",
        s.side, s.from, m.estimate, m.ci.low, m.ci.high
    ))
}

/// The attributions first, then every layer's step.
pub fn sentences(l: &Ladder) -> Vec<String> {
    l.attributions
        .iter()
        .map(attribution_sentence)
        .chain(l.steps.iter().filter_map(step_sentence))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_container_sentence_names_each_layer_and_the_rest() {
        let a = Attribution {
            side: "B".into(),
            container: "LXD".into(),
            times_host: 1.69,
            extra_ms: 0.69,
            layers: vec![("veth".into(), 0.20), ("bridge".into(), 0.10)],
            rest_ms: 0.39,
            nat_ms: Some(0.05),
        };
        let s = attribution_sentence(&a);
        assert!(
            s.starts_with("B: of LXD's 1.69 × the host's CPU per request (+0.690 ms"),
            "{s}"
        );
        assert!(
            s.contains("the veth pair accounts for +0.200 ms (29 %)"),
            "{s}"
        );
        assert!(
            s.contains("the bridge accounts for +0.100 ms (14 %)"),
            "{s}"
        );
        assert!(s.contains("+0.390 ms (57 %)"), "{s}");
        assert!(s.contains("would add +0.050 ms more"), "{s}");
    }
}

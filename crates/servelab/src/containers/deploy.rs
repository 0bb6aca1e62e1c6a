//! Deploying a container comparison: the dataset, rustnfs in Docker (scenario A's
//! server), httpd on the host, in the LXD instance and in Docker, and the cells of the
//! tables with the parts that serve each.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

use super::host::{HostHttpd, make_world_readable, static_bin, wait_http, wait_tcp};
use super::options::{ContainerArgs, Engine, Workloads};
use super::{Cell, ContainerReport, Run, b_args, docker, lxd, serving};
use crate::experiment::nfs::NfsExport;
use crate::experiment::probe::Part;
use crate::experiment::progress::Progress;
use crate::experiment::stack::Stack;
use crate::experiment::terminal;
use crate::experiment::workspace::Dataset;

/// Where httpd runs and how to reach its two scenarios.
struct Place {
    name: String,
    url_a: Option<String>,
    url_b: String,
}

impl<'a> Run<'a> {
    /// The dataset, rustnfs in Docker, httpd on the host, in LXD and in Docker.
    pub(super) fn deploy(args: &'a ContainerArgs, w: &'a Workloads) -> anyhow::Result<Self> {
        let plan = args.parse()?;
        crate::experiment::interrupt::check()?;
        let mut rep = ContainerReport {
            loadavg_before: crate::experiment::workspace::loadavg(),
            ..ContainerReport::default()
        };
        // The dataset: compare's (generated with the same seed) or --dataset.
        let dataset = Dataset::prepare(w.dataset.as_deref(), w.spec, "sl-deploy-data-")?;
        let info = &dataset.info;
        // Readable by the containers' uid 65534 (tempfile creates 0700).
        make_world_readable(dataset.tmp());
        make_world_readable(&info.root);
        let data = info.root.clone();
        rep.large_file = format!("{} ({} bytes)", info.large_file, info.large_bytes);
        rep.small_file = format!("{} ({} bytes)", info.small_file, info.small_bytes);

        let httpd_bin = static_bin("httpd")?;
        rep.notes.push(format!(
            "the same static httpd ({}) on the host and in every container",
            httpd_bin.display()
        ));

        // rustnfs in Docker for scenario A (host and Docker columns).
        let tag = &args.image_tag;
        let images = [format!("rustnfs:{tag}"), format!("httpd:{tag}")];
        let image_refs: Vec<&str> = images.iter().map(String::as_str).collect();
        let docker_missing = docker::unavailable(&image_refs);
        let deployment = match &docker_missing {
            None => Some(docker::Deployment::start(&data, tag, true)?),
            Some(why) => {
                rep.skipped
                    .push(format!("scenario A and the Docker column: {why}"));
                None
            }
        };
        let nfs_ip = deployment.as_ref().and_then(|d| d.nfs_ip);
        // The image exports one directory (`SHARED_DIRECTORY`): MOUNT knows it by its
        // path, NFSv4 as its root (rustnfs `--export`: "mounted as /").
        let export = match args.nfs_version() {
            nfsclient::NfsVersion::V3 => "/nfs-share",
            _ => "/",
        };
        let nfs_url = nfs_ip
            .as_ref()
            .map(|ip| NfsExport::at(*ip, export).httpd_url());
        if let Some(ip) = nfs_ip {
            wait_tcp(&SocketAddr::new(ip, 2049).to_string(), 20)?;
        }

        // Host.
        let host_b = HostHttpd::start(&httpd_bin, &b_args(&data, &[]))?;
        let host_a = match &nfs_url {
            Some(u) => Some(HostHttpd::start(&httpd_bin, &args.httpd_a_args(u))?),
            None => None,
        };
        let mut places = vec![Place {
            name: "host".into(),
            url_a: host_a.as_ref().map(|h| h.url.clone()),
            url_b: host_b.url.clone(),
        }];
        let mut run = Run {
            args,
            w,
            plan,
            rep,
            data,
            large_file: info.large_file.clone(),
            small_file: info.small_file.clone(),
            httpd_bin,
            nfs_url,
            cells: Vec::new(),
            progress: Progress::new("servelab compare --containers"),
            host_peak: 0,
            host_b,
            host_a,
            instance: None,
            deployment,
            _dataset: dataset,
        };
        if run.plan.engines.contains(&Engine::Lxd) {
            crate::experiment::interrupt::check()?;
            let rustnfs_image = docker_missing.is_none().then(|| images[0].clone());
            places.extend(run.deploy_lxd(rustnfs_image.as_deref()));
        }
        if run.plan.engines.contains(&Engine::Docker) {
            places.extend(run.deploy_docker()?);
        }
        run.cells = run.cells_of(&places)?;
        Ok(run)
    }

    /// The cells of the tables: B everywhere, A where it runs.
    fn cells_of(&self, places: &[Place]) -> anyhow::Result<Vec<Cell>> {
        let mut cells = Vec::new();
        for p in places {
            let both = [("B", Some(&p.url_b)), ("A", p.url_a.as_ref())];
            for (scenario, url) in both {
                let Some(url) = url else { continue };
                let addr: SocketAddr = url
                    .trim_start_matches("http://")
                    .parse()
                    .with_context(|| format!("{url} is not an http://IP:PORT address"))?;
                let parts = self.parts_of(&p.name, scenario == "A");
                cells.push(Cell {
                    place: p.name.clone(),
                    scenario,
                    stack: Stack::new(format!("{} {scenario}", p.name), addr, parts),
                });
            }
        }
        Ok(cells)
    }

    /// The LXD column (skipped with its reason when LXD is missing or fails).
    fn deploy_lxd(&mut self, rustnfs_image: Option<&str>) -> Option<Place> {
        if let Some(why) = lxd::unavailable() {
            self.rep.skipped.push(format!("LXD: {why}"));
            return None;
        }
        // Without Docker the instance's scenario A reads a host rustnfs (not
        // compared: the host and Docker columns have no A then).
        let rustnfs_bin = static_bin("rustnfs").ok();
        let up = lxd::UpOptions {
            data: &self.data,
            httpd_bin: &self.httpd_bin,
            rustnfs_bin: rustnfs_bin.as_deref(),
            rustnfs_image,
            file: &self.large_file,
        };
        terminal::note("servelab compare: starting the LXD instance (lxc/lxd-deploy.sh up)");
        match lxd::Instance::up(&up) {
            Ok(i) => {
                self.rep.notes.push(format!(
                    "LXD instance {} ({}), limits.memory=1GB; its scenario A reads \
                     the script's own rustnfs container",
                    i.name, i.path
                ));
                let place = Place {
                    name: "LXD".into(),
                    url_a: i.path.ends_with("docker").then(|| i.url_a.clone()),
                    url_b: i.url_b.clone(),
                };
                self.instance = Some(i);
                Some(place)
            }
            Err(e) => {
                self.rep.skipped.push(format!("LXD: {e:#}"));
                None
            }
        }
    }

    /// The Docker column: httpd A and B containers next to rustnfs's.
    fn deploy_docker(&mut self) -> anyhow::Result<Option<Place>> {
        let (Some(d), Some(nfs_url)) = (self.deployment.as_mut(), &self.nfs_url) else {
            return Ok(None);
        };
        let tag = &self.args.image_tag;
        let data_args = vec!["--root".to_string(), "/www".to_string()];
        let b = d.httpd("b", tag, &self.data, &data_args)?;
        let a = d.httpd("a", tag, &self.data, &self.args.httpd_a_args(nfs_url))?;
        for c in [&a, &b] {
            wait_http(&c.url, Duration::from_secs(15))?;
        }
        let place = Place {
            name: "Docker".into(),
            url_a: Some(a.url.clone()),
            url_b: b.url.clone(),
        };
        d.httpd_a = Some(a);
        d.httpd_b = Some(b);
        Ok(Some(place))
    }

    /// What serves httpd in `place` (scenario A when `a`): the host's httpd process, the LXD instance's cgroup or the
    /// Docker container's, plus the rustnfs container behind scenario A. A part whose
    /// cgroup cannot be found leaves the cell without a CPU figure (not a partial one).
    fn parts_of(&self, place: &str, a: bool) -> Vec<Part> {
        use lab::sampler::Target as T;
        let mut v: Vec<(String, Option<T>)> = Vec::new();
        match place {
            "host" => {
                let h = if a {
                    self.host_a.as_ref()
                } else {
                    Some(&self.host_b)
                };
                v.push(("httpd (host)".into(), h.map(|h| T::Tree(h.proc.pid()))));
            }
            "LXD" => {
                let name = self.instance.as_ref().map(|i| i.name.clone());
                v.push((
                    "LXD instance".into(),
                    name.as_deref()
                        .and_then(container_target(serving::lxd_cgroup, serving::lxd_pid)),
                ));
            }
            _ => {
                let d = self.deployment.as_ref();
                let name = d.and_then(|d| {
                    if a {
                        d.httpd_a.as_ref()
                    } else {
                        d.httpd_b.as_ref()
                    }
                });
                // Its cgroup on a v2 host, its process tree on a v1 host (as the rustnfs
                // container below): with the cgroup alone, every Docker row of a v1 host
                // had no CPU figure and fell back to the load average.
                v.push((
                    "httpd container".into(),
                    name.and_then(|n| {
                        container_target(serving::docker_cgroup, serving::docker_pid)(&n.name)
                    }),
                ));
            }
        }
        if a {
            // The LXD instance reads the script's own rustnfs container.
            let nfs = match place {
                "LXD" => Some(format!("{}-rustnfs", lxd::PREFIX)),
                _ => self.deployment.as_ref().and_then(|d| d.rustnfs.clone()),
            };
            v.push((
                "rustnfs container".into(),
                nfs.as_deref().and_then(container_target(
                    serving::docker_cgroup,
                    serving::docker_pid,
                )),
            ));
        }
        if v.iter().any(|(_, t)| t.is_none()) {
            return Vec::new();
        }
        v.into_iter()
            .filter_map(|(name, target)| {
                Some(Part {
                    name,
                    target: target?,
                })
            })
            .collect()
    }
}

/// A container's sampling target: its cgroup v2 directory, else (cgroup v1 hosts) the
/// process tree under its first process.
fn container_target(
    cgroup: fn(&str) -> Option<PathBuf>,
    pid: fn(&str) -> Option<u32>,
) -> impl Fn(&str) -> Option<lab::sampler::Target> {
    move |name| {
        cgroup(name)
            .map(lab::sampler::Target::Cgroup)
            .or_else(|| pid(name).map(lab::sampler::Target::Tree))
    }
}

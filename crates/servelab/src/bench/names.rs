//! The names of tools and servers as they appear in the suite's CSV and summary
//! (shared by [`super::suite`], which measures, and [`super::summary`], which reads).

/// Tool names as they appear in the CSV.
pub const LOAD: &str = "servelab-load";
pub const WRK: &str = "wrk";
pub const AB: &str = "ab";
pub const IPERF3: &str = "iperf3";
pub const NFS_CAT: &str = "nfs-cat";
/// servelab load over NFSv4.0 (`nfs://…?version=4`): the same read and metadata
/// workloads, on every NFS server that speaks v4.
pub const LOAD_NFS4: &str = "servelab-load-nfs4";

/// Server names as they appear in the CSV.
pub const HTTPD_LOCAL: &str = "httpd-local";
pub const HTTPD_NFS: &str = "httpd-nfs";
pub const NGINX: &str = "nginx";
pub const APACHE: &str = "apache";
pub const H2O: &str = "h2o";
pub const RUSTNFS: &str = "rustnfs";
pub const GANESHA: &str = "ganesha";

//! NFS-Ganesha as the control server of the httpd, nfsclient, kernel-client and fault
//! tests: the harness's one launcher (`lab::peers::start_ganesha`: rpcbind, a start-up
//! lock shared across processes, retries, restart on the same ports), skipped with a
//! message where it is not installed, and the URL forms the tests give clients.

use std::path::Path;

use lab::peers::ExternalServer;

use crate::common;

/// Ganesha exporting `export` read-write (no root squash), or `None` (after `SKIP:`)
/// when it is not installed; under CI missing is a failure.
pub fn start(export: &Path) -> Option<ExternalServer> {
    common::available(lab::peers::start_ganesha(export))
}

/// Ganesha serving NFSv3 and NFSv4 with `export` as the pseudo-root `/` (the v4
/// control of the kernel-client battery), or `None` as [`start`].
pub fn start_v4(export: &Path) -> Option<ExternalServer> {
    common::available(lab::peers::start_ganesha_v4(export))
}

/// [`start_v4`] squashing root (`Root_Squash`: uid and gid 0 act as 65534), the
/// control of rows made as squashed root, or `None` as [`start`].
pub fn start_v4_root_squash(export: &Path) -> Option<ExternalServer> {
    common::available(lab::peers::start_ganesha_v4_root_squash(export))
}

/// Its NFS port.
pub fn nfs_port(g: &ExternalServer) -> u16 {
    g.addr.port()
}

/// Its MOUNT port.
pub fn mount_port(g: &ExternalServer) -> u16 {
    g.extra_port.expect("Ganesha has a MOUNT port")
}

/// The export as an `nfs://` URL in libnfs's form (what httpd's `--nfs` takes).
pub fn url(g: &ExternalServer) -> String {
    url_on(g, "127.0.0.1", "")
}

/// `path` (appended to the export's path) on `host`, in libnfs's form.
pub fn url_on(g: &ExternalServer, host: &str, path: &str) -> String {
    format!(
        "nfs://{host}{}{path}?version=3&nfsport={}&mountport={}",
        g.root().display(),
        nfs_port(g),
        mount_port(g)
    )
}

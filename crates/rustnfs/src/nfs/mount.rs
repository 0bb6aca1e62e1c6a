//! MOUNT v3 (RFC 1813 appendix I) and the portmapper v2 (RFC 1833), both on the NFS port:
//! clients learn that port from GETPORT and mount without rpcbind. MNT finds the export
//! for the calling client (`crate::exports`); EXPORT lists every export with its
//! clients, as `showmount -e` prints them.

use nfs3_types::mount::{
    dirpath, export_node, exports, fhandle3, mountlist, mountres3, mountres3_ok, mountstat3,
};
use nfs3_types::portmap::{IPPROTO_TCP, mapping, pmaplist};
use nfs3_types::xdr_codec::{List, Opaque};

use super::xdr::{Args, put, word};
use super::{Answer, Dispatcher};
use crate::rpc::{MOUNT_PROG, NFS_PROG};

/// AUTH_SYS and AUTH_NONE: the flavours MNT offers, AUTH_SYS first (clients take the
/// first they support).
const FLAVORS: [u32; 2] = [1, 0];

impl Dispatcher {
    /// A procedure without arguments or result: MOUNT's NULL and UMNTALL, the
    /// portmapper's NULL.
    pub(super) fn empty_call(&self, a: &mut Args<'_>) -> Answer {
        a.end()?;
        Ok("ok")
    }

    /// DUMP: we keep no mount list.
    pub(super) fn mount_dump(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        a.end()?;
        put(out, &mountlist::default());
        Ok("ok")
    }

    pub(super) fn mnt(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let path = a.opaque(nfs3_types::mount::MNTPATHLEN)?;
        a.end()?;
        let start = std::time::Instant::now();
        let r = self.fs.mount(path);
        let (res, status) = match r {
            Ok(fh) => (
                mountres3::Ok(mountres3_ok {
                    fhandle: fhandle3(Opaque::owned(self.fs.wire(&fh).data.into_owned())),
                    auth_flavors: FLAVORS.to_vec(),
                }),
                "ok",
            ),
            Err(s) => (mountres3::Err(s), mount_label(s)),
        };
        self.registry
            .record_op("MNT", "vfs", status, start.elapsed(), 0);
        put(out, &res);
        Ok(status)
    }

    /// UMNT: nothing to forget.
    pub(super) fn umnt(&self, a: &mut Args<'_>) -> Answer {
        let _path = a.opaque(nfs3_types::mount::MNTPATHLEN)?;
        a.end()?;
        Ok("ok")
    }

    pub(super) fn mount_export(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        a.end()?;
        let served = self.fs.list();
        let list: exports<'_, '_> = List(
            served
                .iter()
                .map(|(path, clients)| export_node {
                    ex_dir: dirpath(Opaque::borrowed(path.as_bytes())),
                    ex_groups: List(
                        clients
                            .iter()
                            .map(|c| nfs3_types::mount::name(Opaque::borrowed(c.as_bytes())))
                            .collect(),
                    ),
                })
                .collect(),
        );
        put(out, &list);
        Ok("ok")
    }

    /// SET / UNSET: this portmapper registers nothing for others.
    pub(super) fn pmap_set(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let _m: mapping = a.xdr()?;
        a.end()?;
        word(out, 0);
        Ok("ok")
    }

    pub(super) fn pmap_getport(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let ours = |prog: u32, vers: u32, prot: u32| {
            (prog == NFS_PROG || prog == MOUNT_PROG) && vers == 3 && prot == IPPROTO_TCP
        };
        let m: mapping = a.xdr()?;
        a.end()?;
        let port = if ours(m.prog, m.vers, m.prot) {
            u32::from(self.port)
        } else {
            0
        };
        word(out, port);
        Ok("ok")
    }

    pub(super) fn pmap_dump(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        a.end()?;
        let port = u32::from(self.port);
        let list: pmaplist = List(
            [NFS_PROG, MOUNT_PROG]
                .into_iter()
                .map(|prog| mapping {
                    prog,
                    vers: 3,
                    prot: IPPROTO_TCP,
                    port,
                })
                .collect(),
        );
        put(out, &list);
        Ok("ok")
    }
}

/// The status label of a MOUNT result (as `rpc::reply_status` names them).
fn mount_label(s: mountstat3) -> &'static str {
    match s {
        mountstat3::MNT3_OK => "ok",
        mountstat3::MNT3ERR_PERM => "MNT3ERR_PERM",
        mountstat3::MNT3ERR_NOENT => "MNT3ERR_NOENT",
        mountstat3::MNT3ERR_ACCES => "MNT3ERR_ACCES",
        mountstat3::MNT3ERR_NOTDIR => "MNT3ERR_NOTDIR",
        mountstat3::MNT3ERR_INVAL => "MNT3ERR_INVAL",
        _ => "MNT3ERR_OTHER",
    }
}

//! The file-system calls of every protocol, routed to the export a handle belongs to:
//! the `DirFs` calls NFSv3, MOUNT and NFSv4 make, each on a view of the handle's export
//! with the calling client's options, acting as the caller after that export's
//! squashing — or answered from the NFSv4 pseudo-filesystem.
//!
//! A handle of an export that is gone, or that is not exported to the calling client,
//! is `STALE` (what kernel nfsd answers when it finds no export for the client); a
//! `secure` export refuses calls from ports above 1023 with `PERM`. NFSv3 never sees
//! pseudo directories (knfsd's v4root exports are NFSv4-only).

use std::sync::Arc;
use std::time::Instant;

use nfs3_types::mount::mountstat3;
use nfs3_types::nfs3::{
    FSINFO3resok, FSSTAT3resok, PATHCONF3resok, createhow3, fattr3, ftype3, mknoddata3, nfs_fh3,
    nfsstat3, nfstime3, post_op_attr, sattr3, stable_how, wcc_data,
};

use super::export::Export;
use super::file::Options;
use super::pseudo::{Child, Pseudo};
use super::table::{Table, V4Root};
use super::{Exports, calling};
use crate::fs::{DirIter, Entry, Fh, NfsResult};
use crate::identity::{Caller, Scope};
use crate::sys::SetTime;

type Changed<T> = (NfsResult<T>, wcc_data);

/// Where a handle leads, for the calling client.
enum At {
    Export(Entered),
    /// A pseudo directory (its node).
    Pseudo(usize),
}

/// An export entered by the calling client: its index, a view with this client's
/// options, and the caller's identity after its squashing (in effect while this lives).
struct Entered {
    index: usize,
    fs: crate::fs::DirFs,
    options: Options,
    _scope: Option<Scope>,
}

impl Exports {
    /// Where `fh` leads for the calling client, or the status it gets.
    fn at(&self, table: &Table, fh: &Fh) -> NfsResult<At> {
        let from = calling();
        if let V4Root::Pseudo(p) = &table.v4
            && let Some(node) = p.by_handle(fh)
        {
            return if from.v4 && visible(table, p, node) {
                Ok(At::Pseudo(node))
            } else {
                Err(nfsstat3::NFS3ERR_STALE)
            };
        }
        let (index, export) = table.by_handle(fh).ok_or_else(|| unknown(table, fh))?;
        enter(export, index).map(At::Export)
    }

    /// The root of export `index`, entered by the calling client.
    fn at_root(&self, table: &Table, index: usize) -> NfsResult<(Fh, Entered)> {
        let export = &table.exports[index];
        Ok((export.fs.root_fh(), enter(export, index)?))
    }

    /// Decodes a client's handle: one of an export served to this client, or (NFSv4) a
    /// visible pseudo directory.
    pub fn decode(&self, data: &[u8]) -> NfsResult<Fh> {
        let fh = Fh::from_wire(data)?;
        self.at(&self.table(), &fh)?;
        Ok(fh)
    }

    /// The wire form of a handle.
    pub fn wire(&self, fh: &Fh) -> nfs_fh3 {
        fh.to_nfs()
    }

    /// The NFSv4 root (PUTROOTFH): the root export, or the pseudo-filesystem's root.
    pub fn root_fh(&self) -> Fh {
        let table = self.table();
        match &table.v4 {
            V4Root::Export(i) => table.exports[*i].fs.root_fh(),
            V4Root::Pseudo(p) => p.fh(0),
        }
    }

    /// GETATTR.
    pub fn attr(&self, fh: &Fh) -> NfsResult<fattr3> {
        let table = self.table();
        match self.at(&table, fh)? {
            At::Export(x) => x.fs.attr(fh),
            At::Pseudo(node) => Ok(pseudo(&table).attr(node, table.loaded)),
        }
    }

    /// The ACCESS bits `caller` (as sent) has on an object with attributes `attr`,
    /// after the squashing of `fh`'s export for this client; a read-only export or a
    /// pseudo directory allows no change.
    pub fn allowed(&self, fh: &Fh, attr: &fattr3, caller: &Caller) -> u32 {
        let (read_only, squash) = match self.at(&self.table(), fh) {
            Ok(At::Export(x)) => (x.options.read_only, x.options.squash),
            Ok(At::Pseudo(_)) => (true, crate::identity::Squash::Root),
            Err(_) => return 0,
        };
        crate::fs::allowed(attr, &caller.clone().squashed(squash), read_only)
    }

    /// Whether the calling client may change nothing where `fh` is.
    pub fn read_only_at(&self, fh: &Fh) -> bool {
        match self.at(&self.table(), fh) {
            Ok(At::Export(x)) => x.options.read_only,
            _ => true,
        }
    }

    /// LOOKUP; over NFSv4 also the pseudo-filesystem, `..` of an export's root, and the
    /// crossing into an export whose root the name is.
    pub fn lookup(&self, dir: &Fh, name: &[u8]) -> (NfsResult<(Fh, fattr3)>, post_op_attr) {
        let table = self.table();
        match self.at(&table, dir) {
            Err(s) => (Err(s), post_op_attr::None),
            Ok(At::Pseudo(node)) => {
                let p = pseudo(&table);
                let here = post_op_attr::Some(p.attr(node, table.loaded));
                (self.pseudo_lookup(&table, p, node, name), here)
            }
            Ok(At::Export(Entered { index, fs, .. })) => {
                let from = calling();
                if from.v4 && name == b".." && *dir == fs.root_fh() {
                    let here = fs.attr(dir).map_or(post_op_attr::None, post_op_attr::Some);
                    return (self.v4_parent(&table, index), here);
                }
                let (r, here) = fs.lookup(dir, name);
                if !from.v4 || !table.has_nested(index) || name == b".." || name == b"." {
                    return (r, here);
                }
                let maybe_mount = match &r {
                    Ok((_, a)) => a.type_ == ftype3::NF3DIR,
                    Err(s) => *s == nfsstat3::NFS3ERR_ACCES,
                };
                if maybe_mount
                    && let Ok(id) = fs.child_id(dir, name)
                    && let Some((j, _)) = table.by_root(id)
                    && j != index
                    && let Ok((root, _at)) = self.at_root(&table, j)
                {
                    let attr = table.exports[j].fs.attr(&root);
                    return (attr.map(|a| (root, a)), here);
                }
                (r, here)
            }
        }
    }

    /// A name in a pseudo directory: `.`, `..`, a pseudo directory or an export's root
    /// the client may see.
    fn pseudo_lookup(
        &self,
        table: &Table,
        p: &Pseudo,
        node: usize,
        name: &[u8],
    ) -> NfsResult<(Fh, fattr3)> {
        let here = p.node(node);
        let target = match name {
            b"." => Child::Dir(node),
            b".." => Child::Dir(here.parent),
            _ => here
                .children
                .iter()
                .find(|(n, _)| n.as_bytes() == name)
                .map(|(_, c)| *c)
                .ok_or(nfsstat3::NFS3ERR_NOENT)?,
        };
        match target {
            Child::Dir(d) if visible(table, p, d) => Ok((p.fh(d), p.attr(d, table.loaded))),
            Child::Dir(_) => Err(nfsstat3::NFS3ERR_NOENT),
            Child::Export(e) => {
                let (root, x) = self
                    .at_root(table, e)
                    .map_err(|_| nfsstat3::NFS3ERR_NOENT)?;
                Ok((root, x.fs.attr(&root)?))
            }
        }
    }

    /// NFSv4's `..` of export `index`'s root: the pseudo directory above it, or the
    /// directory of the export it is nested in.
    fn v4_parent(&self, table: &Table, index: usize) -> NfsResult<(Fh, fattr3)> {
        if let V4Root::Pseudo(p) = &table.v4
            && let Some(node) = p.parent_of_export(index)
        {
            return Ok((p.fh(node), p.attr(node, table.loaded)));
        }
        let Some(outer) = table.parent_of(index) else {
            return Err(nfsstat3::NFS3ERR_NOENT);
        };
        let (_, x) = self.at_root(table, outer)?;
        let fs = &x.fs;
        let inner = &table.exports[index].line.path;
        let outer_path = &table.exports[outer].line.path;
        let rel = &inner[outer_path.len().min(inner.len())..];
        let parent = rel.rsplit_once('/').map_or("", |(p, _)| p);
        let fh = fs
            .mount(format!("/{parent}").as_bytes())
            .map_err(|_| nfsstat3::NFS3ERR_NOENT)?;
        Ok((fh, fs.attr(&fh)?))
    }

    /// READDIR / READDIRPLUS (and NFSv4 READDIR): a pseudo directory lists what the
    /// client may see; an export's directory shows nested exports' roots over NFSv4.
    /// READDIRPLUS is `NOTSUPP` for an NFSv3 client with `nordirplus`.
    pub fn dir_iter(&self, dir: &Fh, cookie: u64, plus: bool) -> NfsResult<DirIter> {
        let table = self.table();
        let from = calling();
        match self.at(&table, dir)? {
            At::Pseudo(node) => Ok(self.pseudo_listing(&table, node, cookie)),
            At::Export(Entered {
                index, fs, options, ..
            }) => {
                if plus && !from.v4 && !options.readdirplus {
                    return Err(nfsstat3::NFS3ERR_NOTSUPP);
                }
                let it = fs.dir_iter(dir, cookie, plus)?;
                if !from.v4 || !table.has_nested(index) {
                    return Ok(it);
                }
                let mut roots = std::collections::HashMap::new();
                for (j, e) in table.exports.iter().enumerate() {
                    if j != index
                        && let Ok((root, _at)) = self.at_root(&table, j)
                        && let Ok(a) = e.fs.attr(&root)
                    {
                        roots.insert(e.fs.root_id(), (a, root));
                    }
                }
                Ok(it.crossing(Arc::new(roots)))
            }
        }
    }

    fn pseudo_listing(&self, table: &Table, node: usize, cookie: u64) -> DirIter {
        let p = pseudo(table);
        let mut entries = Vec::new();
        for (k, (name, _)) in p.node(node).children.iter().enumerate() {
            let found = self.pseudo_lookup(table, p, node, name.as_bytes());
            if let Ok((fh, attr)) = found {
                entries.push(Entry {
                    name: name.as_bytes().to_vec(),
                    fileid: attr.fileid,
                    // 0, 1 and 2 are reserved (the start, `.` and `..` in NFSv4).
                    cookie: k as u64 + 3,
                    plus: Some((attr, Some(fh))),
                });
            }
        }
        DirIter::listed(p.attr(node, table.loaded), entries, cookie)
    }

    /// READLINK.
    pub fn readlink(&self, fh: &Fh) -> (NfsResult<Vec<u8>>, post_op_attr) {
        let table = self.table();
        match self.at(&table, fh) {
            Ok(At::Export(x)) => x.fs.readlink(fh),
            Ok(At::Pseudo(n)) => (
                Err(nfsstat3::NFS3ERR_INVAL),
                post_op_attr::Some(pseudo(&table).attr(n, table.loaded)),
            ),
            Err(s) => (Err(s), post_op_attr::None),
        }
    }

    /// READ's copy path.
    pub fn read_into(
        &self,
        fh: &Fh,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> Result<(fattr3, u32, bool), (nfsstat3, Option<fattr3>)> {
        match self.at(&self.table(), fh) {
            Ok(At::Export(x)) => x.fs.read_into(fh, offset, count, out),
            Ok(At::Pseudo(_)) => Err((nfsstat3::NFS3ERR_ISDIR, None)),
            Err(s) => Err((s, None)),
        }
    }

    /// READ's sendfile path: the attributes and the open file.
    pub fn open_read(
        &self,
        fh: &Fh,
    ) -> Result<(fattr3, Arc<std::fs::File>), (nfsstat3, Option<fattr3>)> {
        match self.at(&self.table(), fh) {
            Ok(At::Export(x)) => x.fs.open_read(fh),
            Ok(At::Pseudo(_)) => Err((nfsstat3::NFS3ERR_ISDIR, None)),
            Err(s) => Err((s, None)),
        }
    }

    /// Records a sendfile READ's file-system phase into the export's registry.
    pub fn record_read(&self, fh: &Fh, start: Instant, r: Result<u64, nfsstat3>) {
        if let Some((_, e)) = self.table().by_handle(fh) {
            e.fs.record_read(start, r);
        }
    }

    /// FSSTAT (NFSv4's space and file counts too); a pseudo directory has none.
    pub fn fsstat(&self, fh: &Fh) -> NfsResult<FSSTAT3resok> {
        let table = self.table();
        match self.at(&table, fh)? {
            At::Export(x) => x.fs.fsstat(fh),
            At::Pseudo(n) => Ok(FSSTAT3resok {
                obj_attributes: post_op_attr::Some(pseudo(&table).attr(n, table.loaded)),
                tbytes: 0,
                fbytes: 0,
                abytes: 0,
                tfiles: 0,
                ffiles: 0,
                afiles: 0,
                invarsec: 0,
            }),
        }
    }

    /// FSINFO (NFSv3 only: never a pseudo directory).
    pub fn fsinfo(&self, fh: &Fh) -> NfsResult<FSINFO3resok> {
        self.export(fh, |fs| fs.fsinfo(fh))
    }

    /// PATHCONF (NFSv3 only).
    pub fn pathconf(&self, fh: &Fh) -> NfsResult<PATHCONF3resok> {
        self.export(fh, |fs| fs.pathconf(fh))
    }

    /// SETATTR (a pseudo directory is read-only).
    pub fn setattr(&self, fh: &Fh, attr: &sattr3, guard: Option<nfstime3>) -> Changed<()> {
        self.change(fh, |fs| fs.setattr(fh, attr, guard))
    }

    /// WRITE.
    pub fn write(&self, fh: &Fh, offset: u64, data: &[u8], how: stable_how) -> Changed<stable_how> {
        match self.at(&self.table(), fh) {
            Ok(At::Export(x)) => x.fs.write(fh, offset, data, how),
            Ok(At::Pseudo(_)) => (Err(nfsstat3::NFS3ERR_ISDIR), wcc_data::default()),
            Err(s) => (Err(s), wcc_data::default()),
        }
    }

    /// COMMIT.
    pub fn commit(&self, fh: &Fh) -> Changed<()> {
        self.change(fh, |fs| fs.commit(fh))
    }

    /// CREATE.
    pub fn create(&self, dir: &Fh, name: &[u8], how: &createhow3) -> Changed<(Fh, fattr3)> {
        self.change(dir, |fs| fs.create(dir, name, how))
    }

    /// MKDIR.
    pub fn mkdir(&self, dir: &Fh, name: &[u8], attr: &sattr3) -> Changed<(Fh, fattr3)> {
        self.change(dir, |fs| fs.mkdir(dir, name, attr))
    }

    /// SYMLINK.
    pub fn symlink(&self, dir: &Fh, name: &[u8], target: &[u8]) -> Changed<(Fh, fattr3)> {
        self.change(dir, |fs| fs.symlink(dir, name, target))
    }

    /// MKNOD.
    pub fn mknod(&self, dir: &Fh, name: &[u8], what: &mknoddata3) -> Changed<(Fh, fattr3)> {
        self.change(dir, |fs| fs.mknod(dir, name, what))
    }

    /// REMOVE and RMDIR.
    pub fn remove(&self, dir: &Fh, name: &[u8], rmdir: bool) -> Changed<()> {
        self.change(dir, |fs| fs.remove(dir, name, rmdir))
    }

    /// RENAME, within one export (`XDEV` across two).
    pub fn rename(
        &self,
        from: &Fh,
        from_name: &[u8],
        to: &Fh,
        to_name: &[u8],
    ) -> (NfsResult<()>, wcc_data, wcc_data) {
        let none = wcc_data::default;
        match self.two(from, to) {
            Ok(x) => x.fs.rename(from, from_name, to, to_name),
            Err(s) => (Err(s), none(), none()),
        }
    }

    /// LINK, within one export (`XDEV` across two).
    pub fn link(
        &self,
        file: &Fh,
        dir: &Fh,
        name: &[u8],
    ) -> (NfsResult<()>, post_op_attr, wcc_data) {
        match self.two(file, dir) {
            Ok(x) => x.fs.link(file, dir, name),
            Err(s) => (Err(s), post_op_attr::None, wcc_data::default()),
        }
    }

    /// The object's stat, times whole (NFSv4's 64-bit seconds); a pseudo directory has
    /// none on disk (`STALE`: its attributes' times always fit).
    pub fn stat(&self, fh: &Fh) -> NfsResult<crate::sys::Stat> {
        self.export(fh, |fs| fs.stat(fh))
    }

    /// NFSv4 SETATTR's times outside NFSv3's range (a pseudo directory is read-only).
    pub fn set_times(&self, fh: &Fh, atime: SetTime, mtime: SetTime) -> NfsResult<()> {
        self.change(fh, |fs| {
            (fs.set_times(fh, atime, mtime), wcc_data::default())
        })
        .0
    }

    /// NFSv4.2 SEEK (a pseudo directory is a directory: `ISDIR`).
    pub fn seek(&self, fh: &Fh, offset: u64, hole: bool) -> NfsResult<Option<u64>> {
        match self.at(&self.table(), fh)? {
            At::Export(x) => x.fs.seek(fh, offset, hole),
            At::Pseudo(_) => Err(nfsstat3::NFS3ERR_ISDIR),
        }
    }

    /// NFSv4.2 ALLOCATE and DEALLOCATE (`ROFS` on a read-only export for this client
    /// and in the pseudo-filesystem).
    pub fn allocate(&self, fh: &Fh, offset: u64, len: u64, punch: bool) -> NfsResult<()> {
        self.change(fh, |fs| {
            (fs.allocate(fh, offset, len, punch), wcc_data::default())
        })
        .0
    }

    /// NFSv4.2 COPY, within one export (`XDEV` across two, as RENAME and LINK; `ROFS`
    /// when the client may not change the export).
    pub fn copy_range(
        &self,
        src: &Fh,
        src_offset: u64,
        dst: &Fh,
        dst_offset: u64,
        count: u64,
    ) -> NfsResult<u64> {
        self.two(src, dst)?
            .fs
            .copy_range(src, src_offset, dst, dst_offset, count)
    }

    /// MOUNT's MNT for the calling client.
    pub fn mount(&self, path: &[u8]) -> Result<Fh, mountstat3> {
        self.table().mount(path, calling().peer)
    }

    /// Whether a connection from `ip` is served at all (see `Table::admits`).
    pub fn admits(&self, ip: std::net::IpAddr) -> bool {
        self.table().admits(ip)
    }

    /// A call on an export only (a pseudo directory is `STALE` for it).
    fn export<T>(
        &self,
        fh: &Fh,
        f: impl FnOnce(&crate::fs::DirFs) -> NfsResult<T>,
    ) -> NfsResult<T> {
        match self.at(&self.table(), fh)? {
            At::Export(x) => f(&x.fs),
            At::Pseudo(_) => Err(nfsstat3::NFS3ERR_STALE),
        }
    }

    /// A change: on an export, or `ROFS` in the pseudo-filesystem.
    fn change<T>(&self, fh: &Fh, f: impl FnOnce(&crate::fs::DirFs) -> Changed<T>) -> Changed<T> {
        match self.at(&self.table(), fh) {
            Ok(At::Export(x)) => f(&x.fs),
            Ok(At::Pseudo(_)) => (Err(nfsstat3::NFS3ERR_ROFS), wcc_data::default()),
            Err(s) => (Err(s), wcc_data::default()),
        }
    }

    /// The export view two handles share (the caller acting as its squashing).
    fn two(&self, a: &Fh, b: &Fh) -> NfsResult<Entered> {
        let table = self.table();
        let first = self.at(&table, a)?;
        let second = self.at(&table, b)?;
        let same = match (&first, &second) {
            (At::Export(x), At::Export(y)) => Some(x.index == y.index),
            _ => None,
        };
        // Scopes end in the order they began: the second first.
        drop(second);
        match (same, first) {
            (Some(true), At::Export(x)) => Ok(x),
            (Some(false), _) => Err(nfsstat3::NFS3ERR_XDEV),
            _ => Err(nfsstat3::NFS3ERR_ROFS),
        }
    }
}

/// Export `index` for the calling client: its view, and the caller acting as its
/// squashing; `STALE` when it is not exported to the client, `PERM` from a port above
/// 1023 on a `secure` export.
fn enter(export: &Export, index: usize) -> NfsResult<Entered> {
    let from = calling();
    let options = export
        .options_for(from.peer.map(|p| p.ip()))
        .ok_or(nfsstat3::NFS3ERR_STALE)?;
    if options.secure && from.peer.is_none_or(|p| p.port() >= 1024) {
        return Err(nfsstat3::NFS3ERR_PERM);
    }
    let scope = crate::identity::current().map(|c| Scope::enter(c.squashed(options.squash)));
    Ok(Entered {
        index,
        fs: export.view(&options),
        options,
        _scope: scope,
    })
}

/// The status of a handle of no export served: `STALE` (its export is gone, as after a
/// reload; kernel nfsd answers so when it finds no export) unless it cannot have been
/// given at all — an even generation (export generations are odd), or with the
/// one-export flags a generation above the export's, as before exports files.
fn unknown(table: &Table, fh: &Fh) -> nfsstat3 {
    let never = match table.origin {
        super::table::Origin::Flags => fh.generation() > table.exports[0].fs.generation(),
        super::table::Origin::File(_) => fh.generation() & 1 == 0,
    };
    if never {
        nfsstat3::NFS3ERR_BADHANDLE
    } else {
        nfsstat3::NFS3ERR_STALE
    }
}

/// Whether pseudo directory `node` leads to an export the calling client may use (the
/// root always shows, empty when none).
fn visible(table: &Table, p: &Pseudo, node: usize) -> bool {
    let peer = calling().peer.map(|a| a.ip());
    node == 0
        || p.node(node)
            .exports
            .iter()
            .any(|&e| table.exports[e].options_for(peer).is_some())
}

/// The table's pseudo-filesystem (only called where a pseudo handle was found in it).
fn pseudo(table: &Table) -> &Pseudo {
    match &table.v4 {
        V4Root::Pseudo(p) => p,
        V4Root::Export(_) => unreachable!("a pseudo handle in a table without a pseudo-filesystem"),
    }
}

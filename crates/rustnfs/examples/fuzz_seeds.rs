//! Writes the rustnfs fuzz targets' seed corpora: `cargo run -p rustnfs --example
//! fuzz_seeds -- fuzz/seeds/rustnfs_request [fuzz/seeds/rustnfs_nfs4]` (the second
//! directory gets the NFSv4 COMPOUND seeds).

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .ok_or_else(|| std::io::Error::other("usage: fuzz_seeds DIR [NFS4_DIR]"))?;
    write(&dir, &rustnfs::fuzzing::seeds())?;
    if let Some(v4) = args.next() {
        write(&v4, &rustnfs::fuzzing::nfs4_seeds())?;
    }
    Ok(())
}

fn write(dir: &str, seeds: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, bytes) in seeds {
        std::fs::write(std::path::Path::new(dir).join(name), bytes)?;
    }
    println!("{} seeds written to {dir}", seeds.len());
    Ok(())
}

//! Writes the `rustnfs_request` fuzz target's seed corpus: `cargo run -p rustnfs --example fuzz_seeds -- fuzz/seeds/rustnfs_request`.

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .ok_or_else(|| std::io::Error::other("usage: fuzz_seeds DIR"))?;
    std::fs::create_dir_all(&dir)?;
    let seeds = rustnfs::fuzzing::seeds();
    for (name, bytes) in &seeds {
        std::fs::write(std::path::Path::new(&dir).join(name), bytes)?;
    }
    println!("{} seeds written to {dir}", seeds.len());
    Ok(())
}

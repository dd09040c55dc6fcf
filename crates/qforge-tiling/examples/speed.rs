//! Time `select` on a few shapes: `cargo run -p qforge-tiling --release --example speed`.
use qforge_tiling::{Device, OutDType, Problem, WeightLayout, select};
fn main() -> Result<(), Box<dyn std::error::Error>> {
    for dev in ["h100", "rtx4090", "t4"] {
        let d = Device::builtin(dev)?;
        for (m, n, k) in [(1u64, 4096u64, 4096u64), (16, 4096, 4096), (4096, 14336, 4096), (7, 300, 1 << 20)] {
            let p = Problem::f16(m, n, k, WeightLayout::dense(OutDType::F16))?;
            let iters = 2000;
            let t = std::time::Instant::now();
            for i in 0..iters {
                std::hint::black_box(select(&Problem { n: p.n + i, ..p }, &d)?);
            }
            let c = select(&p, &d)?;
            println!(
                "{dev:8} {m:>5}x{n:>6}x{k:>8}: {:6.1} us/select ({} evaluated)",
                t.elapsed().as_secs_f64() * 1e6 / iters as f64,
                c.explanation.evaluated
            );
        }
    }
    Ok(())
}

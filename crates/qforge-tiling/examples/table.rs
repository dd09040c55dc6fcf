//! Print the chosen configs for typical LLM shapes (the table in docs/tiling.md).
//! `cargo run -p qforge-tiling --example table --release`

use qforge_tiling::{ActDType, Device, OutDType, Problem, WeightLayout, select};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let layouts = [
        ("q4_k", WeightLayout::lookup("q4_k", None)?, ActDType::F16),
        ("f16", WeightLayout::lookup("f16", None)?, ActDType::F16),
        ("fp8_e4m3", WeightLayout::lookup("fp8_e4m3", None)?, ActDType::Fp8),
    ];
    let nks = [(4096u64, 4096u64), (11008, 4096), (4096, 11008), (14336, 4096), (128256, 4096)];
    for dev in ["h100", "rtx4090"] {
        let d = Device::builtin(dev)?;
        println!("\n### {dev}\n");
        println!("| format | M | N | K | variant | block_m×n×k | stages | warps | split_k | smem | waves | eff | µs |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for (name, layout, act) in &layouts {
            for &(n, k) in &nks {
                for m in [1u64, 16, 128, 4096] {
                    let p = Problem::new(m, n, k, *layout, *act, OutDType::F16)?;
                    let c = select(&p, &d)?;
                    println!(
                        "| {name} | {m} | {n} | {k} | {} | {}×{}×{} | {} | {} | {} | {} | {:.2} | {:.0}% | {:.1} |",
                        c.variant.name(),
                        c.block_m,
                        c.block_n,
                        c.block_k,
                        c.stages,
                        c.warps,
                        c.split_k,
                        c.smem_bytes,
                        c.waves,
                        c.efficiency * 100.0,
                        c.predicted_us
                    );
                }
            }
        }
    }
    Ok(())
}

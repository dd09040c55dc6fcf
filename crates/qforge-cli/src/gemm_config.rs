//! `qforge gemm-config`: the GEMM tiling config qforge-tiling selects for a shape, format and
//! device, as a summary, an explanation or JSON; `--batch` reads "M N K" lines from stdin.

use crate::exit::{Classify, CliResult, bad_input};
use qforge_tiling::{ActDType, Config, OutDType, Planner, Problem, WeightLayout};
use std::io::{BufRead, Write};

pub struct GemmArgs<'a> {
    pub m: Option<u64>,
    pub n: Option<u64>,
    pub k: Option<u64>,
    pub format: &'a str,
    pub device: &'a str,
    pub act_dtype: Option<&'a str>,
    pub out_dtype: &'a str,
    pub group_size: Option<u64>,
    pub json: bool,
    pub explain: bool,
    pub batch: bool,
}

/// The weight layout of a format name: f32 / f16 / bf16, or a registry format with its
/// group size applied (qforge-tiling reads the format's layout from the registry).
fn layout(format: &str, group_size: Option<u64>) -> CliResult<WeightLayout> {
    WeightLayout::lookup(format, group_size).map_err(|e| match e {
        qforge_tiling::TilingError::UnknownLayout { .. } => {
            bad_input(format!("unknown format '{format}' (see `qforge formats`; also f32, f16, bf16)"))
        }
        e => bad_input(e),
    })
}

/// Activations default to the format's natural pairing (its native dot's activations: fp8
/// for fp8 weights, int8 for int4g), f16 otherwise.
fn default_act(l: &WeightLayout) -> ActDType {
    l.native_act
}

fn json(c: &Config, p: &Problem, device: &str) -> serde_json::Value {
    let e = &c.explanation;
    let rejected: serde_json::Map<String, serde_json::Value> = qforge_tiling::Reject::ALL
        .iter()
        .zip(e.rejected)
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| (format!("{r:?}"), serde_json::json!(n)))
        .collect();
    let runner_ups: Vec<serde_json::Value> = e
        .runner_ups
        .iter()
        .flatten()
        .map(|r| {
            serde_json::json!({
                "variant": r.tile.variant.name(), "block_m": r.tile.bm, "block_n": r.tile.bn, "block_k": r.tile.bk,
                "stages": r.tile.stages, "warps": r.tile.warps, "split_k": r.split_k,
                "smem_bytes": r.smem_bytes, "predicted_us": r.predicted_us,
            })
        })
        .collect();
    serde_json::json!({
        "m": p.m, "n": p.n, "k": p.k,
        "format": p.layout.name, "group_size": (p.layout.kind == qforge_tiling::LayoutKind::Group).then_some(p.layout.k_block),
        "act_dtype": p.act.name(), "out_dtype": p.out.name(), "device": device,
        "variant": c.variant.name(),
        "block_m": c.block_m, "block_n": c.block_n, "block_k": c.block_k,
        "stages": c.stages, "warps": c.warps, "split_k": c.split_k,
        "raster": match c.raster { qforge_tiling::Raster::AlongM => "along_m", qforge_tiling::Raster::AlongN => "along_n" },
        "swizzle": c.swizzle, "persistent": c.persistent, "grid": c.grid,
        "mma": c.mma.map(|k| k.name()),
        "smem_bytes": c.smem_bytes, "regs_per_thread": c.regs_per_thread, "ctas_per_sm": c.ctas_per_sm,
        "tiles": c.tiles, "waves": c.waves, "wave_efficiency": c.wave_efficiency,
        "efficiency": c.efficiency, "predicted_us": c.predicted_us, "bound": c.bound.name(),
        "evaluated": e.evaluated, "rejected": rejected, "runner_ups": runner_ups, "ideal_us": e.ideal_us,
    })
}

fn parse_dim(s: &str, what: &str, line: usize) -> CliResult<u64> {
    s.parse::<u64>().map_err(|_| bad_input(format!("stdin line {line}: {what} '{s}' is not a positive integer")))
}

pub fn gemm_config(a: GemmArgs) -> CliResult<()> {
    let layout = layout(a.format, a.group_size)?;
    let act = match a.act_dtype {
        Some(s) => s.parse::<ActDType>().input()?,
        None => default_act(&layout),
    };
    let out_dtype = a.out_dtype.parse::<OutDType>().input()?;
    let planner = Planner::builtin(a.device).input()?;
    let dev = planner.device().name.clone();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if a.batch {
        if a.m.is_some() || a.n.is_some() || a.k.is_some() {
            return Err(bad_input("--batch reads M N K from stdin; do not also give --m/--n/--k"));
        }
        let stdin = std::io::stdin().lock();
        for (i, line) in stdin.lines().enumerate() {
            let line = line.input()?;
            let body = line.split('#').next().unwrap_or("").trim();
            if body.is_empty() {
                continue;
            }
            let f: Vec<&str> = body.split_whitespace().collect();
            if f.len() != 3 {
                return Err(bad_input(format!("stdin line {}: expected \"M N K\", got {body:?}", i + 1)));
            }
            let (m, n, k) = (parse_dim(f[0], "M", i + 1)?, parse_dim(f[1], "N", i + 1)?, parse_dim(f[2], "K", i + 1)?);
            let p = Problem::new(m, n, k, layout, act, out_dtype)
                .map_err(|e| bad_input(format!("stdin line {}: {e}", i + 1)))?;
            let c = planner.select(&p).input()?;
            serde_json::to_writer(&mut out, &json(&c, &p, &dev)).failed()?;
            out.write_all(b"\n").failed()?;
        }
        return out.flush().failed();
    }
    let dim = |v: Option<u64>, flag: &str| v.ok_or_else(|| bad_input(format!("{flag} is required (or use --batch)")));
    let p = Problem::new(dim(a.m, "--m")?, dim(a.n, "--n")?, dim(a.k, "--k")?, layout, act, out_dtype).input()?;
    let c = planner.select(&p).input()?;
    if a.json {
        let mut v = json(&c, &p, &dev);
        if a.explain {
            v["explanation"] = serde_json::json!(c.explain());
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&v).failed()?).failed()?;
    } else {
        writeln!(
            out,
            "{}x{}x{} {} ({} act, {} out) on {}: {}",
            p.m,
            p.n,
            p.k,
            p.layout,
            p.act.name(),
            p.out.name(),
            dev,
            c.summary()
        )
        .failed()?;
        if a.explain {
            writeln!(out, "{}", c.explain()).failed()?;
        }
    }
    out.flush().failed()
}

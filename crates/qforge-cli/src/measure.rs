//! What `bench` measures with, on either device: the benchmark data and the timing loop.

use crate::exit::CliResult;
use std::time::{Duration, Instant};

/// Deterministic bell-shaped test data (qforge-core's shared generator, fixed seed).
pub(crate) fn data(n: usize) -> Vec<f32> {
    qforge_core::rand::pseudo_gaussian(n, 0x2545_f491_4f6c_dd1d)
}

/// Run `f` repeatedly for at least `min` (and at least 3 times); the median time per run.
pub(crate) fn time(min: Duration, mut f: impl FnMut() -> CliResult<()>) -> CliResult<(f64, usize)> {
    f()?; // warm-up
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 3 || (start.elapsed() < min && times.len() < 1000) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], times.len()))
}

//! Shared by the GEMM tests.
#[allow(dead_code)]
pub mod a8_ref;
#[allow(dead_code)]
pub mod fp8_ref;
#[allow(dead_code)] // not every test binary uses every helper
pub mod gemm_ref;
#[allow(dead_code)]
pub mod q8_ref;

use qforge_core::{Format, Layout, QuantTensor, Shape};
use std::cell::RefCell;
use std::collections::HashMap;

/// A test's weights: `qforge_golden::signal(n · k, seed)` quantized to `f`, N × K. Each
/// thread quantizes a shape once and keeps it while it stays on one format: the tests check
/// every shape with several instances, input / output types and K splits, and quantizing
/// them again for each (the I-quants' grid searches above all) was half of the host GEMM
/// tests' time. A thread's next format drops the last one's weights. A format is its name
/// and its layout: int4g's variants (group size, scale dtype) share one name.
#[allow(dead_code)] // not every test binary uses every helper
pub fn weights(f: &'static dyn Format, n: usize, k: usize, seed: u64) -> QuantTensor<'static> {
    type Cache = (Option<(&'static str, Layout)>, HashMap<(usize, usize, u64), QuantTensor<'static>>);
    thread_local! {
        static CACHE: RefCell<Cache> = RefCell::new((None, HashMap::new()));
    }
    CACHE.with_borrow_mut(|(format, cached)| {
        let this = Some((f.desc().name, f.layout()));
        if *format != this {
            *format = this;
            cached.clear();
        }
        cached
            .entry((n, k, seed))
            .or_insert_with(|| {
                let x = qforge_golden::signal(n * k, seed);
                qforge_cpu::quantize(f, Shape::new([n, k]).unwrap(), &x, None).unwrap()
            })
            .clone()
    })
}

//! Any bytes through the safetensors reader and the model view (fp8 companions included),
//! and every tensor decoded: a typed error or a value, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qforge_io::{Container, ModelFile, decode_f32};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = ModelFile::parse(data, Container::Safetensors) {
        for t in &m.tensors {
            let _ = decode_f32(t);
            let _ = t.quant_tensor();
        }
    }
});

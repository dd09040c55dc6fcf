//! Any bytes through the GGUF reader, the model view, the value decoders and the imatrix
//! reader: a typed error or a value, never a panic, a hang or an unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qforge_io::{GgufFile, ModelFile, decode_f32, imatrix};

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = GgufFile::parse(data) {
        for (_, v) in &g.metadata {
            let _ = v.to_json(64);
        }
        for t in &g.tensors {
            let _ = g.quant_tensor(t);
        }
        if let Ok(m) = ModelFile::from_gguf(g) {
            for t in &m.tensors {
                let _ = decode_f32(t);
            }
        }
    }
    let _ = imatrix::parse(data);
});

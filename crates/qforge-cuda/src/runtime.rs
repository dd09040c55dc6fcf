//! The CUDA runtime over cudarc (feature `cuda`).

include!(concat!(env!("OUT_DIR"), "/modules.rs"));

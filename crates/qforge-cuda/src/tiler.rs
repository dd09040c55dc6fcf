//! The fused GEMM's configs come from qforge-tiling: the tiler's device description is read
//! from the CUDA device's attributes at run time, and [`qforge_tiling::select_fused`] picks
//! the instance (of `codegen::FUSED_GEMM_TILES`) and the split-k count for each shape.

use crate::CudaError;
use crate::runtime::{Cuda, DeviceQuantTensor, driver};
use cudarc::driver::sys::CUdevice_attribute as A;
use qforge_core::DType;
use qforge_tiling::{
    ActDType, Config, CudaProperties, Device, FUSED_GEMM_TILES, FusedTile, OutDType, Planner, Problem,
};
use qforge_tiling::{TilingError, WeightLayout};

/// [`CudaProperties`] from a device's name, compute capability and attributes (`attr` reads
/// one `CU_DEVICE_ATTRIBUTE_*`): everything qforge-tiling's [`Device`] is built from.
pub(crate) fn properties(
    name: String,
    (major, minor): (i32, i32),
    attr: impl Fn(A) -> Result<i32, CudaError>,
) -> Result<CudaProperties, CudaError> {
    let u = |a: A| attr(a).map(|v| u32::try_from(v).unwrap_or(0));
    let b = |a: A| u(a).map(u64::from);
    let opt = |a: A| u(a).ok().filter(|v| *v > 0);
    Ok(CudaProperties {
        name,
        major: u32::try_from(major).unwrap_or(0),
        minor: u32::try_from(minor).unwrap_or(0),
        multi_processor_count: u(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        shared_mem_per_block: b(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        shared_mem_per_block_optin: b(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        shared_mem_per_multiprocessor: b(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        reserved_shared_mem_per_block: b(A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)?,
        regs_per_multiprocessor: u(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
        regs_per_block: u(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
        max_threads_per_multi_processor: u(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        max_threads_per_block: u(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_blocks_per_multi_processor: u(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
        l2_cache_size: b(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        max_grid_size_x: b(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
        clock_rate_khz: opt(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
        memory_clock_rate_khz: opt(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
        memory_bus_width_bits: opt(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
    })
}

/// The tiler's problem for the fused GEMM of `m` rows against `w` with `mma` inputs.
pub(crate) fn problem(w: &DeviceQuantTensor, m: usize, mma: DType, out: DType) -> Result<Problem, CudaError> {
    let act = if mma == DType::Bf16 { ActDType::Bf16 } else { ActDType::F16 };
    let out = match out {
        DType::F32 => OutDType::F32,
        DType::F16 => OutDType::F16,
        DType::Bf16 => OutDType::Bf16,
    };
    let layout = WeightLayout::from_format(w.format())?;
    Ok(Problem::new(m as u64, w.shape().rows() as u64, w.shape().cols() as u64, layout, act, out)?)
}

impl Cuda {
    /// qforge-tiling's description of this device, from its CUDA attributes (SM count,
    /// shared memory per block / SM, registers, threads, L2, clocks, compute capability).
    pub fn tiling_device(&self) -> Result<Device, CudaError> {
        let ctx = self.context();
        let cc = ctx.compute_capability().map_err(driver("compute capability"))?;
        let props = properties(self.name()?, cc, |a| ctx.attribute(a).map_err(driver("device attribute")))?;
        Ok(Device::from_properties(&props)?)
    }

    /// The planner over [`Cuda::tiling_device`] (built once).
    pub(crate) fn planner(&self) -> Result<&Planner, CudaError> {
        if let Some(p) = self.planner.get() {
            return Ok(p);
        }
        let p = Planner::new(self.tiling_device()?)?;
        Ok(self.planner.get_or_init(|| p))
    }

    /// The fused GEMM's config for `m` rows against `w` (`mma` inputs, `out` output) on this
    /// device: qforge-tiling's [`select_fused`](qforge_tiling::select_fused), and the index
    /// of its instance in `codegen::FUSED_GEMM_TILES`.
    ///
    /// # Errors
    /// `Tiling` (a zero dimension, or no instance for this device: below sm_80), `Driver`.
    pub fn gemm_config(
        &self,
        w: &DeviceQuantTensor,
        m: usize,
        mma: DType,
        out: DType,
    ) -> Result<(usize, Config), CudaError> {
        let c = self.planner()?.select_fused(&problem(w, m, mma, out)?)?;
        let tile = FusedTile::of(&c.tile())
            .and_then(|t| FUSED_GEMM_TILES.iter().position(|f| f == t))
            .ok_or_else(|| TilingError::InvalidConfig { reason: format!("{} is no fused instance", c.summary()) })?;
        Ok((tile, c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field comes from its own attribute: each attribute answers with its enum value,
    /// and the fields read back the attribute the CUDA documentation names for them.
    #[test]
    fn properties_read_the_right_attributes() {
        let p = properties("dev".into(), (9, 0), |a| Ok(a as i32)).unwrap();
        let v = |a: A| a as i32 as u64;
        assert_eq!((p.major, p.minor, p.name.as_str()), (9, 0, "dev"));
        assert_eq!(u64::from(p.multi_processor_count), v(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
        assert_eq!(p.shared_mem_per_block_optin, v(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
        assert_eq!(p.shared_mem_per_multiprocessor, v(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
        assert_eq!(p.reserved_shared_mem_per_block, v(A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK));
        assert_eq!(u64::from(p.regs_per_block), v(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK));
        assert_eq!(p.l2_cache_size, v(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
        assert_eq!(p.memory_bus_width_bits.map(u64::from), Some(v(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)));
        // A driver error is the caller's error, not a default.
        assert!(properties("dev".into(), (8, 0), |_| Err(CudaError::NotBuilt)).is_err());
    }

    /// An H100's attributes (its published values) give the tiler's built-in H100 limits, and
    /// a fused config that is one of the instances.
    #[test]
    fn an_h100s_attributes_describe_an_h100() {
        let p = properties("NVIDIA H100 80GB HBM3".into(), (9, 0), |a| {
            Ok(match a {
                A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT => 132,
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK => 49152,
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN => 232_448,
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR => 233_472,
                A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK => 1024,
                A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR
                | A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK => 65536,
                A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR => 2048,
                A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK => 1024,
                A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR => 32,
                A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE => 52_428_800,
                A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X => i32::MAX,
                A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE => 1_980_000,
                A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE => 2_619_000,
                A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH => 5120,
                _ => 0,
            })
        })
        .unwrap();
        let d = Device::from_properties(&p).unwrap();
        let h = Device::builtin("h100").unwrap();
        assert_eq!((d.cc_major, d.sm_count, d.smem_per_block_optin), (9, 132, h.smem_per_block_optin));
        let layout = WeightLayout::lookup("q4_k", None).unwrap();
        for m in [1, 16, 100, 4096] {
            let c = qforge_tiling::select_fused(&Problem::f16(m, 4096, 4096, layout).unwrap(), &d).unwrap();
            assert!(FusedTile::of(&c.tile()).is_some(), "{}", c.summary());
        }
    }
}

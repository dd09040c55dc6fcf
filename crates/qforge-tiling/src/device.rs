//! Device descriptions: the built-in table of real GPUs and a constructor from the CUDA
//! device properties queried at run time.

use crate::error::TilingError;

// The minimal `simple` kernel's needs: what every valid device must provide
// ([`Device::check`]), and what the config rules give the fallback candidate.
/// Tile edge of the minimal `simple` kernel (M, N and K).
pub const SIMPLE_TILE: u32 = 16;
/// Registers per thread the `simple` kernel needs.
pub const SIMPLE_REGS: u32 = 64;
/// Shared memory of the `simple` kernel with the widest dtypes (f32 activations, weights
/// decoded to f32): a device with less cannot run any GEMM and is refused.
pub const SIMPLE_SMEM_MAX: u64 = (SIMPLE_TILE * SIMPLE_TILE * 4 * 2) as u64;

/// Tensor-core multiply input types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaKind {
    /// IEEE f16 inputs, f32 accumulate.
    F16,
    /// bfloat16 inputs, f32 accumulate.
    Bf16,
    /// TensorFloat-32 (f32 in registers, 10-bit mantissa in the multiply), f32 accumulate.
    Tf32,
    /// Signed 8-bit integer inputs, i32 accumulate.
    Int8,
    /// 8-bit float (e4m3 / e5m2) inputs, f32 accumulate (sm_89+).
    Fp8,
}

impl MmaKind {
    /// Lower-case name: `f16`, `bf16`, `tf32`, `int8`, `fp8`.
    pub fn name(self) -> &'static str {
        match self {
            MmaKind::F16 => "f16",
            MmaKind::Bf16 => "bf16",
            MmaKind::Tf32 => "tf32",
            MmaKind::Int8 => "int8",
            MmaKind::Fp8 => "fp8",
        }
    }
    /// Bytes of one input element in shared memory.
    pub fn bytes(self) -> u64 {
        match self {
            MmaKind::F16 | MmaKind::Bf16 => 2,
            MmaKind::Tf32 => 4,
            MmaKind::Int8 | MmaKind::Fp8 => 1,
        }
    }
    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of [`MmaKind`]s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KindSet(pub u8);

impl KindSet {
    /// The empty set (no tensor cores of that kind of instruction).
    pub const NONE: KindSet = KindSet(0);
    /// The set holding exactly `kinds`.
    pub const fn of(kinds: &[MmaKind]) -> KindSet {
        let mut bits = 0u8;
        let mut i = 0;
        while i < kinds.len() {
            bits |= 1 << (kinds[i] as u8);
            i += 1;
        }
        KindSet(bits)
    }
    /// Whether `k` is in the set.
    pub fn contains(self, k: MmaKind) -> bool {
        self.0 & k.bit() != 0
    }
}

/// Which tensor-core instructions the device has, per input type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TensorCores {
    /// Warp-level `mma.sync` (sm_75: f16 m16n8k8 / int8 m8n8k16; sm_80+: m16n8k16 f16/bf16,
    /// m16n8k8 tf32, m16n8k32 int8; sm_89+: m16n8k32 fp8).
    pub mma_sync: KindSet,
    /// Warpgroup-level `wgmma.mma_async` (sm_90a): m64nNk16 f16/bf16, k8 tf32, k32 int8/fp8.
    pub wgmma: KindSet,
}

impl TensorCores {
    /// Tensor cores of a compute capability.
    pub fn for_cc(major: u32, minor: u32) -> TensorCores {
        use MmaKind::*;
        let cc = major * 10 + minor;
        let mma_sync = match cc {
            0..=74 => KindSet::NONE,
            75..=79 => KindSet::of(&[F16, Int8]),
            80..=88 => KindSet::of(&[F16, Bf16, Tf32, Int8]),
            _ => KindSet::of(&[F16, Bf16, Tf32, Int8, Fp8]),
        };
        let wgmma = if major == 9 { KindSet::of(&[F16, Bf16, Tf32, Int8, Fp8]) } else { KindSet::NONE };
        TensorCores { mma_sync, wgmma }
    }

    /// Instruction shape (m, n, k) for a kind; `wgmma` selects the warpgroup instruction
    /// (n is the largest; any multiple of 8 up to it is available). `sm75` selects Turing's.
    pub fn shape(kind: MmaKind, wgmma: bool, sm75: bool) -> [u32; 3] {
        let k = match kind {
            MmaKind::F16 | MmaKind::Bf16 => 16,
            MmaKind::Tf32 => 8,
            MmaKind::Int8 | MmaKind::Fp8 => 32,
        };
        match (wgmma, sm75, kind) {
            (true, _, _) => [64, 256, k],
            (false, true, MmaKind::Int8) => [8, 8, 16],
            (false, true, _) => [16, 8, 8],
            (false, false, _) => [16, 8, k],
        }
    }
}

/// Dense peak throughputs in TFLOP/s (TOP/s for int8), fp32 accumulate where it matters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peaks {
    /// Dense f16 / bf16 tensor-core peak, TFLOP/s (0 without tensor cores).
    pub f16: f64,
    /// Dense tf32 tensor-core peak, TFLOP/s (0 where there is none).
    pub tf32: f64,
    /// Dense int8 tensor-core peak, TOP/s (0 where there is none).
    pub int8: f64,
    /// 0 where there is no fp8 tensor core.
    pub fp8: f64,
    /// CUDA-core fp32 FMA throughput.
    pub fp32: f64,
}

impl Peaks {
    /// The peak for tensor-core inputs of `kind` (TFLOP/s, TOP/s for int8); 0 where the device
    /// has none.
    pub fn tensor(&self, kind: MmaKind) -> f64 {
        match kind {
            MmaKind::F16 | MmaKind::Bf16 => self.f16,
            MmaKind::Tf32 => self.tf32,
            MmaKind::Int8 => self.int8,
            MmaKind::Fp8 => self.fp8,
        }
    }
}

/// What the tiling needs to know about a GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    /// Name: a built-in table name, or the CUDA device name.
    pub name: String,
    /// Compute capability, major (9 for sm_90).
    pub cc_major: u32,
    /// Compute capability, minor.
    pub cc_minor: u32,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Shared memory per block without opt-in (48 KiB on every arch here).
    pub smem_per_block: u64,
    /// Shared memory per block with `cudaFuncAttributeMaxDynamicSharedMemorySize` opt-in.
    pub smem_per_block_optin: u64,
    /// Shared memory per SM, bytes.
    pub smem_per_sm: u64,
    /// Shared memory the system reserves per resident block (1 KiB on sm_80+).
    pub reserved_smem_per_block: u64,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// 32-bit registers a block may use.
    pub regs_per_block: u32,
    /// Resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// L2 cache, bytes.
    pub l2_bytes: u64,
    /// DRAM bandwidth, GB/s.
    pub mem_bandwidth_gbs: f64,
    /// Peak throughputs.
    pub peaks: Peaks,
    /// Tensor-core instructions available per input kind.
    pub tensor: TensorCores,
    /// Largest grid dimension x (2^31 - 1).
    pub max_grid_x: u64,
}

/// The subset of `cudaDeviceProp` that [`Device::from_properties`] uses. Optional fields
/// are estimated from the compute capability and SM count when absent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CudaProperties {
    /// `cudaDeviceProp::name`.
    pub name: String,
    /// `major`: compute capability, major.
    pub major: u32,
    /// `minor`: compute capability, minor.
    pub minor: u32,
    /// `multiProcessorCount`: SMs.
    pub multi_processor_count: u32,
    /// `sharedMemPerBlock`: bytes per block without opt-in.
    pub shared_mem_per_block: u64,
    /// `sharedMemPerBlockOptin`: bytes per block with opt-in (0 = same as without).
    pub shared_mem_per_block_optin: u64,
    /// `sharedMemPerMultiprocessor`: bytes per SM.
    pub shared_mem_per_multiprocessor: u64,
    /// `reservedSharedMemPerBlock`: bytes the system reserves per resident block.
    pub reserved_shared_mem_per_block: u64,
    /// `regsPerMultiprocessor`: 32-bit registers per SM.
    pub regs_per_multiprocessor: u32,
    /// `regsPerBlock`: 32-bit registers per block.
    pub regs_per_block: u32,
    /// `maxThreadsPerMultiProcessor`.
    pub max_threads_per_multi_processor: u32,
    /// `maxThreadsPerBlock`.
    pub max_threads_per_block: u32,
    /// `maxBlocksPerMultiProcessor`.
    pub max_blocks_per_multi_processor: u32,
    /// `l2CacheSize`: bytes.
    pub l2_cache_size: u64,
    /// `maxGridSize[0]` (0 = the CUDA limit 2^31 - 1).
    pub max_grid_size_x: u64,
    /// SM clock, kHz.
    pub clock_rate_khz: Option<u32>,
    /// Memory clock, kHz (double data rate is assumed).
    pub memory_clock_rate_khz: Option<u32>,
    /// `memoryBusWidth`, bits.
    pub memory_bus_width_bits: Option<u32>,
}

/// Built-in device names, in table order.
pub const BUILTIN_DEVICES: [&str; 7] = ["h100", "h200", "a100", "l40s", "rtx4090", "rtx3090", "t4"];

const KIB: u64 = 1024;

#[allow(clippy::too_many_arguments)]
fn table_entry(
    name: &str,
    cc: (u32, u32),
    sms: u32,
    smem_sm_kib: u64,
    optin_kib: u64,
    threads_sm: u32,
    blocks_sm: u32,
    l2_mib: u64,
    bw: f64,
    peaks: Peaks,
) -> Device {
    Device {
        name: name.to_string(),
        cc_major: cc.0,
        cc_minor: cc.1,
        sm_count: sms,
        smem_per_block: 48 * KIB,
        smem_per_block_optin: optin_kib * KIB,
        smem_per_sm: smem_sm_kib * KIB,
        reserved_smem_per_block: if cc.0 >= 8 { KIB } else { 0 },
        regs_per_sm: 65536,
        regs_per_block: 65536,
        max_threads_per_sm: threads_sm,
        max_threads_per_block: 1024,
        max_blocks_per_sm: blocks_sm,
        l2_bytes: l2_mib * KIB * KIB,
        mem_bandwidth_gbs: bw,
        peaks,
        tensor: TensorCores::for_cc(cc.0, cc.1),
        max_grid_x: (1 << 31) - 1,
    }
}

impl Device {
    /// A device from the built-in table (case-insensitive). Figures are NVIDIA's published
    /// ones: SM counts, the CUDA programming guide's per-arch shared-memory limits
    /// (sm_90: 228 KiB/SM, 227 KiB = 232448 B/block; sm_80: 164/163 KiB = 166912 B;
    /// sm_86/sm_89: 100/99 KiB = 101376 B; sm_75: 64/64 KiB = 65536 B), and datasheet
    /// bandwidths and dense tensor peaks (fp32 accumulate).
    ///
    /// # Errors
    ///
    /// [`TilingError::UnknownDevice`] for a name not in [`BUILTIN_DEVICES`].
    pub fn builtin(name: &str) -> Result<Device, TilingError> {
        let p = |f16: f64, tf32: f64, int8: f64, fp8: f64, fp32: f64| Peaks { f16, tf32, int8, fp8, fp32 };
        let d = match name.trim().to_ascii_lowercase().as_str() {
            // H100 SXM5: 132 SMs, HBM3 3.35 TB/s, 989 TF f16, 1979 TF fp8/int8, 67 TF fp32.
            "h100" => {
                table_entry("h100", (9, 0), 132, 228, 227, 2048, 32, 50, 3350.0, p(989.4, 494.7, 1978.9, 1978.9, 66.9))
            }
            // H200 SXM: the H100 die with 141 GB HBM3e at 4.8 TB/s.
            "h200" => {
                table_entry("h200", (9, 0), 132, 228, 227, 2048, 32, 50, 4800.0, p(989.4, 494.7, 1978.9, 1978.9, 66.9))
            }
            // A100 SXM4 80GB: 108 SMs, 2039 GB/s, 312 TF f16, 624 TOPS int8, no fp8.
            "a100" => {
                table_entry("a100", (8, 0), 108, 164, 163, 2048, 32, 40, 2039.0, p(312.0, 156.0, 624.0, 0.0, 19.5))
            }
            // L40S: AD102, 142 SMs, 864 GB/s, 362 TF f16, 733 TF fp8/int8.
            "l40s" => {
                table_entry("l40s", (8, 9), 142, 100, 99, 1536, 24, 96, 864.0, p(362.05, 183.0, 733.0, 733.0, 91.6))
            }
            // RTX 4090: 128 SMs, 1008 GB/s, 165 TF f16 (fp32 acc), 330 TF fp8, 661 TOPS int8.
            "rtx4090" => {
                table_entry("rtx4090", (8, 9), 128, 100, 99, 1536, 24, 72, 1008.0, p(165.2, 82.6, 660.6, 330.3, 82.6))
            }
            // RTX 3090: GA102, 82 SMs, 936 GB/s, 71 TF f16 (fp32 acc), 284 TOPS int8.
            "rtx3090" => {
                table_entry("rtx3090", (8, 6), 82, 100, 99, 1536, 16, 6, 936.0, p(71.0, 35.6, 284.0, 0.0, 35.6))
            }
            // T4: TU104, 40 SMs, 320 GB/s, 65 TF f16, 130 TOPS int8.
            "t4" => table_entry("t4", (7, 5), 40, 64, 64, 1024, 16, 4, 320.0, p(65.0, 0.0, 130.0, 0.0, 8.1)),
            _ => {
                return Err(TilingError::UnknownDevice { name: name.to_string(), known: BUILTIN_DEVICES.join(", ") });
            }
        };
        Ok(d)
    }

    /// Describe a device from its CUDA properties. Bandwidth comes from the memory clock and
    /// bus width when given, else from a per-SM figure of the architecture; tensor and fp32
    /// peaks from per-SM-per-clock rates of the architecture and the SM clock (an estimate
    /// per architecture when absent). The result is checked like any device.
    ///
    /// # Errors
    ///
    /// [`TilingError::DeviceTooSmall`] when the properties fail [`Device::check`].
    pub fn from_properties(p: &CudaProperties) -> Result<Device, TilingError> {
        let cc = p.major * 10 + p.minor;
        let geforce = p.name.to_ascii_lowercase().contains("geforce");
        let clock_ghz = match p.clock_rate_khz {
            Some(k) if k > 0 => k as f64 / 1e6,
            _ => match cc {
                90..=99 => 1.75,
                80 => 1.41,
                86..=88 => 1.7,
                89 => 2.5,
                75 => 1.59,
                _ => 1.5,
            },
        };
        let sms = p.multi_processor_count as f64;
        // Dense f16 tensor flops per SM per clock (fp32 accumulate; GeForce parts run it at half rate).
        let f16_per_clk = match cc {
            0..=69 => 0.0,
            70..=79 => 1024.0,
            80 => 2048.0,
            81..=89 => {
                if geforce {
                    512.0
                } else {
                    1024.0
                }
            }
            90..=99 => 4096.0,
            _ => 4096.0,
        };
        let fp32_per_clk = if cc == 80 || (60..80).contains(&cc) { 128.0 } else { 256.0 };
        let tflops = |per_clk: f64| sms * per_clk * clock_ghz / 1e3;
        let f16 = tflops(f16_per_clk);
        let tensor = TensorCores::for_cc(p.major, p.minor);
        let int8_factor = if geforce && (81..=89).contains(&cc) { 4.0 } else { 2.0 };
        let peaks = Peaks {
            f16,
            tf32: if tensor.mma_sync.contains(MmaKind::Tf32) { f16 / 2.0 } else { 0.0 },
            int8: if tensor.mma_sync.contains(MmaKind::Int8) { f16 * int8_factor } else { 0.0 },
            fp8: if tensor.mma_sync.contains(MmaKind::Fp8) { f16 * 2.0 } else { 0.0 },
            fp32: tflops(fp32_per_clk),
        };
        let bw = match (p.memory_clock_rate_khz, p.memory_bus_width_bits) {
            (Some(c), Some(w)) if c > 0 && w > 0 => c as f64 * 2.0 * (w as f64 / 8.0) / 1e6,
            _ => {
                let per_sm = match cc {
                    90..=99 => 25.0,
                    80 => 19.0,
                    86..=88 => 11.0,
                    89 => 7.0,
                    75 => 8.0,
                    _ => 8.0,
                };
                per_sm * sms
            }
        };
        let d = Device {
            name: p.name.clone(),
            cc_major: p.major,
            cc_minor: p.minor,
            sm_count: p.multi_processor_count,
            smem_per_block: p.shared_mem_per_block,
            smem_per_block_optin: p.shared_mem_per_block_optin.max(p.shared_mem_per_block),
            smem_per_sm: p.shared_mem_per_multiprocessor,
            reserved_smem_per_block: p.reserved_shared_mem_per_block,
            regs_per_sm: p.regs_per_multiprocessor,
            regs_per_block: p.regs_per_block,
            max_threads_per_sm: p.max_threads_per_multi_processor,
            max_threads_per_block: p.max_threads_per_block,
            max_blocks_per_sm: p.max_blocks_per_multi_processor,
            l2_bytes: p.l2_cache_size,
            mem_bandwidth_gbs: bw,
            peaks,
            tensor,
            max_grid_x: if p.max_grid_size_x == 0 { (1 << 31) - 1 } else { p.max_grid_size_x },
        };
        d.check()?;
        Ok(d)
    }

    /// Compute capability as `major * 10 + minor`.
    pub fn cc(&self) -> u32 {
        self.cc_major * 10 + self.cc_minor
    }

    /// Check that the description is consistent and can run the minimal `simple` kernel
    /// (see [`crate::SIMPLE_SMEM_MAX`]); every valid device has a config for every problem.
    ///
    /// # Errors
    ///
    /// [`TilingError::DeviceTooSmall`] saying which requirement fails: no SMs, compute
    /// capability below 5.0, too few threads, block slots, registers or shared memory for
    /// the `simple` kernel, a zero grid limit, or a bandwidth / peak that is not finite and
    /// positive (tensor peaks: non-negative).
    pub fn check(&self) -> Result<(), TilingError> {
        let bad = |reason: String| Err(TilingError::DeviceTooSmall { name: self.name.clone(), reason });
        let simple = SIMPLE_SMEM_MAX;
        if self.sm_count == 0 {
            return bad("it has 0 SMs".into());
        }
        if self.cc_major < 5 {
            return bad(format!("compute capability {}.{} is below 5.0", self.cc_major, self.cc_minor));
        }
        if self.max_threads_per_block < 32 || self.max_threads_per_sm < 32 {
            return bad("the simple kernel needs 32 threads per block and per SM".into());
        }
        if self.max_blocks_per_sm == 0 {
            return bad("max blocks per SM is 0".into());
        }
        let regs = SIMPLE_REGS * 32;
        if self.regs_per_block < regs || self.regs_per_sm < regs {
            return bad(format!("the simple kernel needs {regs} registers per block and per SM"));
        }
        if self.smem_per_block_optin < simple {
            return bad(format!(
                "{} bytes of shared memory per block; the simple kernel needs {simple}",
                self.smem_per_block_optin
            ));
        }
        if self.smem_per_sm < simple + self.reserved_smem_per_block {
            return bad(format!("{} bytes of shared memory per SM is too small", self.smem_per_sm));
        }
        if self.max_grid_x == 0 {
            return bad("max grid size x is 0".into());
        }
        let pk = &self.peaks;
        let finite_pos = |v: f64| v.is_finite() && v > 0.0;
        let finite_nonneg = |v: f64| v.is_finite() && v >= 0.0;
        if !finite_pos(self.mem_bandwidth_gbs) || !finite_pos(pk.fp32) {
            return bad("memory bandwidth and fp32 peak must be finite and positive".into());
        }
        if ![pk.f16, pk.tf32, pk.int8, pk.fp8].into_iter().all(finite_nonneg) {
            return bad("tensor peaks must be finite and non-negative".into());
        }
        Ok(())
    }
}

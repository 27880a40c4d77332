//! Shared wgpu plumbing for rulegym's WGSL compute shaders (feature `gpu`).
//!
//! One module for every GPU kernel in the crate (GRPO, retrieval, ...):
//! * [`GpuContext::new`] acquires a headless adapter and device, or returns
//!   [`GpuError::NoAdapter`] (never panics) when the machine has no GPU and no software Vulkan
//!   driver (Mesa lavapipe: `apt-get install mesa-vulkan-drivers`);
//! * [`shaders`] is the registry: every `shaders/*.wgsl` file is embedded there with
//!   `include_str!`, under its file stem; add a line there for a new shader;
//! * [`GpuContext::pipeline`] compiles and caches compute pipelines by (shader, entry point),
//!   with auto-derived layouts (bind exactly the bindings an entry point uses);
//! * buffer helpers upload slices ([`GpuContext::storage`]), allocate zeroed outputs, build bind
//!   groups, dispatch 1-D workloads of any size ([`grid`]), and read results back;
//! * [`chunks`] splits a long array so that each storage binding stays under
//!   [`GpuContext::max_binding_bytes`] (at most [`MAX_BINDING_BYTES`] = 100 MB: Mesa lavapipe
//!   returns wrong results for bindings above ~123 MB).
//!
//! Validation errors inside [`GpuContext::submit`] and pipeline creation are caught with wgpu
//! error scopes and returned as [`GpuError::Wgpu`].
//!
//! ```no_run
//! # fn main() -> Result<(), rulegym::gpu::GpuError> {
//! use rulegym::gpu::GpuContext;
//! let ctx = GpuContext::new()?;
//! println!("{}", ctx.describe());
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Mutex;

pub use wgpu;
use wgpu::util::DeviceExt;

/// The largest storage binding any rulegym kernel uses, in bytes.
pub const MAX_BINDING_BYTES: u64 = 100_000_000;

/// Most workgroups in one dispatch dimension (the WebGPU minimum limit).
pub const MAX_WORKGROUPS_PER_DIM: u32 = 65_535;

/// Errors from GPU setup and execution.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// No adapter: no GPU driver and no software Vulkan (lavapipe) on this machine.
    #[error(
        "no GPU adapter found ({0}); install a Vulkan driver, e.g. Mesa lavapipe: `apt-get install mesa-vulkan-drivers`"
    )]
    NoAdapter(String),
    /// The adapter refused to create a device.
    #[error("could not create a wgpu device: {0}")]
    Device(String),
    /// No shader of that name in the registry.
    #[error("no shader named {0:?} in rulegym::gpu::shaders")]
    UnknownShader(String),
    /// A buffer would exceed the binding limit; the caller must chunk.
    #[error("{what} needs {bytes} bytes in one binding; the limit is {limit} (chunk it)")]
    TooLarge {
        /// What the buffer holds.
        what: String,
        /// Bytes requested.
        bytes: u64,
        /// Bytes allowed.
        limit: u64,
    },
    /// Mapping a buffer for readback failed.
    #[error("GPU readback failed: {0}")]
    Readback(String),
    /// wgpu reported a validation or out-of-memory error.
    #[error("wgpu error: {0}")]
    Wgpu(String),
}

/// The registry of WGSL sources: each file in `shaders/`, embedded at compile time.
pub mod shaders {
    /// `(name, source)` for every shader; the name is the file stem.
    pub const ALL: &[(&str, &str)] = &[
        (
            "grpo_advantage",
            include_str!("../shaders/grpo_advantage.wgsl"),
        ),
        ("grpo_loss", include_str!("../shaders/grpo_loss.wgsl")),
        (
            "retrieval_flat",
            include_str!("../shaders/retrieval_flat.wgsl"),
        ),
    ];

    /// The source of the shader `name`, if registered.
    pub fn source(name: &str) -> Option<&'static str> {
        ALL.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
    }
}

/// A headless wgpu device and queue with a cache of compiled compute pipelines.
pub struct GpuContext {
    /// The wgpu device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    binding_cap: u64,
    pipelines: Mutex<BTreeMap<(String, String), wgpu::ComputePipeline>>,
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext")
            .field("adapter", &self.info.name)
            .finish()
    }
}

impl GpuContext {
    /// Acquires the highest-performance adapter of any backend (the `WGPU_BACKEND` and
    /// `WGPU_ADAPTER_NAME` environment variables are honored) and a device with the adapter's
    /// own limits. Blocks; costs milliseconds on a GPU, ~0.1 s on lavapipe.
    pub fn new() -> Result<Self, GpuError> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let options = wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        };
        let adapter = pollster::block_on(instance.request_adapter(&options))
            .map_err(|e| GpuError::NoAdapter(e.to_string()))?;
        let limits = adapter.limits();
        let desc = wgpu::DeviceDescriptor {
            label: Some("rulegym"),
            required_limits: limits.clone(),
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc))
            .map_err(|e| GpuError::Device(e.to_string()))?;
        Ok(Self {
            device,
            queue,
            info: adapter.get_info(),
            limits,
            binding_cap: MAX_BINDING_BYTES,
            pipelines: Mutex::new(BTreeMap::new()),
        })
    }

    /// The adapter's name, backend and device type.
    pub fn info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// One line naming the adapter, e.g. `llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan, Cpu)`.
    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?})",
            self.info.name, self.info.backend, self.info.device_type
        )
    }

    /// Whether the adapter is a CPU implementation (lavapipe/llvmpipe): a correctness device.
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// The device limits in force.
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// Largest storage binding to use: [`MAX_BINDING_BYTES`], the device's smaller limits, or
    /// a lower cap from [`Self::set_max_binding_bytes`], rounded down to a multiple of 256 bytes.
    pub fn max_binding_bytes(&self) -> u64 {
        let dev = self
            .limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size);
        (self.binding_cap.min(dev) / 256 * 256).max(256)
    }

    /// Lowers the binding cap (at least 256 bytes; never above [`MAX_BINDING_BYTES`]), e.g. so
    /// tests exercise the chunked paths on small inputs.
    pub fn set_max_binding_bytes(&mut self, bytes: u64) {
        self.binding_cap = bytes.clamp(256, MAX_BINDING_BYTES);
    }

    /// The compute pipeline for `entry` in the registered shader `shader`, compiled on first
    /// use and cached. Its bind group layout 0 holds exactly the bindings `entry` uses.
    pub fn pipeline(&self, shader: &str, entry: &str) -> Result<wgpu::ComputePipeline, GpuError> {
        let key = (shader.to_string(), entry.to_string());
        if let Some(p) = self.pipelines.lock().expect("pipeline cache").get(&key) {
            return Ok(p.clone());
        }
        let source =
            shaders::source(shader).ok_or_else(|| GpuError::UnknownShader(shader.into()))?;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(shader),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(GpuError::Wgpu(format!("{shader}.wgsl, entry {entry}: {e}")));
        }
        self.pipelines
            .lock()
            .expect("pipeline cache")
            .insert(key, pipeline.clone());
        Ok(pipeline)
    }

    fn check_size(&self, what: &str, bytes: u64) -> Result<(), GpuError> {
        let limit = self.max_binding_bytes();
        if bytes > limit {
            return Err(GpuError::TooLarge {
                what: what.into(),
                bytes,
                limit,
            });
        }
        Ok(())
    }

    /// A read-only storage buffer holding `data` (padded to at least 16 bytes and to a multiple
    /// of 4); fails with [`GpuError::TooLarge`] above [`Self::max_binding_bytes`].
    pub fn storage<T: bytemuck::Pod>(
        &self,
        label: &str,
        data: &[T],
    ) -> Result<wgpu::Buffer, GpuError> {
        self.storage_bytes(label, bytemuck::cast_slice(data))
    }

    /// Like [`Self::storage`] for raw bytes (a `u8` mask is read in WGSL as `array<u32>`, four
    /// bytes per word, little-endian).
    pub fn storage_bytes(&self, label: &str, bytes: &[u8]) -> Result<wgpu::Buffer, GpuError> {
        self.check_size(label, bytes.len() as u64)?;
        let padded = bytes.len().max(16).div_ceil(4) * 4;
        if padded == bytes.len() {
            return Ok(self
                .device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some(label),
                    contents: bytes,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                }));
        }
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: padded as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        // New buffers are zeroed: write the 4-byte-aligned prefix, then the tail padded.
        let whole = bytes.len() / 4 * 4;
        if whole > 0 {
            self.queue.write_buffer(&buffer, 0, &bytes[..whole]);
        }
        if whole < bytes.len() {
            let mut tail = [0u8; 4];
            tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
            self.queue.write_buffer(&buffer, whole as u64, &tail);
        }
        Ok(buffer)
    }

    /// A zero-filled read-write storage buffer of `bytes` (at least 16) that can be read back.
    pub fn storage_zeroed(&self, label: &str, bytes: u64) -> Result<wgpu::Buffer, GpuError> {
        self.check_size(label, bytes)?;
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.max(16).div_ceil(4) * 4,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }))
    }

    /// A uniform buffer holding `value`.
    pub fn uniform<T: bytemuck::Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::bytes_of(value),
                usage: wgpu::BufferUsages::UNIFORM,
            })
    }

    /// A bind group for group 0 of `pipeline` with `(binding, buffer)` entries (whole buffers).
    pub fn bind_group(
        &self,
        pipeline: &wgpu::ComputePipeline,
        entries: &[(u32, &wgpu::Buffer)],
    ) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry<'_>> = entries
            .iter()
            .map(|(binding, buffer)| wgpu::BindGroupEntry {
                binding: *binding,
                resource: buffer.as_entire_binding(),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    }

    /// Records one dispatch of `workgroups` workgroups (split over x and y with [`grid`]; the
    /// shader recovers the linear index as `wid.x + wid.y * num_workgroups.x` and must ignore
    /// indices past its count).
    pub fn dispatch(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        pipeline: &wgpu::ComputePipeline,
        bind_group: &wgpu::BindGroup,
        workgroups: u32,
    ) {
        if workgroups == 0 {
            return;
        }
        let (x, y) = grid(workgroups);
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: None,
            timestamp_writes: None,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, bind_group, &[]);
        pass.dispatch_workgroups(x, y, 1);
    }

    /// A new command encoder.
    pub fn encoder(&self) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
    }

    /// Submits `encoder` and returns any validation or out-of-memory error it raised.
    pub fn submit(&self, encoder: wgpu::CommandEncoder) -> Result<(), GpuError> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let val = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        self.queue.submit([encoder.finish()]);
        let v = pollster::block_on(val.pop());
        let o = pollster::block_on(oom.pop());
        match v.or(o) {
            Some(e) => Err(GpuError::Wgpu(e.to_string())),
            None => Ok(()),
        }
    }

    /// Copies the first `out.len()` elements of `buffer` into `out` (waits for the GPU).
    pub fn read_into<T: bytemuck::Pod>(
        &self,
        buffer: &wgpu::Buffer,
        out: &mut [T],
    ) -> Result<(), GpuError> {
        let bytes = std::mem::size_of_val(out) as u64;
        if bytes == 0 {
            return Ok(());
        }
        let size = bytes.div_ceil(4) * 4;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.encoder();
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
        self.submit(encoder)?;
        let (tx, rx) = std::sync::mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        rx.recv()
            .map_err(|e| GpuError::Readback(e.to_string()))?
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        {
            let view = staging
                .slice(..)
                .get_mapped_range()
                .map_err(|e| GpuError::Readback(e.to_string()))?;
            bytemuck::cast_slice_mut::<T, u8>(out).copy_from_slice(&view[..bytes as usize]);
        }
        staging.unmap();
        Ok(())
    }

    /// The first `count` elements of `buffer`.
    pub fn read<T: bytemuck::Pod + Default>(
        &self,
        buffer: &wgpu::Buffer,
        count: usize,
    ) -> Result<Vec<T>, GpuError> {
        let mut out = vec![T::default(); count];
        self.read_into(buffer, &mut out)?;
        Ok(out)
    }
}

/// Splits `0..total` elements of `elem_bytes` each into consecutive ranges of at most
/// `max_bytes` bytes whose starts are multiples of `align` elements (`align >= 1`).
pub fn chunks(
    total: usize,
    elem_bytes: u64,
    max_bytes: u64,
    align: usize,
) -> impl Iterator<Item = Range<usize>> {
    let align = align.max(1);
    let per = ((max_bytes / elem_bytes.max(1)) as usize / align * align).max(align);
    (0..total.div_ceil(per)).map(move |i| i * per..((i + 1) * per).min(total))
}

/// `(x, y)` workgroup counts with `x * y >= n` and both within [`MAX_WORKGROUPS_PER_DIM`].
pub fn grid(n: u32) -> (u32, u32) {
    if n <= MAX_WORKGROUPS_PER_DIM {
        (n, 1)
    } else {
        (MAX_WORKGROUPS_PER_DIM, n.div_ceil(MAX_WORKGROUPS_PER_DIM))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_and_respect_limits() {
        let parts: Vec<_> = chunks(1000, 4, 400, 16).collect();
        assert_eq!(
            parts,
            vec![
                0..96,
                96..192,
                192..288,
                288..384,
                384..480,
                480..576,
                576..672,
                672..768,
                768..864,
                864..960,
                960..1000
            ]
        );
        assert_eq!(chunks(0, 4, 400, 1).count(), 0);
        assert_eq!(chunks(10, 4, 1 << 30, 1).collect::<Vec<_>>(), vec![0..10]);
        for r in chunks(25_000_001, 4, MAX_BINDING_BYTES, 256) {
            assert!((r.end - r.start) as u64 * 4 <= MAX_BINDING_BYTES && r.start % 256 == 0);
        }
    }

    #[test]
    fn grid_covers() {
        assert_eq!(grid(5), (5, 1));
        let (x, y) = grid(200_000);
        assert!(x * y >= 200_000 && x <= MAX_WORKGROUPS_PER_DIM && y <= MAX_WORKGROUPS_PER_DIM);
    }

    /// Parses and validates every shader with naga: runs without any adapter.
    #[test]
    fn every_registered_shader_validates() {
        use wgpu::naga;
        for (name, src) in shaders::ALL {
            let module = naga::front::wgsl::parse_str(src)
                .unwrap_or_else(|e| panic!("{name}.wgsl: {}", e.emit_to_string(src)));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::default(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{name}.wgsl: {}", e.emit_to_string(src)));
        }
        assert!(shaders::source("grpo_loss").is_some() && shaders::source("nope").is_none());
    }
}

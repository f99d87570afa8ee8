//! What the walk records: per function ([`Func`], [`FnState`]) and per declaration ([`Storage`]).

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::cpp) enum FuncKind {
    Global,
    Device,
    Host,
}

#[derive(Debug)]
pub(in crate::cpp) struct Param {
    pub(in crate::cpp) name: String,
    pub(in crate::cpp) is_tensor: bool,
}

#[derive(Debug)]
pub(in crate::cpp) struct Func {
    pub(in crate::cpp) name: String,
    pub(in crate::cpp) name_range: Range<usize>,
    /// The whole definition.
    pub(in crate::cpp) range: Range<usize>,
    pub(in crate::cpp) kind: FuncKind,
    pub(in crate::cpp) params: Vec<Param>,
    /// Simple names called or referenced through macros.
    pub(in crate::cpp) calls: HashSet<String>,
    /// Kernel names launched (`<<<`, `cudaLaunchKernel`, macro expansions).
    pub(in crate::cpp) launches: HashSet<String>,
    /// Base names written through (`p[i] = ...`, `*p = ...`, `atomicAdd(&p[i], ...)`).
    pub(in crate::cpp) writes: HashSet<String>,
    pub(in crate::cpp) returns_tensor: bool,
    pub(in crate::cpp) returned_params: HashSet<String>,
    /// `return p;` of a tensor parameter `p`: the name and where, judged in `finish`.
    pub(in crate::cpp) returned_sites: Vec<(String, Range<usize>)>,
    /// Per parameter: uses as a name, and uses that only store (`p[i] = v`), so a parameter
    /// with more uses than stores is read.
    pub(in crate::cpp) param_uses: Vec<u32>,
    pub(in crate::cpp) param_stores: Vec<u32>,
    /// `<<<` launches: kernel name and, per argument, the tensor parameter whose data pointer
    /// it passes (if any) with the argument's range.
    pub(in crate::cpp) launch_args: Vec<LaunchArgs>,
    /// Calls of other functions (helpers, `cudaMemset`) given an input's data pointer.
    pub(in crate::cpp) helper_calls: Vec<LaunchArgs>,
    /// Stores written in host code through a tensor parameter's data pointer
    /// (`float* a = x.data_ptr<float>(); a[i] = 0;`): the parameter and the store's range.
    pub(in crate::cpp) host_writes: Vec<(String, Range<usize>)>,
    /// (callee, argument index, own parameter index): a parameter handed on as is.
    pub(in crate::cpp) param_passes: Vec<(String, usize, usize)>,
    /// Inline assembly (may store anything).
    pub(in crate::cpp) has_asm: bool,
    /// Kernels launched outside a branch only half/bf16 inputs take (see `half_depth`) and
    /// outside a dtype test the analysis cannot decide (see `dtype_tests`).
    pub(in crate::cpp) full_launches: HashSet<String>,
    /// Kernels launched on a branch of a dtype test the analysis cannot decide.
    pub(in crate::cpp) maybe_launches: HashSet<String>,
    /// Names used as values in the body (a kernel handed to a launcher, cast to a pointer for
    /// `cudaLaunchKernel`, captured by a lambda): a launch the analysis does not follow.
    /// Arguments of calls that only configure a kernel (`cudaFuncSetAttribute`) are not here.
    pub(in crate::cpp) value_refs: HashSet<String>,
    /// Host code stores into a tensor's data itself (CPU C++: `out_p[i] = ...`).
    pub(in crate::cpp) stores_tensor_data: bool,
    /// The stream its returns give (`return at::cuda::getCurrentCUDAStream();`), merged over
    /// every `return`; `None` before the first.
    pub(in crate::cpp) ret_stream: Option<StreamKind>,
    /// In-place methods on a tensor parameter (`x.zero_()`): the parameter, where, message.
    pub(in crate::cpp) inplace_sites: Vec<(String, Range<usize>, String)>,
    /// Per parameter: its type names a half/bf16 type (`const at::Half* p`).
    pub(in crate::cpp) half_params: Vec<bool>,
    /// `cudaStreamWaitEvent(<caller's stream>, ...)` / `event.block(<caller's stream>)`.
    pub(in crate::cpp) joins_caller: bool,
    /// `cudaEventRecord(...)` / `event.record(...)`.
    pub(in crate::cpp) records_event: bool,
}

pub(in crate::cpp) type LaunchArgs = (String, Vec<(Option<String>, Range<usize>)>);

/// Per host function: outputs from `torch::empty*` and whether anything could write them.
#[derive(Debug, Default)]
pub(in crate::cpp) struct FnState<'t> {
    // Names are slices of the source: a declaration costs no allocation.
    pub(in crate::cpp) inits: HashMap<&'t str, Node<'t>>,
    /// name -> (range of the allocation call, written?, returned?)
    pub(in crate::cpp) empties: HashMap<&'t str, (Range<usize>, bool, bool)>,
    /// `float* p = out.data_ptr<float>()`: uses of `p` are uses of `out`.
    pub(in crate::cpp) ptr_aliases: HashMap<&'t str, &'t str>,
    /// Locals holding tensors (`torch::Tensor t`, `auto y = torch::empty(...)`).
    pub(in crate::cpp) tensor_locals: HashSet<&'t str>,
    /// Locals declared as pointers or references: stores through them reach what they point at.
    pub(in crate::cpp) ptr_locals: HashSet<&'t str>,
}

/// Where a declaration's variables live (`Analyzer::storage_of`).
#[derive(Debug, Default, Clone, Copy)]
pub(in crate::cpp) struct Storage {
    pub(in crate::cpp) is_static: bool,
    /// `const`, `constexpr`, `__constant__` or `extern`: not written here.
    pub(in crate::cpp) is_const: bool,
    /// `__device__`, `__shared__`, `__constant__`, `__managed__`.
    pub(in crate::cpp) device_mem: bool,
    /// At namespace level, outside any function.
    pub(in crate::cpp) top: bool,
}

impl Storage {
    /// Host memory that outlives the call and can be written: where a cache can live.
    pub(in crate::cpp) fn outlives_the_call(&self) -> bool {
        (self.is_static || self.top) && !self.is_const && !self.device_mem
    }
}

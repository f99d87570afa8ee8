//! KG630 `cpp-device-result-store`: device memory that outlives a launch, written by a kernel
//! and read back by the same kernel on later calls, i.e. a store of results keyed by the input.
//!
//! What counts as persistent device memory: a `__device__`/`__managed__` global array or
//! pointer, and a `static` or namespace-level host pointer handed to a kernel launch (memory
//! `cudaMalloc`ed once and kept). Such memory is flagged when one kernel both stores to it and
//! loads from it, because a later launch then reads what an earlier one left (the measured
//! fingerprint cache keeps results in `__device__` arrays and serves them on a key match).
//!
//! Honest uses stay silent: `__constant__` tables and `__shared__` memory are not kept across
//! launches by the kernel; a `__device__` scalar (a grid-wide counter) holds no result; memory
//! the host resets before launching (`cudaMemset*`, `cudaMemcpyToSymbol*` naming it); a kernel
//! that synchronises the whole grid (`grid.sync()`, `this_grid()`, `__threadfence()`: blocks
//! of one launch exchanging partial results); and a workspace that one kernel writes and
//! another reads (a two-pass reduction, split-K).

use crate::rule::{Rule, RuleMeta};
use kernelgate_model::Severity::Error;
use std::ops::Range;
use tree_sitter::Node;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG630: RuleMeta = RuleMeta {
    code: "KG630",
    name: "cpp-device-result-store",
    severity: Error,
    summary: "A kernel keeps results in device memory that outlives the launch and reads them back",
    error_when: "whenever a kernel writes and reads back device memory that outlives the launch",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "A `__device__` (or `__managed__`) global array or pointer, or a `static`/namespace-level pointer to device memory handed to a launch, is both written and read by the same kernel. What one call leaves there, a later call reads: the shape of a result store keyed by a fingerprint of the input (measured: a 5.8x speedup that was never earned on a 4096 fp32 matmul, with every checked result correct). Silent for `__constant__` tables, `__shared__` memory, `__device__` scalars (grid-wide counters), memory the host resets before launching (`cudaMemsetAsync`, `cudaMemcpyToSymbolAsync`), kernels that synchronise the grid (`grid.sync()`, `__threadfence()`: partial results of one launch) and workspaces one kernel writes and another reads. Recompute every call.",
    bad: "__device__ float store_key[8][16];\n__device__ float store_out[8][1 << 20];\n__global__ void mm(const float* a, float* c, int n) {\n    if (store_key[0][0] == a[0]) { c[i] = store_out[0][i]; return; }\n    store_out[0][i] = c[i] = dot(a, i);\n}",
    good: "__device__ unsigned int blocks_done;  // reset by the last block\n__constant__ float table[256];\n__global__ void mm(const float* a, float* c, int n) {\n    c[i] = dot(a, i);\n}",
};

/// A device function's body and parameter names (`__global__` and `__device__` functions).
struct Kernel<'t> {
    name: &'t str,
    params: Vec<&'t str>,
    body: Node<'t>,
    grid_sync: bool,
}

/// Findings (code, byte range in the extension text, message) for one parsed extension.
pub fn check(root: Node, text: &str) -> Vec<(Rule, Range<usize>, String)> {
    let t = |n: Node| &text[n.byte_range()];
    // __device__ arrays and pointers (true: an array, whose content a symbol copy resets).
    let mut globals: Vec<(&str, Range<usize>, bool)> = Vec::new();
    let mut host_ptrs: Vec<(&str, Range<usize>)> = Vec::new(); // static/global host pointers
    let mut kernels: Vec<Kernel> = Vec::new();
    let mut launches: Vec<(&str, Vec<Node>)> = Vec::new(); // kernel name, argument nodes
    let mut resets: Vec<Node> = Vec::new(); // cudaMemset*/cudaMemcpyToSymbol* calls

    let mut stack = vec![(root, false)];
    while let Some((n, in_fn)) = stack.pop() {
        match n.kind() {
            "comment" | "string_literal" | "raw_string_literal" => continue,
            "declaration" => persistent_decl(n, text, !in_fn, &mut globals, &mut host_ptrs),
            "function_definition" => {
                if let Some(k) = device_function(n, text) {
                    kernels.push(k);
                }
            }
            "call_expression" => {
                let func = n.child_by_field_name("function").map(t).unwrap_or("");
                let mut c = n.walk();
                let is_launch = n
                    .children(&mut c)
                    .any(|ch| ch.kind() == "kernel_call_syntax");
                if is_launch {
                    if let Some(al) = n.child_by_field_name("arguments") {
                        let mut c = al.walk();
                        let args = al
                            .named_children(&mut c)
                            .filter(|a| a.kind() != "comment")
                            .collect();
                        launches.push((last_segment(func), args));
                    }
                } else if func.starts_with("cudaMemset")
                    || func.starts_with("cudaMemcpyToSymbol")
                    || func.starts_with("cuMemset")
                {
                    resets.push(n);
                }
            }
            _ => {}
        }
        let inner = in_fn || n.kind() == "function_definition";
        let mut c = n.walk();
        for ch in n.children(&mut c) {
            stack.push((ch, inner));
        }
    }
    // `cudaMemcpyToSymbol(ptr, &buf, ..)` on a pointer sets where it points, clearing nothing.
    let reset = |name: &str, array: bool| {
        resets.iter().any(|r| {
            let f = r.child_by_field_name("function").map(t).unwrap_or("");
            (array || !f.contains("ToSymbol"))
                && r.child_by_field_name("arguments")
                    .is_some_and(|a| mentions(a, text, name))
        })
    };

    let mut out = Vec::new();
    for (name, range, array) in &globals {
        if reset(name, *array) {
            continue;
        }
        if let Some(k) = kernels.iter().find(|k| {
            !k.grid_sync && !k.params.contains(name) && stores_and_loads(k.body, text, name)
        }) {
            out.push((
                Rule::KG630,
                range.clone(),
                format!(
                    "`{name}` is device memory that outlives the launch, and kernel `{}` both writes and reads it: a later call reads what an earlier call left (a store of results keyed by the input). Recompute every call, or reset it from the host before each launch (`cudaMemsetAsync`)",
                    k.name
                ),
            ));
        }
    }
    for (name, range) in &host_ptrs {
        if reset(name, false) {
            continue;
        }
        let hit = launches.iter().find_map(|(kname, args)| {
            let k = kernels.iter().find(|k| k.name == *kname && !k.grid_sync)?;
            args.iter().enumerate().find_map(|(i, a)| {
                let p = *k.params.get(i)?;
                (mentions(*a, text, name) && stores_and_loads(k.body, text, p)).then_some(k.name)
            })
        });
        if let Some(kname) = hit {
            out.push((
                Rule::KG630,
                range.clone(),
                format!(
                    "`{name}` points at device memory kept across calls, and kernel `{kname}` both writes and reads it: a later call reads what an earlier call left (a store of results keyed by the input). Keep scratch memory written by one kernel and read by the next, or reset it before each launch"
                ),
            ));
        }
    }
    out
}

/// A namespace-level (`top`) or `static` declaration: `__device__ float store[8][N];`,
/// `__device__ float* p;`, `static float* d_buf = nullptr;`.
fn persistent_decl<'t>(
    n: Node<'t>,
    text: &'t str,
    top: bool,
    globals: &mut Vec<(&'t str, Range<usize>, bool)>,
    host_ptrs: &mut Vec<(&'t str, Range<usize>)>,
) {
    let (mut device, mut skip, mut is_static) = (false, false, false);
    let mut c = n.walk();
    for ch in n.children(&mut c) {
        match ch.kind() {
            "__device__" | "__managed__" => device = true,
            "__constant__" | "__shared__" => skip = true,
            "type_qualifier" => {
                let q = &text[ch.byte_range()];
                skip |= q == "__constant__" || q == "__shared__" || q == "constexpr";
                device |= q == "__device__" || q == "__managed__";
            }
            "storage_class_specifier" => {
                let sc = &text[ch.byte_range()];
                skip |= sc == "extern";
                is_static |= sc == "static";
            }
            _ => {}
        }
    }
    if skip || !(top || is_static) {
        return;
    }
    let mut c = n.walk();
    for d in n.children_by_field_name("declarator", &mut c) {
        let mut x = d;
        if x.kind() == "init_declarator" {
            x = x.child_by_field_name("declarator").unwrap_or(x);
        }
        let (mut array, mut pointer) = (false, false);
        loop {
            match x.kind() {
                "array_declarator" => array = true,
                "pointer_declarator" => pointer = true,
                _ => break,
            }
            match x.child_by_field_name("declarator") {
                Some(y) => x = y,
                None => break,
            }
        }
        if x.kind() != "identifier" {
            continue;
        }
        let name = &text[x.byte_range()];
        if device && (array || pointer) {
            globals.push((name, x.byte_range(), array));
        } else if !device && pointer {
            host_ptrs.push((name, x.byte_range()));
        }
    }
}

fn device_function<'t>(n: Node<'t>, text: &'t str) -> Option<Kernel<'t>> {
    let mut c = n.walk();
    let device = n
        .children(&mut c)
        .any(|ch| matches!(ch.kind(), "__global__" | "__device__"));
    if !device {
        return None;
    }
    let mut d = n.child_by_field_name("declarator");
    while let Some(x) = d {
        if x.kind() == "function_declarator" {
            break;
        }
        d = x.child_by_field_name("declarator");
    }
    let decl = d?;
    let name = decl
        .child_by_field_name("declarator")
        .map(|x| last_segment(&text[x.byte_range()]))?;
    let mut params = Vec::new();
    if let Some(pl) = decl.child_by_field_name("parameters") {
        let mut c = pl.walk();
        for p in pl.named_children(&mut c) {
            let mut d = p.child_by_field_name("declarator");
            while let Some(x) = d {
                if x.kind() == "identifier" {
                    break;
                }
                d = x
                    .child_by_field_name("declarator")
                    .or_else(|| x.named_child(0));
            }
            params.push(d.map_or("", |x| &text[x.byte_range()]));
        }
    }
    let body = n.child_by_field_name("body")?;
    let b = &text[body.byte_range()];
    let grid_sync =
        b.contains("__threadfence") || b.contains("this_grid") || b.contains("grid.sync");
    Some(Kernel {
        name,
        params,
        body,
        grid_sync,
    })
}

/// True when `body` stores through `name` (`name[i] = v`, `*name = v`, `atomic*(&name[i], ..)`)
/// and also loads from it anywhere else.
fn stores_and_loads(body: Node, text: &str, name: &str) -> bool {
    let (mut stores, mut loads) = (false, false);
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        if n.kind() == "identifier" && &text[n.byte_range()] == name {
            match access(n, text) {
                Access::Store => stores = true,
                Access::Load => loads = true,
                Access::Both => {
                    stores = true;
                    loads = true;
                }
            }
            continue;
        }
        let mut c = n.walk();
        for ch in n.children(&mut c) {
            stack.push(ch);
        }
    }
    stores && loads
}

enum Access {
    Store,
    Load,
    Both,
}

/// How the use of a name at `id` touches the memory it names.
fn access(id: Node, text: &str) -> Access {
    let mut n = id;
    while let Some(p) = n.parent() {
        match p.kind() {
            // `name[i]`: the memory; `y[name]` (the name as an index) is a load.
            "subscript_expression" if p.child_by_field_name("argument") == Some(n) => n = p,
            "parenthesized_expression"
            | "pointer_expression"
            | "field_expression"
            | "cast_expression" => n = p,
            "assignment_expression" => {
                if p.child_by_field_name("left") != Some(n) {
                    return Access::Load;
                }
                let op = p
                    .child_by_field_name("operator")
                    .map_or("=", |o| &text[o.byte_range()]);
                return if op == "=" {
                    Access::Store
                } else {
                    Access::Both
                };
            }
            "update_expression" => return Access::Both,
            "argument_list" => {
                let f = p
                    .parent()
                    .and_then(|c| c.child_by_field_name("function"))
                    .map_or("", |f| &text[f.byte_range()]);
                // Atomics accumulate (a counter, a histogram): stores, not loads of old results.
                return if f.starts_with("atomic") {
                    Access::Store
                } else {
                    Access::Load
                };
            }
            _ => return Access::Load,
        }
    }
    Access::Load
}

/// `node`'s text mentions the identifier `name` (as a whole word).
fn mentions(node: Node, text: &str, name: &str) -> bool {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind() == "identifier" && &text[n.byte_range()] == name {
            return true;
        }
        let mut c = n.walk();
        for ch in n.children(&mut c) {
            stack.push(ch);
        }
    }
    false
}

fn last_segment(q: &str) -> &str {
    q.rsplit("::").next().unwrap_or(q).trim()
}

#[cfg(test)]
mod tests {
    use super::super::tests::run;
    use crate::rule::Rule;
    use kernelgate_model::Precision;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/lint/cpp")
            .join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// Lines of the KG630 findings on a fixture.
    fn store_lines(py: &str) -> Vec<u32> {
        run(py, Precision::Fp32)
            .into_iter()
            .filter(|f| f.0 == Rule::KG630)
            .map(|f| f.1)
            .collect()
    }

    fn wrap(cuda: &str) -> String {
        format!(
            "from torch.utils.cpp_extension import load_inline\nSRC = r\"\"\"\n{cuda}\n\"\"\"\next = load_inline(name=\"t\", cpp_sources=\"\", cuda_sources=SRC, functions=[\"run\"])\n"
        )
    }

    #[test]
    fn device_arrays_keyed_by_input_values_are_a_result_store() {
        // store_key (line 8) and store_out (line 9): read and written by relu_or_serve.
        assert_eq!(
            store_lines(&fixture("hack_device_result_store.py")),
            vec![8, 9]
        );
    }

    #[test]
    fn a_static_device_pointer_read_and_written_by_one_kernel_is_a_result_store() {
        assert_eq!(
            store_lines(&fixture("hack_static_ptr_result_store.py")),
            vec![8]
        );
    }

    #[test]
    fn honest_device_memory_is_silent() {
        // Grid reduction with __threadfence, __constant__ table, scalar counter, a workspace
        // written by one kernel and read by the next, a histogram the host clears.
        assert_eq!(
            store_lines(&fixture("honest_device_memory.py")),
            Vec::<u32>::new()
        );
    }

    #[test]
    fn a_host_reset_before_the_launch_makes_read_back_honest() {
        let kernel = "__device__ float acc[256];\n__global__ void k(const float* x, float* y) {\n    int i = threadIdx.x;\n    acc[i] += x[i];\n    y[i] = acc[i];\n}\n";
        let flagged = wrap(&format!(
            "{kernel}void run(float* x, float* y) {{ k<<<1, 256>>>(x, y); }}"
        ));
        assert_eq!(store_lines(&flagged), vec![3]);
        let reset = wrap(&format!(
            "{kernel}void run(float* x, float* y) {{ cudaMemsetAsync(acc, 0, sizeof(acc)); k<<<1, 256>>>(x, y); }}"
        ));
        assert_eq!(store_lines(&reset), Vec::<u32>::new());
    }

    #[test]
    fn device_pointer_set_by_symbol_copy_is_still_a_store() {
        // cudaMemcpyToSymbol sets where the pointer points, it does not clear what is there.
        let src = wrap(
            "__device__ float* store;\n__global__ void k(const float* x, float* y) {\n    int i = threadIdx.x;\n    if (store[4096] == x[0]) { y[i] = store[i]; return; }\n    store[i] = y[i] = x[i];\n}\nvoid run(float* x, float* y, float* buf) { cudaMemcpyToSymbol(store, &buf, sizeof(buf)); k<<<1, 256>>>(x, y); }",
        );
        assert_eq!(store_lines(&src), vec![3]);
    }
}

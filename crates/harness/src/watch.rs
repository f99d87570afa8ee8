//! `kernelgate_harness.GpuWatch`: the judge's view of the GPU between a worker's calls.
//!
//! A worker can reply before its GPU work ends (work launched after its synchronise, from
//! another thread or stream): that work then runs while the judge does its own work between
//! calls, off both clocks. Contexts of different processes never run on the GPU at once; they
//! take turns in time slices. So the judge keeps one tiny kernel of its own running between a
//! worker's calls (one thread reading `%globaltimer` in a loop): every moment another context
//! has the GPU is a moment that kernel does not run, and it sees a jump in the timer. The sum of
//! those jumps is GPU time someone else used while the judge was not timing, and it is charged
//! to the call before it.
//!
//! A worker's work that is queued while the watch runs waits at most one time slice, so the
//! watch only ends after it has run `quiet` without a jump since the worker was stopped
//! (`SIGSTOP`, `kg_judge`): the stopped worker can queue nothing new, and whatever it queued
//! earlier has had its turn. A watch that starts late (the GPU busy with someone else's work
//! when it was launched) shows that as its start delay, measured on the host.

use std::ffi::{c_void, CString};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{result, sys, CudaContext};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// The watch kernel. `ctl` is host memory mapped into the device, eight u64 slots:
/// 0 stop asked (host), 1 first timer reading (kernel), 2 worker stopped (host), 3 stolen ns,
/// 4 jumps, 5 last timer reading, 6 done (kernel), 7 longest reading interval under `gap` ns.
/// After a stop is asked it runs until `quiet` ns passed without a jump since the later of the
/// last jump and the moment it saw slot 2 set, or `cap` ns after the stop was asked (then slot
/// 6 holds 2: the GPU never went quiet). Never asked to stop within `life` ns, it ends by itself
/// (slot 6 holds 3): a judge that waits for its whole context (a device-wide synchronise)
/// while a watch runs is stalled, not hung.
const WATCH_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .entry kg_watch(
    .param .u64 p_ctl,
    .param .u64 p_gap,
    .param .u64 p_quiet,
    .param .u64 p_cap,
    .param .u64 p_life
)
{
    .reg .pred %p<8>;
    .reg .u64 %rd<24>;

    ld.param.u64 %rd1, [p_ctl];
    ld.param.u64 %rd2, [p_gap];
    ld.param.u64 %rd3, [p_quiet];
    ld.param.u64 %rd4, [p_cap];
    ld.param.u64 %rd19, [p_life];
    mov.u64 %rd5, %globaltimer;
    mov.u64 %rd20, %rd5;
    st.volatile.u64 [%rd1+8], %rd5;
    membar.sys;
    mov.u64 %rd6, 0;
    mov.u64 %rd7, 0;
    mov.u64 %rd8, %rd5;
    mov.u64 %rd9, 0;
    mov.u64 %rd10, 0;
    mov.u64 %rd11, 0;
LOOP:
    mov.u64 %rd12, %globaltimer;
    sub.u64 %rd13, %rd12, %rd5;
    setp.gt.u64 %p1, %rd13, %rd2;
    @%p1 add.u64 %rd6, %rd6, %rd13;
    @%p1 add.u64 %rd7, %rd7, 1;
    @%p1 mov.u64 %rd8, %rd12;
    @!%p1 max.u64 %rd11, %rd11, %rd13;
    mov.u64 %rd5, %rd12;
    setp.ne.u64 %p2, %rd10, 0;
    @%p2 bra STOPPED_SEEN;
    ld.volatile.u64 %rd14, [%rd1+16];
    setp.eq.u64 %p3, %rd14, 0;
    @%p3 bra CHECK_STOP;
    mov.u64 %rd10, %rd12;
    max.u64 %rd8, %rd8, %rd12;
    bra CHECK_STOP;
STOPPED_SEEN:
CHECK_STOP:
    setp.ne.u64 %p4, %rd9, 0;
    @%p4 bra ASKED;
    ld.volatile.u64 %rd15, [%rd1];
    setp.ne.u64 %p5, %rd15, 0;
    @%p5 bra STOP_SEEN;
    sub.u64 %rd21, %rd12, %rd20;
    setp.lt.u64 %p5, %rd21, %rd19;
    @%p5 bra LOOP;
    mov.u64 %rd18, 3;
    bra DONE;
STOP_SEEN:
    mov.u64 %rd9, %rd12;
ASKED:
    sub.u64 %rd16, %rd12, %rd9;
    setp.gt.u64 %p6, %rd16, %rd4;
    @%p6 bra NOT_QUIET;
    setp.eq.u64 %p7, %rd10, 0;
    @%p7 bra LOOP;
    sub.u64 %rd17, %rd12, %rd8;
    setp.lt.u64 %p7, %rd17, %rd3;
    @%p7 bra LOOP;
    mov.u64 %rd18, 1;
    bra DONE;
NOT_QUIET:
    mov.u64 %rd18, 2;
DONE:
    st.volatile.u64 [%rd1+24], %rd6;
    st.volatile.u64 [%rd1+32], %rd7;
    st.volatile.u64 [%rd1+40], %rd12;
    st.volatile.u64 [%rd1+56], %rd11;
    membar.sys;
    st.volatile.u64 [%rd1+48], %rd18;
    membar.sys;
    ret;
}
"#;

const SLOTS: usize = 8;
/// How long `start` waits for the kernel's first reading before calling the GPU unresponsive.
const START_TIMEOUT: Duration = Duration::from_secs(30);

fn cuda_err(what: &str, e: impl std::fmt::Debug) -> PyErr {
    PyRuntimeError::new_err(format!("kernelgate GPU watch: {what} failed: {e:?}"))
}

/// What one watch saw, from its start to its end.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// GPU time the watch kernel did not run, in jumps longer than `gap`.
    stolen_ns: u64,
    jumps: u64,
    /// Host time from the launch to the kernel's first reading, seen on the host.
    start_ns: u64,
    /// GPU time from the first reading to the last.
    watched_ns: u64,
    /// The longest interval between two readings that was not a jump (the loop's own pace).
    pace_ns: u64,
    /// 1 quiet, 2 the GPU busy until `cap` after the stop was asked, 3 never asked to stop.
    state: u64,
}

struct Running {
    launched: Instant,
    start_ns: Option<u64>,
}

/// `GpuWatch(device="cuda:N", gap_us=4.0, quiet_us=3000.0, cap_ms=2000.0, life_ms=10000.0)`.
/// `start(quiet_us=None)` launches the watch and waits for its first reading;
/// `worker_stopped()` says the worker can queue nothing more; `stop()` ends it and returns
/// `(stolen_ms, jumps, start_ms, watched_ms, pace_us, state)`, state "quiet", "busy" (the GPU
/// never went quiet within `cap_ms` of the stop) or "expired" (never stopped within `life_ms`).
#[pyclass(unsendable, module = "kernelgate_harness")]
pub struct GpuWatch {
    _ctx: Arc<CudaContext>,
    _module: sys::CUmodule,
    func: sys::CUfunction,
    stream: sys::CUstream,
    ctl: *mut u64,
    gap_ns: u64,
    quiet_ns: u64,
    cap_ns: u64,
    life_ns: u64,
    running: Option<Running>,
}

impl Drop for GpuWatch {
    fn drop(&mut self) {
        // SAFETY: everything here was created by this watch in the retained context.
        unsafe {
            if self.running.is_some() {
                self.slot_write(2, 1);
                self.slot_write(0, 1);
                let _ = result::stream::synchronize(self.stream);
            }
            let _ = result::stream::destroy(self.stream);
            let _ = result::free_host(self.ctl as *mut c_void);
            let _ = result::module::unload(self._module);
        }
    }
}

impl GpuWatch {
    /// SAFETY: `i < SLOTS`; the slots are this watch's mapped host memory.
    unsafe fn slot(&self, i: usize) -> u64 {
        std::ptr::read_volatile(self.ctl.add(i))
    }
    unsafe fn slot_write(&self, i: usize, v: u64) {
        std::ptr::write_volatile(self.ctl.add(i), v);
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }

    /// Waits for the kernel's first reading; returns the host time from launch to it.
    fn started(&mut self) -> PyResult<u64> {
        let Some(run) = self.running.as_mut() else {
            return Err(PyRuntimeError::new_err("the GPU watch is not running"));
        };
        if let Some(ns) = run.start_ns {
            return Ok(ns);
        }
        let launched = run.launched;
        loop {
            // SAFETY: slot 1 is written once by the kernel.
            if unsafe { std::ptr::read_volatile(self.ctl.add(1)) } != 0 {
                let ns = launched.elapsed().as_nanos() as u64;
                if let Some(run) = self.running.as_mut() {
                    run.start_ns = Some(ns);
                }
                return Ok(ns);
            }
            if launched.elapsed() > START_TIMEOUT {
                return Err(PyRuntimeError::new_err(format!(
                    "kernelgate GPU watch: its kernel did not start within {} s (the GPU busy with another process's work)",
                    START_TIMEOUT.as_secs()
                )));
            }
            std::hint::spin_loop();
        }
    }
}

#[pymethods]
impl GpuWatch {
    #[new]
    #[pyo3(signature = (device = "cuda", gap_us = 4.0, quiet_us = 3000.0, cap_ms = 2000.0, life_ms = 10000.0))]
    fn new(device: &str, gap_us: f64, quiet_us: f64, cap_ms: f64, life_ms: f64) -> PyResult<Self> {
        let ordinal = match device {
            "cuda" => 0,
            d => d
                .strip_prefix("cuda:")
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "device must be \"cuda\" or \"cuda:N\", not {d:?}"
                    ))
                })?,
        };
        for (name, v) in [
            ("gap_us", gap_us),
            ("quiet_us", quiet_us),
            ("cap_ms", cap_ms),
            ("life_ms", life_ms),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(PyValueError::new_err(format!(
                    "{name} must be positive, not {v}"
                )));
            }
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| cuda_err("retaining the primary CUDA context", e))?;
        ctx.bind_to_thread()
            .map_err(|e| cuda_err("binding the CUDA context", e))?;
        let ptx = CString::new(WATCH_PTX).expect("no NUL in the PTX");
        // SAFETY: a NUL-terminated PTX image; the module lives as long as this watch.
        let module = unsafe { result::module::load_data(ptx.as_ptr() as *const c_void) }
            .map_err(|e| cuda_err("loading the watch kernel", e))?;
        // SAFETY: the module was just loaded and holds this entry.
        let func =
            unsafe { result::module::get_function(module, CString::new("kg_watch").unwrap()) }
                .map_err(|e| cuda_err("finding the watch kernel", e))?;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| cuda_err("creating the watch's stream", e))?;
        // Mapped, so the kernel reads the host's stop and the host reads its figures.
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: plain pinned allocation, freed in Drop.
        let ctl = unsafe { result::malloc_host(SLOTS * 8, flags) }
            .map_err(|e| cuda_err("allocating the watch's mapped memory", e))?
            as *mut u64;
        Ok(GpuWatch {
            _ctx: ctx,
            _module: module,
            func,
            stream,
            ctl,
            gap_ns: (gap_us * 1e3) as u64,
            quiet_ns: (quiet_us * 1e3) as u64,
            cap_ns: (cap_ms * 1e6) as u64,
            life_ns: (life_ms * 1e6) as u64,
            running: None,
        })
    }

    /// Launches the watch kernel (right after a reply) and waits for its first reading, so the
    /// start delay is measured here (`quiet_us`: this watch's own quiet time). `stop` ends it.
    #[pyo3(signature = (quiet_us = None))]
    fn start(&mut self, quiet_us: Option<f64>) -> PyResult<()> {
        if self.running.is_some() {
            return Err(PyRuntimeError::new_err("the GPU watch is already running"));
        }
        // SAFETY: the slots are this watch's; the kernel is not running.
        unsafe {
            for i in 0..SLOTS {
                std::ptr::write_volatile(self.ctl.add(i), 0);
            }
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        let mut dptr: sys::CUdeviceptr = 0;
        // SAFETY: `ctl` is mapped host memory of this context.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, self.ctl as *mut c_void, 0) }
            .result()
            .map_err(|e| cuda_err("mapping the watch's memory", e))?;
        let mut quiet = match quiet_us {
            Some(q) if q.is_finite() && q >= 0.0 => (q * 1e3) as u64,
            Some(q) => {
                return Err(PyValueError::new_err(format!(
                    "quiet_us must be >= 0, not {q}"
                )))
            }
            None => self.quiet_ns,
        };
        let (mut gap, mut cap, mut life) = (self.gap_ns, self.cap_ns.max(quiet), self.life_ns);
        let mut params: [*mut c_void; 5] = [
            &mut dptr as *mut _ as *mut c_void,
            &mut gap as *mut _ as *mut c_void,
            &mut quiet as *mut _ as *mut c_void,
            &mut cap as *mut _ as *mut c_void,
            &mut life as *mut _ as *mut c_void,
        ];
        let launched = Instant::now();
        // SAFETY: one thread; the parameters match the kernel's four u64s and outlive the call.
        unsafe {
            result::launch_kernel(self.func, (1, 1, 1), (1, 1, 1), 0, self.stream, &mut params)
        }
        .map_err(|e| cuda_err("launching the watch kernel", e))?;
        self.running = Some(Running {
            launched,
            start_ns: None,
        });
        self.started().map(|_| ())
    }

    /// Whether the watch is running (started and not yet stopped).
    #[getter]
    fn running(&self) -> bool {
        self.running.is_some()
    }

    /// The worker can queue nothing more from now on (it is stopped): the quiet the watch needs
    /// before it ends counts from here. Waits for the kernel to have started, so the moment is
    /// one it sees.
    fn worker_stopped(&mut self) -> PyResult<()> {
        self.started()?;
        // SAFETY: slot 2 is the host's.
        unsafe { self.slot_write(2, 1) };
        Ok(())
    }

    /// Ends the watch: asks the kernel to stop, waits until it has (it first runs `quiet`
    /// without a jump after `worker_stopped`), and returns
    /// `(stolen_ms, jumps, start_ms, watched_ms, pace_us, state)`.
    fn stop(&mut self) -> PyResult<(f64, u64, f64, f64, f64, &'static str)> {
        let start_ns = self.started()?;
        // SAFETY: slots 0 and 2 are the host's; the kernel reads them.
        unsafe {
            if self.slot(2) == 0 {
                self.slot_write(2, 1);
            }
            self.slot_write(0, 1);
        }
        // SAFETY: the watch's own stream.
        let synced = unsafe { result::stream::synchronize(self.stream) };
        self.running = None;
        synced.map_err(|e| cuda_err("waiting for the watch kernel", e))?;
        // SAFETY: the kernel has finished and its writes are fenced.
        let seen = unsafe {
            Seen {
                stolen_ns: self.slot(3),
                jumps: self.slot(4),
                start_ns,
                watched_ns: self.slot(5).saturating_sub(self.slot(1)),
                pace_ns: self.slot(7),
                state: self.slot(6),
            }
        };
        let state = match seen.state {
            1 => "quiet",
            2 => "busy",
            _ => "expired",
        };
        Ok((
            seen.stolen_ns as f64 / 1e6,
            seen.jumps,
            seen.start_ns as f64 / 1e6,
            seen.watched_ns as f64 / 1e6,
            seen.pace_ns as f64 / 1e3,
            state,
        ))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GpuWatch>()?;
    Ok(())
}

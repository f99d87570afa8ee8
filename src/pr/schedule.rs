//! The evaluation stage's scheduler. Kernels that need a build (CUDA/C++ extensions) are built
//! on CPU cores ahead of the devices, several at once; each device evaluates one kernel at a
//! time, always the earliest one whose build is ready; while a device is busy, the process of
//! the kernel it will take next is started, and those of up to three kernels still building
//! (their interpreters import torch meanwhile).
//!
//! Kernels that run on the CPU whatever the device (CPU C++ extensions) get a lane of their own
//! on a GPU runner, so they never hold a GPU. Where the runner has CPUs to spare, each lane has
//! CPUs no build or GPU eval uses (`cores`) and starts as soon as its kernel is built; else one
//! lane on every CPU starts once no build is left, since parallel builds on the same cores would
//! distort CPU timing (a reference timed before and after the candidate's import under
//! different loads reads as tampering).
//!
//! Events go back to the caller's thread over a channel, in the order they happen, so the
//! report can be rewritten and progress printed as each kernel moves on.

use std::collections::{BTreeSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Condvar, Mutex};
use std::time::Instant;

use kernelgate_report::TimeSpent;

use super::evaluator::{Device, Evaluated, Evaluator};
use super::plan::Job;

/// What happened to one kernel, as it happened.
pub enum Event {
    BuildStarted(usize),
    /// The build ended; `Err` carries why it did not build (the eval reports the truth).
    Built(usize, Result<(), String>),
    EvalStarted(usize, Device),
    /// The last eval of the kernel (after a retry, if there was one).
    Evaluated(usize, Device, Box<Evaluated>, TimeSpent),
}

/// Host memory one build may take (nvcc and g++ on torch's headers: 1.5-2.5 GiB).
const BUILD_MEMORY_BYTES: u64 = 3 << 30;

/// How many builds run at once when the configuration says `0` (auto): one per core not kept
/// for the devices' own host threads, as many as `available_memory` holds, at least one. Each
/// build runs with `MAX_JOBS=2`, but most of a CUDA build is one process (nvcc on the device
/// translation unit: 60 of its 65 s on an H200 host), so a build is about one core.
pub fn auto_build_workers(cores: usize, devices: usize, available_memory: Option<u64>) -> usize {
    let by_cores = cores.saturating_sub(2 * devices);
    let by_memory = available_memory.map_or(usize::MAX, |m| (m / BUILD_MEMORY_BYTES) as usize);
    by_cores.min(by_memory).max(1)
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
pub fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The kind of worker a kernel needs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lane {
    Gpu,
    Cpu,
}

struct State {
    /// A GPU runner: its CPU lane waits for the builds, unless the lanes have CPUs of their own.
    gpu_runner: bool,
    /// CPU lanes on CPUs no build uses ([`Evaluator::cpu_lanes`]): they need not wait.
    lanes_confined: bool,
    /// Not yet started building, in plan order.
    to_build: VecDeque<usize>,
    /// Ready for a worker of each lane; the earliest (plan order) goes first.
    ready: [BTreeSet<usize>; 2],
    /// Queued or building, per lane: its workers wait for these.
    unready: [BTreeSet<usize>; 2],
    /// Kernels whose process a waiting GPU worker already started before their build ended.
    speculated: BTreeSet<usize>,
    /// Workers looking for their next kernel, per lane: from the end of an eval (or their start)
    /// until they take one, waiting or not. Counted all along, not only while they wait: a
    /// worker woken by a finished build is still looking until it holds the lock again.
    seeking: [usize; 2],
    lane: Vec<Lane>,
    build_started: Vec<Option<Instant>>,
    build_ms: Vec<f64>,
    ready_at: Vec<Option<Instant>>,
}

/// Processes a GPU worker keeps started for kernels still building. Each imports torch, which
/// takes 2-5 s beside a round of builds, longer than an eval after its build (about 3 s): with
/// one started ahead, the second and later of kernels built together still waited for theirs.
/// Each waits idle (a few hundred MB of host memory, no CUDA context) until its job comes.
const STARTED_AHEAD: usize = 3;

enum Take {
    Job(usize),
    /// Start this (still building) kernel's process now.
    Speculate(usize),
    Done,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The earliest ready kernel of `lane` (one whose process this worker started, `mine`,
    /// first), waiting for one; `Done` when nothing is left. A GPU worker about to wait with
    /// fewer than [`STARTED_AHEAD`] processes started is told instead to start the process of
    /// the earliest kernel still building: its eval then starts the moment the build ends,
    /// without the process's start-up.
    fn take(
        &self,
        (device, lane): (Device, Lane),
        evaluator: &dyn Evaluator,
        mine: &mut Vec<usize>,
        taken_elsewhere: &mut Vec<usize>,
    ) -> Take {
        let l = lane as usize;
        let mut s = self.lock();
        // The caller is counted in `seeking` (by `run`, or where its last eval ended) until
        // this gives it a kernel or tells it nothing is left.
        let found = |s: &mut State, take: Take| {
            s.seeking[l] -= 1;
            take
        };
        loop {
            // Taken by another worker meanwhile: this worker lets its process go.
            mine.retain(|j| {
                let open = s.ready[l].contains(j) || s.unready[l].contains(j);
                if !open {
                    taken_elsewhere.push(*j);
                }
                open
            });
            let builds_left = s.unready[0].len() + s.unready[1].len();
            let held = lane == Lane::Cpu && s.gpu_runner && !s.lanes_confined && builds_left > 0;
            if !held {
                let own = mine
                    .iter()
                    .copied()
                    .filter(|j| s.ready[l].contains(j))
                    .min();
                if let Some(i) = own.or_else(|| s.ready[l].first().copied()) {
                    s.ready[l].remove(&i);
                    mine.retain(|&j| j != i);
                    return found(&mut s, Take::Job(i));
                }
            }
            if s.unready[l].is_empty() && s.ready[l].is_empty() {
                return found(&mut s, Take::Done);
            }
            if let Some(j) = Self::speculate(&mut s, lane, mine) {
                return Take::Speculate(j);
            }
            evaluator.waiting(device, s.ready[l].len());
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A still-building kernel of a GPU lane to start the process of, when `mine` has room.
    fn speculate(s: &mut State, lane: Lane, mine: &mut Vec<usize>) -> Option<usize> {
        if lane != Lane::Gpu || mine.len() >= STARTED_AHEAD {
            return None;
        }
        let speculated = &s.speculated;
        let j = s.unready[lane as usize]
            .iter()
            .copied()
            .find(|j| !speculated.contains(j))?;
        s.speculated.insert(j);
        mine.push(j);
        Some(j)
    }

    /// [`Shared::speculate`] without waiting: topping up while this worker evaluates.
    fn speculate_now(&self, lane: Lane, mine: &mut Vec<usize>) -> Option<usize> {
        let mut s = self.lock();
        Self::speculate(&mut s, lane, mine)
    }

    /// The earliest ready kernel to start ahead on a busy GPU, only when no GPU worker is
    /// looking for work (a kernel held ahead must not leave an idle GPU without work). Never on
    /// the CPU lane: a process importing torch beside CPU timing would disturb it.
    fn take_ahead(&self, lane: Lane, mine: &[usize]) -> Option<usize> {
        let l = lane as usize;
        let mut s = self.lock();
        if lane == Lane::Cpu || s.seeking[l] > 0 {
            return None;
        }
        let own = mine
            .iter()
            .copied()
            .filter(|j| s.ready[l].contains(j))
            .min();
        let i = own.or_else(|| s.ready[l].first().copied())?;
        s.ready[l].remove(&i);
        Some(i)
    }
}

/// Runs `todo` (indices into `jobs`) on `devices`, building ahead with `build_workers` threads
/// when a device is a GPU. Calls `on_event` on the caller's thread for every event; returns
/// when every kernel was evaluated or `on_event` failed.
pub fn run<E>(
    evaluator: &dyn Evaluator,
    jobs: &[Job],
    todo: Vec<usize>,
    devices: &[Device],
    build_workers: usize,
    mut on_event: impl FnMut(Event) -> Result<(), E>,
) -> Result<(), E> {
    let stage_start = Instant::now();
    // Never build ahead of a CPU device: builds would share its cores with the timing.
    let gpu_runner = devices.iter().any(|d| matches!(d, Device::Cuda(_)));
    let mut state = initial_state(evaluator, jobs, todo, gpu_runner, stage_start);
    let lanes = evaluator.cpu_lanes().filter(|_| gpu_runner);
    state.lanes_confined = lanes.is_some();
    // Workers: each device in its lane, plus CPU workers on a GPU runner with CPU kernels (one,
    // or one per confined lane).
    let mut workers: Vec<(Device, Lane)> = devices
        .iter()
        .map(|&d| (d, if gpu_runner { Lane::Gpu } else { Lane::Cpu }))
        .collect();
    let cpu_kernels =
        state.ready[Lane::Cpu as usize].len() + state.unready[Lane::Cpu as usize].len();
    if gpu_runner && cpu_kernels > 0 {
        for _ in 0..lanes.unwrap_or(1).clamp(1, cpu_kernels) {
            workers.push((Device::Cpu, Lane::Cpu));
        }
    }
    // Every worker starts out looking for work, before its thread first runs.
    for &(_, lane) in &workers {
        state.seeking[lane as usize] += 1;
    }
    let builders = build_workers.max(1).min(state.to_build.len());
    let shared = Shared {
        state: Mutex::new(state),
        changed: Condvar::new(),
    };
    let (tx, rx) = mpsc::channel::<Event>();

    std::thread::scope(|scope| {
        for _ in 0..builders {
            let tx = tx.clone();
            let shared = &shared;
            scope.spawn(move || build_worker(shared, evaluator, jobs, &tx));
        }
        for &(device, lane) in &workers {
            let tx = tx.clone();
            let shared = &shared;
            scope.spawn(move || {
                eval_worker(shared, evaluator, jobs, (device, lane), stage_start, &tx)
            });
        }
        drop(tx);
        for event in rx {
            if let Err(e) = on_event(event) {
                // Stop handing out work; running evals finish and their results are dropped.
                let mut s = shared.lock();
                s.to_build.clear();
                s.unready = [BTreeSet::new(), BTreeSet::new()];
                s.ready = [BTreeSet::new(), BTreeSet::new()];
                drop(s);
                shared.changed.notify_all();
                return Err(e);
            }
        }
        Ok(())
    })
}

/// Every kernel in its lane: to build first (on a GPU runner, when it builds an extension) or
/// ready at once.
fn initial_state(
    evaluator: &dyn Evaluator,
    jobs: &[Job],
    todo: Vec<usize>,
    gpu_runner: bool,
    stage_start: Instant,
) -> State {
    let n = jobs.len();
    let mut state = State {
        gpu_runner,
        lanes_confined: false,
        to_build: VecDeque::new(),
        ready: [BTreeSet::new(), BTreeSet::new()],
        unready: [BTreeSet::new(), BTreeSet::new()],
        speculated: BTreeSet::new(),
        seeking: [0, 0],
        lane: vec![Lane::Gpu; n],
        build_started: vec![None; n],
        build_ms: vec![0.0; n],
        ready_at: vec![None; n],
    };
    for i in todo {
        let lane = if gpu_runner && !evaluator.runs_on_cpu(&jobs[i]) {
            Lane::Gpu
        } else {
            Lane::Cpu
        };
        state.lane[i] = lane;
        if gpu_runner && evaluator.needs_build(&jobs[i]) {
            state.to_build.push_back(i);
            state.unready[lane as usize].insert(i);
        } else {
            state.ready[lane as usize].insert(i);
            state.ready_at[i] = Some(stage_start);
        }
    }
    state
}

/// One build worker: builds kernels in order until none is left, each becoming ready in its lane.
fn build_worker(
    shared: &Shared,
    evaluator: &dyn Evaluator,
    jobs: &[Job],
    tx: &mpsc::Sender<Event>,
) {
    loop {
        let i = {
            let mut s = shared.lock();
            let Some(i) = s.to_build.pop_front() else {
                break;
            };
            s.build_started[i] = Some(Instant::now());
            i
        };
        let _ = tx.send(Event::BuildStarted(i));
        let t0 = Instant::now();
        let built = std::panic::catch_unwind(AssertUnwindSafe(|| evaluator.build(&jobs[i])))
            .unwrap_or_else(|_| Err("the build stage panicked".into()));
        {
            let mut s = shared.lock();
            s.build_ms[i] = t0.elapsed().as_secs_f64() * 1000.0;
            s.ready_at[i] = Some(Instant::now());
            let l = s.lane[i] as usize;
            s.ready[l].insert(i);
            s.unready[l].remove(&i);
        }
        shared.changed.notify_all();
        let _ = tx.send(Event::Built(i, built));
    }
}

/// One device's worker: evaluates ready kernels of its lane, starting the next one's process
/// ahead (or a building one's, when idle), retrying an infrastructure failure once.
fn eval_worker(
    shared: &Shared,
    evaluator: &dyn Evaluator,
    jobs: &[Job],
    (device, lane): (Device, Lane),
    stage_start: Instant,
    tx: &mpsc::Sender<Event>,
) {
    let mut next: Option<usize> = None;
    // Kernels whose process this worker started while their build ran.
    let mut speculated: Vec<usize> = Vec::new();
    let mut taken_elsewhere = Vec::new();
    // This worker is counted in `State::seeking` (by `run`) until `take` gives it a kernel.
    loop {
        let take = match next.take() {
            Some(i) => Take::Job(i),
            None => shared.take(
                (device, lane),
                evaluator,
                &mut speculated,
                &mut taken_elsewhere,
            ),
        };
        for j in taken_elsewhere.drain(..) {
            evaluator.discard(&jobs[j], device);
        }
        let i = match take {
            Take::Job(i) => i,
            Take::Speculate(j) => {
                evaluator.prepare(&jobs[j], device);
                continue;
            }
            Take::Done => break,
        };
        speculated.retain(|&j| j != i);
        next = shared.take_ahead(lane, &speculated);
        if let Some(j) = next {
            // Its process may have been started while it built: not a second one.
            if !speculated.contains(&j) {
                evaluator.prepare(&jobs[j], device);
            }
            speculated.retain(|&k| k != j);
        }
        while let Some(j) = shared.speculate_now(lane, &mut speculated) {
            evaluator.prepare(&jobs[j], device);
        }
        let started = Instant::now();
        if tx.send(Event::EvalStarted(i, device)).is_err() {
            break;
        }
        let mut eval = evaluate(evaluator, &jobs[i], device);
        let mut retries = 0;
        if eval.is_infrastructure() {
            // The machine's or kernelgate's fault, not the candidate's: once more.
            retries = 1;
            eval = evaluate(evaluator, &jobs[i], device);
        }
        let ended = Instant::now();
        let spent = {
            let mut s = shared.lock();
            if next.is_none() {
                // Looking for its next kernel from now until `take` gives it one.
                s.seeking[lane as usize] += 1;
            }
            let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1000.0;
            let queued_until = s.build_started[i].unwrap_or(started);
            TimeSpent {
                queued_ms: ms(stage_start, queued_until),
                build_ms: s.build_ms[i],
                wait_ms: ms(s.ready_at[i].unwrap_or(started).max(queued_until), started),
                eval_ms: ms(started, ended),
                total_ms: ms(stage_start, ended),
                retries,
                phases: eval.phases(),
                build: eval.build_source(),
            }
        };
        if tx
            .send(Event::Evaluated(i, device, Box::new(eval), spent))
            .is_err()
        {
            break;
        }
    }
    for j in next.into_iter().chain(speculated) {
        // Started ahead but not evaluated here: let it go.
        evaluator.discard(&jobs[j], device);
    }
}

fn evaluate(evaluator: &dyn Evaluator, job: &Job, device: Device) -> Evaluated {
    std::panic::catch_unwind(AssertUnwindSafe(|| evaluator.evaluate(job, device))).unwrap_or_else(
        |panic| {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Evaluated::Error(format!(
                "internal error in kernelgate (please report): {msg}"
            ))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pr::changes::{KernelChange, KernelStatus};
    use kernelgate_eval::Outcome;
    use kernelgate_model::{Backend, Precision};
    use std::collections::{HashMap, HashSet};
    use std::path::PathBuf;
    use std::time::Duration;

    fn job(path: &str, backend: Backend) -> Job {
        Job {
            change: KernelChange {
                path: path.to_string(),
                problem: Some("level1/3_ReLU".into()),
                status: KernelStatus::Added,
                ..KernelChange::default()
            },
            kernel_file: PathBuf::from(path),
            problem_file: Some(PathBuf::from("KernelBench/level1/3_ReLU.py")),
            base_file: None,
            backend,
            precision: Precision::Fp32,
            source: String::new(),
            sources: Vec::new(),
            base_sources: Vec::new(),
        }
    }

    /// What the fake did, in the order it happened: `("built", path)`, `("start cuda:0", path)`.
    type Log = Vec<(String, String)>;

    /// An evaluator whose builds and evals wait at gates the test opens: the test decides
    /// what is still building or evaluating when the scheduler acts, with no clock involved.
    /// Every step is logged in order; the test waits for a step (`wait_for`) before it asserts.
    struct Gated {
        builds: HashSet<String>,
        failing_builds: Vec<String>,
        cpu_only: Vec<String>,
        lanes: Option<usize>,
        /// Paths whose first eval is an infrastructure failure (`true`: every eval).
        flaky: HashMap<String, bool>,
        /// Gates held closed until `open`: `"build a.py"`, `"eval a.py"`. Others pass at once.
        closed: Mutex<HashSet<String>>,
        opened: Condvar,
        log: Mutex<Log>,
        logged: Condvar,
        evals: Mutex<HashMap<String, u32>>,
    }

    /// How long a test waits for a step the scheduler should take before calling it stuck: a
    /// deadlock guard, never reached when the scheduler works.
    const STUCK: Duration = Duration::from_secs(30);

    impl Gated {
        fn new(builds: &[&str]) -> Gated {
            Gated {
                builds: builds.iter().map(|p| p.to_string()).collect(),
                failing_builds: vec![],
                cpu_only: vec![],
                lanes: None,
                flaky: HashMap::new(),
                closed: Mutex::new(HashSet::new()),
                opened: Condvar::new(),
                log: Mutex::new(vec![]),
                logged: Condvar::new(),
                evals: Mutex::new(HashMap::new()),
            }
        }
        /// Holds `gate` (`"build a.py"`, `"eval a.py"`) closed until `open`.
        fn hold(self, gates: &[&str]) -> Gated {
            self.closed
                .lock()
                .unwrap()
                .extend(gates.iter().map(|g| g.to_string()));
            self
        }
        fn open(&self, gate: &str) {
            assert!(
                self.closed.lock().unwrap().remove(gate),
                "{gate} was not held"
            );
            self.opened.notify_all();
        }
        fn pass(&self, gate: String) {
            let mut closed = self.closed.lock().unwrap();
            while closed.contains(&gate) {
                closed = self.opened.wait(closed).unwrap();
            }
        }
        fn note(&self, what: &str, path: &str) {
            self.log
                .lock()
                .unwrap()
                .push((what.to_string(), path.to_string()));
            self.logged.notify_all();
        }
        /// Waits until `what` happened to `path`; panics when it never does.
        fn wait_for(&self, what: &str, path: &str) {
            self.wait_until(what, path, |w| w == what);
        }
        /// Waits until an action of `path` that `matches` is logged (`described` names it in
        /// the failure); that action.
        fn wait_until(
            &self,
            described: &str,
            path: &str,
            matches: impl Fn(&str) -> bool,
        ) -> String {
            let log = self.log.lock().unwrap();
            let (log, timeout) = self
                .logged
                .wait_timeout_while(log, STUCK, |log| {
                    !log.iter().any(|(w, p)| matches(w) && p == path)
                })
                .unwrap();
            assert!(!timeout.timed_out(), "never: {described} {path}; {log:?}");
            let (w, _) = log.iter().find(|(w, p)| matches(w) && p == path).unwrap();
            w.clone()
        }
        /// Position of `what` of `path` in the log.
        fn at(&self, what: &str, path: &str) -> usize {
            let log = self.log.lock().unwrap();
            log.iter()
                .position(|(w, p)| w == what && p == path)
                .unwrap_or_else(|| panic!("no {what} of {path}: {log:?}"))
        }
        /// Waits until `what` (on any device: `"start"`, `"prepare"`) happened to `path`;
        /// the device it happened on.
        fn wait_for_any(&self, what: &str, path: &str) -> String {
            let prefix = format!("{what} ");
            let w = self.wait_until(what, path, |w| w.starts_with(&prefix));
            w[prefix.len()..].to_string()
        }
        /// Waits until `path`'s eval starts; the device it started on.
        fn started_on(&self, path: &str) -> String {
            self.wait_for_any("start", path)
        }
        fn happened(&self, what: &str, path: &str) -> bool {
            let log = self.log.lock().unwrap();
            log.iter().any(|(w, p)| w == what && p == path)
        }
        fn count(&self, prefix: &str) -> usize {
            let log = self.log.lock().unwrap();
            log.iter().filter(|(w, _)| w.starts_with(prefix)).count()
        }
    }

    impl Evaluator for Gated {
        fn needs_build(&self, job: &Job) -> bool {
            self.builds.contains(job.path())
        }
        fn runs_on_cpu(&self, job: &Job) -> bool {
            self.cpu_only.iter().any(|p| p == job.path())
        }
        fn cpu_lanes(&self) -> Option<usize> {
            self.lanes
        }
        fn build(&self, job: &Job) -> Result<(), String> {
            self.note("building", job.path());
            self.pass(format!("build {}", job.path()));
            self.note("built", job.path());
            if self.failing_builds.iter().any(|p| p == job.path()) {
                return Err("nvcc: error".into());
            }
            Ok(())
        }
        fn prepare(&self, job: &Job, device: Device) {
            self.note(&format!("prepare {device}"), job.path());
        }
        fn discard(&self, job: &Job, device: Device) {
            self.note(&format!("discard {device}"), job.path());
        }
        fn waiting(&self, device: Device, ready: usize) {
            self.note(&format!("waiting {device}"), &format!("{ready} ready"));
        }
        fn evaluate(&self, job: &Job, device: Device) -> Evaluated {
            let n = {
                let mut e = self.evals.lock().unwrap();
                let n = e.entry(job.path().to_string()).or_insert(0);
                *n += 1;
                *n
            };
            self.note(&format!("start {device}"), job.path());
            self.pass(format!("eval {}", job.path()));
            self.note(&format!("end {device}"), job.path());
            match self.flaky.get(job.path()) {
                Some(always) if *always || n == 1 => Evaluated::ended(Outcome::Infrastructure {
                    message: "CUDA driver error at start-up".into(),
                    traceback: String::new(),
                }),
                _ => Evaluated::ended(Outcome::Passed { trials: 5 }),
            }
        }
    }

    /// Each kernel's last eval: its device, whether it was an infrastructure failure, its time.
    type Done = Vec<(usize, Device, bool, TimeSpent)>;

    fn run_all(ev: &Gated, jobs: &[Job], devices: &[Device], builders: usize) -> Done {
        let mut done = Vec::new();
        run::<()>(
            ev,
            jobs,
            (0..jobs.len()).collect(),
            devices,
            builders,
            |e| {
                if let Event::Evaluated(i, d, eval, spent) = e {
                    done.push((i, d, eval.is_infrastructure(), spent));
                }
                Ok(())
            },
        )
        .unwrap();
        done
    }

    /// Runs the stage on another thread while `drive` opens gates on this one.
    fn run_driven(
        ev: &Gated,
        jobs: &[Job],
        devices: &[Device],
        builders: usize,
        drive: impl FnOnce(&Gated),
    ) -> Done {
        std::thread::scope(|s| {
            let stage = s.spawn(|| run_all(ev, jobs, devices, builders));
            let driven = std::panic::catch_unwind(AssertUnwindSafe(|| drive(ev)));
            if let Err(panic) = driven {
                // Let the stage finish, then report the test's own failure.
                ev.closed.lock().unwrap().clear();
                ev.opened.notify_all();
                let _ = stage.join();
                std::panic::resume_unwind(panic);
            }
            stage.join().expect("the stage panicked")
        })
    }

    /// Each eval on `device` as (start, end) positions in the log.
    fn evals_on(ev: &Gated, device: Device) -> Vec<(usize, usize)> {
        let log = ev.log.lock().unwrap();
        let (start, end) = (format!("start {device}"), format!("end {device}"));
        log.iter()
            .enumerate()
            .filter(|(_, (w, _))| *w == start)
            .map(|(t, (_, p))| {
                let e = (t..log.len())
                    .find(|&e| log[e].0 == end && log[e].1 == *p)
                    .unwrap_or_else(|| panic!("{p} never ended on {device}: {log:?}"));
                (t, e)
            })
            .collect()
    }

    #[test]
    fn builds_run_in_parallel_and_feed_every_gpu_earliest_ready_first() {
        // k0 is still building while the three after it are built.
        let paths = ["k0.py", "k1.py", "k2.py", "k3.py"];
        let ev = Gated::new(&paths).hold(&[
            "build k0.py",
            "build k1.py",
            "build k2.py",
            "build k3.py",
            "eval k1.py",
            "eval k2.py",
        ]);
        let jobs: Vec<Job> = paths.iter().map(|p| job(p, Backend::Cuda)).collect();
        let gpus = [Device::Cuda(0), Device::Cuda(1)];
        let done = run_driven(&ev, &jobs, &gpus, 4, |ev| {
            // Four builders: all four builds under way at once.
            for p in paths {
                ev.wait_for("building", p);
            }
            ev.open("build k2.py");
            ev.open("build k1.py");
            // Both GPUs take the two built kernels (held there) while k0 and k3 still build.
            let k1 = ev.started_on("k1.py");
            let k2 = ev.started_on("k2.py");
            assert_ne!(k1, k2, "one GPU idled while a built kernel waited");
            assert!(!ev.happened("built", "k0.py"));
            assert!(!ev.happened("built", "k3.py"));
            ev.open("build k3.py");
            ev.open("build k0.py");
            ev.open("eval k1.py");
            ev.open("eval k2.py");
        });
        assert_eq!(done.len(), 4);
        // Both GPUs worked, neither ran two kernels at once.
        for gpu in gpus {
            let spans = evals_on(&ev, gpu);
            assert!(!spans.is_empty(), "{gpu} never evaluated anything");
            for w in spans.windows(2) {
                assert!(w[1].0 > w[0].1, "{gpu} ran two evals at once: {spans:?}");
            }
        }
        // Every eval starts after its own build.
        for p in paths {
            let start = ev
                .log
                .lock()
                .unwrap()
                .iter()
                .position(|(w, q)| w.starts_with("start") && q == p)
                .unwrap();
            assert!(start > ev.at("built", p), "{p} evaluated before its build");
        }
        // Where the time went, per kernel: the build, then the eval, within the total.
        let k0 = &done.iter().find(|d| d.0 == 0).unwrap().3;
        assert!(k0.build_ms > 0.0, "{k0:?}");
        assert!(k0.total_ms >= k0.build_ms + k0.eval_ms, "{k0:?}");
    }

    #[test]
    fn a_failed_build_does_not_stop_the_others_and_its_kernel_is_still_evaluated() {
        let mut ev = Gated::new(&["bad.py", "good.py"]);
        ev.failing_builds = vec!["bad.py".into()];
        let jobs = vec![job("bad.py", Backend::Cuda), job("good.py", Backend::Cuda)];
        let done = run_all(&ev, &jobs, &[Device::Cuda(0)], 1);
        let mut evaluated: Vec<usize> = done.iter().map(|d| d.0).collect();
        evaluated.sort();
        assert_eq!(evaluated, vec![0, 1]);
    }

    #[test]
    fn kernels_without_a_build_go_to_the_gpu_while_others_build() {
        let ev = Gated::new(&["cuda.py"]).hold(&["build cuda.py"]);
        let jobs = vec![
            job("cuda.py", Backend::Cuda),
            job("triton.py", Backend::Triton),
        ];
        run_driven(&ev, &jobs, &[Device::Cuda(0)], 1, |ev| {
            ev.wait_for("end cuda:0", "triton.py");
            ev.open("build cuda.py");
        });
        assert!(ev.at("end cuda:0", "triton.py") < ev.at("built", "cuda.py"));
    }

    #[test]
    fn a_cpu_device_never_builds_ahead() {
        let ev = Gated::new(&["a.py", "b.py"]);
        let jobs = vec![job("a.py", Backend::Cuda), job("b.py", Backend::Cuda)];
        let done = run_all(&ev, &jobs, &[Device::Cpu], 2);
        assert_eq!(done.len(), 2);
        assert_eq!(ev.count("built"), 0);
        assert!(done.iter().all(|d| d.3.build_ms == 0.0));
    }

    #[test]
    fn the_next_kernel_is_started_ahead_on_a_busy_gpu() {
        let ev = Gated::new(&[]).hold(&["eval a.py"]);
        let jobs = vec![job("a.py", Backend::Triton), job("b.py", Backend::Triton)];
        run_driven(&ev, &jobs, &[Device::Cuda(0)], 1, |ev| {
            // b's process is started while a runs, before b's own eval.
            ev.wait_for("prepare cuda:0", "b.py");
            ev.open("eval a.py");
        });
        assert!(ev.at("prepare cuda:0", "b.py") < ev.at("end cuda:0", "a.py"));
    }

    #[test]
    fn an_infrastructure_failure_is_retried_once() {
        let mut ev = Gated::new(&[]);
        ev.flaky.insert("once.py".into(), false);
        ev.flaky.insert("always.py".into(), true);
        let jobs = vec![
            job("once.py", Backend::Triton),
            job("always.py", Backend::Triton),
        ];
        let done = run_all(&ev, &jobs, &[Device::Cuda(0)], 1);
        let once = done.iter().find(|d| d.0 == 0).unwrap();
        assert_eq!(
            (once.2, once.3.retries),
            (false, 1),
            "passed the second time"
        );
        let always = done.iter().find(|d| d.0 == 1).unwrap();
        assert_eq!((always.2, always.3.retries), (true, 1));
        assert_eq!(
            ev.evals.lock().unwrap()["always.py"],
            2,
            "retried exactly once"
        );
    }

    #[test]
    fn cpu_kernels_get_their_own_lane_and_never_hold_a_gpu() {
        let mut ev = Gated::new(&[]).hold(&["eval cpp.py"]);
        ev.cpu_only = vec!["cpp.py".into()];
        let jobs = vec![job("cpp.py", Backend::Cpp), job("cuda.py", Backend::Cuda)];
        let done = run_driven(&ev, &jobs, &[Device::Cuda(0)], 1, |ev| {
            // Side by side: the GPU's eval runs while the CPU's is held.
            ev.wait_for("start cpu", "cpp.py");
            ev.wait_for("end cuda:0", "cuda.py");
            ev.open("eval cpp.py");
        });
        let on = |i: usize| done.iter().find(|d| d.0 == i).unwrap().1;
        assert_eq!((on(0), on(1)), (Device::Cpu, Device::Cuda(0)));
    }

    #[test]
    fn an_idle_gpu_starts_the_process_of_a_kernel_still_building() {
        let ev = Gated::new(&["slow.py"]).hold(&["build slow.py"]);
        let jobs = vec![job("slow.py", Backend::Cuda)];
        run_driven(&ev, &jobs, &[Device::Cuda(0)], 1, |ev| {
            ev.wait_for("prepare cuda:0", "slow.py");
            ev.open("build slow.py");
        });
        assert!(ev.at("prepare cuda:0", "slow.py") < ev.at("built", "slow.py"));
        assert!(ev.at("start cuda:0", "slow.py") > ev.at("built", "slow.py"));
    }

    #[test]
    fn an_idle_gpu_starts_the_processes_of_three_kernels_still_building_and_no_more() {
        let paths = ["a.py", "b.py", "c.py", "d.py"];
        let ev = Gated::new(&paths).hold(&["build a.py", "build b.py", "build c.py", "build d.py"]);
        let jobs: Vec<Job> = paths.iter().map(|p| job(p, Backend::Cuda)).collect();
        let done = run_driven(&ev, &jobs, &[Device::Cuda(0)], 4, |ev| {
            for p in ["a.py", "b.py", "c.py"] {
                ev.wait_for("prepare cuda:0", p);
            }
            for p in paths {
                ev.wait_for("building", p);
            }
            // The fourth waits for a free place: started only once a build ended and its
            // eval took one.
            ev.open("build a.py");
            ev.wait_for("prepare cuda:0", "d.py");
            for p in ["build b.py", "build c.py", "build d.py"] {
                ev.open(p);
            }
        });
        assert_eq!(done.len(), 4);
        assert!(ev.at("prepare cuda:0", "d.py") > ev.at("built", "a.py"));
        let log = ev.log.lock().unwrap();
        let prepared = |p: &str| {
            log.iter()
                .filter(|(w, q)| w.starts_with("prepare") && q == p)
                .count()
        };
        // One process per kernel: a started one is not started again when it is taken ahead.
        assert!(paths.iter().all(|p| prepared(p) == 1), "{log:?}");
    }

    #[test]
    fn a_kernel_started_on_one_gpu_and_taken_by_another_is_let_go_there() {
        let ev = Gated::new(&["a.py", "b.py"]).hold(&["build a.py", "build b.py"]);
        let jobs = vec![job("a.py", Backend::Cuda), job("b.py", Backend::Cuda)];
        let gpus = [Device::Cuda(0), Device::Cuda(1)];
        let done = run_driven(&ev, &jobs, &gpus, 2, |ev| {
            // The idle GPUs start processes for the kernels still building.
            for p in ["a.py", "b.py"] {
                ev.wait_for_any("prepare", p);
            }
            ev.open("build a.py");
            ev.open("build b.py");
        });
        assert_eq!(done.len(), 2);
        let log = ev.log.lock().unwrap();
        let prepared = log.iter().filter(|(w, _)| w.starts_with("prepare")).count();
        let discarded = log.iter().filter(|(w, _)| w.starts_with("discard")).count();
        let used = done
            .iter()
            .filter(|(i, d, _, _)| {
                log.iter()
                    .any(|(w, p)| *w == format!("prepare {d}") && *p == jobs[*i].path())
            })
            .count();
        // Every process started ahead was either used by its own GPU or let go.
        assert_eq!(prepared, used + discarded, "{log:?}");
    }

    #[test]
    fn nothing_is_started_ahead_beside_cpu_timing() {
        let ev = Gated::new(&[]);
        let jobs = vec![job("a.py", Backend::Cpp), job("b.py", Backend::Cpp)];
        run_all(&ev, &jobs, &[Device::Cpu], 1);
        assert_eq!(ev.count("start cpu"), 2);
        assert_eq!(ev.count("prepare"), 0);
    }

    #[test]
    fn the_cpu_lane_waits_until_no_build_is_left() {
        let mut ev = Gated::new(&["cpp.py", "cuda.py"]).hold(&["build cuda.py"]);
        ev.cpu_only = vec!["cpp.py".into()];
        let jobs = vec![job("cpp.py", Backend::Cpp), job("cuda.py", Backend::Cuda)];
        run_driven(&ev, &jobs, &[Device::Cuda(0)], 2, |ev| {
            // cpp.py is built, and the CPU lane waits with it ready.
            ev.wait_for("waiting cpu", "1 ready");
            ev.open("build cuda.py");
        });
        assert!(ev.at("start cpu", "cpp.py") > ev.at("built", "cuda.py"));
    }

    #[test]
    fn confined_cpu_lanes_start_once_their_kernel_is_built_side_by_side() {
        let paths = ["a.py", "b.py", "c.py", "cuda.py"];
        let mut ev =
            Gated::new(&paths).hold(&["build cuda.py", "build c.py", "eval a.py", "eval b.py"]);
        ev.cpu_only = vec!["a.py".into(), "b.py".into(), "c.py".into()];
        ev.lanes = Some(2);
        let jobs = vec![
            job("a.py", Backend::Cpp),
            job("b.py", Backend::Cpp),
            job("c.py", Backend::Cpp),
            job("cuda.py", Backend::Cuda),
        ];
        let done = run_driven(&ev, &jobs, &[Device::Cuda(0)], 4, |ev| {
            // Their CPUs are their own: no waiting for the CUDA build.
            ev.wait_for("start cpu", "a.py");
            ev.wait_for("start cpu", "b.py");
            // c is built while both lanes are busy: it waits for one.
            ev.open("build c.py");
            ev.wait_for("built", "c.py");
            ev.open("eval a.py");
            ev.wait_for("start cpu", "c.py");
            ev.open("eval b.py");
            ev.open("build cuda.py");
        });
        assert_eq!(done.len(), 4);
        assert!(ev.at("start cpu", "b.py") < ev.at("built", "cuda.py"));
        // Two lanes: two CPU evals at once, never three (c waited for a's lane).
        let cpu = evals_on(&ev, Device::Cpu);
        let overlapping = |t: usize| cpu.iter().filter(|(s, e)| *s <= t && t < *e).count();
        assert_eq!(
            cpu.iter().map(|(s, _)| overlapping(*s)).max(),
            Some(2),
            "{cpu:?}"
        );
        assert!(ev.at("start cpu", "c.py") > ev.at("end cpu", "a.py"));
    }

    #[test]
    fn auto_build_workers_leave_cores_for_the_gpus_and_memory_for_each_build() {
        assert_eq!(auto_build_workers(16, 1, None), 14);
        assert_eq!(auto_build_workers(16, 8, None), 1);
        assert_eq!(auto_build_workers(2, 1, None), 1);
        // 3 GiB per build: 20 GiB available holds 6.
        assert_eq!(auto_build_workers(16, 1, Some(20 << 30)), 6);
        assert_eq!(auto_build_workers(16, 1, Some(1 << 30)), 1);
    }
}

//! qforge-pool: hot worker threads for the short parallel loops of qforge's CPU mat-vec and
//! mat-mul.
//!
//! A mat-vec over a 4096 × 4096 quantized weight takes 0.1–0.6 ms on one core. Handed to rayon,
//! such a loop waits for workers that went to sleep after the previous one, and waking a
//! sleeping thread costs tens of µs on a virtual machine (an idle vCPU halts, and the wake-up
//! goes through the hypervisor): two threads reached 1.0–1.7× of one on the 2-core Xeon of
//! docs/matmul.md, where ggml reaches 1.9–2.0×. Here the calling thread runs tasks itself,
//! and the helper threads spin for a while after each loop before they park, as ggml's
//! thread pool and OpenMP runtimes do: [`spin`], `QFORGE_SPIN_US` (default 1000 µs; 0 parks at
//! once). Tasks are claimed one at a time from a shared counter, so a slowed thread takes
//! fewer of them.
//!
//! The thread count is rayon's ([`rayon::current_num_threads`]: the pool a caller `install`s
//! into decides, as for everything else in qforge-cpu). The helpers are one process-wide set,
//! started when first needed; a loop that finds them busy (another thread's loop, or a loop
//! started from inside a task) runs on rayon instead, with the same results.
//!
//! ```
//! let mut out = vec![0u64; 1000];
//! qforge_pool::try_for_each_chunk(&mut out, 64, |i, chunk| {
//!     for (j, v) in chunk.iter_mut().enumerate() {
//!         *v = (64 * i + j) as u64;
//!     }
//!     Ok::<(), ()>(())
//! })?;
//! assert!(out.iter().enumerate().all(|(j, v)| *v == j as u64));
//! let sums = qforge_pool::try_map(10, |i| Ok::<_, ()>(i * i))?;
//! assert_eq!(sums[9], 81);
//! # Ok::<(), ()>(())
//! ```
#![allow(unsafe_code)]

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use rayon::prelude::*;

/// How long a helper spins for the next loop before it parks: `QFORGE_SPIN_US` µs (read once),
/// default 1000.
pub fn spin() -> Duration {
    static SPIN: OnceLock<Duration> = OnceLock::new();
    *SPIN.get_or_init(|| {
        let us = std::env::var("QFORGE_SPIN_US").ok().and_then(|v| v.trim().parse::<u64>().ok());
        Duration::from_micros(us.unwrap_or(1000))
    })
}

/// Calls `f(i, chunk)` once for every `chunk`-element chunk of `out` (chunk `i` is `out[i ·
/// chunk ..]`, the last one shorter where `chunk` does not divide `out.len()`), on up to
/// [`rayon::current_num_threads`] threads, the caller's included, and returns the first error
/// (chunks not yet started when it came are skipped). A panic in `f` is resumed on the caller
/// once every thread has left the loop. `chunk == 0` is taken as 1.
///
/// # Errors
/// The first error `f` returned.
pub fn try_for_each_chunk<T: Send, E: Send>(
    out: &mut [T],
    chunk: usize,
    f: impl Fn(usize, &mut [T]) -> Result<(), E> + Sync,
) -> Result<(), E> {
    let chunk = chunk.max(1);
    let (len, tasks) = (out.len(), out.len().div_ceil(chunk));
    let base = SendPtr(out.as_mut_ptr());
    let run = |i: usize| {
        let start = i * chunk;
        let n = chunk.min(len - start);
        // SAFETY: `i < tasks`, so `start + n ≤ len`: the chunk lies inside `out`, which this
        // function borrows mutably for the whole loop. `run_tasks` calls `run` once for each
        // task index, so no two calls see overlapping chunks, and every call returns before
        // `run_tasks` does (it waits for every thread), so no chunk outlives the borrow.
        let c = unsafe { std::slice::from_raw_parts_mut(base.get().add(start), n) };
        f(i, c)
    };
    match run_tasks(tasks, &run) {
        Some(r) => r,
        None => out.par_chunks_mut(chunk).enumerate().try_for_each(|(i, c)| f(i, c)),
    }
}

/// [`try_for_each_chunk`] of a loop that cannot fail.
pub fn for_each_chunk<T: Send>(out: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let done = try_for_each_chunk(out, chunk, |i, c| {
        f(i, c);
        Ok::<(), std::convert::Infallible>(())
    });
    let Ok(()) = done;
}

/// `[f(0, c0), f(1, c1), …]` of the `chunk`-element chunks `c_i` of `data` (the last one
/// shorter where `chunk` does not divide `data.len()`; `chunk == 0` is taken as 1), computed
/// as [`try_for_each_chunk`] runs its chunks.
///
/// # Errors
/// The first error `f` returned.
pub fn try_map_chunks<T: Sync, R: Send, E: Send>(
    data: &[T],
    chunk: usize,
    f: impl Fn(usize, &[T]) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E> {
    let chunk = chunk.max(1);
    try_map(data.len().div_ceil(chunk), |i| f(i, &data[i * chunk..data.len().min(i * chunk + chunk)]))
}

/// `[f(0), f(1), …, f(tasks − 1)]`, computed as [`try_for_each_chunk`] runs its chunks.
///
/// # Errors
/// The first error `f` returned.
pub fn try_map<R: Send, E: Send>(tasks: usize, f: impl Fn(usize) -> Result<R, E> + Sync) -> Result<Vec<R>, E> {
    let mut slots: Vec<Option<R>> = (0..tasks).map(|_| None).collect();
    try_for_each_chunk(&mut slots, 1, |i, s| {
        s[0] = Some(f(i)?);
        Ok(())
    })?;
    // Every slot is set: the loop ran every task and none failed.
    Ok(slots.into_iter().flatten().collect())
}

/// A raw pointer that may cross threads: the caller of [`try_for_each_chunk`] hands disjoint
/// chunks of its slice to the tasks.
struct SendPtr<T>(*mut T);

// By hand: the derives would ask for `T: Copy`.
impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so that closures capture the whole `Sync` wrapper).
    fn get(self) -> *mut T {
        self.0
    }
}

// SAFETY: the pointer is only turned into disjoint `&mut [T]` chunks, one per task, and `T:
// Send` is required wherever one is made (`try_for_each_chunk`), so sending or sharing the
// wrapper moves nothing that could not move.
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above: shared, it only ever yields disjoint chunks.
unsafe impl<T: Send> Sync for SendPtr<T> {}

/// One loop: its tasks, the next unclaimed one, the first error and the first panic.
struct Loop<'a, E> {
    run: &'a (dyn Fn(usize) -> Result<(), E> + Sync),
    tasks: usize,
    next: AtomicUsize,
    failed: AtomicBool,
    error: Mutex<Option<E>>,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl<E> Loop<'_, E> {
    /// Claims and runs tasks until none are left (or one failed); a panic is kept, not thrown.
    fn work(&self) {
        let claimed = catch_unwind(AssertUnwindSafe(|| {
            loop {
                let i = self.next.fetch_add(1, Ordering::Relaxed);
                if i >= self.tasks || self.failed.load(Ordering::Relaxed) {
                    return;
                }
                if let Err(e) = (self.run)(i) {
                    self.failed.store(true, Ordering::Relaxed);
                    lock(&self.error).get_or_insert(e);
                }
            }
        }));
        if let Err(p) = claimed {
            self.failed.store(true, Ordering::Relaxed);
            lock(&self.panic).get_or_insert(p);
        }
    }
}

/// Locks `m`, poisoned or not: every value guarded here is whole whenever the lock is free.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `Loop::work` of the current loop, its lifetime erased: the caller of [`run_tasks`] keeps
/// the loop alive until every helper has acknowledged it.
#[derive(Clone, Copy)]
struct Work(*const (dyn Fn() + Sync + 'static));

// SAFETY: the closure behind the pointer is `Sync`, and it is only called between the loop's
// start and the helper's acknowledgement, while `run_tasks` keeps it alive.
unsafe impl Send for Work {}

/// What the caller and the helpers share.
struct Shared {
    /// Bumped once per loop; a helper that sees a new value takes part.
    epoch: AtomicU64,
    /// The current loop's work, and how many helpers take part in it.
    work: Mutex<Option<(Work, usize)>>,
    /// Helpers that have not yet acknowledged the current loop.
    pending: AtomicUsize,
    /// Parked helpers wait here for a new epoch.
    sleepers: AtomicUsize,
    park: Mutex<()>,
    wake: Condvar,
}

/// The helper threads: one process-wide set, used by one loop at a time.
struct Helpers {
    shared: Arc<Shared>,
    count: usize,
}

fn helpers() -> &'static Mutex<Helpers> {
    static HELPERS: OnceLock<Mutex<Helpers>> = OnceLock::new();
    HELPERS.get_or_init(|| {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            work: Mutex::new(None),
            pending: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            park: Mutex::new(()),
            wake: Condvar::new(),
        });
        Mutex::new(Helpers { shared, count: 0 })
    })
}

/// Runs `run(i)` for every `i < tasks` on the caller and the helpers and returns the first
/// error; `None` (nothing run) where the helpers are busy, for the caller to use rayon.
fn run_tasks<E: Send>(tasks: usize, run: &(dyn Fn(usize) -> Result<(), E> + Sync)) -> Option<Result<(), E>> {
    let threads = rayon::current_num_threads().min(tasks).max(1);
    let lp = Loop {
        run,
        tasks,
        next: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
        panic: Mutex::new(None),
    };
    if threads == 1 {
        lp.work();
        return Some(finish(lp));
    }
    let mut h = match helpers().try_lock() {
        Ok(h) => h,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return None,
    };
    while h.count < threads - 1 {
        let (shared, id) = (Arc::clone(&h.shared), h.count);
        let seen = shared.epoch.load(Ordering::SeqCst);
        let spawned =
            std::thread::Builder::new().name(format!("qforge-pool-{id}")).spawn(move || helper(&shared, id, seen));
        if spawned.is_err() {
            break;
        }
        h.count += 1;
    }
    let shared = Arc::clone(&h.shared);
    let work = || lp.work();
    let dyn_work: &(dyn Fn() + Sync) = &work;
    // SAFETY: only the lifetime is erased. The helpers call the closure only between the epoch
    // bump below and their acknowledgement (`pending`), and this function waits for every
    // acknowledgement before `work` and `lp` go out of scope, whatever happens: `lp.work()`
    // keeps panics, so nothing unwinds between the bump and the wait.
    let erased: &'static (dyn Fn() + Sync + 'static) = unsafe { std::mem::transmute(dyn_work) };
    *lock(&shared.work) = Some((Work(erased), threads - 1));
    shared.pending.store(h.count, Ordering::SeqCst);
    shared.epoch.fetch_add(1, Ordering::SeqCst);
    if shared.sleepers.load(Ordering::SeqCst) > 0 {
        let _g = lock(&shared.park);
        shared.wake.notify_all();
    }
    lp.work();
    let mut spins = 0u32;
    while shared.pending.load(Ordering::Acquire) != 0 {
        spins += 1;
        if spins < 1 << 14 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    *lock(&shared.work) = None;
    drop(h);
    Some(finish(lp))
}

/// The loop's result once every thread has left it: its panic resumed, or its first error.
fn finish<E>(lp: Loop<'_, E>) -> Result<(), E> {
    if let Some(p) = lp.panic.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        resume_unwind(p);
    }
    match lp.error.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Helper `id`'s life: wait for a new epoch (spinning for [`spin`], then parked), take part
/// if the loop asks for that many helpers, acknowledge; forever.
fn helper(shared: &Shared, id: usize, mut seen: u64) {
    loop {
        seen = next_epoch(shared, seen);
        let work = *lock(&shared.work);
        if let Some((Work(w), want)) = work
            && id < want
        {
            // SAFETY: `run_tasks` keeps the closure alive until this helper acknowledges the
            // loop below (it waits for `pending` to reach 0).
            let w: &(dyn Fn() + Sync) = unsafe { &*w };
            w();
        }
        shared.pending.fetch_sub(1, Ordering::Release);
    }
}

/// Waits until the epoch differs from `seen` and returns it: spinning for [`spin`], then parked.
fn next_epoch(shared: &Shared, seen: u64) -> u64 {
    let (start, limit) = (Instant::now(), spin());
    let mut i = 0u32;
    loop {
        let e = shared.epoch.load(Ordering::Acquire);
        if e != seen {
            return e;
        }
        i = i.wrapping_add(1);
        if i.is_multiple_of(128) && start.elapsed() >= limit {
            break;
        }
        std::hint::spin_loop();
    }
    let mut g = lock(&shared.park);
    shared.sleepers.fetch_add(1, Ordering::SeqCst);
    let e = loop {
        let e = shared.epoch.load(Ordering::SeqCst);
        if e != seen {
            break e;
        }
        g = shared.wake.wait(g).unwrap_or_else(std::sync::PoisonError::into_inner);
    };
    shared.sleepers.fetch_sub(1, Ordering::SeqCst);
    e
}

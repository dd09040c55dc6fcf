//! The loops of qforge-pool: every task exactly once at every thread count, errors and panics
//! reach the caller, busy helpers hand the loop to rayon, parked helpers wake up.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use qforge_pool::{for_each_chunk, try_for_each_chunk, try_map, try_map_chunks};

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a rayon pool")
}

/// Fills `len` elements in chunks of `chunk`: element `j` must end up `j + 1`, each written once.
fn fill(len: usize, chunk: usize) -> Vec<usize> {
    let mut out = vec![0usize; len];
    let calls = AtomicUsize::new(0);
    try_for_each_chunk(&mut out, chunk, |i, c| {
        calls.fetch_add(1, Ordering::Relaxed);
        let chunk = chunk.max(1);
        assert!(c.len() == chunk || (i + 1) * chunk >= len, "chunk {i} has {} elements", c.len());
        for (j, v) in c.iter_mut().enumerate() {
            *v += i * chunk + j + 1;
        }
        Ok::<(), ()>(())
    })
    .expect("no task fails");
    assert_eq!(calls.into_inner(), len.div_ceil(chunk.max(1)));
    out
}

#[test]
fn every_chunk_exactly_once_at_every_thread_count() {
    for threads in [1, 2, 3, 5] {
        pool(threads).install(|| {
            for (len, chunk) in [(0, 4), (1, 1), (7, 3), (100, 1), (1000, 64), (4096, 4096), (10, 0), (5, 100)] {
                let out = fill(len, chunk);
                assert!(out.iter().enumerate().all(|(j, v)| *v == j + 1), "{threads} threads, {len} / {chunk}");
            }
        });
    }
}

#[test]
fn chunk_maps_and_infallible_loops_see_every_chunk() {
    for threads in [1, 3] {
        pool(threads).install(|| {
            for (len, chunk) in [(0, 3), (10, 0), (10, 3), (1000, 64)] {
                let data: Vec<usize> = (0..len).collect();
                let got = try_map_chunks(&data, chunk, |i, c| Ok::<_, ()>((i, c.to_vec()))).expect("no task fails");
                let want: Vec<(usize, Vec<usize>)> =
                    data.chunks(chunk.max(1)).map(<[usize]>::to_vec).enumerate().collect();
                assert_eq!(got, want, "{threads} threads, {len} / {chunk}");
                let mut out = vec![0usize; len];
                for_each_chunk(&mut out, chunk, |i, c| c.iter_mut().for_each(|v| *v = i + 1));
                assert!(out.iter().enumerate().all(|(j, v)| *v == j / chunk.max(1) + 1));
            }
        });
    }
}

#[test]
fn loops_on_more_threads_than_the_last_and_fewer() {
    // The helpers are started for the widest loop so far; narrower loops leave some out.
    for threads in [2, 4, 2, 3, 1, 4] {
        pool(threads).install(|| {
            let out = fill(999, 7);
            assert!(out.iter().enumerate().all(|(j, v)| *v == j + 1), "{threads} threads");
        });
    }
}

#[test]
fn the_first_error_comes_back() {
    pool(3).install(|| {
        let mut out = vec![0u8; 100];
        let r = try_for_each_chunk(&mut out, 1, |i, _| if i == 37 { Err(i) } else { Ok(()) });
        assert_eq!(r, Err(37));
        let r = try_map(50, |i| if i % 10 == 9 { Err(i) } else { Ok(i) });
        assert!(matches!(r, Err(i) if i % 10 == 9), "{r:?}");
        // And the helpers still run the next loop.
        assert_eq!(try_map(20, |i| Ok::<_, ()>(2 * i)), Ok((0..20).map(|i| 2 * i).collect()));
    });
}

#[test]
fn a_panic_reaches_the_caller_and_the_helpers_go_on() {
    pool(2).install(|| {
        for _ in 0..3 {
            let caught = std::panic::catch_unwind(|| {
                let _ = try_map(64, |i| {
                    assert!(i != 40, "task 40");
                    Ok::<_, ()>(i)
                });
            });
            let msg = caught.expect_err("the panic is resumed on the caller");
            assert_eq!(msg.downcast_ref::<&str>().copied(), Some("task 40"));
            assert_eq!(fill(300, 3).last(), Some(&300));
        }
    });
}

#[test]
fn busy_helpers_hand_the_loop_to_rayon() {
    // Four callers at once (one gets the helpers, the others run on rayon), and a loop inside
    // a task: every result is still whole.
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                pool(2).install(|| {
                    for _ in 0..50 {
                        let v = try_map(16, |i| {
                            let inner = try_map(8, |j| Ok::<_, ()>(i * 8 + j))?;
                            Ok::<_, ()>(inner.iter().sum::<usize>() + t)
                        })
                        .expect("no task fails");
                        let want: Vec<usize> = (0..16).map(|i| (0..8).map(|j| i * 8 + j).sum::<usize>() + t).collect();
                        assert_eq!(v, want);
                    }
                });
            });
        }
    });
}

#[test]
fn parked_helpers_wake_for_the_next_loop() {
    pool(3).install(|| {
        for _ in 0..4 {
            // Longer than the spin (`QFORGE_SPIN_US`, 1 ms unless set), so the helpers park.
            std::thread::sleep(qforge_pool::spin() + Duration::from_millis(5));
            let threads = std::sync::Mutex::new(std::collections::HashSet::new());
            try_map(64, |i| {
                threads.lock().expect("not poisoned").insert(std::thread::current().id());
                std::thread::sleep(Duration::from_micros(200));
                Ok::<_, ()>(i)
            })
            .expect("no task fails");
            // 64 tasks of 200 µs: every woken helper takes some.
            assert!(threads.into_inner().expect("not poisoned").len() > 1, "only the caller ran tasks");
        }
    });
}

//! Teardown hooks beyond namespaces (a sysctl to restore, a child to stop), run by the signal
//! handler in `netns` and by `Guard` on drop, so every exit path restores what a run changed.

use std::sync::Mutex;

type Hook = Box<dyn FnOnce() + Send>;
static HOOKS: Mutex<Vec<(u64, Hook)>> = Mutex::new(Vec::new());
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Runs its hook once: on drop, or from the signal handler, whichever comes first.
pub struct Guard(u64);

pub fn register(f: impl FnOnce() + Send + 'static) -> Guard {
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    HOOKS.lock().unwrap_or_else(|e| e.into_inner()).push((id, Box::new(f)));
    Guard(id)
}

impl Drop for Guard {
    fn drop(&mut self) {
        let hook = {
            let mut hooks = HOOKS.lock().unwrap_or_else(|e| e.into_inner());
            hooks.iter().position(|(id, _)| *id == self.0).map(|i| hooks.remove(i).1)
        };
        if let Some(f) = hook {
            f();
        }
    }
}

/// Runs every pending hook, newest first.
pub fn run_hooks() {
    let hooks = std::mem::take(&mut *HOOKS.lock().unwrap_or_else(|e| e.into_inner()));
    for (_, f) in hooks.into_iter().rev() {
        f();
    }
}

/// Sets a sysctl and restores its old value when the guard drops (or on a signal).
pub fn sysctl(key: &str, value: &str) -> std::io::Result<Guard> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    let old = std::fs::read_to_string(&path)?.trim().to_string();
    std::fs::write(&path, value)?;
    Ok(register(move || {
        let _ = std::fs::write(&path, &old);
    }))
}

//! Temporary files removed when SIGINT, SIGTERM or SIGHUP ends the process: a registered path is
//! unlinked by the signal handler, which then ends the process with the signal's default action (the
//! exit status still says "killed by SIGTERM").
//!
//! The handler only reads a fixed table of atomic pointers and calls `unlink`, `signal` and `raise`
//! (all async-signal-safe).

use std::path::Path;

/// A path registered for removal on a signal; dropping it unregisters the path.
#[derive(Debug)]
pub struct Registered {
    #[cfg(unix)]
    slot: Option<usize>,
}

/// Registers `path` (a temporary file) for removal if a signal ends the process before the returned
/// guard is dropped. More than [`SLOTS`] paths at once are not registered (they are still removed on
/// errors, by their owner).
pub fn register(path: &Path) -> Registered {
    imp::register(path)
}

/// How many paths can be registered at once.
pub const SLOTS: usize = 64;

#[cfg(unix)]
mod imp {
    use std::ffi::{c_char, CString};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::ptr::null_mut;
    use std::sync::atomic::{AtomicPtr, Ordering};
    use std::sync::Once;

    use super::{Registered, SLOTS};

    /// The registered paths (NUL-terminated), null where a slot is free.
    static PATHS: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(null_mut()) }; SLOTS];
    static INSTALL: Once = Once::new();

    /// The signals that end a command early.
    const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    extern "C" fn remove_and_reraise(signal: libc::c_int) {
        for slot in &PATHS {
            let p = slot.load(Ordering::SeqCst);
            if !p.is_null() {
                // SAFETY: a non-null slot holds a `CString` leaked by `register`, never freed.
                unsafe { libc::unlink(p) };
            }
        }
        // SAFETY: restoring the default action and raising the signal again ends the process as the
        // signal would have; both calls are async-signal-safe.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }

    fn install() {
        for signal in SIGNALS {
            let handler = remove_and_reraise as extern "C" fn(libc::c_int) as libc::sighandler_t;
            // SAFETY: installs a handler that only touches `PATHS` and async-signal-safe calls; a
            // signal the parent asked to ignore (`nohup`) stays ignored.
            unsafe {
                if libc::signal(signal, handler) == libc::SIG_IGN {
                    libc::signal(signal, libc::SIG_IGN);
                }
            }
        }
    }

    pub(super) fn register(path: &Path) -> Registered {
        INSTALL.call_once(install);
        let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
            return Registered { slot: None };
        };
        let ptr = c.into_raw();
        for (i, slot) in PATHS.iter().enumerate() {
            if slot
                .compare_exchange(null_mut(), ptr, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return Registered { slot: Some(i) };
            }
        }
        // SAFETY: `ptr` came from `into_raw` above and was stored nowhere.
        drop(unsafe { CString::from_raw(ptr) });
        Registered { slot: None }
    }

    impl Drop for Registered {
        fn drop(&mut self) {
            if let Some(i) = self.slot {
                // The string is leaked, not freed: a handler running on another thread may still be
                // reading it (a few bytes per output written).
                PATHS[i].store(null_mut(), Ordering::SeqCst);
            }
        }
    }
}

#[cfg(not(unix))]
mod imp {
    use super::Registered;

    pub(super) fn register(_: &std::path::Path) -> Registered {
        Registered {}
    }
}

//! [`StreamScope`]: which stream this thread's kernel launches go to.
//!
//! Every launcher of this crate ([`crate::Function::launch`] and the GEMM launchers built on
//! it) submits to the *current launch stream* of the calling thread: the stream of the
//! innermost live [`StreamScope`] on that thread, or, outside any scope, the stream of the
//! function's [`crate::Gpu`]. A library that launches on an application's stream (the ops
//! of `rcute-ops`) enters a scope around its launches, so launchers deeper down need no
//! stream parameter. This is the model of PyTorch's "current stream": per thread, nested,
//! restored when the scope ends.
//!
//! ```no_run
//! # use rcute_kernel::{stream_scope::StreamScope, Gpu};
//! # let gpu = Gpu::detect().unwrap().unwrap();
//! let app_stream = gpu.context().new_stream().unwrap();
//! {
//!     let _scope = StreamScope::enter(&app_stream);
//!     // launches here go to `app_stream`
//! }
//! // and from here on to `gpu.stream()` again
//! ```

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::CudaStream;

thread_local! {
    static CURRENT: RefCell<Vec<Arc<CudaStream>>> = const { RefCell::new(Vec::new()) };
}

/// While alive, the calling thread's launches go to its stream (see the module docs).
/// Scopes nest; dropping one restores the stream that was current before it. Not `Send`:
/// a scope belongs to the thread that entered it.
#[must_use = "the scope ends when this value is dropped"]
#[derive(Debug)]
pub struct StreamScope {
    depth: usize,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl StreamScope {
    /// Make `stream` this thread's launch stream until the returned scope is dropped.
    pub fn enter(stream: &Arc<CudaStream>) -> StreamScope {
        let depth = CURRENT.with(|c| {
            let mut c = c.borrow_mut();
            c.push(stream.clone());
            c.len()
        });
        StreamScope {
            depth,
            _not_send: std::marker::PhantomData,
        }
    }

    /// The stream of the innermost live scope of this thread, if any.
    pub fn current() -> Option<Arc<CudaStream>> {
        CURRENT.with(|c| c.borrow().last().cloned())
    }
}

impl Drop for StreamScope {
    fn drop(&mut self) {
        // Scopes are values on the stack of one thread, so they end in reverse order;
        // truncating (instead of popping) also restores the right stream if an inner
        // scope was leaked with `mem::forget`.
        CURRENT.with(|c| c.borrow_mut().truncate(self.depth - 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_scope_means_no_stream() {
        assert!(StreamScope::current().is_none());
    }
}

//! The process allocator: jemalloc, with two options changed. `strait` and the benchmark's
//! batch pipe declare it through [`process_allocator!`](crate::process_allocator); the raw pipe,
//! which imports nothing of Strait, gets the same options through `MALLOC_CONF`, so both pipes
//! stay the floor of the same process setup.

pub use tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at its start (its `malloc_conf` string, NUL-terminated). The
/// `MALLOC_CONF` environment variable still overrides them. Measured on catch-ups of 2,000,000
/// records of 512 bytes (`bench/FINDINGS.md`, sixth round):
/// - `oversize_threshold` (default 8 MiB): jemalloc serves larger allocations from an arena that
///   hands their pages back to the kernel as soon as they are freed. librdkafka allocates each
///   fetch response whole, and Strait's (its 8 MiB prefetch plus the response's framing) are just
///   above 8 MiB, so every page fetched was faulted in afresh: about 240,000 minor faults per
///   catch-up. At 64 MiB, above librdkafka's default `fetch.max.bytes` (50 MiB), a freed response
///   is reused like any other block: 50,000–110,000 faults, 0.3–0.5 CPU s less.
/// - `dirty_decay_ms` (default 10,000): freed pages not reused within about this time go back to
///   the kernel. 3 s keeps the reuse above while holding peak RSS below the defaults' (the
///   threshold alone added 8–23 MB).
pub const MALLOC_CONF: &[u8] = b"oversize_threshold:67108864,dirty_decay_ms:3000\0";

/// Declares jemalloc as the global allocator (librdkafka's C allocations included: it takes over
/// `malloc`) with [`MALLOC_CONF`](crate::allocator::MALLOC_CONF). Every record is allocated on one
/// thread and freed on another (the consumer's fetch, the producer's copy, its headers), where
/// glibc's allocator spent a tenth of the CPU. Use once, in a binary crate: jemalloc reads the
/// `malloc_conf` symbol, which only a binary's own definition reliably provides.
#[macro_export]
macro_rules! process_allocator {
    () => {
        #[global_allocator]
        static ALLOCATOR: $crate::allocator::Jemalloc = $crate::allocator::Jemalloc;

        /// jemalloc's `malloc_conf`: a C string, read at its start.
        #[no_mangle]
        #[allow(non_upper_case_globals)]
        static malloc_conf: &u8 = &$crate::allocator::MALLOC_CONF[0];
    };
}

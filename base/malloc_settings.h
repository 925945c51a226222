// KeepFreedMemory(): makes glibc's malloc keep freed memory for reuse instead of handing it
// back to the kernel (issue 18), for the long-running tamp_server and tamp_worker.
//
// A step frees and allocates the same megabytes again (gRPC's message buffers, payloads).
// By default glibc serves blocks of 128 KiB and more (a threshold it raises as it goes) with
// mmap and unmaps them on free, and trims a heap whose free top passes 128 KiB (later twice
// the raised threshold), so each step's buffers came back as fresh pages: a minor page fault
// per 4 KiB, thousands per step, dear on a VM. After KeepFreedMemory() blocks up to 32 MiB
// come from the heap and freed memory stays there, up to 1 GiB of it: a steady state faults
// in nothing, at the cost of keeping the process's peak heap.
//
// ShareOneHeap(): one malloc arena for every thread, for tamp_server (issue 19). glibc gives
// threads that contend for the heap arenas of their own (up to 8 per core), and memory freed
// into one arena serves only threads allocating from it. gRPC's threads take turns at a
// step's megabytes (payloads parsed on one, answers and send buffers on another), so with
// KeepFreedMemory() every arena kept its own largest step, and a server's RSS grew for over
// a hundred steps to well above what one heap needs, which levels off in the first steps. A
// server's threads allocate a few large blocks per call; small ones come from the
// per-thread caches (tcache) without the arena's lock.
//
// Example (first thing in main, before any thread starts):
//   if (absl::Status kept = KeepFreedMemory(); !kept.ok()) LOG(WARNING) << kept;
//   if (absl::Status shared = ShareOneHeap(); !shared.ok()) LOG(WARNING) << shared;
#ifndef TAMP_BASE_MALLOC_SETTINGS_H_
#define TAMP_BASE_MALLOC_SETTINGS_H_

#include "absl/status/status.h"

namespace tamp {

// FAILED_PRECONDITION when malloc refuses the settings (another allocator replaces glibc's,
// e.g. a sanitizer's); the process runs on with the defaults then.
absl::Status KeepFreedMemory();

// FAILED_PRECONDITION as above. Threads that already have an arena of their own keep it: call
// it before the process starts threads.
absl::Status ShareOneHeap();

}  // namespace tamp

#endif  // TAMP_BASE_MALLOC_SETTINGS_H_

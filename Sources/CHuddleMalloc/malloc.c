#include "CHuddleMalloc.h"
#include <malloc.h>

static int configured = 0;

/// One malloc arena for every thread of the process, set before main so that no thread has made
/// its own yet (glibc gives each thread an arena of its own, up to 8 per core).
///
/// Memory freed into an arena is reused only by that arena and stays resident, and a node's
/// buffers are made on one thread and freed on another (read on an event loop, stored by the
/// node's actor, written by a link's writer): with an arena per thread each arena grows to its
/// own peak and the process holds about the sum of those peaks. Measured in huddle-bench's 16 KiB
/// throughput row: a receiver idle after the run still held 67 MiB of heap in 3 arenas (30, 28
/// and 9 MiB) while its live data was near zero; with one arena its peak RSS was 10 to 15 MiB
/// lower.
///
/// Only the `huddle` executable links this module: a test process that links the node's
/// libraries runs dozens of busy threads (relays, clients, parallel tests), where one arena's
/// lock is contended (a relay starved of its UDP forwarding made two nodes fail each other).
__attribute__((constructor)) static void huddle_one_malloc_arena(void) { configured = mallopt(M_ARENA_MAX, 1); }

int huddle_malloc_arenas_limited(void) { return configured; }

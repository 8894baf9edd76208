#include "CHuddleMalloc.h"
#include <malloc.h>
#include <pthread.h>
#include <time.h>

static int configured = 0;

/// How often the trimming thread gives free heap pages back to the kernel, in milliseconds.
#define HUDDLE_TRIM_INTERVAL_MS 250

/// Gives the arena's free pages back to the kernel every `HUDDLE_TRIM_INTERVAL_MS`, for the life
/// of the process. glibc returns only the free top of the heap by itself: a node's heap is cut up
/// by 16 KiB messages and megabyte write batches made and freed on different threads, so after a
/// burst the pages in between stay resident although nothing uses them, and the next burst adds
/// its own on top. `malloc_trim(0)` releases every whole free page (madvise), which the next
/// allocation there faults back in. Measured with huddle-bench's reach rows (the relay that is also
/// a member, the NATted sender): see BENCHMARKS.md.
static void *huddle_trim_loop(void *unused) {
    (void)unused;
    const struct timespec interval = {HUDDLE_TRIM_INTERVAL_MS / 1000, (HUDDLE_TRIM_INTERVAL_MS % 1000) * 1000000L};
    for (;;) {
        nanosleep(&interval, NULL);
        malloc_trim(0);
    }
    return NULL;
}

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

int huddle_malloc_trim_start(void) {
    static int started = 0;
    if (started) return 1;
    pthread_t thread;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return 0;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    started = pthread_create(&thread, &attr, huddle_trim_loop, NULL) == 0;
    pthread_attr_destroy(&attr);
    return started;
}

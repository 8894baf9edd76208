#define _GNU_SOURCE
#include "CHuddleSystem.h"
#include <malloc.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>

_Static_assert(sizeof(struct huddle_peer_credentials) == sizeof(struct ucred), "struct ucred layout");
_Static_assert(offsetof(struct huddle_peer_credentials, uid) == offsetof(struct ucred, uid), "struct ucred layout");

int huddle_set_not_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int huddle_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

/// One malloc arena for every thread of the process, set before main so that no thread has made
/// its own yet (glibc gives each thread an arena of its own, up to 8 per core).
///
/// Memory freed into an arena is reused only by that arena and stays resident, and a node's
/// buffers are made on one thread and freed on another (read on an event loop, stored by the
/// node's actor, written by a link's writer): with an arena per thread each arena grows to its
/// own peak and the process holds about the sum of those peaks. Measured in huddle-bench's 16 KiB
/// throughput row: a receiver idle after the run still held 67 MiB of heap in 3 arenas (30, 28
/// and 9 MiB) while its live data was near zero; with one arena its peak RSS was 10 to 15 MiB
/// lower. Every process that links this module (the `huddle` executable) gets it.
__attribute__((constructor)) static void huddle_one_malloc_arena(void) { mallopt(M_ARENA_MAX, 1); }

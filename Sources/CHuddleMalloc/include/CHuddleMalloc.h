#ifndef CHUDDLEMALLOC_H
#define CHUDDLEMALLOC_H

/// 1 when the process was limited to one malloc arena before main (see malloc.c), else 0.
/// Referenced from the `huddle` executable's main, which also keeps the constructor linked in.
int huddle_malloc_arenas_limited(void);

/// Starts a thread that gives the heap's free pages back to the kernel every 250 ms (see malloc.c),
/// for `huddle run` alone; 1 when it runs (also when it already did), 0 when it could not start.
int huddle_malloc_trim_start(void);

#endif

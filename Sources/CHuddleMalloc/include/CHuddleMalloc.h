#ifndef CHUDDLEMALLOC_H
#define CHUDDLEMALLOC_H

/// 1 when the process was limited to one malloc arena before main (see malloc.c), else 0.
/// Referenced from the `huddle` executable's main, which also keeps the constructor linked in.
int huddle_malloc_arenas_limited(void);

#endif

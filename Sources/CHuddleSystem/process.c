#define _GNU_SOURCE
#include "CHuddleSystem.h"
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>

_Static_assert(sizeof(struct huddle_peer_credentials) == sizeof(struct ucred), "struct ucred layout");
_Static_assert(offsetof(struct huddle_peer_credentials, uid) == offsetof(struct ucred, uid), "struct ucred layout");

int huddle_set_not_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int huddle_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

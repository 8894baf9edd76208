#ifndef HUDDLE_CSODIUM_SHIM_H
#define HUDDLE_CSODIUM_SHIM_H
#include <sodium.h>
#endif

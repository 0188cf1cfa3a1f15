/*
 * timing.h - a monotonic clock in milliseconds and seconds.
 */
#ifndef JEV_BASE_TIMING_H
#define JEV_BASE_TIMING_H

#include <time.h>

static inline double jev_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

#endif

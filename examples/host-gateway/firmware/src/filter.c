/* Smoothing of sensor readings. */
#include "gateway.h"

/* out[i] is the mean of the `window` readings ending at i (fewer at the start). */
void moving_average(const long *values, size_t count, size_t window, q16_t *out)
{
    int64_t total = 0;
    bool ok = true;
    for (size_t i = 0; i < count; i++) {
        total += values[i];
        if (i >= window) {
            total -= values[i - window];
        }
        size_t n = i + 1 < window ? i + 1 : window;
        out[i] = q16_div(q16_from_int((long)total), q16_from_int((long)n), &ok);
    }
}

/* previous + alpha * (sample - previous) */
q16_t ema_step(q16_t previous, q16_t sample, q16_t alpha)
{
    return previous + q16_mul(alpha, sample - previous);
}

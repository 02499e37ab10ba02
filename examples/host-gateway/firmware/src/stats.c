/* Statistics of a batch of sensor readings (integers), as Q16.16. */
#include <string.h>

#include "gateway.h"

#define MAX_BATCH 64

long stats_min(const long *values, size_t count)
{
    long best = values[0];
    for (size_t i = 1; i < count; i++) {
        if (values[i] < best) {
            best = values[i];
        }
    }
    return best;
}

long stats_max(const long *values, size_t count)
{
    long best = values[0];
    for (size_t i = 1; i < count; i++) {
        if (values[i] > best) {
            best = values[i];
        }
    }
    return best;
}

q16_t stats_mean(const long *values, size_t count)
{
    int64_t total = 0;
    bool ok = true;
    for (size_t i = 0; i < count; i++) {
        total += values[i];
    }
    return q16_div(q16_from_int((long)total), q16_from_int((long)count), &ok);
}

/* Population variance. */
q16_t stats_variance(const long *values, size_t count)
{
    q16_t mean = stats_mean(values, count);
    int64_t total = 0;
    bool ok = true;
    for (size_t i = 0; i < count; i++) {
        q16_t deviation = q16_from_int(values[i]) - mean;
        total += q16_mul(deviation, deviation);
    }
    if (total > INT32_MAX) {
        total = INT32_MAX;
    }
    return q16_div((q16_t)total, q16_from_int((long)count), &ok);
}

q16_t stats_stddev(const long *values, size_t count)
{
    return q16_sqrt(stats_variance(values, count));
}

q16_t stats_median(const long *values, size_t count)
{
    long sorted[MAX_BATCH];
    bool ok = true;
    if (count > MAX_BATCH) {
        count = MAX_BATCH;
    }
    memcpy(sorted, values, count * sizeof sorted[0]);
    sort_values(sorted, count);
    if (count % 2 == 1) {
        return q16_from_int(sorted[count / 2]);
    }
    q16_t sum = q16_from_int(sorted[count / 2 - 1]) + q16_from_int(sorted[count / 2]);
    return q16_div(sum, q16_from_int(2), &ok);
}

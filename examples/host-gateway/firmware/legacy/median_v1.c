/* Gateway 1.x statistics: median by a bubble sort of at most 16 readings. Not built. */
#include <stddef.h>

static void bubble_sort_v1(long *values, size_t count)
{
    for (size_t pass = 0; pass + 1 < count; pass++) {
        for (size_t i = 0; i + 1 < count - pass; i++) {
            if (values[i] > values[i + 1]) {
                long t = values[i];
                values[i] = values[i + 1];
                values[i + 1] = t;
            }
        }
    }
}

long median_readings_v1(long *values, size_t count)
{
    if (count > 16) {
        count = 16;
    }
    bubble_sort_v1(values, count);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

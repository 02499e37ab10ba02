#include "filter.h"

#include "log.h"

static int samples[FILTER_WINDOW];
static unsigned next;
static unsigned count;

void filter_reset(void)
{
    next = 0;
    count = 0;
}

int filter_push(int sample)
{
    FW_ASSERT(next < FILTER_WINDOW);
    samples[next] = sample;
    next++;
    if (next > FILTER_WINDOW) {
        next = 0;
    }
    if (count < FILTER_WINDOW) {
        count++;
    }
    int sum = 0;
    for (unsigned i = 0; i < count; i++) {
        sum += samples[i];
    }
    return sum / (int)count;
}

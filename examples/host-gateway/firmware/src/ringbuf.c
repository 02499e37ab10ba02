/* The uplink queue: a ring of RING_CAPACITY readings. */
#include "gateway.h"

static long ring[RING_CAPACITY];
static size_t head;
static size_t count;

void ring_clear(void)
{
    head = 0;
    count = 0;
}

bool ring_push(long value)
{
    if (count == RING_CAPACITY) {
        return false;
    }
    ring[(head + count) % RING_CAPACITY] = value;
    count++;
    return true;
}

bool ring_pop(long *value)
{
    if (count == 0) {
        return false;
    }
    *value = ring[head];
    head = (head + 1) % RING_CAPACITY;
    count--;
    return true;
}

size_t ring_length(void)
{
    return count;
}

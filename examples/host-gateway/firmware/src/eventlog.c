/* The event log: the last EVLOG_CAPACITY events in a ring, the oldest overwritten when it is
 * full. Each record has a sequence number (1 after a clear, then one more each event, so the
 * cloud sees what it missed) and the time it happened in seconds of uptime. Times never go
 * back, so the records of a time range are found by binary search. */
#include "gateway.h"

static struct event_record records[EVLOG_CAPACITY];
static size_t oldest;
static size_t count;
static uint32_t next_seq = 1;
static uint32_t overwritten;

/* The index-th record, 0 the oldest; index < count. */
static struct event_record *nth(size_t index)
{
    return &records[(oldest + index) % EVLOG_CAPACITY];
}

void evlog_clear(void)
{
    oldest = 0;
    count = 0;
    next_seq = 1;
    overwritten = 0;
}

/* False, and nothing logged, when `time` is before the latest record's. */
bool evlog_append(uint32_t time, uint16_t code, int32_t value, uint32_t *seq)
{
    struct event_record *slot;
    if (count > 0 && time < nth(count - 1)->time) {
        return false;
    }
    if (count == EVLOG_CAPACITY) {
        slot = &records[oldest];
        oldest = (oldest + 1) % EVLOG_CAPACITY;
        overwritten++;
    } else {
        slot = nth(count);
        count++;
    }
    slot->seq = next_seq++;
    slot->time = time;
    slot->code = code;
    slot->value = value;
    if (seq != NULL) {
        *seq = slot->seq;
    }
    return true;
}

size_t evlog_count(void)
{
    return count;
}

uint32_t evlog_overwritten(void)
{
    return overwritten;
}

const struct event_record *evlog_at(size_t index)
{
    return index < count ? nth(index) : NULL;
}

/* The record of `seq`; NULL with *overwritten set when the ring has dropped it, NULL alone when
 * it was never logged. The records held have consecutive numbers. */
const struct event_record *evlog_find(uint32_t seq, bool *overwritten_out)
{
    uint32_t first = next_seq - (uint32_t)count;
    *overwritten_out = false;
    if (seq == 0 || seq >= next_seq) {
        return NULL;
    }
    if (seq < first) {
        *overwritten_out = true;
        return NULL;
    }
    return nth(seq - first);
}

/* The first index whose time is at or after `time` (after it, when `strictly`); count when
 * there is none. */
static size_t bound(uint32_t time, bool strictly)
{
    size_t low = 0;
    size_t high = count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        uint32_t t = nth(middle)->time;
        if (strictly ? t <= time : t < time) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    return low;
}

/* The records with from <= time <= to: how many, the first of them at index *first. */
size_t evlog_range(uint32_t from, uint32_t to, size_t *first)
{
    *first = 0;
    if (from > to || count == 0) {
        return 0;
    }
    size_t low = bound(from, false);
    size_t high = bound(to, true);
    *first = low;
    return high - low;
}

#include "ringbuf.h"

void ringbuf_init(struct ringbuf *rb)
{
    rb->head = 0;
    rb->tail = 0;
    rb->count = 0;
}

bool ringbuf_push(struct ringbuf *rb, int32_t value)
{
    if (rb->count > RINGBUF_SLOTS) {
        return false;
    }
    rb->slots[rb->head] = value;
    rb->head = (rb->head + 1u) % RINGBUF_SLOTS;
    rb->count++;
    return true;
}

bool ringbuf_pop(struct ringbuf *rb, int32_t *value)
{
    if (rb->count == 0) {
        return false;
    }
    *value = rb->slots[rb->tail];
    rb->tail = (rb->tail + 1u) % RINGBUF_SLOTS;
    rb->count--;
    return true;
}

unsigned ringbuf_len(const struct ringbuf *rb)
{
    return rb->count;
}

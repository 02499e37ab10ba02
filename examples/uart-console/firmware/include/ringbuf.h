/* Fixed-size FIFO of signed 32-bit values (no allocation, no overwrite when full). */
#ifndef UARTCON_RINGBUF_H
#define UARTCON_RINGBUF_H

#include <stdbool.h>
#include <stdint.h>

#define RINGBUF_SLOTS 4u

struct ringbuf {
    int32_t slots[RINGBUF_SLOTS];
    unsigned head;  /* next slot to write */
    unsigned tail;  /* next slot to read */
    unsigned count; /* values stored, 0..RINGBUF_SLOTS */
};

void ringbuf_init(struct ringbuf *rb);

/* Returns false, leaving the buffer unchanged, when it is full. */
bool ringbuf_push(struct ringbuf *rb, int32_t value);

/* Returns false when the buffer is empty. */
bool ringbuf_pop(struct ringbuf *rb, int32_t *value);

unsigned ringbuf_len(const struct ringbuf *rb);

#endif

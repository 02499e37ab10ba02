/* SLIP framing (RFC 1055) of the sensor bus: END closes a frame; inside a frame an END byte
 * travels as ESC ESC_END and an ESC byte as ESC ESC_ESC. The encoder opens each frame with
 * an END as well, which flushes whatever line noise the receiver had collected. */
#include <string.h>

#include "gateway.h"

/* Bytes written, or 0 when the frame does not fit in `capacity`. */
size_t slip_encode(const uint8_t *data, size_t len, uint8_t *out, size_t capacity)
{
    size_t at = 0;
    if (capacity < 2) {
        return 0;
    }
    out[at++] = SLIP_END;
    for (size_t i = 0; i < len; i++) {
        uint8_t byte = data[i];
        bool special = byte == SLIP_END || byte == SLIP_ESC;
        /* this byte, and the closing END after it */
        if (at + (special ? 2u : 1u) + 1u > capacity) {
            return 0;
        }
        if (byte == SLIP_END) {
            out[at++] = SLIP_ESC;
            out[at++] = SLIP_ESC_END;
        } else if (byte == SLIP_ESC) {
            out[at++] = SLIP_ESC;
            out[at++] = SLIP_ESC_ESC;
        } else {
            out[at++] = byte;
        }
    }
    out[at++] = SLIP_END;
    return at;
}

/* The byte an escape stands for, or -1 when ESC is followed by anything else. */
static int unescape(uint8_t byte)
{
    if (byte == SLIP_ESC_END) {
        return SLIP_END;
    }
    if (byte == SLIP_ESC_ESC) {
        return SLIP_ESC;
    }
    return -1;
}

/* Exactly one frame: ENDs before it are skipped, the END after it is required, and only more
 * ENDs may follow that. The payload's length; `status` says whether it is whole. */
size_t slip_decode(const uint8_t *data, size_t len, uint8_t *out, size_t capacity,
                   enum slip_status *status)
{
    size_t i = 0;
    size_t at = 0;
    while (i < len && data[i] == SLIP_END) {
        i++;
    }
    for (; i < len; i++) {
        uint8_t byte = data[i];
        if (byte == SLIP_END) {
            for (size_t k = i + 1; k < len; k++) {
                if (data[k] != SLIP_END) {
                    *status = SLIP_TRAILING;
                    return at;
                }
            }
            *status = SLIP_OK;
            return at;
        }
        if (byte == SLIP_ESC) {
            int plain = i + 1 < len ? unescape(data[i + 1]) : -1;
            if (plain < 0) {
                *status = i + 1 < len ? SLIP_BAD_ESCAPE : SLIP_UNTERMINATED;
                return at;
            }
            byte = (uint8_t)plain;
            i++;
        }
        if (at == capacity) {
            *status = SLIP_TOO_LONG;
            return at;
        }
        out[at++] = byte;
    }
    *status = SLIP_UNTERMINATED;
    return at;
}

void slip_receiver_init(struct slip_receiver *rx)
{
    memset(rx, 0, sizeof *rx);
}

/* A broken frame is reported once, at the byte that broke it; the rest of it, up to the next
 * END, is dropped quietly. */
static enum slip_event receive_error(struct slip_receiver *rx)
{
    rx->discarding = true;
    rx->escaped = false;
    rx->len = 0;
    rx->errors++;
    return SLIP_ERROR;
}

/* One byte off the wire. After SLIP_FRAME the frame is rx->frame[0 .. rx->frame_len): the
 * caller takes it before it feeds the next byte, which may overwrite it. */
enum slip_event slip_receive(struct slip_receiver *rx, uint8_t byte)
{
    if (byte == SLIP_END) {
        bool was_discarding = rx->discarding;
        bool was_escaped = rx->escaped;
        size_t len = rx->len;
        rx->discarding = false;
        rx->escaped = false;
        rx->len = 0;
        if (was_discarding) {
            return SLIP_NONE;
        }
        if (was_escaped) {
            /* ESC END: the sender gave up on the frame mid-escape */
            rx->errors++;
            return SLIP_ERROR;
        }
        if (len == 0) {
            /* back-to-back ENDs: no frame, only the flush */
            return SLIP_NONE;
        }
        rx->frame_len = len;
        rx->frames++;
        return SLIP_FRAME;
    }
    if (rx->discarding) {
        return SLIP_NONE;
    }
    if (rx->escaped) {
        int plain = unescape(byte);
        rx->escaped = false;
        if (plain < 0) {
            return receive_error(rx);
        }
        byte = (uint8_t)plain;
    } else if (byte == SLIP_ESC) {
        rx->escaped = true;
        return SLIP_NONE;
    }
    if (rx->len == SLIP_FRAME_MAX) {
        return receive_error(rx);
    }
    rx->frame[rx->len++] = byte;
    return SLIP_NONE;
}

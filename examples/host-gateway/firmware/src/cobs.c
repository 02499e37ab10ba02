/* COBS framing of the serial uplink: no zero byte inside a frame. */
#include "gateway.h"

size_t cobs_encode(const uint8_t *data, size_t len, uint8_t *out, size_t capacity)
{
    size_t code_at = 0;
    size_t at = 1;
    uint8_t code = 1;
    if (capacity == 0) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        if (at >= capacity) {
            return 0;
        }
        if (data[i] == 0) {
            out[code_at] = code;
            code_at = at++;
            code = 1;
            continue;
        }
        out[at++] = data[i];
        code++;
        if (code == 0xFF) {
            out[code_at] = code;
            code_at = at++;
            code = 1;
        }
    }
    out[code_at] = code;
    return at;
}

size_t cobs_decode(const uint8_t *data, size_t len, uint8_t *out, size_t capacity, bool *ok)
{
    size_t at = 0;
    size_t i = 0;
    *ok = true;
    while (i < len) {
        uint8_t code = data[i++];
        if (code == 0 || i + code - 1 > len) {
            *ok = false;
            return at;
        }
        for (uint8_t k = 1; k < code; k++) {
            if (at == capacity) {
                *ok = false;
                return at;
            }
            out[at++] = data[i++];
        }
        if (code != 0xFF && i < len) {
            if (at == capacity) {
                *ok = false;
                return at;
            }
            out[at++] = 0;
        }
    }
    return at;
}

/* LEB128 varints of the telemetry encoding (as protocol buffers write them): seven bits a
 * byte, least significant group first, the top bit set on every byte but the last. Signed
 * values go through zigzag first, so that small negative numbers stay short. */
#include "gateway.h"

/* Bytes written, or 0 when `capacity` is too small (nothing useful is left in `out`). */
size_t varint_encode(uint64_t value, uint8_t *out, size_t capacity)
{
    size_t at = 0;
    do {
        if (at == capacity) {
            return 0;
        }
        uint8_t group = (uint8_t)(value & 0x7Fu);
        value >>= 7;
        out[at++] = value != 0 ? (uint8_t)(group | 0x80u) : group;
    } while (value != 0);
    return at;
}

/* One varint from the start of data: the bytes it took, or 0 with the reason in `status`.
 * A tenth byte may carry bit 63 only; an eleventh byte is never valid. */
size_t varint_decode(const uint8_t *data, size_t len, uint64_t *value, enum varint_status *status)
{
    uint64_t result = 0;
    *value = 0;
    for (size_t i = 0; i < VARINT_MAX_BYTES; i++) {
        if (i == len) {
            *status = VARINT_TRUNCATED;
            return 0;
        }
        uint8_t byte = data[i];
        if (i == VARINT_MAX_BYTES - 1 && byte > 0x01u) {
            *status = VARINT_OVERLONG;
            return 0;
        }
        result |= (uint64_t)(byte & 0x7Fu) << (7 * i);
        if ((byte & 0x80u) == 0) {
            *value = result;
            *status = VARINT_OK;
            return i + 1;
        }
    }
    *status = VARINT_OVERLONG;
    return 0;
}

/* 0, -1, 1, -2, 2 ... to 0, 1, 2, 3, 4 ...; written without shifting a negative number. */
uint64_t zigzag_encode(int64_t value)
{
    uint64_t doubled = (uint64_t)value << 1;
    return value < 0 ? ~doubled : doubled;
}

int64_t zigzag_decode(uint64_t value)
{
    int64_t half = (int64_t)(value >> 1);
    return (value & 1u) != 0 ? -half - 1 : half;
}

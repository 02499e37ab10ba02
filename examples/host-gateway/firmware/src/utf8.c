/* UTF-8 of the labels the cloud sends. */
#include "gateway.h"

/* Bytes of the sequence a lead byte starts; 0 for a byte no sequence starts with. */
int utf8_sequence_length(uint8_t lead)
{
    if (lead < 0x80) {
        return 1;
    }
    if (lead >= 0xC2 && lead <= 0xDF) {
        return 2;
    }
    if (lead >= 0xE0 && lead <= 0xEF) {
        return 3;
    }
    if (lead >= 0xF0 && lead <= 0xF4) {
        return 4;
    }
    return 0;
}

static bool continuation(uint8_t byte)
{
    return (byte & 0xC0u) == 0x80u;
}

bool utf8_valid(const uint8_t *data, size_t len)
{
    return utf8_codepoints(data, len) >= 0;
}

/* Code points in data, or -1 when it is not UTF-8. */
long utf8_codepoints(const uint8_t *data, size_t len)
{
    long points = 0;
    size_t i = 0;
    while (i < len) {
        int n = utf8_sequence_length(data[i]);
        if (n == 0 || i + (size_t)n > len) {
            return -1;
        }
        for (int k = 1; k < n; k++) {
            if (!continuation(data[i + (size_t)k])) {
                return -1;
            }
        }
        i += (size_t)n;
        points++;
    }
    return points;
}

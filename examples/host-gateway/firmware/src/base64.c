/* Base64 (RFC 4648, with padding) of the cloud's provisioning blobs. */
#include <string.h>

#include "gateway.h"

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encode(const uint8_t *data, size_t len, char *out, size_t capacity)
{
    size_t at = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t chunk = (uint32_t)data[i] << 16;
        size_t left = len - i;
        if (left > 1) {
            chunk |= (uint32_t)data[i + 1] << 8;
        }
        if (left > 2) {
            chunk |= data[i + 2];
        }
        if (at + 4 >= capacity) {
            break;
        }
        out[at++] = alphabet[(chunk >> 18) & 63];
        out[at++] = alphabet[(chunk >> 12) & 63];
        out[at++] = left > 1 ? alphabet[(chunk >> 6) & 63] : '=';
        out[at++] = left > 2 ? alphabet[chunk & 63] : '=';
    }
    out[at] = '\0';
    return at;
}

static int base64_value(char c)
{
    const char *found = c != '\0' ? strchr(alphabet, c) : NULL;
    return found != NULL ? (int)(found - alphabet) : -1;
}

size_t base64_decode(const char *text, uint8_t *out, size_t capacity, bool *ok)
{
    size_t len = strlen(text);
    size_t at = 0;
    *ok = len % 4 == 0;
    for (size_t i = 0; *ok && i < len; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            if (text[i + k] == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad > 0 || (v[k] = base64_value(text[i + k])) < 0) {
                *ok = false;
                return at;
            }
        }
        uint32_t chunk = (uint32_t)(v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3]);
        for (int k = 0; k < 3 - pad; k++) {
            if (at == capacity) {
                *ok = false;
                return at;
            }
            out[at++] = (uint8_t)(chunk >> (16 - 8 * k));
        }
    }
    return at;
}

/* The simple sums of the field buses and instruments: Fletcher-16 of the sensor board's
 * bootloader, Adler-32 of compressed blobs, the Internet checksum (RFC 1071) of the UDP
 * uplink, the LRC of Modbus ASCII and the XOR sum of NMEA sentences. */
#include <ctype.h>
#include <string.h>

#include "gateway.h"

/* Modulo 255 a byte at a time: slow but obviously right for the short frames it sees. */
uint16_t fletcher16(const uint8_t *data, size_t len)
{
    uint16_t sum1 = 0;
    uint16_t sum2 = 0;
    for (size_t i = 0; i < len; i++) {
        sum1 = (uint16_t)((sum1 + data[i]) % 255u);
        sum2 = (uint16_t)((sum2 + sum1) % 255u);
    }
    return (uint16_t)(sum2 << 8 | sum1);
}

#define ADLER_MOD 65521u
/* The most bytes whose sums cannot overflow 32 bits before the modulo (zlib's NMAX). */
#define ADLER_BLOCK 5552u

uint32_t adler32(const uint8_t *data, size_t len)
{
    uint32_t a = 1;
    uint32_t b = 0;
    while (len > 0) {
        size_t block = len < ADLER_BLOCK ? len : ADLER_BLOCK;
        len -= block;
        while (block-- > 0) {
            a += *data++;
            b += a;
        }
        a %= ADLER_MOD;
        b %= ADLER_MOD;
    }
    return b << 16 | a;
}

/* Big-endian 16-bit words summed in ones' complement, an odd last byte padded with zero. */
uint16_t internet_checksum(const uint8_t *data, size_t len)
{
    uint32_t sum = 0;
    size_t i = 0;
    for (; i + 1 < len; i += 2) {
        sum += (uint32_t)(data[i] << 8 | data[i + 1]);
    }
    if (i < len) {
        sum += (uint32_t)data[i] << 8;
    }
    while (sum >> 16 != 0) {
        sum = (sum & 0xFFFFu) + (sum >> 16);
    }
    return (uint16_t)~sum;
}

/* The two's complement of the byte sum: the frame and its LRC add up to zero. */
uint8_t lrc8(const uint8_t *data, size_t len)
{
    uint8_t sum = 0;
    for (size_t i = 0; i < len; i++) {
        sum = (uint8_t)(sum + data[i]);
    }
    return (uint8_t)(0x100u - sum);
}

uint8_t xor8(const uint8_t *data, size_t len)
{
    uint8_t sum = 0;
    for (size_t i = 0; i < len; i++) {
        sum ^= data[i];
    }
    return sum;
}

/* "$GPGGA,...*47": the XOR of the characters between '$' (or '!') and '*', which two hex
 * digits follow. `computed` is the sum of what the sentence holds, checksum or not. */
enum nmea_status nmea_verify(const char *sentence, uint8_t *computed)
{
    *computed = 0;
    if (*sentence != '$' && *sentence != '!') {
        return NMEA_NO_START;
    }
    const char *body = sentence + 1;
    const char *star = strchr(body, '*');
    size_t body_len = star != NULL ? (size_t)(star - body) : strlen(body);
    *computed = xor8((const uint8_t *)body, body_len);
    if (star == NULL || strlen(star + 1) != 2 || !isxdigit((unsigned char)star[1]) ||
        !isxdigit((unsigned char)star[2])) {
        return NMEA_NO_CHECKSUM;
    }
    uint8_t stated = 0;
    bool ok = true;
    if (parse_hex_bytes(star + 1, &stated, 1, &ok) != 1 || !ok) {
        return NMEA_NO_CHECKSUM;
    }
    return stated == *computed ? NMEA_OK : NMEA_BAD_CHECKSUM;
}

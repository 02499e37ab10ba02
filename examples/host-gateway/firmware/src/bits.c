/* Bit tricks of the register maps. */
#include "gateway.h"

int bits_popcount(uint32_t x)
{
    x = x - ((x >> 1) & 0x55555555u);
    x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
    x = (x + (x >> 4)) & 0x0F0F0F0Fu;
    return (int)((x * 0x01010101u) >> 24);
}

uint8_t bits_reverse8(uint8_t x)
{
    x = (uint8_t)((x & 0xF0u) >> 4 | (x & 0x0Fu) << 4);
    x = (uint8_t)((x & 0xCCu) >> 2 | (x & 0x33u) << 2);
    x = (uint8_t)((x & 0xAAu) >> 1 | (x & 0x55u) << 1);
    return x;
}

uint32_t bits_reverse32(uint32_t x)
{
    uint32_t out = 0;
    for (int i = 0; i < 4; i++) {
        out = (out << 8) | bits_reverse8((uint8_t)(x >> (8 * i)));
    }
    return out;
}

int bits_parity(uint32_t x)
{
    return bits_popcount(x) & 1;
}

int bits_clz(uint32_t x)
{
    int n = 0;
    if (x == 0) {
        return 32;
    }
    while ((x & 0x80000000u) == 0) {
        x <<= 1;
        n++;
    }
    return n;
}

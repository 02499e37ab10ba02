#include "fletcher.h"

uint16_t fletcher16(const uint8_t *data, size_t len)
{
    uint32_t sum1 = 0u;
    uint32_t sum2 = 0u;
    for (size_t i = 0; i < len; i++) {
        sum1 = (sum1 + data[i]) % 256u;
        sum2 = (sum2 + sum1) % 256u;
    }
    return (uint16_t)((sum2 << 8) | sum1);
}

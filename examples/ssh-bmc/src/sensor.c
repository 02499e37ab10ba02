#include "sensor.h"

int32_t tmp102_to_decimillidegrees(uint32_t raw)
{
    int32_t counts = (int32_t)(raw & TMP102_MAX_RAW);
    return counts * 625;
}

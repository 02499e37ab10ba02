#include "adc.h"

uint32_t adc_to_millivolts(uint32_t raw)
{
    /* 4095 * 3300 fits easily in 32 bits: multiply first, then divide, to keep the precision. */
    return raw * ADC_VREF_MV / (ADC_MAX_RAW + 1u);
}

#include "fan.h"

uint32_t fan_percent_to_duty(uint32_t percent)
{
    return percent / 100u * FAN_PWM_MAX;
}

/* The chassis fan's PWM: duty 0..255. */
#ifndef BMCCTL_FAN_H
#define BMCCTL_FAN_H

#include <stdint.h>

#define FAN_PWM_MAX 255u

/* The duty for a speed of `percent` (0..100), rounded down: 40 % is 102/255. */
uint32_t fan_percent_to_duty(uint32_t percent);

#endif

#include "gpio.h"

static uint32_t latch;

bool gpio_set(uint32_t pin)
{
    if (pin >= GPIO_PINS) {
        return false;
    }
    latch |= 1u << pin;
    return true;
}

bool gpio_clear(uint32_t pin)
{
    if (pin >= GPIO_PINS) {
        return false;
    }
    latch &= 1u << pin;
    return true;
}

uint32_t gpio_read(void)
{
    return latch;
}
